//! Outages: while the broker is unreachable the engine keeps retrying with backoff, `/health` stays up, and
//! once the broker is back every event comes out. Each test runs its own private server instance and pauses
//! it (SIGSTOP/SIGCONT), so no other test is disturbed and no data is lost with the pause.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use flowhost_tests::{servers, unique, Backends, TestHost};
use serde_json::json;

/// A server process of this test, killed when dropped.
struct Private {
    child: Child,
}

impl Private {
    fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill -{signal}");
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn wait_for_port(port: u16) {
    for _ in 0..150 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("private server on {port} did not start");
}

async fn private_kafka() -> (Private, String) {
    let port = free_port();
    let address = format!("tcp://127.0.0.1:{port}");
    let child = Command::new(servers::tansu_bin())
        .args(["broker", "--listener-url", &address, "--advertised-listener-url", &address])
        .args(["--storage-engine", "memory://tansu/"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(port).await;
    (Private { child }, format!("127.0.0.1:{port}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_outage_is_retried_and_nothing_is_lost() {
    let (broker, brokers) = private_kafka().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.kafka.brokers = Some(brokers);
    config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
    let host = TestHost::start_with(config).await;

    let (source, out) = (unique("in"), unique("out"));
    let rule = json!({
        "id": "r", "source": {"type": "kafka", "topic": source},
        "conditions": {"event_type": "deposit", "expression": "true"}, "output_topic": out
    });
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule)).await.0, 201);
    host.wait_for_reload().await;
    let event = |n: u32| json!({"event_type": "deposit", "n": n});
    host.publish(&source, &[event(1), event(2)]).await;
    assert_eq!(host.read(&out, 2, Duration::from_secs(45)).await.len(), 2);

    // The broker stops answering for longer than the session timeout: the group member expires.
    broker.signal("STOP");
    for _ in 0..8 {
        assert_eq!(host.call("GET", "/health", None).await, (200, json!({"status": "ok"})), "health during outage");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    broker.signal("CONT");

    host.publish(&source, &[event(3), event(4)]).await;
    let outputs = host.read(&out, 4, Duration::from_secs(60)).await;
    let mut seen: Vec<u64> =
        outputs.iter().map(|r| flowhost_tests::host::json_value(r)["n"].as_u64().unwrap()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, vec![1, 2, 3, 4], "every event came out after the outage");
    host.stop().await;
}
