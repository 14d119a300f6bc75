//! The `bench` command's own behaviour, through the binary: `compare` on saved summaries (its table and its exit
//! status) and refused arguments. Running benchmarks is not tested here: figures are never a test's verdict.

use std::process::Command;

use flowhost_bench::summary::Summary;
use flowhost_bench::Report;

fn bench(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bench")).args(args).output().expect("bench runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// A summary of three runs of one figure (lower is better), saved to `path`.
fn save(path: &std::path::Path, values: [f64; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("figures.jsonl");
    std::env::set_var(flowhost_bench::JSON_ENV, &lines);
    for value in values {
        Report::new("cel").lower("4-clause rule", "ns", value).target(120.0);
    }
    std::env::remove_var(flowhost_bench::JSON_ENV);
    let metrics = std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect::<Vec<_>>();
    let summary = Summary::new("2026-11-29T18:00:00Z".into(), Some("abc".into()), 3, 2, &metrics);
    std::fs::write(path, serde_json::to_string(&summary).unwrap()).unwrap();
}

#[test]
fn compare_exits_1_only_when_a_figure_got_worse_beyond_noise() {
    let dir = tempfile::tempdir().unwrap();
    let (base, same, worse) =
        (dir.path().join("base.json"), dir.path().join("same.json"), dir.path().join("worse.json"));
    save(&base, [100.0, 104.0, 102.0]);
    save(&same, [103.0, 101.0, 105.0]);
    save(&worse, [150.0, 151.0, 149.0]);

    let (status, table, _) = bench(&["compare", base.to_str().unwrap(), same.to_str().unwrap()]);
    assert_eq!(status, 0, "{table}");
    assert!(table.contains("| cel | 4-clause rule | 102 ns | 103 ns | +1.0% | ±3.9% | within noise |"), "{table}");

    let (status, table, _) = bench(&["compare", base.to_str().unwrap(), worse.to_str().unwrap()]);
    assert_eq!(status, 1, "{table}");
    assert!(table.contains("| WORSE |"), "{table}");
    assert!(table.contains("1 of 1 figures worse beyond their runs' spread"), "{table}");
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    let (status, _, error) = bench(&["--only", "nonesuch"]);
    assert_eq!(status, 2);
    assert!(error.contains("no benchmark \"nonesuch\""), "{error}");
    let (status, _, error) = bench(&["--runs", "0"]);
    assert_eq!((status, error.contains("at least 1")), (2, true), "{error}");
    let (status, _, error) = bench(&["compare", "/nonexistent/base.json", "/nonexistent/new.json"]);
    assert_eq!(status, 2);
    assert!(error.contains("reading /nonexistent/base.json"), "{error}");
    let (status, list, _) = bench(&["list"]);
    assert_eq!(status, 0);
    assert!(list.contains("cel") && list.contains("gateway-throughput"), "{list}");
}
