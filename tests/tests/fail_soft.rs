//! Starting while a dependency is down, losing it under load, and getting it back: every role starts anyway,
//! answers `/health` 200 and `/ready` 503 naming the dependency, retries with capped backoff, and becomes ready
//! once the dependency answers, with nothing restarted by hand. Each test runs private servers it starts (only
//! after Flowhost, to begin with), kills and starts again on the same port.

use std::time::Duration;

use flowhost_core::config::{Config, Secret};
use flowhost_tests::gateway::{configure, presence_event, GatewayAddrs, PlayerBackend};
use flowhost_tests::process::{self, free_port};
use flowhost_tests::{Backends, TestHost};
use serde_json::{json, Value};

const ORIGIN: &str = "https://casino.example";

/// Polls `url` until it answers `status`; returns the body (JSON or text) and the failing-checks header.
async fn until_status(url: &str, status: u16) -> (String, String) {
    let http = reqwest::Client::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(response) = http.get(url).timeout(Duration::from_secs(10)).send().await {
            if response.status() == status {
                let header = response
                    .headers()
                    .get("flowhost-failing-checks")
                    .map(|value| value.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                return (response.text().await.unwrap(), header);
            }
        }
        assert!(tokio::time::Instant::now() < until, "{url} never answered {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The names `/ready` of the main listener reports failing, once it answers 503.
async fn failing(host: &TestHost) -> Vec<String> {
    let (body, _) = until_status(&host.url("/ready"), 503).await;
    let body: Value = serde_json::from_str(&body).unwrap();
    body["failing"].as_array().unwrap().iter().map(|name| name.as_str().unwrap().to_owned()).collect()
}

/// Waits until `/ready` of the main listener fails naming `dependency`.
async fn until_failing(host: &TestHost, dependency: &str) {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = host.call("GET", "/ready", None).await;
        if status == 503 && body["failing"].as_array().unwrap().contains(&json!(dependency)) {
            return;
        }
        assert!(tokio::time::Instant::now() < until, "readiness never named {dependency}: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The flow runtime's roles (admin, engine, push API, sender) with MongoDB, Kafka, NATS and Redis all down at
/// start: the process serves its probes at once, names all four (and the plugins it could not load from the
/// store) on `/ready`, and works once they are started. Then NATS and Redis are killed under load and started
/// again: readiness names each while it is gone and recovers without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_runtime_starts_without_its_backends_and_recovers_them() {
    let (mongo_port, kafka_port, nats_port, redis_port) = (free_port(), free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.roles = vec!["all".to_owned()];
    config.plugins.bundled = true;
    config.mongodb.uri = Some(format!("mongodb://127.0.0.1:{mongo_port}/?serverSelectionTimeoutMS=1000"));
    config.mongodb.database = "fail_soft".to_owned();
    config.kafka.brokers = Some(format!("127.0.0.1:{kafka_port}"));
    config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
    config.nats.url = Some(format!("nats://127.0.0.1:{nats_port}"));
    config.redis.url = Some(format!("redis://127.0.0.1:{redis_port}"));

    let started = std::time::Instant::now();
    let host = TestHost::start_with(config).await;
    assert_eq!(host.call("GET", "/health", None).await, (200, json!({"status": "ok"})));
    assert!(started.elapsed() < Duration::from_secs(20), "probes answered within {:?}", started.elapsed());
    let down = failing(&host).await;
    for dependency in ["mongodb", "kafka", "nats", "redis", "plugins"] {
        assert!(down.contains(&dependency.to_owned()), "{dependency} is named: {down:?}");
    }
    let (status, body) = host.call("GET", "/api/v1/triggers", None).await;
    assert_eq!(status, 503, "the API answers while the store is down: {body}");

    let _mongo = process::mongodb(mongo_port).await;
    let _kafka = process::kafka(kafka_port).await;
    let nats = process::nats(nats_port).await;
    let redis = process::redis(redis_port).await;
    host.wait_ready().await;
    let (status, plugins) = host.call("GET", "/api/v1/plugins", None).await;
    assert_eq!(status, 200, "{plugins}");
    assert!(plugins.to_string().contains("notifications"), "the bundled plugins are loaded: {plugins}");

    let (source, out) = host.pass_through_rule().await;
    host.publish(&source, &[json!({"event_type": "deposit", "n": 1})]).await;
    assert_eq!(host.read(&out, 1, Duration::from_secs(60)).await.len(), 1, "events flow once Kafka answers");

    // NATS dies and comes back on the same port: the client reconnects by itself.
    nats.kill();
    until_failing(&host, "nats").await;
    let _nats = process::nats(nats_port).await;
    host.wait_ready().await;

    // Redis dies and comes back (empty: it keeps nothing): the connection is made again.
    redis.kill();
    until_failing(&host, "redis").await;
    let _redis = process::redis(redis_port).await;
    host.wait_ready().await;

    host.publish(&source, &[json!({"event_type": "deposit", "n": 2})]).await;
    let outputs = host.read(&out, 2, Duration::from_secs(60)).await;
    assert_eq!(outputs.len(), 2, "events still flow after the outages");
    host.stop().await;
}

/// The presence projector with its document store (`DOCDB_URI`) down at start: `/health` answers `ok`, `/ready`
/// answers `not ready` naming `presence_docdb`, and once the store is started the projector is ready and
/// projects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_starts_without_its_document_store() {
    let mongo_port = free_port();
    let presence_addr = format!("127.0.0.1:{}", free_port());
    let host = TestHost::start_configured(Backends::Embedded, None, |config: &mut Config| {
        config.roles = vec!["presence".to_owned()];
        config.plugins.bundled = true;
        flowhost_tests::every_role::configure_presence_and_campaigns(
            config,
            Backends::Embedded,
            &presence_addr,
            &format!("127.0.0.1:{}", free_port()),
        );
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_uri =
            Some(Secret::new(format!("mongodb://127.0.0.1:{mongo_port}/?serverSelectionTimeoutMS=1000")));
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_timeout_ms = 1000;
    })
    .await;
    let (health, _) = until_status(&format!("http://{presence_addr}/health"), 200).await;
    assert_eq!(health, "ok");
    let (ready, failing) = until_status(&format!("http://{presence_addr}/ready"), 503).await;
    assert_eq!(ready, "not ready");
    assert!(failing.contains("presence_docdb"), "the store is named: {failing}");

    let _mongo = process::mongodb(mongo_port).await;
    let (ready, _) = until_status(&format!("http://{presence_addr}/ready"), 200).await;
    assert_eq!(ready, "ready");
    host.stop().await;
}

/// A gateway whose edge cache (`GATEWAY_EDGE_CACHE_URL`) is down at start: the edge serves its probes, `/ready`
/// names `gateway_cache`, events are refused with the dependency error, and once Redis is started the edge
/// accepts them. Redis killed under load and started again: the same, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_edge_starts_without_its_cache_and_recovers_it() {
    let redis_port = free_port();
    let backend = PlayerBackend::start().await;
    let addrs = GatewayAddrs::free();
    let host = TestHost::start_configured(Backends::Embedded, None, |config: &mut Config| {
        configure(config, &addrs, &[ORIGIN], &backend);
        config.section_mut::<flowhost_gateway::GatewayConfig>().cache_url =
            Some(Secret::new(format!("redis://127.0.0.1:{redis_port}")));
    })
    .await;
    let edge_ready = addrs.edge_url("/ready");
    let (health, _) = until_status(&addrs.edge_url("/health"), 200).await;
    assert_eq!(serde_json::from_str::<Value>(&health).unwrap()["status"], "ok");
    let (ready, _) = until_status(&edge_ready, 503).await;
    assert!(ready.contains("gateway_cache"), "the cache is named: {ready}");
    let http = reqwest::Client::new();
    let post = |action: &'static str| {
        let request = http
            .post(addrs.edge_url("/api/gateway/events"))
            .header("origin", ORIGIN)
            .bearer_auth("player-31")
            .json(&presence_event(action));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(post("opened").await, 503, "no event is accepted without the cache");

    let redis = process::redis(redis_port).await;
    until_status(&edge_ready, 200).await;
    assert_eq!(post("opened").await, 202);

    redis.kill();
    let (ready, _) = until_status(&edge_ready, 503).await;
    assert!(ready.contains("gateway_cache"), "{ready}");
    assert_eq!(post("heartbeat").await, 503);
    let _redis = process::redis(redis_port).await;
    until_status(&edge_ready, 200).await;
    assert_eq!(post("heartbeat").await, 202);
    host.stop().await;
}

/// The gateway (edge, ingest, worker), the presence projector and the campaign events API in one process with
/// MongoDB, Kafka and Redis down at start: every listener answers its probes, each `/ready` names what it
/// waits for, and once the servers are started an event through the edge reaches its presence document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_presence_and_campaigns_start_without_their_servers() {
    let (mongo_port, kafka_port, redis_port) = (free_port(), free_port(), free_port());
    let (mongo, kafka) =
        (format!("mongodb://127.0.0.1:{mongo_port}/?serverSelectionTimeoutMS=1000"), format!("127.0.0.1:{kafka_port}"));
    let backend = PlayerBackend::start().await;
    let addrs = GatewayAddrs::free();
    let (presence, campaigns) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let host = TestHost::start_configured(Backends::Embedded, None, |config: &mut Config| {
        configure(config, &addrs, &[ORIGIN], &backend);
        config.roles = vec!["gateway".to_owned(), "presence".to_owned(), "campaigns".to_owned()];
        config.plugins.bundled = true;
        flowhost_tests::every_role::configure_presence_and_campaigns(config, Backends::Embedded, &presence, &campaigns);
        config.mongodb.uri = Some(mongo.clone());
        config.kafka.brokers = Some(kafka.clone());
        config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
        config.redis.url = Some(format!("redis://127.0.0.1:{redis_port}"));
        config.section_mut::<flowhost_presence::PresenceConfig>().bootstrap_servers = vec![kafka.clone()];
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_uri = Some(Secret::new(mongo.clone()));
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_timeout_ms = 1000;
        config.section_mut::<flowhost_presence::PresenceConfig>().dlq_replication_factor = 1;
        // The topic the gateway's worker publishes presence events to.
        config.section_mut::<flowhost_presence::PresenceConfig>().input_topic =
            "gateway.player-casino-presence.v1".to_owned();
    })
    .await;
    let waiting = [
        (host.url("/ready"), "mongodb"),
        (host.url("/ready"), "kafka"),
        (host.url("/ready"), "redis"),
        (format!("http://{}/ready", addrs.ingest), "gateway_queue"),
        (format!("http://{presence}/ready"), "presence_docdb"),
        (format!("http://{campaigns}/ready"), "campaigns_store"),
    ];
    for (url, dependency) in &waiting {
        let health = url.replace("/ready", "/health");
        until_status(&health, 200).await;
        let (body, header) = until_status(url, 503).await;
        assert!(body.contains(dependency) || header.contains(dependency), "{url} names {dependency}: {body} {header}");
    }

    let _mongo = process::mongodb(mongo_port).await;
    let _kafka = process::kafka(kafka_port).await;
    let _redis = process::redis(redis_port).await;
    for (url, _) in &waiting {
        until_status(url, 200).await;
    }
    until_status(&addrs.edge_url("/ready"), 200).await;
    let http = reqwest::Client::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(90);
    let documents = flowhost_mongo::MongoDocuments::connect(&mongo, "presence").await.unwrap();
    // Heartbeats until the projector has the player (it starts at the latest offset of a new group).
    loop {
        let accepted = http
            .post(addrs.edge_url("/api/gateway/events"))
            .header("origin", ORIGIN)
            .bearer_auth("player-41")
            .json(&presence_event("heartbeat"))
            .send()
            .await
            .unwrap();
        assert_eq!(accepted.status(), 202);
        let document = flowhost_core::ports::DocumentStore::get(&documents, "presence_state", "12:41").await.unwrap();
        if document.is_some_and(|document| document["state"] == "online") {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the event never reached its presence document");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    host.stop().await;
}
