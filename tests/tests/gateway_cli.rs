//! `flowhost gateway origin-map generate` as an operator runs it (spec 002, part A, item 5): a valid input
//! writes a map the gateway reads; an input with one bad entry is rejected whole, naming the problem, and the
//! existing map is left as it was.

use std::process::Command;

use flowhost_gateway::origins::{OriginMap, MAX_FILE_BYTES};
use flowhost_tests::cli::flowhost_bin;
use serde_json::json;

fn generate(input: &std::path::Path, output: &std::path::Path) -> std::process::Output {
    Command::new(flowhost_bin())
        .args(["gateway", "origin-map", "generate", "--input"])
        .arg(input)
        .arg("--output")
        .arg(output)
        .output()
        .expect("run flowhost")
}

#[test]
fn the_generator_writes_a_map_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("input.json"), dir.path().join("origins.json"));
    let valid = json!({"schema_version": 1, "environment": "production", "player_url": "https://players.internal",
        "hosts": ["play.example.com"], "mappings": [{"host": "play.example.com", "tenant_id": "12", "site_id": "34"}]});
    std::fs::write(&input, valid.to_string()).unwrap();
    let run = generate(&input, &output);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let written = std::fs::read_to_string(&output).unwrap();
    let map = OriginMap::parse(&written, MAX_FILE_BYTES).unwrap();
    assert_eq!(map.entry("https://play.example.com").unwrap().tenant_id, "12");

    let mut invalid = valid.clone();
    invalid["hosts"] = json!(["play.example.com", "Other.example.com"]);
    std::fs::write(&input, invalid.to_string()).unwrap();
    let run = generate(&input, &output);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("nothing written") && stderr.contains("canonical"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), written, "the existing map is untouched");
}
