//! The one executor on `flowhost serve` processes killed with SIGKILL mid-stream (issue: delivery you can trust,
//! scale out; one flow runtime): a v1 rule and a v2 flow read the same source topic through the one consumer. On
//! the embedded store one node is killed and started again on the same data directory; on the real servers two
//! nodes share the work through the consumer group and one of them is killed while the other goes on. Either way
//! every source record ends with exactly one completed run, every action record is written under its run's
//! idempotency key (a step redone after the kill reuses its key, never a new one, so no run was executed twice
//! at once), and every record has the rule's output (at least once: a record consumed again may add one).
//! Needs `target/<profile>/flowhost` (built by `tests/run.sh`).

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flowhost_core::collections::PLUGIN_DOCUMENTS;
use flowhost_core::config::Config;
use flowhost_core::ports::{OutRecord, Ports};
use flowhost_tests::cli::flowhost_bin;
use flowhost_tests::process::free_port;
use flowhost_tests::{unique, Backends, TestHost};
use serde_json::{json, Value};

const EVENTS: usize = 600;

/// One `flowhost serve` process with the settings of `config_file` (TOML) and `env`.
struct Node {
    child: Child,
    port: u16,
}

impl Node {
    /// A node of the deployment `config` (its servers, database, group and namespaces).
    fn start(config_file: &Path, data_dir: &Path, config: &Config) -> Node {
        let port = free_port();
        let child = Command::new(flowhost_bin())
            .args(["serve", "--config"])
            .arg(config_file)
            .envs(TestHost::deployment_env(config))
            .env("FLOWHOST_PLUGINS_GRANTS", flowhost_tests::host::fixture_grants_env())
            .env("FLOWHOST_DATA_DIR", data_dir)
            .env("API_PORT", port.to_string())
            .env("FLOWHOST_ENGINE_RELOAD_INTERVAL_MS", "200")
            .env("FLOWHOST_ENGINE_FLOWS_POLL_INTERVAL_MS", "100")
            .env("FLOWHOST_ENGINE_BATCH_SIZE", "50")
            .env("FLOWHOST_PLUGINS_SYNC_INTERVAL_MS", "200")
            .env("FLOWHOST_PLUGINS_BUNDLED", "false")
            .env("FLOWHOST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "flowhost serve did not open port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Node { child, port }
    }

    fn kill9(mut self) {
        let _ = Command::new("kill").arg("-KILL").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let client = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let mut request = client.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    /// Waits until the node's engine has loaded `rules` enabled rules (`flowhost_engine_rules_loaded`): a rule
    /// takes effect at the engine's next reload, not when the admin API answers, and a record consumed before
    /// that is not the rule's.
    async fn wait_for_rules(&self, rules: i64) {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
            let loaded = text.lines().find_map(|line| line.strip_prefix("flowhost_engine_rules_loaded "));
            if loaded.and_then(|value| value.trim().parse::<i64>().ok()) == Some(rules) {
                return;
            }
            assert!(Instant::now() < deadline, "the engine never loaded {rules} rule(s): {loaded:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The settings file the nodes read beside their environment: a short Kafka session, so a killed node leaves
/// its group in seconds.
fn config_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("flowhost.toml");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "[kafka.properties]\n\"session.timeout.ms\" = \"6000\"").unwrap();
    path
}

/// The deployment the nodes make (on the real servers, its own database, group and namespaces), and the ports
/// the test reaches it with (the same data directory, or the same servers).
async fn deployment(backends: Backends, data_dir: &Path) -> (Config, Ports) {
    let config: Config = TestHost::config(backends, data_dir);
    let ports = flowhost::connect(&config).await.expect("connect");
    (config, ports)
}

async fn prepare(node: &Node, source: &str, out: &str) -> String {
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(node.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{}/api/v1/plugins/ledger/versions/0.1.0", node.port);
    let response = client.put(url).body(flowhost_runtime_fixtures::bytes("ledger")).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.text().await.unwrap());
    let flow = json!({
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
            {"id": "seg", "kind": "service-in", "config": {"service": "ledger"}},
            {"id": "act", "kind": "action", "config": {"action_ref": "record", "amount": "{{amount}}"}},
            {"id": "out", "kind": "output-topic", "config": {"topic": out}}
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "act"}, {"from": "act", "to": "out"}]
    });
    let (status, created) = node.call("POST", "/api/v2/flows", Some(flow)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, released) = node.call("POST", &format!("/api/v2/flows/{id}/release"), Some(json!({}))).await;
    assert_eq!(status, 200, "{released}");
    let rule = json!({
        "id": "every-deposit", "name": "every deposit",
        "source": {"type": "kafka", "topic": source},
        "conditions": {"event_type": "deposit", "expression": "amount >= 0.0"},
        "output_topic": rule_output(out)
    });
    let (status, created) = node.call("POST", "/api/v1/triggers", Some(rule)).await;
    assert_eq!(status, 201, "{created}");
    node.wait_for_rules(1).await;
    id
}

/// Where the rule publishes, beside the flow's output.
fn rule_output(out: &str) -> String {
    format!("{out}-rule")
}

async fn completed_runs(node: &Node, flow_id: &str) -> u64 {
    let (_, page) = node.call("GET", &format!("/api/v2/flows/{flow_id}/runs?status=completed&page_size=1"), None).await;
    page["total"].as_u64().unwrap_or(0)
}

async fn publish(ports: &Ports, source: &str, range: std::ops::Range<usize>) {
    let records: Vec<OutRecord> = range
        .map(|i| {
            let event = json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": i as f64, "player_id": format!("p{i}")});
            OutRecord::new(source, event.to_string()).with_key(format!("p{i}").into_bytes())
        })
        .collect();
    ports.topics.publish(&records).await.expect("publish");
}

/// Every record has one completed run, the action recorded each run once under its idempotency key, and the rule
/// published every record at least once.
async fn check(node: &Node, ports: &Ports, flow_id: &str, out: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while completed_runs(node, flow_id).await < EVENTS as u64 {
        assert!(Instant::now() < deadline, "only {} of {EVENTS} runs completed", completed_runs(node, flow_id).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (_, all) = node.call("GET", &format!("/api/v2/flows/{flow_id}/runs?page_size=1"), None).await;
    assert_eq!(all["total"], EVENTS, "exactly one run per source record: {all}");
    let records = ports.documents.list(PLUGIN_DOCUMENTS).await.unwrap();
    let ledger = records.iter().filter(|doc| doc.as_object().is_some()).count();
    assert!(ledger >= EVENTS, "one action record per run at least: {ledger}");
    // Each record is keyed by the idempotency key of a run's action step: no run wrote under two keys.
    assert_eq!(ledger, EVENTS, "an action redone after the kill reused its key");
    let outputs = flowhost_tests::host::read_topic(ports, &rule_output(out), 2 * EVENTS, Duration::from_secs(10)).await;
    let players: std::collections::BTreeSet<String> =
        outputs.iter().map(|r| flowhost_tests::host::json_value(r)["player_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(players.len(), EVENTS, "the rule published every record ({} outputs)", outputs.len());
}

async fn one_node_killed_and_started_again(backends: Backends) {
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(dir.path());
    let (source, out) = (unique("deposits"), unique("recorded"));
    let (config, ports) = deployment(backends, dir.path()).await;
    let node = Node::start(&file, dir.path(), &config);
    ports.topics.create_topic(&source, 4).await.expect("source topic");
    let flow_id = prepare(&node, &source, &out).await;

    publish(&ports, &source, 0..EVENTS / 2).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while completed_runs(&node, &flow_id).await < 50 {
        assert!(Instant::now() < deadline, "the node never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.kill9();
    publish(&ports, &source, EVENTS / 2..EVENTS).await;
    let node = Node::start(&file, dir.path(), &config);
    check(&node, &ports, &flow_id, &out).await;
}

async fn two_nodes_one_killed(backends: Backends) {
    let dir = tempfile::tempdir().unwrap();
    let file = config_file(dir.path());
    let (source, out) = (unique("deposits"), unique("recorded"));
    let (config, ports) = deployment(backends, &dir.path().join("a")).await;
    let first = Node::start(&file, &dir.path().join("a"), &config);
    let second = Node::start(&file, &dir.path().join("b"), &config);
    ports.topics.create_topic(&source, 4).await.expect("source topic");
    let flow_id = prepare(&first, &source, &out).await;

    for chunk in 0..6 {
        publish(&ports, &source, chunk * EVENTS / 6..(chunk + 1) * EVENTS / 6).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while completed_runs(&second, &flow_id).await < 50 {
        assert!(Instant::now() < deadline, "the nodes never got going");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill9();
    check(&second, &ports, &flow_id, &out).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_node_killed_mid_stream_loses_no_run() {
    one_node_killed_and_started_again(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distributed_node_killed_mid_stream_loses_no_run() {
    one_node_killed_and_started_again(Backends::Distributed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_distributed_nodes_share_the_work_and_survive_a_kill() {
    two_nodes_one_killed(Backends::Distributed).await;
}
