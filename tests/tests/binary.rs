//! The `flowhost` binary as a user runs it: `serve` on embedded defaults, the quick start's walk with the
//! `events` commands, data kept across a restart, a bad setting refused at start by name, and `health` (the
//! container image's HEALTHCHECK).
//! Needs `target/<profile>/flowhost` (built by `tests/run.sh`).

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use flowhost_tests::cli::{flowhost_bin, plugin};
use flowhost_tests::process::free_port;
use serde_json::{json, Value};

struct Server {
    child: Child,
}

impl Server {
    fn start(data_dir: &Path, port: u16) -> Server {
        let child = Command::new(flowhost_bin())
            .arg("serve")
            .env("FLOWHOST_DATA_DIR", data_dir)
            .env("API_PORT", port.to_string())
            .env("FLOWHOST_ENGINE_RELOAD_INTERVAL_MS", "200")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server { child };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "flowhost serve did not open port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// SIGTERM, then wait: a graceful stop.
    fn stop(mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "flowhost did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn events(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(flowhost_bin()).arg("events").args(args).env("FLOWHOST_DATA_DIR", data_dir).output().unwrap()
}

async fn call(port: u16, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), format!("http://127.0.0.1:{port}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn quick_start_walk_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start(dir.path(), port);
    assert_eq!(call(port, "GET", "/health", None).await, (200, json!({"status": "ok"})));

    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(call(port, "PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let rule = json!({
        "id": "big-deposits", "name": "Big deposits",
        "source": {"type": "kafka", "topic": "deposits"},
        "conditions": {"event_type": "deposit", "expression": "amount > 100.0"},
        "output_topic": "big-deposits"
    });
    assert_eq!(call(port, "POST", "/api/v1/triggers", Some(rule)).await.0, 201);

    let big = r#"{"event_type":"deposit","tenant_id":"casino-1","amount":250.0,"player_id":"p1"}"#;
    let small = r#"{"event_type":"deposit","tenant_id":"casino-1","amount":5.0,"player_id":"p2"}"#;
    for value in [big, small] {
        let out = events(dir.path(), &["publish", "deposits", value]);
        assert!(out.status.success(), "publish: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = events(dir.path(), &["tail", "big-deposits", "--limit", "1", "--idle-timeout-ms", "20000"]);
    assert!(out.status.success(), "tail: {}", String::from_utf8_lossy(&out.stderr));
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["value"]["player_id"], "p1");
    assert_eq!(line["headers"]["flowhost-rule-id"], "big-deposits");
    // Only the matching event came out.
    let out = events(dir.path(), &["tail", "big-deposits", "--idle-timeout-ms", "1500"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    server.stop();
    let server = Server::start(dir.path(), port);
    let (status, rule) = call(port, "GET", "/api/v1/triggers/big-deposits", None).await;
    assert_eq!(
        (status, rule["conditions"]["expression"].as_str()),
        (200, Some("amount > 100.0")),
        "kept across restart"
    );
    server.stop();
}

/// `flowhost health` is the container image's HEALTHCHECK: 0 while the process on `API_PORT` answers
/// `/health` 200, 1 (naming the URL) once it is gone.
#[test]
fn health_asks_the_main_listener() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let health = || Command::new(flowhost_bin()).arg("health").env("API_PORT", port.to_string()).output().unwrap();
    let server = Server::start(dir.path(), port);
    // The port opens before the first answer on a busy machine; HEALTHCHECK retries the same way.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let up = health();
        if up.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "healthy process: {}", String::from_utf8_lossy(&up.stderr));
        std::thread::sleep(Duration::from_millis(200));
    }
    server.stop();
    let down = health();
    assert_eq!(down.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert!(stderr.contains(&format!("http://127.0.0.1:{port}/health")), "{stderr}");
}

#[test]
fn a_bad_setting_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(flowhost_bin())
        .arg("serve")
        .env("FLOWHOST_DATA_DIR", dir.path())
        .env("API_PORT", "eighty")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("API_PORT"), "{stderr}");
}

#[test]
fn publish_refuses_an_invalid_topic_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = events(dir.path(), &["publish", "bad topic", "{}"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("topic name"));
}

/// A plugin author's loop: read a component's manifest and run its actions locally, seeing output, guest logs
/// and classified failures.
#[test]
fn plugin_commands_run_components_locally() {
    let component = |name: &str| flowhost_runtime_fixtures::path(name).display().to_string();
    flowhost_runtime_fixtures::bytes("noop"); // builds the components when missing

    let out = plugin(&["manifest", &component("noop")], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((manifest["id"].as_str(), manifest["actions"][0]["name"].as_str()), (Some("noop"), Some("noop")));

    let out = plugin(&["invoke", &component("noop"), "noop"], Some("{\"a\": 1}\n"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!({"a": 1}));

    let out = plugin(&["invoke", &component("caps"), "now", "{}"], None);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("caps@0.1.0"), "the guest's log line is shown");

    for (name, action, needle) in
        [("spin", "spin", "out of fuel"), ("trap", "panic", "trap"), ("noop", "nope", "unknown action")]
    {
        // Fuel, not the clock, must stop the spinning guest: a generous deadline keeps a loaded machine from
        // turning "out of fuel" into "timed out".
        let out = plugin(&["invoke", &component(name), action, "{}", "--timeout-ms", "20000"], None);
        assert!(!out.status.success(), "{name}/{action} must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{name}/{action}: {stderr}");
    }
}
