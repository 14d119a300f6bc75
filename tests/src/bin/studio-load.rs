//! Studio's figures on this machine: the bundle's size (raw and gzip) and the time to interactive of a flow of
//! 300 nodes in headless Chromium (from choosing the flow until all its nodes are drawn and the page answers a
//! click), and one edit of it (a node added), median of 5 loads. The edit's anchor: React Flow alone with as many
//! nodes and the same canvas chrome (`host/studio/web/anchor/`), a node added, timed the same way in the same
//! browser.
//!
//!     cargo run --release -p flowhost-tests --bin studio-load

use std::io::Write;
use std::process::Stdio;

use flowhost_bench::Report;
use flowhost_tests::cli::repository_root;
use flowhost_tests::{Backends, TestHost};
use serde_json::{json, Value};

const NODES: usize = 300;

/// The size of `bytes` after `gzip -9` (Debian's gzip, as a web server's static compression would give).
fn gzip_size(bytes: &[u8]) -> usize {
    let mut gzip = std::process::Command::new("gzip")
        .args(["-9", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    gzip.stdin.take().unwrap().write_all(bytes).unwrap();
    gzip.wait_with_output().unwrap().stdout.len()
}

/// The median, in ms, of the row whose first cell starts with `what` in `table`: the Markdown table that
/// `studio_load.mjs` prints, one row per figure (`| what | median ms | slowest ms |`).
fn median_ms(table: &str, what: &str) -> f64 {
    let median = table.lines().find_map(|line| {
        let mut cells = line.split('|').map(str::trim).skip(1);
        if !cells.next()?.starts_with(what) {
            return None;
        }
        cells.next()?.strip_suffix(" ms")?.parse().ok()
    });
    median.unwrap_or_else(|| panic!("no {what:?} row with a median in studio_load.mjs's table:\n{table}"))
}

#[tokio::main]
async fn main() {
    let mut report = Report::new("studio-load");
    println!("Studio, {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
    println!();
    println!("| File | Bytes | gzip -9 |");
    println!("|---|---|---|");
    let host = TestHost::start(Backends::Embedded).await;
    let http = reqwest::Client::new();
    let mut total = (0, 0);
    for file in ["index.html", "studio.js", "studio.css"] {
        let bytes = http.get(host.url(&format!("/studio/{file}"))).send().await.unwrap().bytes().await.unwrap();
        let gzipped = gzip_size(&bytes);
        total = (total.0 + bytes.len(), total.1 + gzipped);
        println!("| {file} | {} | {gzipped} |", bytes.len());
    }
    println!("| all | {} | {} |", total.0, total.1);
    report.lower("bundle, all files", "KB", total.0 as f64 / 1024.0);
    report.lower("bundle, all files gzip -9", "KB", total.1 as f64 / 1024.0);

    // A chain of 300 nodes: a source, then mappings and conditions alternating, then an output topic.
    let schema = json!({"fields": [{"name": "amount", "type": "double"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let mut nodes: Vec<Value> =
        vec![json!({"id": "n0", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}})];
    for n in 1..NODES - 1 {
        let node = if n % 2 == 0 {
            json!({"id": format!("n{n}"), "kind": "condition", "config": {"expression": "amount > 1.0"}})
        } else {
            json!({"id": format!("n{n}"), "kind": "mapping", "config": {"mode": "merge", "fields": [{"source": "amount", "target": "amount"}]}})
        };
        nodes.push(node);
    }
    nodes.push(json!({"id": format!("n{}", NODES - 1), "kind": "output-topic", "config": {"topic": "out"}}));
    let edges: Vec<Value> = (1..NODES).map(|n| json!({"from": format!("n{}", n - 1), "to": format!("n{n}")})).collect();
    let flow = json!({"id": "big", "name": "Big", "nodes": nodes, "edges": edges});
    let (status, created) = host.call("POST", "/api/v2/flows", Some(flow)).await;
    assert_eq!(status, 201, "{created}");

    let root = repository_root();
    let anchor = tempfile::tempdir().unwrap();
    // Studio's build (host/studio/build.rs) installed the packages the anchor is built from.
    let built = std::process::Command::new("node")
        .args(["build.mjs", "--anchor", "--outdir"])
        .arg(anchor.path())
        .current_dir(root.join("host/studio/web"))
        .status()
        .expect("node (Node.js) must be installed");
    assert!(built.success(), "building the React Flow anchor (node build.mjs --anchor) failed: {built}");
    let output = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/studio_load.mjs"))
        .args([&host.base_url, "big", &NODES.to_string()])
        .arg(anchor.path())
        .output()
        .await
        .expect("node (Node.js) must be installed");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!();
    let table = String::from_utf8_lossy(&output.stdout);
    print!("{table}");
    report.lower("page interactive, median of 5", "ms", median_ms(&table, "page interactive"));
    let drawn = median_ms(&table, &format!("{NODES}-node flow drawn"));
    report.lower(&format!("{NODES}-node flow drawn, median of 5"), "ms", drawn);
    // The edit twice: as the script sees it (Playwright's click and polling included: 50-60 ms with no work in
    // the page at all, on 2 cores) and in the page, from the click event until the frame that draws the node,
    // which is what a user waits for and what the target is for.
    let edit = median_ms(&table, "then one edit");
    report.lower(&format!("one edit of the {NODES}-node flow, median of 5"), "ms", edit);
    let in_page = median_ms(&table, "the same edit in the page");
    let in_page_figure = format!("one edit of the {NODES}-node flow in the page, median of 5");
    report.lower(&in_page_figure, "ms", in_page).target(50.0);
    report.anchor(&in_page_figure, "React Flow alone", median_ms(&table, "anchor: React Flow alone"));
    host.stop().await;
}
