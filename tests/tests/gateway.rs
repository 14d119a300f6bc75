//! The edge analytics gateway end to end (spec 002 part A): the public route's controls in the spec's order and
//! every status of its errors table, player validation against a backend the test serves (cached under a keyed
//! identity, negative answers briefly, failures never), limits with `Retry-After`, load shedding, internal
//! ingest, the durable queue and the worker producing the presence envelope to the broker, the queue
//! administration API, the probes and the metrics, on the embedded defaults and on Redis and Kafka.

use std::collections::HashSet;
use std::time::Duration;

use flowhost_core::config::Config;
use flowhost_core::ports::{Ports, Record};
use flowhost_tests::gateway::{configure, parts, presence_event, GatewayAddrs, PlayerBackend, SITE, TENANT};
use flowhost_tests::host::reader;
use flowhost_tests::{servers, unique, Backends, TestHost};
use serde_json::{json, Value};

const ORIGIN: &str = "https://play.example.com";
const PRESENCE_TOPIC: &str = "gateway.player-casino-presence.v1";

struct Gateway {
    host: TestHost,
    addrs: GatewayAddrs,
    http: reqwest::Client,
}

impl Gateway {
    /// A ready gateway (its edge answers `/ready`), configured by `change` after the defaults.
    async fn start(backends: Backends, backend: &PlayerBackend, change: impl FnOnce(&mut Config)) -> Gateway {
        let gateway = Gateway::launch(backends, backend, change).await;
        gateway.wait_ready(gateway.addrs.edge).await;
        gateway
    }

    /// [`Gateway::start`] without waiting for any readiness (a process whose parts serve other listeners).
    async fn launch(backends: Backends, backend: &PlayerBackend, change: impl FnOnce(&mut Config)) -> Gateway {
        let addrs = GatewayAddrs::free();
        let host = TestHost::start_configured(backends, None, |config| {
            configure(config, &addrs, &[ORIGIN], backend);
            change(config);
        })
        .await;
        Gateway { host, addrs, http: reqwest::Client::new() }
    }

    async fn wait_ready(&self, addr: std::net::SocketAddr) {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(response) = self.http.get(format!("http://{addr}/ready")).send().await {
                if response.status() == 200 {
                    return;
                }
            }
            assert!(tokio::time::Instant::now() < until, "{addr} never ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Posts `body` to the public route with `Origin` and, when given, the bearer.
    async fn post(
        &self,
        origin: &str,
        token: Option<&str>,
        body: &Value,
    ) -> (u16, std::collections::HashMap<String, String>, Value) {
        let mut request =
            self.http.post(self.addrs.edge_url("/api/gateway/events")).header("origin", origin).json(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        parts(request.send().await.unwrap()).await
    }

    /// Polls `GET /admin/v1/queues` until `done` holds for its `queues` (for at most 10 s); returns them.
    async fn queues_until(&self, done: impl Fn(&Value) -> bool) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let url = format!("http://{}/admin/v1/queues", self.addrs.admin);
            let answer: Value = self.http.get(url).send().await.unwrap().json().await.unwrap();
            if done(&answer["queues"]) {
                return answer["queues"].clone();
            }
            assert!(tokio::time::Instant::now() < until, "the queues never got there: {answer}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn metrics(&self) -> String {
        self.http.get(format!("http://{}/metrics", self.addrs.metrics)).send().await.unwrap().text().await.unwrap()
    }
}

/// Reads `topic` until the records of every id in `event_ids` arrived; returns them in arrival order.
async fn read_events(ports: &Ports, topic: &str, event_ids: &HashSet<String>, deadline: Duration) -> Vec<Record> {
    let until = tokio::time::Instant::now() + deadline;
    // Subscribe once the producer created the topic: a Kafka consumer that subscribed to a missing topic may not
    // look for it again before the deadline (librdkafka refreshes its metadata every few minutes).
    while !ports.topics.exists(topic).await.unwrap_or(false) {
        assert!(tokio::time::Instant::now() < until, "nothing ever created {topic}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut consumer = reader(ports, topic).await;
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    while seen.len() < event_ids.len() && tokio::time::Instant::now() < until {
        for record in consumer.poll(500, Duration::from_millis(200)).await.unwrap_or_default() {
            let value: Value = serde_json::from_slice(&record.value).unwrap_or(Value::Null);
            let id = value.pointer("/metadata/event_id").and_then(Value::as_str).unwrap_or_default().to_owned();
            if event_ids.contains(&id) {
                seen.insert(id);
                found.push(record);
            }
        }
    }
    assert_eq!(seen.len(), event_ids.len(), "not every accepted event reached {topic}");
    found
}

fn event_id(body: &Value) -> String {
    body["event_id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_route_answers_every_status_of_its_errors_table() {
    let backend = PlayerBackend::start().await;
    let gateway = Gateway::start(Backends::Embedded, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().requests_per_minute.token = 5;
    })
    .await;

    // Preflight: answered with the exact CORS headers, never `*`; an excluded origin gets 403 without them.
    let preflight = |origin: &str| {
        gateway
            .http
            .request(reqwest::Method::OPTIONS, gateway.addrs.edge_url("/api/gateway/events"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "authorization, content-type")
            .send()
    };
    let (status, headers, _) = parts(preflight(ORIGIN).await.unwrap()).await;
    assert_eq!(status, 204);
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    assert_eq!(headers["access-control-allow-methods"], "POST");
    assert_eq!(headers["access-control-allow-headers"], "authorization, content-type");
    assert!(!headers.contains_key("access-control-allow-credentials"));
    let (status, headers, _) = parts(preflight("https://evil.example.com").await.unwrap()).await;
    assert_eq!(status, 403);
    assert!(!headers.contains_key("access-control-allow-origin"));

    // 403 for an excluded origin on the POST too, before anything else is looked at.
    let (status, headers, body) =
        gateway.post("https://evil.example.com", Some("player-1"), &presence_event("opened")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("ORIGIN_FORBIDDEN")));
    assert!(!headers.contains_key("access-control-allow-origin"));
    assert_eq!(backend.calls_of("player-1"), 0);

    // 401: missing, malformed, invalid (cached briefly: the second invalid answer does not ask the backend).
    for token in [None, Some("not a token")] {
        let (status, headers, body) = gateway.post(ORIGIN, token, &presence_event("opened")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{token:?}");
        assert_eq!(headers["access-control-allow-origin"], ORIGIN, "the page can read the refusal");
    }
    for _ in 0..2 {
        assert_eq!(gateway.post(ORIGIN, Some("invalid"), &presence_event("opened")).await.0, 401);
    }
    assert_eq!(backend.calls_of("invalid"), 1, "a definitive invalid answer is cached");
    assert_eq!(gateway.post(ORIGIN, Some("forbidden"), &presence_event("opened")).await.0, 401);

    // 202: validated once with the canonical client IP and the trusted site id, then from the cache.
    let first = presence_event("opened");
    let (status, headers, body) = gateway.post(ORIGIN, Some("player-501"), &first).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body, json!({"status": "accepted", "event_id": event_id(&first)}));
    assert_eq!(headers["access-control-allow-origin"], ORIGIN);
    assert_eq!(backend.last_body_of("player-501"), Some(json!({"ip": "127.0.0.1", "site_id": 34})));
    let second = presence_event("heartbeat");
    assert_eq!(gateway.post(ORIGIN, Some("player-501"), &second).await.0, 202);
    assert_eq!(backend.calls_of("player-501"), 1, "the second request is answered from the cache");

    // 503 for a failing backend, never cached; a 200 without a positive pair is a failure too.
    for token in ["broken", "garbage"] {
        for _ in 0..2 {
            let (status, _, body) = gateway.post(ORIGIN, Some(token), &presence_event("opened")).await;
            assert_eq!((status, body["error"]["code"].as_str()), (503, Some("UNAVAILABLE")), "{token}");
        }
        assert_eq!(backend.calls_of(token), 2, "{token}: a failure is not cached");
    }

    // 400 and 413 for bodies, after validation; the browser's tenant never wins (unknown fields refused).
    let mut forged = presence_event("opened");
    forged["tenant_id"] = json!("99");
    let (status, _, body) = gateway.post(ORIGIN, Some("player-502"), &forged).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_EVENT")), "{body}");
    let mut huge = presence_event("opened");
    huge["event_payload"]["padding"] = json!("x".repeat(20_000));
    assert_eq!(gateway.post(ORIGIN, Some("player-502"), &huge).await.0, 413);

    // 429: the sixth request of one token within a minute, with Retry-After.
    for n in 0..5 {
        assert_eq!(gateway.post(ORIGIN, Some("player-503"), &presence_event("heartbeat")).await.0, 202, "request {n}");
    }
    let (status, headers, body) = gateway.post(ORIGIN, Some("player-503"), &presence_event("heartbeat")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (429, Some("RATE_LIMITED")));
    let retry_after: u64 = headers["retry-after"].parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // A page's script reads Retry-After only when the answer exposes it (CORS hides it otherwise).
    assert_eq!(headers["access-control-expose-headers"], "Retry-After", "the page can honour Retry-After");

    // The worker produced the accepted events as presence envelopes keyed by tenant and player.
    let ids: HashSet<String> = [event_id(&first), event_id(&second)].into();
    let records = read_events(&gateway.host.ports, PRESENCE_TOPIC, &ids, Duration::from_secs(20)).await;
    let record = records.iter().find(|r| r.value.windows(6).any(|w| w == b"opened")).unwrap();
    assert_eq!(record.key.as_deref(), Some(format!("{TENANT}:501").as_bytes()));
    let envelope: Value = serde_json::from_slice(&record.value).unwrap();
    assert_eq!(envelope["envelope_version"], 1);
    assert_eq!(envelope["event_type"], "player.casino-presence.v1");
    assert_eq!(
        envelope["body"],
        json!({"schema_version": 1, "tenant_id": TENANT, "site_id": SITE, "user": {"user_id": "501"}})
    );
    assert_eq!(envelope["metadata"]["occurred_at"], "2026-11-24T10:00:00.000Z");
    assert!(chrono_like(envelope["metadata"]["received_at"].as_str().unwrap()));
    assert_eq!(envelope["event_payload"], first["event_payload"]);
    assert!(!String::from_utf8_lossy(&record.value).contains("127.0.0.1"), "the client IP is never published");
    let header = |name: &str| {
        record.headers.iter().find(|h| h.key == name).map(|h| String::from_utf8_lossy(&h.value).into_owned())
    };
    assert_eq!(header("event_id"), Some(event_id(&first)));

    // The queue administration API shows the queue drained and acknowledged.
    let queues = gateway.queues_until(|q| q[0]["pending"] == 0 && q[0]["acknowledged"].as_u64() >= Some(7)).await;
    assert_eq!(
        (queues[0]["name"].as_str(), queues[1]["name"].as_str()),
        (Some("gateway-events"), Some("gateway-events-dead"))
    );

    // A message that can never be produced is moved to the dead-letter queue, with its reason, and acknowledged.
    gateway.host.ports.queue.enqueue("gateway-events", b"{not a record".to_vec()).await.unwrap();
    gateway.queues_until(|q| q[1]["pending"] == 1 && q[0]["pending"] == 0).await;
    let dead = gateway.host.ports.queue.lease("gateway-events-dead", "test", 1, Duration::from_secs(30)).await.unwrap();
    let dead: Value = serde_json::from_slice(&dead[0].payload).unwrap();
    assert_eq!((dead["reason"].as_str(), dead["message"].as_str()), (Some("undecodable"), Some("{not a record")));

    // Probes answer without Origin or a client IP on every listener; the counters are on the metrics port,
    // which answers liveness but no readiness (the worker has no HTTP readiness).
    for addr in [gateway.addrs.edge, gateway.addrs.ingest, gateway.addrs.admin, gateway.addrs.private] {
        for probe in ["/health", "/ready"] {
            let status = gateway.http.get(format!("http://{addr}{probe}")).send().await.unwrap().status();
            assert_eq!(status, 200, "{addr}{probe}");
        }
    }
    let metrics_port = |probe: &str| format!("http://{}{probe}", gateway.addrs.metrics);
    assert_eq!(gateway.http.get(metrics_port("/health")).send().await.unwrap().status(), 200);
    assert_eq!(gateway.http.get(metrics_port("/ready")).send().await.unwrap().status(), 404);
    let metrics = gateway.metrics().await;
    for line in [
        "gateway_edge_requests_total{outcome=\"accepted\"} 7",
        "gateway_edge_requests_total{outcome=\"origin_forbidden\"} 2",
        "gateway_edge_requests_total{outcome=\"rate_limited\"} 1",
        "gateway_edge_player_validation_total{outcome=\"invalid\"} 2",
        "gateway_edge_player_cache_total{outcome=\"negative_hit\"} 1",
        "gateway_ingest_events_total{outcome=\"accepted\"} 7",
        "gateway_queue_publish_total{outcome=\"ok\"} 7",
        "gateway_broker_produce_total{outcome=\"ok\"} 7",
        "gateway_dead_letters_total{reason=\"undecodable\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
}

/// An RFC 3339 UTC instant with milliseconds, as the gateway's clock writes it.
fn chrono_like(text: &str) -> bool {
    text.len() == 24 && text.ends_with('Z') && text.as_bytes()[10] == b'T'
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_trusted_proxy_naming_one_client_ip_gets_through() {
    let backend = PlayerBackend::start().await;
    let untrusted = Gateway::start(Backends::Embedded, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().trusted_proxy_cidrs = vec!["10.0.0.0/8".into()];
    })
    .await;
    let (status, _, body) = untrusted.post(ORIGIN, Some("player-1"), &presence_event("opened")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("FORBIDDEN")));
    let status = untrusted.http.get(untrusted.addrs.edge_url("/health")).send().await.unwrap().status();
    assert_eq!(status, 200, "probes answer any peer");
    untrusted.host.stop().await;

    let trusted = Gateway::start(Backends::Embedded, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().trusted_proxy_cidrs = vec!["127.0.0.0/8".into()];
    })
    .await;
    let post = |client_ips: &[&str]| {
        let mut request = trusted
            .http
            .post(trusted.addrs.edge_url("/api/gateway/events"))
            .header("origin", ORIGIN)
            .bearer_auth("player-9")
            .json(&presence_event("opened"));
        for ip in client_ips {
            request = request.header("x-gateway-client-ip", *ip);
        }
        request.send()
    };
    for client_ips in [&[][..], &["203.0.113.9", "203.0.113.10"], &["203.0.113.9, 10.0.0.1"], &["not-an-ip"]] {
        let (status, _, body) = parts(post(client_ips).await.unwrap()).await;
        assert_eq!((status, body["error"]["code"].as_str()), (503, Some("CLIENT_IP_INVALID")), "{client_ips:?}");
    }
    assert_eq!(backend.calls_of("player-9"), 0);
    let (status, _, _) = parts(post(&["::ffff:203.0.113.9"]).await.unwrap()).await;
    assert_eq!(status, 202);
    assert_eq!(backend.last_body_of("player-9"), Some(json!({"ip": "203.0.113.9", "site_id": 34})));
    // Another client IP with the same bearer is validated again: the cache never crosses client IPs.
    assert_eq!(parts(post(&["203.0.113.10"]).await.unwrap()).await.0, 202);
    assert_eq!(backend.calls_of("player-9"), 2);
    trusted.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_inflight_budget_sheds_at_once_and_timeouts_are_enforced() {
    let backend = PlayerBackend::start().await;
    let gateway = Gateway::start(Backends::Embedded, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().max_inflight = 1;
        config.section_mut::<flowhost_gateway::GatewayConfig>().player_timeout_ms = 1500;
    })
    .await;
    // `slow` holds the only permit for its validation (answered after 3 s: past the 1.5 s player timeout).
    let slow = {
        let http = gateway.http.clone();
        let url = gateway.addrs.edge_url("/api/gateway/events");
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let response = http
                .post(url)
                .header("origin", ORIGIN)
                .bearer_auth("slow")
                .json(&presence_event("opened"))
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    let (status, _, body) = gateway.post(ORIGIN, Some("player-3"), &presence_event("opened")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("OVERLOADED")));
    assert!(started.elapsed() < Duration::from_millis(500), "shed at once, not queued");
    // A preflight is answered before the in-flight control.
    let preflight = gateway
        .http
        .request(reqwest::Method::OPTIONS, gateway.addrs.edge_url("/api/gateway/events"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    let (status, elapsed) = slow.await.unwrap();
    assert_eq!(status, 503, "the validation timeout is a dependency failure");
    assert!(elapsed < Duration::from_millis(2500), "GATEWAY_EDGE_PLAYER_TIMEOUT_MS is enforced: {elapsed:?}");
    assert_eq!(gateway.post(ORIGIN, Some("player-3"), &presence_event("opened")).await.0, 202, "the permit is back");
    assert!(gateway.metrics().await.contains("gateway_edge_requests_total{outcome=\"shed\"} 1"));
    assert!(gateway.metrics().await.contains("gateway_edge_player_validation_total{outcome=\"timeout\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_while_internal_ingest_is_unavailable() {
    let backend = PlayerBackend::start().await;
    let addrs = GatewayAddrs::free();
    // An edge alone, whose ingest URL points at nothing.
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        configure(config, &addrs, &[ORIGIN], &backend);
        config.roles = vec!["gateway-edge".to_owned()];
        config.section_mut::<flowhost_gateway::GatewayConfig>().ingest_url =
            format!("http://127.0.0.1:{}/internal/v1/events", flowhost_tests::gateway::free_port());
    })
    .await;
    let http = reqwest::Client::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    let (status, body) = loop {
        match http.get(format!("http://{}/ready", addrs.edge)).send().await {
            Ok(response) => break (response.status().as_u16(), response.json::<Value>().await.unwrap()),
            Err(_) if tokio::time::Instant::now() < until => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(error) => panic!("the edge never listened: {error:?}"),
        }
    };
    assert_eq!(status, 503);
    assert_eq!(body["failing"], json!(["gateway_ingest"]));
    let response = http
        .post(addrs.edge_url("/api/gateway/events"))
        .header("origin", ORIGIN)
        .bearer_auth("player-4")
        .json(&presence_event("opened"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503, "a dependency failure");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_and_kafka_events_reach_the_broker_and_limits_are_shared() {
    let backend = PlayerBackend::start().await;
    let redis = format!("{}/5", servers::redis_url().trim_end_matches('/'));
    let gateway = Gateway::start(Backends::Distributed, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().cache_url =
            Some(flowhost_core::config::Secret::new(redis.clone()));
        config.section_mut::<flowhost_gateway::GatewayConfig>().requests_per_minute.token = 3;
    })
    .await;
    let token = format!("player-{}", rand_id());
    let mut ids = HashSet::new();
    for action in ["opened", "heartbeat", "heartbeat"] {
        let event = presence_event(action);
        assert_eq!(gateway.post(ORIGIN, Some(&token), &event).await.0, 202);
        ids.insert(event_id(&event));
    }
    let analytics = json!({"event_type": "casino.game-opened.v1", "event_id": uuid::Uuid::new_v4().to_string(),
        "occurred_at": "2026-11-24T10:00:00Z", "event_payload": {"game": "roulette"}});
    let other = format!("player-{}", rand_id());
    assert_eq!(gateway.post(ORIGIN, Some(&other), &analytics).await.0, 202);
    assert_eq!(backend.calls_of(&token), 1);

    // A second gateway on the same Redis shares the validation cache and the token's request window.
    let second = Gateway::start(Backends::Distributed, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().cache_url =
            Some(flowhost_core::config::Secret::new(redis.clone()));
        config.section_mut::<flowhost_gateway::GatewayConfig>().requests_per_minute.token = 3;
        TestHost::join_deployment(config, &gateway.host.config);
    })
    .await;
    let (status, headers, _) = second.post(ORIGIN, Some(&token), &presence_event("heartbeat")).await;
    assert_eq!(status, 429, "the fourth request of the token, counted across replicas");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(backend.calls_of(&token), 1);

    let records = read_events(&gateway.host.ports, PRESENCE_TOPIC, &ids, Duration::from_secs(60)).await;
    let player = token.trim_start_matches("player-");
    assert!(records.iter().all(|r| r.key.as_deref() == Some(format!("{TENANT}:{player}").as_bytes())));
    let analytics_topic = gateway.host.config.section::<flowhost_gateway::GatewayConfig>().analytics_topic.clone();
    let records =
        read_events(&gateway.host.ports, &analytics_topic, &[event_id(&analytics)].into(), Duration::from_secs(60))
            .await;
    let envelope: Value = serde_json::from_slice(&records[0].value).unwrap();
    let other_id = other.trim_start_matches("player-");
    let global = (other_id.parse::<u64>().unwrap() + 1000).to_string();
    assert_eq!(envelope["body"]["user"], json!({"user_id": other_id, "global_user_id": global}));
    assert_eq!(envelope["event_payload"], json!({"game": "roulette"}));
    second.host.stop().await;
    gateway.host.stop().await;
}

/// A player id no other run used (the Redis cache outlives test runs).
fn rand_id() -> u64 {
    (uuid::Uuid::new_v4().as_u128() % 1_000_000_000) as u64 + 1
}

/// A `flowhost serve` process of this test, killed when dropped; its log (stdout and stderr) in `log`.
struct Process {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Process {
    fn start(roles: &str, data_dir: &std::path::Path, env: &[(&str, String)], log: std::path::PathBuf) -> Process {
        let file = std::fs::File::create(&log).unwrap();
        let mut command = std::process::Command::new(flowhost_tests::cli::flowhost_bin());
        command
            .args(["serve", "--roles", roles])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("FLOWHOST_DATA_DIR", data_dir)
            .env("API_PORT", flowhost_tests::gateway::free_port().to_string())
            .env("FLOWHOST_LOG", "debug")
            .env("FLOWHOST_PLUGINS_BUNDLED", "false")
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        for (name, value) in env {
            command.env(name, value);
        }
        Process { child: command.spawn().expect("flowhost"), log }
    }

    fn kill_9(&mut self) {
        let status = std::process::Command::new("kill").arg("-9").arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client IP the ingress names in the kill test: it must appear in no log line, at debug level too.
const CLIENT_IP: &str = "203.0.113.77";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_accepted_is_lost_across_a_kill_9_between_202_and_the_broker() {
    let backend = PlayerBackend::start().await;
    let dir = tempfile::tempdir().unwrap();
    let addrs = GatewayAddrs::free();
    let mut env = addrs.env();
    env.extend([
        ("GATEWAY_EDGE_ORIGINS_JSON", flowhost_tests::gateway::origins_json(&[ORIGIN], &backend.url)),
        ("GATEWAY_EDGE_CACHE_HMAC_KEY", flowhost_tests::gateway::HMAC_KEY.to_owned()),
        ("GATEWAY_EDGE_ROLLOUT_CHECKSUM", flowhost_tests::gateway::ROLLOUT_CHECKSUM.to_owned()),
        ("GATEWAY_EDGE_TRUSTED_PROXY_CIDRS", "127.0.0.0/8".to_owned()),
    ]);
    // Edge and ingest only: events are queued and acknowledged, and nothing drains the queue yet.
    let mut front = Process::start("gateway-edge,gateway-ingest", dir.path(), &env, dir.path().join("front.log"));
    let http = reqwest::Client::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while http.get(addrs.edge_url("/ready")).send().await.map(|r| r.status() != 200).unwrap_or(true) {
        assert!(tokio::time::Instant::now() < until, "the gateway never got ready:\n{}", front.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = format!("player-{}", rand_id());
    let mut ids = HashSet::new();
    for n in 0..40 {
        let event = presence_event(if n == 0 { "opened" } else { "heartbeat" });
        let response = http
            .post(addrs.edge_url("/api/gateway/events"))
            .header("origin", ORIGIN)
            .header("x-gateway-client-ip", CLIENT_IP)
            .bearer_auth(&token)
            .json(&event)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        ids.insert(event_id(&event));
    }
    assert_eq!(backend.last_body_of(&token), Some(json!({"ip": CLIENT_IP, "site_id": 34})));
    front.kill_9();

    // A worker started on the same data directory after the kill produces every accepted event, in a
    // deployment of its own on the shared broker (the test reads there).
    let kafka = TestHost::config(Backends::Distributed, dir.path());
    let mut worker_env = vec![
        ("FLOWHOST_KAFKA_BROKERS", servers::kafka_brokers()),
        ("FLOWHOST_KAFKA_TOPIC_PREFIX", kafka.kafka.topic_prefix.clone().unwrap()),
        ("GATEWAY_METRICS_PORT", flowhost_tests::gateway::free_port().to_string()),
    ];
    worker_env.push(("GATEWAY_ANALYTICS_TOPIC", unique("gateway.analytics")));
    let worker = Process::start("gateway-worker", dir.path(), &worker_env, dir.path().join("worker.log"));
    let ports = flowhost::connect(&Config { mongodb: Default::default(), ..kafka }).await.unwrap();
    let records = read_events(&ports, PRESENCE_TOPIC, &ids, Duration::from_secs(90)).await;
    assert!(records.len() >= ids.len());
    for process in [&front, &worker] {
        let log = process.log();
        assert!(!log.is_empty());
        assert!(!log.contains(CLIENT_IP), "the client IP is in a log line:\n{log}");
        assert!(!log.contains(&token), "the bearer is in a log line");
    }
}

/// Serves `html` at `/` on a free loopback port; answers its origin.
async fn page(html: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let router = axum::Router::new().route("/", axum::routing::get(move || async move { axum::response::Html(html) }));
    (origin, tokio::spawn(async move { axum::serve(listener, router).await.unwrap() }))
}

/// Runs `tests/browser/<script>` with node (headless Chromium through playwright-core) with `args` and the
/// screenshots directory last; answers its output (within two minutes) and that directory.
async fn browser_run(script: &str, mut args: Vec<String>) -> (std::process::Output, std::path::PathBuf) {
    let root = flowhost_tests::cli::repository_root();
    let artifacts = root.join("target/test-artifacts/browser");
    std::fs::create_dir_all(&artifacts).unwrap();
    args.push(artifacts.display().to_string());
    let output = tokio::process::Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .args(args)
        .kill_on_drop(true)
        .output();
    let output =
        tokio::time::timeout(Duration::from_secs(120), output).await.expect("the browser run finished").unwrap();
    (output, artifacts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_posts_from_an_allowed_origin_and_is_refused_from_an_excluded_one() {
    let backend = PlayerBackend::start().await;
    let (allowed, _allowed_page) = page("<!doctype html><title>Casino</title><h1>Allowed origin</h1>").await;
    let (excluded, _excluded_page) = page("<!doctype html><title>Elsewhere</title><h1>Excluded origin</h1>").await;
    let addrs = GatewayAddrs::free();
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        configure(config, &addrs, &[allowed.as_str()], &backend);
    })
    .await;
    let gateway = Gateway { host, addrs, http: reqwest::Client::new() };
    gateway.wait_ready(addrs.edge).await;

    let (output, artifacts) =
        browser_run("gateway_cors.mjs", vec![addrs.edge_url(""), format!("{allowed}/"), format!("{excluded}/")]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("DONE"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cases: Vec<Value> =
        stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    let case = |name: &str| cases.iter().find(|c| c["case"] == name).unwrap().clone();
    assert_eq!(case("allowed")["status"], 202, "{cases:?}");
    assert_eq!(case("allowed")["attempts"], 1);
    assert!(case("client-ip-header")["error"].is_string(), "a page cannot send the client-IP header: {cases:?}");
    assert!(case("excluded")["error"].is_string(), "the excluded origin's page cannot post: {cases:?}");
    assert_eq!(backend.calls_of("player-77"), 1, "only the allowed origin's event was validated");
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("gateway_edge_requests_total{outcome=\"origin_forbidden\"}"), "{metrics}");
    assert!(artifacts.join("gateway-allowed.png").exists() && artifacts.join("gateway-excluded.png").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_stop_the_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let origins = flowhost_tests::gateway::origins_json(&[ORIGIN], "https://players.internal");
    let key = flowhost_tests::gateway::HMAC_KEY.to_owned();
    let checksum = || ("GATEWAY_EDGE_ROLLOUT_CHECKSUM", flowhost_tests::gateway::ROLLOUT_CHECKSUM.to_owned());
    let cases = [
        (vec![("GATEWAY_EDGE_ORIGINS_JSON", origins.clone())], "GATEWAY_EDGE_CACHE_HMAC_KEY"),
        (
            vec![("GATEWAY_EDGE_ORIGINS_JSON", origins.clone()), ("GATEWAY_EDGE_CACHE_HMAC_KEY", "too-short".into())],
            "GATEWAY_EDGE_CACHE_HMAC_KEY",
        ),
        (
            vec![
                ("GATEWAY_EDGE_ORIGINS_JSON", origins.clone()),
                ("GATEWAY_EDGE_CACHE_HMAC_KEY", key.clone()),
                ("GATEWAY_EDGE_TRUSTED_PROXY_CIDRS", "10.0.0.1/8".into()),
                checksum(),
            ],
            "GATEWAY_EDGE_TRUSTED_PROXY_CIDRS",
        ),
        (
            vec![
                ("GATEWAY_EDGE_ORIGINS_JSON", "{\"schema_version\": 2, \"origins\": []}".into()),
                ("GATEWAY_EDGE_CACHE_HMAC_KEY", key.clone()),
                checksum(),
            ],
            "GATEWAY_EDGE_ORIGINS_FILE",
        ),
        // The cache secrets go with a non-empty rollout checksum (spec 002, authentication 4).
        (
            vec![("GATEWAY_EDGE_ORIGINS_JSON", origins.clone()), ("GATEWAY_EDGE_CACHE_HMAC_KEY", key.clone())],
            "GATEWAY_EDGE_ROLLOUT_CHECKSUM",
        ),
        (
            vec![
                ("GATEWAY_EDGE_ORIGINS_JSON", origins.clone()),
                ("GATEWAY_EDGE_CACHE_HMAC_KEY", key),
                ("GATEWAY_EDGE_ROLLOUT_CHECKSUM", " ".into()),
            ],
            "GATEWAY_EDGE_ROLLOUT_CHECKSUM",
        ),
    ];
    for (n, (mut env, setting)) in cases.into_iter().enumerate() {
        env.extend(GatewayAddrs::free().env());
        let mut process = Process::start("gateway", dir.path(), &env, dir.path().join(format!("bad-{n}.log")));
        let status = tokio::task::spawn_blocking(move || {
            let status = process.child.wait().unwrap();
            (status, process)
        });
        let (status, process) =
            tokio::time::timeout(Duration::from_secs(30), status).await.expect("the start stops").unwrap();
        assert!(!status.success());
        assert!(process.log().contains(setting), "{setting}:\n{}", process.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_cache_is_a_dependency_failure_within_the_cache_timeout() {
    // A private Redis of this test, paused (SIGSTOP) mid-run so every cache call hangs.
    let port = flowhost_tests::gateway::free_port();
    let redis = flowhost_tests::process::redis(port).await;
    let backend = PlayerBackend::start().await;
    let gateway = Gateway::start(Backends::Embedded, &backend, |config| {
        config.section_mut::<flowhost_gateway::GatewayConfig>().cache_url =
            Some(flowhost_core::config::Secret::new(format!("redis://127.0.0.1:{port}")));
    })
    .await;
    assert_eq!(gateway.post(ORIGIN, Some("player-21"), &presence_event("opened")).await.0, 202);
    redis.signal("STOP");
    let started = std::time::Instant::now();
    let (status, _, body) = gateway.post(ORIGIN, Some("player-21"), &presence_event("heartbeat")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("UNAVAILABLE")));
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "GATEWAY_EDGE_CACHE_TIMEOUT_MS is enforced: {:?}",
        started.elapsed()
    );
    let ready = gateway.http.get(gateway.addrs.edge_url("/ready")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    assert_eq!(ready.json::<Value>().await.unwrap()["failing"], json!(["gateway_cache"]));
    redis.signal("CONT");
    gateway.wait_ready(gateway.addrs.edge).await;
    assert_eq!(gateway.post(ORIGIN, Some("player-21"), &presence_event("heartbeat")).await.0, 202);
}

/// What the stub gateway of the client test saw: per request, the bearer and the headers a browser must not send.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<Value>>>;

/// A stub of the public route for the answers an edge gives only under load: bearer `retry-once` gets a 429 with
/// `Retry-After: 1` and then a 202, `always-503` a 503 without `Retry-After`, `redirect` a 307 to the page. CORS
/// as the edge answers it, for any origin.
async fn stub_gateway(page_origin: String) -> (String, Seen, tokio::task::JoinHandle<()>) {
    use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
    use axum::response::IntoResponse;
    let seen: Seen = Seen::default();
    let retried = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let record = seen.clone();
    let handler = move |method: Method, headers: HeaderMap| {
        let (seen, retried, page_origin) = (record.clone(), retried.clone(), page_origin.clone());
        async move {
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let origin = header("origin").unwrap_or_default();
            let cors = [
                ("access-control-allow-origin", origin),
                ("access-control-expose-headers", "Retry-After".to_owned()),
                ("vary", "Origin".to_owned()),
            ];
            if method == Method::OPTIONS {
                let preflight = [
                    ("access-control-allow-methods", "POST".to_owned()),
                    ("access-control-allow-headers", "authorization, content-type".to_owned()),
                ];
                return (StatusCode::NO_CONTENT, cors, preflight).into_response();
            }
            let token = header("authorization").unwrap_or_default().trim_start_matches("Bearer ").to_owned();
            seen.lock().unwrap().push(json!({"token": token, "cookie": header("cookie"), "referer": header("referer"),
                "at_ms": flowhost_core::Clock::now_ms(&flowhost_core::SystemClock)}));
            let mut response = match token.as_str() {
                "retry-once" if !retried.swap(true, std::sync::atomic::Ordering::SeqCst) => {
                    (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response()
                }
                "retry-once" => (StatusCode::ACCEPTED, axum::Json(json!({"status": "accepted"}))).into_response(),
                "always-503" => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                _ => (StatusCode::TEMPORARY_REDIRECT, [("location", format!("{page_origin}/"))]).into_response(),
            };
            for (name, value) in cors {
                response.headers_mut().insert(name, HeaderValue::from_str(&value).unwrap());
            }
            response
        }
    };
    let router = axum::Router::new().route("/api/gateway/events", axum::routing::any(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (url, seen, tokio::spawn(async move { axum::serve(listener, router).await.unwrap() }))
}

/// The page of the client test: an allowed origin serving the example module as a page would.
async fn client_page() -> (String, tokio::task::JoinHandle<()>) {
    let module = flowhost_tests::cli::repository_root().join("examples/gateway-client/gateway-client.mjs");
    let module = std::fs::read_to_string(module).unwrap();
    let router = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async {
                axum::response::Html("<!doctype html><title>Casino</title><h1>Gateway client</h1>")
            }),
        )
        .route(
            "/gateway-client.mjs",
            axum::routing::get(move || {
                let module = module.clone();
                async move { ([("content-type", "text/javascript")], module) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    (origin, tokio::spawn(async move { axum::serve(listener, router).await.unwrap() }))
}

/// The example browser client (spec 002 part A, rule 7) in Chromium against a running edge: HTTPS only (plain
/// HTTP only to loopback, and only when the page opts in for development), `credentials: "omit"`,
/// `redirect: "error"`, `no-referrer`, at most three attempts, and a 429's `Retry-After` honoured: waited for
/// when short, the event given up at once when longer than the client's budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_browser_client_follows_rule_7_against_the_edge() {
    let backend = PlayerBackend::start().await;
    let (page_origin, _page) = client_page().await;
    let (stub, seen, _stub) = stub_gateway(page_origin.clone()).await;
    let addrs = GatewayAddrs::free();
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        configure(config, &addrs, &[page_origin.as_str()], &backend);
        config.section_mut::<flowhost_gateway::GatewayConfig>().requests_per_minute.token = 1;
    })
    .await;
    let gateway = Gateway { host, addrs, http: reqwest::Client::new() };
    gateway.wait_ready(addrs.edge).await;

    let (output, artifacts) =
        browser_run("gateway_client.mjs", vec![addrs.edge_url(""), format!("{page_origin}/"), stub.clone()]).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stdout.contains("DONE"), "{stdout}\n{stderr}");
    let cases: Vec<Value> =
        stdout.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect();
    let case = |name: &str| cases.iter().find(|c| c["case"] == name).unwrap_or_else(|| panic!("{name}: {cases:?}"));

    // HTTPS only: refused before any request.
    for name in ["plain-http-refused", "plain-http-elsewhere-refused"] {
        assert!(case(name)["refused"].as_str().unwrap().contains("HTTPS"), "{name}: {cases:?}");
    }
    assert!(case("path-refused")["refused"].as_str().unwrap().contains("origin only"), "{cases:?}");

    // The edge: accepted once; a 401 is not retried; a 429 whose Retry-After (the rest of the one-minute window)
    // is over the client's budget ends the attempts at once, the page reading Retry-After through CORS.
    let accepted = case("accepted");
    assert_eq!(
        (accepted["ok"].as_bool(), accepted["status"].as_u64(), accepted["attempts"].as_u64()),
        (Some(true), Some(202), Some(1))
    );
    assert_eq!(
        (case("unauthorized")["status"].as_u64(), case("unauthorized")["attempts"].as_u64()),
        (Some(401), Some(1))
    );
    assert_eq!(case("limit-first")["status"], 202);
    let limited = case("rate-limited");
    assert_eq!((limited["status"].as_u64(), limited["attempts"].as_u64()), (Some(429), Some(1)), "{limited}");
    let retry_after = limited["retryAfterMs"].as_u64().expect("the page reads Retry-After");
    assert!((5_001..=60_000).contains(&retry_after), "{retry_after}");
    assert!(limited["elapsedMs"].as_u64().unwrap() < 5_000, "the client does not wait past its budget");
    assert_eq!(backend.calls_of("player-78"), 1);
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("gateway_edge_requests_total{outcome=\"accepted\"} 2"), "{metrics}");
    assert!(metrics.contains("gateway_edge_requests_total{outcome=\"rate_limited\"} 1"), "{metrics}");

    // The stub: a short Retry-After is waited for and the second attempt lands; a 503 is tried three times in
    // all; a redirect is an error (never followed), tried three times.
    let honoured = case("retry-after-honoured");
    assert_eq!((honoured["status"].as_u64(), honoured["attempts"].as_u64()), (Some(202), Some(2)), "{honoured}");
    assert!(honoured["elapsedMs"].as_u64().unwrap() >= 1_000, "Retry-After: 1 was honoured: {honoured}");
    let unavailable = case("unavailable-three-attempts");
    assert_eq!((unavailable["status"].as_u64(), unavailable["attempts"].as_u64()), (Some(503), Some(3)));
    let redirect = case("redirect-refused");
    assert_eq!((redirect["ok"].as_bool(), redirect["attempts"].as_u64()), (Some(false), Some(3)), "{redirect}");
    assert!(redirect["error"].is_string(), "{redirect}");
    let seen = seen.lock().unwrap().clone();
    let count = |token: &str| seen.iter().filter(|r| r["token"] == token).count();
    assert_eq!((count("retry-once"), count("always-503"), count("redirect")), (2, 3, 3), "{seen:?}");
    let retry: Vec<u64> =
        seen.iter().filter(|r| r["token"] == "retry-once").map(|r| r["at_ms"].as_u64().unwrap()).collect();
    assert!(retry[1] - retry[0] >= 1_000, "the retry came before Retry-After: {retry:?}");
    for request in &seen {
        assert_eq!(
            (&request["cookie"], &request["referer"]),
            (&Value::Null, &Value::Null),
            "credentials and referrer omitted: {request}"
        );
    }
    assert!(artifacts.join("gateway-client.png").exists());
    gateway.host.stop().await;
}

/// The queue administration API runs as a process of its own (`gateway-admin`, spec 002's process table): its
/// listener and the metrics one, nothing else; `gateway-ingest` no longer serves it. It reads the queue the
/// other parts write. A worker-only process serves no `/ready` at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_admin_api_runs_as_its_own_role() {
    let backend = PlayerBackend::start().await;
    let gateway =
        Gateway::launch(Backends::Embedded, &backend, |config| config.roles = vec!["gateway-admin".to_owned()]).await;
    let addrs = gateway.addrs;
    gateway.wait_ready(addrs.admin).await;
    gateway.host.ports.queue.enqueue("gateway-events", b"{}".to_vec()).await.unwrap();
    let queues = gateway.queues_until(|q| q[0]["pending"] == 1).await;
    assert_eq!(queues[0]["name"], "gateway-events");
    for closed in [addrs.edge, addrs.ingest, addrs.private] {
        assert!(tokio::net::TcpStream::connect(closed).await.is_err(), "{closed} is another part's listener");
    }
    let metrics = |probe: &str| gateway.http.get(format!("http://{}{probe}", addrs.metrics)).send();
    assert_eq!(metrics("/metrics").await.unwrap().status(), 200);
    assert_eq!(metrics("/ready").await.unwrap().status(), 404);
    gateway.host.stop().await;

    let ingest =
        Gateway::launch(Backends::Embedded, &backend, |config| config.roles = vec!["gateway-ingest".to_owned()]).await;
    ingest.wait_ready(ingest.addrs.ingest).await;
    assert!(tokio::net::TcpStream::connect(ingest.addrs.admin).await.is_err(), "ingest serves no queue admin");
    ingest.host.stop().await;

    // A process running only the worker answers no readiness anywhere, its main socket included: liveness and
    // metrics only (spec 002 gives the worker no HTTP readiness).
    let worker =
        Gateway::launch(Backends::Embedded, &backend, |config| config.roles = vec!["gateway-worker".to_owned()]).await;
    for base in [worker.host.base_url.clone(), format!("http://{}", worker.addrs.metrics)] {
        assert_eq!(worker.http.get(format!("{base}/health")).send().await.unwrap().status(), 200, "{base}");
        assert_eq!(worker.http.get(format!("{base}/ready")).send().await.unwrap().status(), 404, "{base}");
    }
    worker.host.stop().await;
}
