//! The specification's production topology, end to end on the real servers: every role a `flowhost serve
//! --roles ...` process of its own, started by the operator's script (`examples/topology/topology.sh`), and
//! driven through public surfaces only:
//! - a browser's subscription through the push API; deposits on Kafka run a released v2 flow whose
//!   `send_webpush` segment crosses NATS to the two sender processes; the push reaches a local push service,
//!   which decrypts it; the browser's `displayed` and `clicked` come back through the push API; the campaigns
//!   API lists the delivery and the interaction as live events and counts them as engagement;
//! - an editor send on the push-api process, delivered by a sender process;
//! - the gateway's presence events (opened, heartbeat, closed) reach the presence documents through the edge,
//!   ingest, the durable queue, the worker, Kafka and the presence replicas;
//! - `kill -9` of a sender, a presence replica and the gateway worker mid-stream: nothing acknowledged is lost.
//!
//! Needs `target/<profile>/flowhost` (built by `tests/run.sh`) and the servers of `tests/scripts/servers.sh`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use flowhost_core::config::Config;
use flowhost_core::ports::{DocumentStore, OutRecord, Ports};
use flowhost_tests::cli::{flowhost_bin, repository_root};
use flowhost_tests::gateway::{presence_event, PlayerBackend, HMAC_KEY, SITE};
use flowhost_tests::push::{callers_json, EDITOR_TOKEN, INTERACTION_SECRET, OPS_TOKEN, SOURCE_APP, TENANT_A};
use flowhost_tests::push_service::{PushService, PushSubscription};
use flowhost_tests::{eventually, servers, unique, Backends, TestHost};
use serde_json::{json, Value};

const ORIGIN: &str = "https://casino.example";
/// Deposits of the kill phase (beside the first one).
const DEPOSITS: usize = 20;
/// Presence sessions of the kill phase.
const SESSIONS: u32 = 30;

/// The deployment: its processes (by the script), the settings they share, and the test's own ports onto the
/// same servers (to publish deposits and read presence documents).
struct Topology {
    dir: tempfile::TempDir,
    addresses: HashMap<String, String>,
    ports: Ports,
    presence_documents: flowhost_mongo::MongoDocuments,
    /// The gateway tenant of this run (the presence documents of the shared database are this run's by it).
    gateway_tenant: String,
    http: reqwest::Client,
}

fn script() -> PathBuf {
    repository_root().join("examples/topology/topology.sh")
}

impl Topology {
    async fn start(service: &PushService, players: &PlayerBackend) -> Topology {
        let dir = tempfile::tempdir().unwrap();
        let config: Config = TestHost::config(Backends::Distributed, dir.path());
        let ports = flowhost::connect(&config).await.expect("the test's own ports");
        let gateway_tenant = (uuid::Uuid::new_v4().as_u128() % 1_000_000_000 + 1).to_string();
        let origins = json!({"schema_version": 1, "origins": [
            {"origin": ORIGIN, "tenant_id": gateway_tenant, "site_id": SITE, "player_url": players.url}]});
        let (public, private) = flowhost_notifications::vapid::generate().unwrap();
        let kafka_file = dir.path().join("flowhost.toml");
        std::fs::write(&kafka_file, "[kafka.properties]\n\"session.timeout.ms\" = \"6000\"\n").unwrap();
        let mut env = TestHost::deployment_env(&config);
        env.extend([
            ("FLOWHOST_CONFIG", kafka_file.display().to_string()),
            ("FLOWHOST_LOG", "info".to_owned()),
            ("FLOWHOST_LOG_FORMAT", "text".to_owned()),
            ("FLOWHOST_ENGINE_RELOAD_INTERVAL_MS", "200".to_owned()),
            ("FLOWHOST_ENGINE_FLOWS_POLL_INTERVAL_MS", "100".to_owned()),
            ("FLOWHOST_PLUGINS_SYNC_INTERVAL_MS", "200".to_owned()),
            // The push service: its callers, keys, secrets, tenants, and the local push service it may reach.
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", callers_json()),
            ("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY", public),
            ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", private),
            ("FLOWHOST_WEBPUSH_VAPID_SUBJECT", "mailto:push-ops@casino.example".to_owned()),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", INTERACTION_SECRET.to_owned()),
            ("INAPP_EDITOR_API_AUTH_TOKEN", EDITOR_TOKEN.to_owned()),
            ("FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS", "casino.example,*.casino.example".to_owned()),
            ("FLOWHOST_WEBPUSH_TENANTS", "tenant-a,tenant-b".to_owned()),
            ("FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS", "127.0.0.1".to_owned()),
            ("SSL_CERT_FILE", service.ca_path.display().to_string()),
            // The gateway: the origin map (validated by the test's player backend), its cache on Redis.
            ("GATEWAY_EDGE_ORIGINS_JSON", origins.to_string()),
            ("GATEWAY_EDGE_CACHE_HMAC_KEY", HMAC_KEY.to_owned()),
            ("GATEWAY_EDGE_CACHE_URL", servers::redis_url()),
            ("GATEWAY_EDGE_ROLLOUT_CHECKSUM", "topology-test-1".to_owned()),
            // A dozen processes share two cores here: a Redis answer can take longer than the default 200 ms,
            // and the edge then refuses the event (503) as the specification says. Refusing is tested elsewhere.
            ("GATEWAY_EDGE_CACHE_TIMEOUT_MS", "2000".to_owned()),
            // The presence projector: Kafka and MongoDB (database `presence`, as the specification fixes).
            ("PRESENCE_BROKER_BOOTSTRAP_SERVERS", servers::kafka_brokers()),
            ("DOCDB_URI", servers::mongodb_uri()),
            ("PRESENCE_CONSUMER_GROUP", unique("presence")),
            ("PRESENCE_BROKER_DLQ_REPLICATION_FACTOR", "1".to_owned()),
            ("PRESENCE_PRESENCE_EXPIRY_SECONDS", "3600".to_owned()),
            // The campaign events API: its own read-model database, synced often.
            ("FLOWHOST_CAMPAIGNS_DATABASE", unique("campaigns").replace('-', "_")),
            ("FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", "200".to_owned()),
        ]);
        let settings: String =
            env.iter().map(|(name, value)| format!("{name}='{}'\n", value.replace('\'', "'\\''"))).collect();
        std::fs::write(dir.path().join("topology.env"), settings).unwrap();
        run_script(&["start", &dir.path().display().to_string()]).await;
        let addresses = std::fs::read_to_string(dir.path().join("addresses.env"))
            .unwrap()
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, value)| (name.to_owned(), value.to_owned())))
            .collect();
        let presence_documents =
            flowhost_mongo::MongoDocuments::connect(&servers::mongodb_uri(), "presence").await.unwrap();
        Topology { dir, addresses, ports, presence_documents, gateway_tenant, http: reqwest::Client::new() }
    }

    /// `http://127.0.0.1:<port>` of the address named `key` in `addresses.env` (`PUSH_API_PORT`, `EDGE_PORT`).
    fn url(&self, key: &str, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.addresses[key])
    }

    async fn kill(&self, name: &str) {
        run_script(&["kill", &self.dir.path().display().to_string(), name]).await;
    }

    async fn restart(&self, name: &str) {
        run_script(&["restart", &self.dir.path().display().to_string(), name]).await;
    }

    /// Waits until `GET url` answers 200 (at most 90 s).
    async fn until_ready(&self, url: &str) {
        let until = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let response = self.http.get(url).send().await;
            match response {
                Ok(response) if response.status() == 200 => return,
                Ok(response) if tokio::time::Instant::now() > until => {
                    panic!("{url} never ready: {} {}", response.status(), response.text().await.unwrap_or_default())
                }
                _ => assert!(tokio::time::Instant::now() < until, "{url} never answered"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A JSON request with `headers`; the status and the JSON body (`Null` when empty).
    async fn call(&self, method: &str, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }

    async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call(method, &self.url("ADMIN_ENGINE_PORT", path), &[], body).await
    }

    /// A push-platform call as the `ops` caller.
    async fn platform(&self, path: &str, body: Value) -> (u16, Value) {
        let auth = format!("Bearer {OPS_TOKEN}");
        let headers = [("authorization", auth.as_str()), ("x-source-app", SOURCE_APP)];
        self.call("POST", &self.url("PUSH_API_PORT", path), &headers, Some(body)).await
    }

    /// An editor call for `tenant-a`.
    async fn editor(&self, path: &str, body: Value) -> (u16, Value) {
        let auth = format!("Bearer {EDITOR_TOKEN}");
        let headers = [("authorization", auth.as_str()), ("x-svc-client-id", TENANT_A)];
        self.call("POST", &self.url("PUSH_API_PORT", path), &headers, Some(body)).await
    }

    async fn campaigns(&self, path: &str) -> Value {
        let (status, body) = self.call("GET", &self.url("CAMPAIGNS_HTTP_PORT", path), &[], None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    async fn publish_deposits(&self, topic: &str, players: impl Iterator<Item = i64>) {
        let records: Vec<OutRecord> = players
            .map(|player| {
                let event = json!({"event_type": "deposit", "tenant_id": TENANT_A, "player_id": player, "game": "slots",
                    "event_id": uuid::Uuid::new_v4().to_string()});
                OutRecord::new(topic.to_owned(), event.to_string()).with_key(player.to_string())
            })
            .collect();
        self.ports.topics.publish(&records).await.unwrap();
    }

    async fn completed_runs(&self, flow: &str) -> u64 {
        let (_, page) =
            self.admin("GET", &format!("/api/v2/flows/{flow}/runs?status=completed&page_size=1"), None).await;
        page["total"].as_u64().unwrap_or(0)
    }

    /// Posts a presence event of `player`'s session through the edge; the edge's status.
    async fn presence(&self, player: u32, session: &str, action: &str) -> u16 {
        let mut event = presence_event(action);
        event["event_payload"]["presence_session_id"] = json!(session);
        if action == "closed" {
            event["event_payload"]["close_reason"] = json!("logout");
        }
        let response = self
            .http
            .post(self.url("EDGE_PORT", "/api/gateway/events"))
            .header("origin", ORIGIN)
            .bearer_auth(format!("player-{player}"))
            .json(&event)
            .send()
            .await
            .unwrap();
        response.status().as_u16()
    }

    /// The presence document of `player` (of this run's tenant), when there is one.
    async fn presence_document(&self, player: u32) -> Option<Value> {
        let id = format!("{}:{player}", self.gateway_tenant);
        self.presence_documents.get("presence_state", &id).await.unwrap()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").arg(self.dir.path()).status();
        if std::thread::panicking() {
            // What each process said last, for the failure's report (the directory goes with the test).
            for entry in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|extension| extension == "log") {
                    let log = std::fs::read_to_string(&path).unwrap_or_default();
                    let lines: Vec<&str> = log.lines().filter(|line| !line.contains("rdkafka")).collect();
                    eprintln!("--- {} (last 40 lines)", path.display());
                    for line in &lines[lines.len().saturating_sub(40)..] {
                        eprintln!("{line}");
                    }
                }
            }
        }
    }
}

async fn run_script(args: &[&str]) {
    let mut command = Command::new("bash");
    command.arg(script()).args(args).env("FLOWHOST_BIN", flowhost_bin());
    let status = tokio::task::spawn_blocking(move || command.status().expect("run topology.sh")).await.unwrap();
    assert!(status.success(), "topology.sh {args:?} failed");
}

/// The pushes `subscription` received, decrypted, once there are at least `count`.
async fn pushes(service: &PushService, subscription: &PushSubscription, count: usize) -> Vec<Value> {
    eventually(&format!("{count} pushes"), 120, || async {
        let received = service.received(subscription).await;
        (received.len() >= count).then_some(received)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_topology_as_separate_processes() {
    let service = PushService::start().await;
    let players = PlayerBackend::start().await;
    let topology = Topology::start(&service, &players).await;
    for key in ["ADMIN_ENGINE_PORT", "PUSH_API_PORT", "SENDER_1_PORT", "SENDER_2_PORT", "CAMPAIGNS_HTTP_PORT"] {
        topology.until_ready(&topology.url(key, "/ready")).await;
    }
    for key in ["EDGE_PORT", "INGEST_PORT", "PRESENCE_1_HTTP_PORT", "PRESENCE_2_HTTP_PORT"] {
        topology.until_ready(&topology.url(key, "/ready")).await;
    }

    // The operator's setup: a template (editor route), a browser's subscription (push-platform route), and a
    // released campaign flow whose notifications segment crosses NATS to the senders.
    let template = flowhost_tests::sender::template();
    let (status, created) = topology.editor("/api/v1/templates/web-push", template).await;
    assert_eq!(status, 201, "{created}");
    let browser = service.subscribe(&[201], None).await;
    let mut subscription = flowhost_tests::push::subscription(TENANT_A, 42, &browser.endpoint);
    subscription["keys"] = json!({"p256dh": browser.p256dh, "auth": browser.auth});
    let (status, stored) = topology.platform("/api/v1/service/webpush/subscriptions", subscription).await;
    assert_eq!(status, 201, "{stored}");
    let schema = json!({"fields": [
        {"name": "tenant_id", "type": "string"}, {"name": "player_id", "type": "int"}, {"name": "game", "type": "string"}]});
    assert_eq!(topology.admin("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let source = unique("deposits");
    let flow = json!({
        "id": "welcome", "name": "Welcome bonus",
        "campaign": {"tenant_id": TENANT_A, "offering": "50 free spins", "starts_at": "2026-01-01T00:00:00Z",
            "ends_at": "2099-01-01T00:00:00Z"},
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
            {"id": "seg", "kind": "service-in", "config": {"service": "notifications", "transport": "nats"}},
            {"id": "push", "kind": "action", "config": {
                "action_ref": "send_webpush", "tenant_id": "{{tenant_id}}", "player_id": "{{player_id}}",
                "template_id": 1, "language_enabled_id": "en", "placeholders": {"game": "{{game}}"}}},
            {"id": "out", "kind": "output-topic", "config": {"topic": unique("notified")}},
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "push"}, {"from": "push", "to": "out"}],
    });
    let (status, created) = topology.admin("POST", "/api/v2/flows", Some(flow)).await;
    assert_eq!(status, 201, "{created}");
    let (status, released) = topology.admin("POST", "/api/v2/flows/welcome/release", Some(json!({}))).await;
    assert_eq!(status, 200, "{released}");

    // A deposit runs the flow; a sender process delivers; the push service decrypts it.
    topology.publish_deposits(&source, std::iter::once(42)).await;
    let push = pushes(&service, &browser, 1).await.remove(0);
    assert!(push.get("error").is_none(), "{push}");
    let payload = &push["payload"];
    assert_eq!(payload["title"], "Hi friend", "{payload}");
    assert_eq!(payload["target_url"], "https://casino.example/play/slots");
    let (notification, delivery, token) = (
        payload["data"]["notification_id"].as_str().unwrap().to_owned(),
        payload["delivery_id"].as_str().unwrap().to_owned(),
        payload["interaction_token"].as_str().unwrap().to_owned(),
    );

    // The browser reports `displayed` and `clicked` through the push API.
    for (n, event_type) in ["displayed", "clicked"].iter().enumerate() {
        let event = json!({"event_id": format!("browser-{n}"), "delivery_id": delivery, "notification_id": notification,
            "interaction_token": token, "event_type": event_type, "endpoint": browser.endpoint,
            "occurred_at": "2026-11-27T10:00:00Z", "metadata": {}});
        let (status, body) = topology.platform("/api/v1/service/webpush/events/browser", event).await;
        assert_eq!(status, 202, "{event_type}: {body}");
    }

    // The campaigns API lists the delivery and the interaction, and counts them.
    let detail = eventually("the campaign counts the delivery and the interaction", 60, || async {
        let detail = topology.campaigns("/api/v1/campaigns/welcome").await;
        (detail["deliveries"].as_u64() >= Some(1) && detail["interactions"].as_u64() >= Some(1)).then_some(detail)
    })
    .await;
    assert_eq!(detail["players_engaged"], 1, "{detail}");
    let live = topology.campaigns(&format!("/api/v1/live-events?tenant_id={TENANT_A}&page_size=100")).await;
    let kinds: Vec<&str> = live["items"].as_array().unwrap().iter().filter_map(|item| item["kind"].as_str()).collect();
    assert!(kinds.contains(&"notification_delivered") && kinds.contains(&"interaction"), "{live}");

    // Presence: a session opens, beats and closes through the edge; the replicas project it into MongoDB.
    let session = uuid::Uuid::new_v4().to_string();
    for action in ["opened", "heartbeat"] {
        assert_eq!(topology.presence(7000, &session, action).await, 202, "{action}");
    }
    eventually("the open session's presence document", 90, || async { topology.presence_document(7000).await }).await;
    assert_eq!(topology.presence(7000, &session, "closed").await, 202);
    let closed = eventually("the closed session reaches the document", 90, || async {
        let document = topology.presence_document(7000).await?;
        (document["state"] == "offline").then_some(document)
    })
    .await;
    assert!(closed.to_string().contains(&session), "{closed}");

    // Kills mid-stream. Deposits: one sender is killed while the runs go on; every run completes, every push
    // arrives (at least once).
    topology.publish_deposits(&source, std::iter::repeat_n(42, DEPOSITS)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    topology.kill("sender-1").await;
    let completed = eventually("every deposit's run completed", 180, || async {
        let completed = topology.completed_runs("welcome").await;
        (completed > DEPOSITS as u64).then_some(completed)
    })
    .await;
    assert_eq!(completed, 1 + DEPOSITS as u64, "one completed run per deposit");
    let flow_pushes = pushes(&service, &browser, 1 + DEPOSITS).await;
    assert!(flow_pushes.iter().all(|push| push.get("error").is_none()), "{flow_pushes:?}");

    // Presence: sessions open (every partition gets a committed offset: with none, the specification starts a
    // new owner at the latest offset, and a session materializes on its next heartbeat), then they close while
    // a replica and the worker are killed: every event the edge acknowledged (202) reaches its document once
    // the worker is back.
    let players: Vec<(u32, String)> =
        (7101..7101 + SESSIONS).map(|player| (player, uuid::Uuid::new_v4().to_string())).collect();
    for (player, session) in &players {
        assert_eq!(topology.presence(*player, session, "opened").await, 202);
    }
    sessions_reach(&topology, &players, "online", 90).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (n, (player, session)) in players.iter().enumerate() {
        if n == players.len() / 3 {
            topology.kill("presence-1").await;
        }
        if n == 2 * players.len() / 3 {
            topology.kill("gateway-worker").await;
        }
        assert_eq!(topology.presence(*player, session, "closed").await, 202, "acknowledged");
    }
    topology.restart("gateway-worker").await;
    sessions_reach(&topology, &players, "offline", 120).await;
    let status = topology.http.get(topology.url("PRESENCE_2_HTTP_PORT", "/ready")).send().await.unwrap().status();
    assert_eq!(status, 200, "the surviving presence replica took the partitions");

    // An editor send on the push-api process is delivered by a sender process. A send the route calls retryable
    // (503 `SEND_RETRYABLE`: a sender's plugin call ran past its deadline while every process of the topology
    // shares two cores) is sent again, as the route tells its clients to.
    let send = json!({"tenant_id": TENANT_A, "player_id": 42, "template_id": 1, "language_enabled_id": "en",
        "placeholders": {"first_name": "Ada", "game": "roulette"}});
    let (status, sent) = eventually("an editor send that is not retryable", 60, || async {
        let (status, sent) = topology.editor("/api/v1/webpush/send", send.clone()).await;
        (status != 503 || sent["error"]["code"] != "SEND_RETRYABLE").then_some((status, sent))
    })
    .await;
    assert_eq!((status, sent["delivered"].as_bool()), (200, Some(true)), "{sent}");
    let received = pushes(&service, &browser, 2 + DEPOSITS).await;
    assert!(received.iter().any(|push| push["payload"]["title"] == "Hi Ada"), "{received:?}");
}

/// Waits (at most `seconds` each) until every player's presence document is in `state` with its session.
async fn sessions_reach(topology: &Topology, players: &[(u32, String)], state: &str, seconds: u64) {
    for (player, session) in players {
        eventually(&format!("player {player}'s session {state}"), seconds, || async {
            let reached =
                |document: &Value| document["state"] == state && document.to_string().contains(session.as_str());
            topology.presence_document(*player).await.filter(reached)
        })
        .await;
    }
}
