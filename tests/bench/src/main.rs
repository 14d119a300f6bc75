//! `bench`: runs every benchmark of the workspace several times, in release builds, and prints one table of
//! figures (median and spread over the runs, each beside its anchor and target), also written as JSON; and
//! compares a run against a saved baseline.
//!
//!     bench [--runs N] [--only NAME,NAME] [--out FILE]     run (default: every benchmark, 3 runs)
//!     bench compare BASELINE.json NEW.json                 exit status 1 when a figure got worse beyond noise
//!     bench list                                           the benchmarks and what each measures
//!
//! `tests/bench.sh` is the command to use: it starts the test servers first (so the Kafka, NATS, Redis and
//! MongoDB-protocol variants run too) and stops them after. Runs are interleaved (run 1 of every benchmark, then
//! run 2, ...), so a machine that slows down for a while slows every benchmark's spread rather than one
//! benchmark's median. Each benchmark's own output goes to `target/bench/<started>/<bench>.<run>.log`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context};
use flowhost_bench::summary::{compare, comparison_table, Summary, Verdict};
use flowhost_bench::{Metric, JSON_ENV};

/// One benchmark and how to start it.
struct Bench {
    name: &'static str,
    what: &'static str,
    target: Target,
}

enum Target {
    /// `cargo bench` targets of a host crate (harness = false), run one after the other.
    Cargo { package: &'static str, benches: &'static [&'static str] },
    /// A binary of `flowhost-tests`, with its arguments.
    Bin { args: &'static [&'static str] },
}

/// The features of `flowhost-tests` its benchmark binaries are built with: `anchors`, the anchors that need crates
/// the tests do not (the `web-push` crate's send).
const BIN_FEATURES: &str = "anchors";

const BENCHES: &[Bench] = &[
    Bench {
        name: "cel",
        what: "CEL evaluation per rule, against the `cel` crate",
        target: Target::Cargo { package: "flowhost-expr", benches: &["cel", "cel_allocations"] },
    },
    Bench {
        name: "invoke",
        what: "plugin instantiate + invoke, against wasmtime alone",
        target: Target::Cargo { package: "flowhost-runtime", benches: &["invoke"] },
    },
    Bench {
        name: "condition",
        what: "the condition node kind in wasm, against native CEL",
        target: Target::Cargo { package: "flowhost-runtime", benches: &["condition"] },
    },
    Bench { name: "engine-throughput", what: "v1 engine events/s", target: Target::Bin { args: &[] } },
    Bench { name: "runs-throughput", what: "v2 flow runs/s and latency", target: Target::Bin { args: &[] } },
    Bench { name: "queue-throughput", what: "work queue enqueue+lease+ack/s", target: Target::Bin { args: &[] } },
    Bench {
        name: "documents-throughput",
        what: "embedded document reads/s beside a writer",
        target: Target::Bin { args: &[] },
    },
    Bench {
        name: "flows-validation",
        what: "v2 draft validation and the drift pass",
        target: Target::Bin { args: &[] },
    },
    Bench {
        name: "sender-throughput",
        what: "web pushes/s and in-app messages/s to 10k sockets",
        target: Target::Bin { args: &[] },
    },
    Bench {
        name: "gateway-throughput",
        what: "gateway capacity, latency at 50%/90% of it beside an axum echo handler, shedding, worker",
        target: Target::Bin { args: &[] },
    },
    Bench {
        name: "server-latency",
        what: "push API and admin API routes: capacity and latency at 50%/90% of it",
        target: Target::Bin { args: &[] },
    },
    Bench { name: "presence-throughput", what: "presence events projected/s", target: Target::Bin { args: &[] } },
    Bench {
        name: "campaigns-throughput",
        what: "campaign events API reads beside 1M engagement records: capacity, latency at 50%/90%",
        target: Target::Bin { args: &[] },
    },
    Bench { name: "studio-load", what: "Studio bundle and edits in Chromium", target: Target::Bin { args: &[] } },
    Bench { name: "secrets-resolve", what: "reading secret settings at start", target: Target::Bin { args: &[] } },
];

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("bench: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> anyhow::Result<ExitCode> {
    match args.first().map(String::as_str) {
        Some("compare") => {
            let [_, base, new] = &args[..] else { bail!("usage: bench compare BASELINE.json NEW.json") };
            compare_files(Path::new(base), Path::new(new))
        }
        Some("list") => {
            for bench in BENCHES {
                println!("{:<22} {}", bench.name, bench.what);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("-h" | "--help") => {
            println!("usage: bench [--runs N] [--only NAME,NAME] [--out FILE] | bench compare BASE NEW | bench list");
            Ok(ExitCode::SUCCESS)
        }
        _ => run_benches(&args),
    }
}

fn compare_files(base: &Path, new: &Path) -> anyhow::Result<ExitCode> {
    let read = |path: &Path| -> anyhow::Result<Summary> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not a bench summary", path.display()))
    };
    let (base, new) = (read(base)?, read(new)?);
    println!("baseline: {} runs, {}, {}", base.runs, base.started, base.commit.as_deref().unwrap_or("?"));
    println!("new:      {} runs, {}, {}", new.runs, new.started, new.commit.as_deref().unwrap_or("?"));
    println!();
    let (changes, unmatched) = compare(&base, &new);
    print!("{}", comparison_table(&changes, &unmatched));
    let worse = changes.iter().filter(|change| change.verdict == Verdict::Worse).count();
    println!();
    println!("{worse} of {} figures worse beyond their runs' spread", changes.len());
    Ok(if worse > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

struct Options {
    runs: usize,
    only: Option<Vec<String>>,
    out: Option<PathBuf>,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { runs: 3, only: None, out: None };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--runs" => {
                options.runs = value()?.parse().context("--runs: a number")?;
                if options.runs == 0 {
                    bail!("--runs: at least 1");
                }
            }
            "--only" => {
                let names: Vec<String> = value()?.split(',').map(str::to_owned).collect();
                for name in &names {
                    if !BENCHES.iter().any(|bench| bench.name == name) {
                        bail!("--only: no benchmark {name:?} (bench list names them)");
                    }
                }
                options.only = Some(names);
            }
            "--out" => options.out = Some(PathBuf::from(value()?)),
            other => bail!("unknown argument {other:?} (bench --help)"),
        }
    }
    Ok(options)
}

fn run_benches(args: &[String]) -> anyhow::Result<ExitCode> {
    let options = options(args)?;
    let benches: Vec<&Bench> = BENCHES
        .iter()
        .filter(|bench| options.only.as_ref().is_none_or(|only| only.iter().any(|name| name == bench.name)))
        .collect();
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from);
    let started = chrono::Utc::now();
    let stamp = started.format("%Y%m%dT%H%M%SZ").to_string();
    let logs = target_dir.join("bench").join(&stamp);
    std::fs::create_dir_all(&logs)?;

    build(&workspace, &benches)?;
    let mut metrics: Vec<Metric> = Vec::new();
    let mut failed = Vec::new();
    for run in 1..=options.runs {
        for bench in &benches {
            let json = logs.join(format!("{}.{run}.jsonl", bench.name));
            let log = logs.join(format!("{}.{run}.log", bench.name));
            eprint!("run {run}/{} {:<22}", options.runs, bench.name);
            let clock = Instant::now();
            let status = command(&workspace, bench)
                .env(JSON_ENV, &json)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log)?)
                .stderr(std::fs::File::create(log.with_extension("stderr.log"))?)
                .status()
                .with_context(|| format!("starting {}", bench.name))?;
            let recorded = read_metrics(&json)?;
            eprintln!(" {:>6.1} s, {} figures{}", clock.elapsed().as_secs_f64(), recorded.len(), failure(&status));
            if !status.success() {
                failed.push(format!("{} run {run} ({status}; see {})", bench.name, log.display()));
            }
            metrics.extend(recorded);
        }
    }

    let commit = git_describe(&workspace);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let summary = Summary::new(started.to_rfc3339(), commit, options.runs, cores, &metrics);
    let out = options.out.unwrap_or_else(|| target_dir.join("bench").join(format!("{stamp}.json")));
    std::fs::write(&out, serde_json::to_string_pretty(&summary)?)?;
    println!("{}", summary.table());
    println!("written to {} (compare with: bench compare BASELINE.json {})", out.display(), out.display());
    if failed.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    println!("failed:");
    for failure in &failed {
        println!("  {failure}");
    }
    Ok(ExitCode::FAILURE)
}

fn failure(status: &std::process::ExitStatus) -> String {
    if status.success() {
        String::new()
    } else {
        format!(", FAILED ({status})")
    }
}

/// Builds every selected benchmark once, in release, so the runs time only the benchmarks.
fn build(workspace: &Path, benches: &[&Bench]) -> anyhow::Result<()> {
    let mut cargo_benches = vec!["bench".to_owned(), "--no-run".to_owned()];
    let mut bins =
        ["build", "--release", "-p", "flowhost-tests", "--features", BIN_FEATURES].map(str::to_owned).to_vec();
    let (mut any_cargo_bench, mut any_bin) = (false, false);
    for bench in benches {
        match bench.target {
            Target::Cargo { package, benches } => {
                cargo_benches.extend(["-p".into(), package.into()]);
                for bench in benches {
                    cargo_benches.extend(["--bench".into(), (*bench).into()]);
                }
                any_cargo_bench = true;
            }
            Target::Bin { .. } => {
                bins.extend(["--bin".to_owned(), bench.name.to_owned()]);
                any_bin = true;
            }
        }
    }
    for args in [any_cargo_bench.then_some(cargo_benches), any_bin.then_some(bins)].into_iter().flatten() {
        eprintln!("cargo {}", args.join(" "));
        let status = Command::new(cargo()).args(&args).current_dir(workspace).status()?;
        if !status.success() {
            bail!("cargo {} failed ({status})", args.join(" "));
        }
    }
    Ok(())
}

fn command(workspace: &Path, bench: &Bench) -> Command {
    let mut command = Command::new(cargo());
    command.current_dir(workspace);
    match bench.target {
        Target::Cargo { package, benches } => {
            command.args(["bench", "-q", "-p", package]);
            for bench in benches {
                command.args(["--bench", bench]);
            }
            &mut command
        }
        Target::Bin { args } => {
            command.args(["run", "-q", "--release", "-p", "flowhost-tests", "--features", BIN_FEATURES]);
            command.args(["--bin", bench.name, "--"]).args(args)
        }
    };
    command
}

fn cargo() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn read_metrics(path: &Path) -> anyhow::Result<Vec<Metric>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(Vec::new()) };
    text.lines().map(|line| serde_json::from_str(line).with_context(|| format!("{}: {line}", path.display()))).collect()
}

fn git_describe(workspace: &Path) -> Option<String> {
    let output = Command::new("git").args(["describe", "--always", "--dirty"]).current_dir(workspace).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}
