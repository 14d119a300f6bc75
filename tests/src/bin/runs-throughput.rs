//! Flow runs per second and source-to-output latency: a released flow source -> condition -> mapping -> the
//! bundled `noop` wasm action -> output, run by a whole Flowhost (admin and engine roles) in this process.
//!
//! 1. Throughput: `EVENTS` events already on the source topic when the flow is released; the time from the
//!    first run started until every run is stored as completed. The time from the release to the first run
//!    (the runner loading the release and joining its consumer group) is printed beside it, not counted: it is
//!    a one-off per release, and counting it made the figure depend on where in the reload interval and the
//!    group's join the release fell (up to 2.5x on the same build).
//! 2. Latency at half load: events published at half the measured rate for a few seconds, each stamped with
//!    its send time; the output records' timestamps minus that, p50 / p99. The process's CPU per run over that
//!    phase is printed on stderr. `FLOWHOST_BENCH_LATENCY_RATE=N` publishes at N runs/s instead (to compare two
//!    builds at the same load); `FLOWHOST_BENCH_TIMELINE=1` lists the 100 ms windows whose slowest output took
//!    over 20 ms.
//!
//! On the embedded store, log and subjects, with the conditions and mappings native and as components
//! (`engine.node_kinds = wasm`) in the same run; and, when the test servers' environment is set
//! (`FLOWHOST_TEST_KAFKA_BROKERS`, `FLOWHOST_TEST_NATS_URL`; see tests/scripts/servers.sh), with topics on Kafka
//! and subjects on NATS (documents stay embedded: the MongoDB-protocol test server is no performance reference).
//!
//!     cargo run --release -p flowhost-tests --bin runs-throughput [-- EVENTS [native|wasm|kafka]]

use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::config::Config;
use flowhost_core::ports::OutRecord;
use flowhost_runs::NodeKindsMode;
use flowhost_tests::{unique, Backends, TestHost};
use serde_json::{json, Value};

const LATENCY_SECONDS: u64 = 5;

async fn host(kafka: bool, node_kinds: NodeKindsMode, dir: &std::path::Path) -> TestHost {
    let mut config: Config = TestHost::config(Backends::Embedded, dir);
    config.plugins.bundled = true;
    config.section_mut::<flowhost_runs::EngineConfig>().node_kinds = node_kinds;
    config.section_mut::<flowhost_runs::EngineConfig>().reload_interval_ms = 1000;
    if kafka {
        config.kafka.brokers = Some(flowhost_tests::servers::kafka_brokers());
        config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
        config.nats.url = Some(flowhost_tests::servers::nats_url());
    }
    TestHost::start_with(config).await
}

fn flow(source: &str, out: &str) -> Value {
    let node = |id: &str, kind: &str, config: Value| json!({"id": id, "kind": kind, "config": config});
    let edge = |from: &str, to: &str| json!({"from": from, "to": to});
    json!({
        "nodes": [
            node("src", "source", json!({"event_type": "deposit", "topic": source})),
            node("big", "condition", json!({"expression": "amount > 100.0"})),
            node("map", "mapping", json!({"mode": "merge", "fields": [{"source": "player_id", "target": "player"}]})),
            node("seg", "service-in", json!({"service": "noop"})),
            node("act", "action", json!({"action_ref": "noop", "player": "{{player}}", "sent_ms": "{{sent_ms}}"})),
            node("out", "output-topic", json!({"topic": out})),
        ],
        "edges": [edge("src", "big"), edge("big", "map"), edge("map", "seg"), edge("seg", "act"), edge("act", "out")]
    })
}

fn event(i: usize, sent_ms: i64) -> Vec<u8> {
    json!({"event_type": "deposit", "tenant_id": format!("t{}", i % 8), "amount": 150.0, "player_id": format!("p{i}"), "sent_ms": sent_ms})
        .to_string()
        .into_bytes()
}

async fn publish(host: &TestHost, topic: &str, from: usize, count: usize) {
    for chunk_start in (from..from + count).step_by(1000) {
        let end = (chunk_start + 1000).min(from + count);
        let now = chrono_ms();
        let records: Vec<OutRecord> = (chunk_start..end)
            .map(|i| OutRecord::new(topic, event(i, now)).with_key(format!("p{i}").into_bytes()))
            .collect();
        host.ports.topics.publish(&records).await.expect("publish");
    }
}

/// User and system CPU time of this process so far, from `/proc/self/stat` (NaN where there is none): what a
/// run costs in CPU, whichever thread spent it.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return f64::NAN };
    // The fields after the command name (which may hold spaces) start at its closing parenthesis; utime and
    // stime are the 14th and 15th fields, in clock ticks (100 a second on Linux).
    let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(14) + ticks(15)) / 100.0
}

/// The cores this process may run on.
fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn chrono_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn started(host: &TestHost) -> f64 {
    host.metric("flowhost_flow_runs_started_total").await
}

async fn completed(host: &TestHost) -> f64 {
    host.metric("flowhost_flow_runs_finished_total{status=\"completed\"}").await
}

async fn wait_completed(host: &TestHost, count: f64, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while completed(host).await < count {
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

struct Figures {
    label: &'static str,
    to_first_run_ms: f64,
    /// CPU time of the whole process (every thread) per run while the backlog ran.
    cpu_us_per_run: f64,
    runs_per_s: f64,
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    latency_events: usize,
}

async fn measure(label: &'static str, kafka: bool, node_kinds: NodeKindsMode, events: usize) -> Figures {
    let dir = tempfile::tempdir().expect("data directory");
    let host = host(kafka, node_kinds, dir.path()).await;
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}, {"name": "sent_ms", "type": "int"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let (source, out) = (unique("bench-deposits"), unique("bench-out"));
    host.ports.topics.create_topic(&source, 4).await.expect("source topic");
    publish(&host, &source, 0, events).await;

    // Wait until the bundled noop is in the catalog, then create and release.
    let (status, created) = loop {
        let (status, created) = host.call("POST", "/api/v2/flows/validate-draft", Some(flow(&source, &out))).await;
        if created["valid"] == true {
            break host.call("POST", "/api/v2/flows", Some(flow(&source, &out))).await;
        }
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    eprintln!("{label}: {events} events on the source topic; releasing the flow");
    let release = Instant::now();
    let (status, released) = host.call("POST", &format!("/api/v2/flows/{id}/release"), Some(json!({}))).await;
    assert_eq!(status, 200, "{released}");
    while started(&host).await < 1.0 {
        assert!(release.elapsed() < Duration::from_secs(120), "no run started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let first_run = Instant::now();
    let cpu_before = process_cpu_seconds();
    assert!(wait_completed(&host, events as f64, Duration::from_secs(600)).await, "runs did not complete");
    let runs_per_s = events as f64 / first_run.elapsed().as_secs_f64();
    let cpu_us_per_run = (process_cpu_seconds() - cpu_before) * 1e6 / events as f64;
    let to_first_run_ms = first_run.duration_since(release).as_secs_f64() * 1000.0;
    eprintln!("{label}: {runs_per_s:.0} runs/s; measuring latency at half that rate");

    // Half load: publish at half the rate for a few seconds, in 10 ms slices.
    // `FLOWHOST_BENCH_LATENCY_RATE` (runs/s) fixes the rate instead, to compare builds at the same load.
    let rate =
        std::env::var("FLOWHOST_BENCH_LATENCY_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(runs_per_s / 2.0);
    let total = (rate * LATENCY_SECONDS as f64) as usize;
    let per_slice = ((rate / 100.0).ceil() as usize).max(1);
    let begin = Instant::now();
    let half_cpu_before = process_cpu_seconds();
    let mut sent = 0;
    while sent < total {
        let due = begin + Duration::from_millis((sent as f64 / rate * 1000.0) as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let count = per_slice.min(total - sent);
        publish(&host, &source, events + sent, count).await;
        sent += count;
    }
    assert!(
        wait_completed(&host, (events + total) as f64, Duration::from_secs(120)).await,
        "half-load runs did not complete"
    );
    let (half_cpu, cores) = (process_cpu_seconds() - half_cpu_before, num_cpus());
    eprintln!(
        "{label}: half load: {:.0} µs of CPU per run, {:.0}% of {cores} cores",
        half_cpu * 1e6 / total as f64,
        half_cpu * 100.0 / cores as f64 / begin.elapsed().as_secs_f64()
    );
    let outputs = host.read(&out, events + total, Duration::from_secs(60)).await;
    let timed: Vec<(i64, f64)> = outputs
        .iter()
        .filter_map(|record| {
            let value: Value = serde_json::from_slice(&record.value).ok()?;
            let player: usize = value["player"].as_str()?.trim_start_matches('p').parse().ok()?;
            let sent_ms = value["sent_ms"].as_i64()?;
            (player >= events).then(|| (sent_ms, (record.timestamp_ms - sent_ms) as f64))
        })
        .collect();
    if std::env::var_os("FLOWHOST_BENCH_TIMELINE").is_some() {
        print_slow_windows(label, &timed);
    }
    let mut latencies: Vec<f64> = timed.iter().map(|(_, latency)| *latency).collect();
    latencies.sort_by(|a, b| a.total_cmp(b));
    let at = |p: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * p) as usize).copied().unwrap_or(f64::NAN);
    let figures = Figures {
        label,
        to_first_run_ms,
        cpu_us_per_run,
        runs_per_s,
        rate,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        latency_events: latencies.len(),
    };
    host.stop().await;
    figures
}

/// With `FLOWHOST_BENCH_TIMELINE` set: the half-load outputs grouped into 100 ms windows by send time, and the
/// windows whose slowest output took over 20 ms, on stderr, to tell a periodic stall from a steady queue.
fn print_slow_windows(label: &str, timed: &[(i64, f64)]) {
    let first = timed.iter().map(|(sent, _)| *sent).min().unwrap_or(0);
    let mut windows: std::collections::BTreeMap<i64, (usize, f64)> = Default::default();
    for (sent, latency) in timed {
        let window = windows.entry((sent - first) / 100).or_default();
        window.0 += 1;
        window.1 = window.1.max(*latency);
    }
    for (window, (count, worst)) in windows.iter().filter(|(_, (_, worst))| *worst > 20.0) {
        eprintln!("{label}: sent at +{} ms: {count} outputs, slowest {worst:.0} ms", window * 100);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut report = Report::new("runs-throughput");
    let events: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(40_000);
    // An optional second argument runs one row only (`native`, `wasm` or `kafka`), e.g. under a profiler.
    let only = std::env::args().nth(2);
    let wanted = |row: &str| only.as_deref().is_none_or(|only| only == row);
    let mut rows = Vec::new();
    if wanted("native") {
        let label = "embedded (SQLite documents and log, in-process subjects)";
        rows.push(("embedded", measure(label, false, NodeKindsMode::Native, events).await));
    }
    if wanted("wasm") {
        let label = "embedded, `engine.node_kinds = wasm`";
        rows.push(("embedded wasm node kinds", measure(label, false, NodeKindsMode::Wasm, events).await));
    }
    let servers = std::env::var_os("FLOWHOST_TEST_KAFKA_BROKERS").is_some()
        && std::env::var_os("FLOWHOST_TEST_NATS_URL").is_some();
    if servers && wanted("kafka") {
        let label = "Kafka (tansu) topics, NATS subjects, SQLite documents";
        rows.push(("kafka", measure(label, true, NodeKindsMode::Native, events).await));
    }
    println!("Flow runs: source -> condition -> mapping -> noop wasm action -> output, {events} runs");
    println!();
    println!(
        "| Backends | runs/s (cold backlog) | CPU per run | release to first run | half load (runs/s) | p50 source-to-output | p99 | latency samples |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    // The latency figures are at half the measured rate, unless `FLOWHOST_BENCH_LATENCY_RATE` fixed the rate.
    let fixed_rate = std::env::var("FLOWHOST_BENCH_LATENCY_RATE").ok().and_then(|r| r.parse::<f64>().ok()).is_some();
    for (name, f) in rows {
        println!(
            "| {} | {:.0} | {:.0} µs | {:.0} ms | {:.0} | {:.1} ms | {:.1} ms | {} |",
            f.label, f.runs_per_s, f.cpu_us_per_run, f.to_first_run_ms, f.rate, f.p50_ms, f.p99_ms, f.latency_events
        );
        // The targets are the native embedded row's, at half rate.
        let native = name == "embedded";
        let load = if fixed_rate { format!("at {:.0} runs/s", f.rate) } else { "at half rate".to_owned() };
        let runs = report.higher(&format!("{name}: runs/s, cold backlog"), "/s", f.runs_per_s);
        if native {
            runs.target(20_000.0);
        }
        report.lower(&format!("{name}: CPU per run, cold backlog"), "µs", f.cpu_us_per_run);
        report.lower(&format!("{name}: release to first run"), "ms", f.to_first_run_ms);
        report.lower(&format!("{name}: p50 source to output {load}"), "ms", f.p50_ms);
        let p99 = report.lower(&format!("{name}: p99 source to output {load}"), "ms", f.p99_ms);
        if native && !fixed_rate {
            p99.target(20.0);
        }
    }
}
