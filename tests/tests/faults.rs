//! Outages: while the broker is unreachable the engine keeps retrying with backoff, `/health` stays up, and
//! once the broker is back every event comes out. Each test runs its own private server instance and pauses
//! it (SIGSTOP/SIGCONT), so no other test is disturbed and no data is lost with the pause.

use std::time::Duration;

use flowhost_tests::process::{self, free_port, Private};
use flowhost_tests::{Backends, TestHost};
use serde_json::json;

async fn private_kafka() -> (Private, String) {
    let port = free_port();
    (process::kafka(port).await, format!("127.0.0.1:{port}"))
}

async fn private_mongodb() -> (Private, String) {
    let port = free_port();
    (process::mongodb(port).await, format!("mongodb://127.0.0.1:{port}"))
}

/// With MongoDB frozen, the engine keeps running on the rules it has, the admin API answers 503 within a
/// bounded time instead of hanging, `/health` stays up; once MongoDB answers again everything works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_outage_keeps_the_engine_running_and_the_api_bounded() {
    let (mongo, uri) = private_mongodb().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.mongodb.uri = Some(uri);
    let host = TestHost::start_with(config).await;

    let (source, out) = host.pass_through_rule().await;

    mongo.signal("STOP");
    assert_eq!(host.call("GET", "/health", None).await, (200, json!({"status": "ok"})));
    // Readiness names the store that does not answer (its check gives up after two seconds).
    let (status, ready) = host.call("GET", "/ready", None).await;
    assert_eq!(status, 503, "{ready}");
    assert!(ready["failing"].as_array().unwrap().contains(&json!("documents")), "{ready}");
    let started = std::time::Instant::now();
    let (status, body) = host.call("GET", "/api/v1/triggers", None).await;
    assert_eq!(status, 503, "{body}");
    assert!(body["error"].as_str().is_some(), "{body}");
    assert!(started.elapsed() < Duration::from_secs(20), "the API answered within a bounded time");

    host.publish(&source, &[json!({"event_type": "deposit", "n": 1})]).await;
    assert_eq!(host.read(&out, 1, Duration::from_secs(30)).await.len(), 1, "the engine kept its rules");
    // The reload that was running when MongoDB froze fails once its operation timeout passes.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while host.metric("flowhost_engine_errors_total{kind=\"reload\"}").await < 1.0 {
        assert!(std::time::Instant::now() < until, "no reload failure was counted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    mongo.signal("CONT");
    let until = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _) = host.call("GET", "/api/v1/triggers/r", None).await;
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < until, "the API did not recover: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_outage_is_retried_and_nothing_is_lost() {
    let (broker, brokers) = private_kafka().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.kafka.brokers = Some(brokers);
    config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
    let host = TestHost::start_with(config).await;

    let (source, out) = host.pass_through_rule().await;
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
