//! The presence projector end to end (spec 002 part B): the `presence` role consumes the gateway's presence
//! envelopes, the bundled `presence` plugin projects them, and the host writes one document per player by
//! compare-and-replace; no-ops write nothing; invalid records reach the dead-letter topic with their exact bytes,
//! key and headers; the sweep takes due sites offline. On the embedded backends and on Kafka with MongoDB.

use std::time::Duration;

use flowhost_core::ports::{OutRecord, Versioned};
use flowhost_tests::gateway::free_port;
use flowhost_tests::host::read_topic;
use flowhost_tests::process::Private;
use flowhost_tests::{servers, unique, Backends, TestHost};
use serde_json::{json, Value};

const SESSION_A: &str = "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99";
const SESSION_B: &str = "1c7f4b63-4d3f-4e1f-8e2b-8f4f3c2d1baa";

struct Presence {
    host: TestHost,
    addr: String,
    input: String,
    dead_letters: String,
    tenant: String,
}

impl Presence {
    async fn start(backends: Backends, expiry_seconds: u64) -> Presence {
        Presence::start_with(backends, expiry_seconds, |_| {}).await
    }

    async fn start_with(
        backends: Backends,
        expiry_seconds: u64,
        change: impl FnOnce(&mut flowhost_core::config::Config),
    ) -> Presence {
        let addr = format!("127.0.0.1:{}", free_port());
        let distributed = backends == Backends::Distributed;
        // On the shared broker every test has its own input topic (and so its own dead-letter topic).
        let input = if distributed { unique("presence.input") } else { "gateway.player-casino-presence.v1".to_owned() };
        // The host's deployment on the shared broker, chosen here to create its input topic first.
        let deployment = flowhost_tests::host::deployment_name();
        if distributed {
            // The input topic belongs to the gateway (its worker creates it); the projector never creates it.
            let namespace = flowhost_core::ports::Namespace::new(&deployment, '.');
            let kafka =
                flowhost_kafka::KafkaTopics::new_in(&servers::kafka_brokers(), &Default::default(), namespace).unwrap();
            flowhost_core::ports::Topics::create_topic(&kafka, &input, 2).await.unwrap();
        }
        let host = TestHost::start_configured(backends, None, |config| {
            config.roles = vec!["presence".to_owned()];
            config.plugins.bundled = true;
            let presence = config.section_mut::<flowhost_presence::PresenceConfig>();
            presence.http_addr = addr.clone();
            presence.expiry_seconds = expiry_seconds;
            presence.sweep_interval_seconds = 1;
            presence.retry_initial_ms = 100;
            presence.retry_max_ms = 1000;
            presence.input_topic = input.clone();
            presence.group = unique("presence");
            if distributed {
                config.kafka.topic_prefix = Some(deployment.clone());
                let presence = config.section_mut::<flowhost_presence::PresenceConfig>();
                presence.bootstrap_servers = vec![servers::kafka_brokers()];
                presence.docdb_uri = Some(flowhost_core::config::Secret::new(servers::mongodb_uri()));
                presence.dlq_replication_factor = 1;
            } else {
                presence.bootstrap_servers = vec!["embedded".to_owned()];
            }
            change(config);
        })
        .await;
        // A test may have named another input topic (a second replica of another test's group).
        let input = host.config.section::<flowhost_presence::PresenceConfig>().input_topic.clone();
        let dead_letters = flowhost_presence::dead_letter::dead_letter_topic(&input);
        // Tenants differ per test: the MongoDB database `presence` is shared by every run.
        let tenant = (uuid::Uuid::new_v4().as_u128() % 1_000_000_000 + 1).to_string();
        let presence = Presence { host, addr, input, dead_letters, tenant };
        presence.wait_ready().await;
        presence.wait_consuming().await;
        presence
    }

    /// The group starts at the latest offset once its partitions are assigned, which on Kafka takes a few
    /// seconds after `/ready`: a probe player's heartbeat is sent until its document appears ("active sessions
    /// materialize on their next heartbeat").
    async fn wait_consuming(&self) {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        while self.document("1").await.is_none() {
            assert!(tokio::time::Instant::now() < until, "the consumer never consumed");
            self.send(&self.envelope("1", "1", SESSION_A, "heartbeat")).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The value of a metric line (`name{labels}`), 0 when absent.
    async fn metric(&self, series: &str) -> u64 {
        let metrics = self.metrics().await;
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or(0)
    }

    /// `/ready` answers `ready` once the consumer is in its group and the store answers.
    async fn wait_ready(&self) {
        let until = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(response) = self.host.http.get(format!("http://{}/ready", self.addr)).send().await {
                if response.status() == 200 {
                    assert_eq!(response.text().await.unwrap(), "ready");
                    return;
                }
            }
            assert!(tokio::time::Instant::now() < until, "the presence role never got ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn envelope(&self, player: &str, site: &str, session: &str, action: &str) -> Value {
        let now = chrono_now();
        json!({"envelope_version": 1, "event_type": "player.casino-presence.v1", "source": "casino-web",
            "metadata": {"event_id": uuid::Uuid::new_v4().to_string(), "received_at": now, "occurred_at": now},
            "body": {"schema_version": 1, "tenant_id": self.tenant, "site_id": site, "user": {"user_id": player}},
            "event_payload": {"presence_session_id": session, "action": action}})
    }

    async fn publish(&self, values: &[Vec<u8>]) {
        let records: Vec<OutRecord> =
            values.iter().map(|value| OutRecord::new(self.input.clone(), value.clone()).with_key("k")).collect();
        self.topics().publish(&records).await.expect("publish");
    }

    async fn send(&self, envelope: &Value) {
        self.publish(&[envelope.to_string().into_bytes()]).await;
    }

    fn topics(&self) -> std::sync::Arc<dyn flowhost_core::ports::Topics> {
        self.host.ports.topics.clone()
    }

    async fn document(&self, player: &str) -> Option<Versioned> {
        let documents = self.documents().await;
        documents.get_versioned("presence_state", &format!("{}:{player}", self.tenant)).await.unwrap()
    }

    async fn documents(&self) -> std::sync::Arc<dyn flowhost_core::ports::DocumentStore> {
        match &self.host.config.section::<flowhost_presence::PresenceConfig>().docdb_uri {
            Some(uri) => {
                std::sync::Arc::new(flowhost_mongo::MongoDocuments::connect(uri.expose(), "presence").await.unwrap())
            }
            None => self.host.ports.documents.database("presence").await.unwrap(),
        }
    }

    /// Waits until the player's document satisfies `done`.
    async fn document_until(&self, player: &str, done: impl Fn(&Versioned) -> bool) -> Versioned {
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(document) = self.document(player).await {
                if done(&document) {
                    return document;
                }
            }
            assert!(
                tokio::time::Instant::now() < until,
                "the document of {player} never got there: {:?}",
                self.document(player).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn metrics(&self) -> String {
        self.host.http.get(format!("http://{}/metrics", self.addr)).send().await.unwrap().text().await.unwrap()
    }

    /// Waits until `/metrics` has `line` (a counter at an exact value).
    async fn metric_until(&self, line: &str) {
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        while !self.metrics().await.contains(line) {
            assert!(tokio::time::Instant::now() < until, "{line} never appeared:\n{}", self.metrics().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn chrono_now() -> String {
    flowhost_core::digest::iso_utc(flowhost_core::Clock::now_ms(&flowhost_core::SystemClock))
}

fn site<'a>(document: &'a Versioned, site_id: &str) -> &'a Value {
    document.body["sites"].as_array().unwrap().iter().find(|s| s["site_id"] == site_id).unwrap()
}

async fn transitions_guards_and_dead_letters(backends: Backends) {
    let presence = Presence::start(backends, 120).await;
    // absent + opened -> online.
    presence.send(&presence.envelope("501", "34", SESSION_A, "opened")).await;
    let document = presence.document_until("501", |d| d.body["state"] == "online").await;
    assert_eq!(document.body["version"], 1);
    assert_eq!(
        (document.body["tenant_id"].as_str(), document.body["player_id"].as_str()),
        (Some(presence.tenant.as_str()), Some("501"))
    );
    let first = site(&document, "34").clone();
    assert_eq!((first["state"].as_str(), first["session_id"].as_str()), (Some("online"), Some(SESSION_A)));
    assert_eq!(first["last_event"]["topic"], presence.input.as_str());

    // A repeated event (the same event id at a new offset) and a stale close are no-ops: nothing is written.
    let heartbeat = presence.envelope("501", "34", SESSION_A, "heartbeat");
    presence.send(&heartbeat).await;
    let document = presence.document_until("501", |d| d.version == 2).await;
    presence.send(&heartbeat).await;
    presence.send(&presence.envelope("501", "34", SESSION_B, "closed")).await;
    // A second site of the same player, then a close of the first one's session: online while one site is.
    presence.send(&presence.envelope("501", "35", SESSION_B, "opened")).await;
    presence.send(&presence.envelope("501", "34", SESSION_A, "closed")).await;
    // Records consumed in one batch are written together: up to two writes for these two changes.
    let after = presence.document_until("501", |d| site_state(d, "34") == Some("offline")).await;
    assert_eq!(after.body["state"], "online");
    assert_eq!(site(&after, "35")["state"], "online");
    assert_eq!(after.body["version"], after.version, "the body's version follows the store's");
    assert!(document.version < after.version && after.version <= 4, "{} then {}", document.version, after.version);
    presence.metric_until("presence_duplicate_records_total 1").await;
    presence.metric_until("presence_stale_closes_total 1").await;

    // Permanently invalid records reach the dead-letter topic with their exact bytes, key and headers: one per
    // validation code (the validator's errors are the only permanent ones).
    let valid = presence.envelope("502", "34", SESSION_A, "heartbeat");
    let with = |pointer: &str, value: Value| {
        let mut envelope = valid.clone();
        *envelope.pointer_mut(pointer).unwrap() = value;
        envelope.to_string().into_bytes()
    };
    let in_ten_minutes =
        flowhost_core::digest::iso_utc(flowhost_core::Clock::now_ms(&flowhost_core::SystemClock) + 600_000);
    let mut closed_with_crash = valid.clone();
    closed_with_crash["event_payload"]["action"] = json!("closed");
    closed_with_crash["event_payload"]["close_reason"] = json!("crash");
    let mut heartbeat_with_reason = valid.clone();
    heartbeat_with_reason["event_payload"]["close_reason"] = json!("logout");
    let invalid: Vec<(&str, Vec<u8>)> = vec![
        ("malformed_json", b"{\"envelope_version\": 1, oops".to_vec()),
        ("malformed_json", vec![0xff, 0xfe, 0x00]),
        ("malformed_json", b"[1, 2]".to_vec()),
        ("unsupported_envelope_version", with("/envelope_version", json!(2))),
        ("unsupported_schema_version", with("/body/schema_version", json!(2))),
        ("unsupported_event_type", with("/event_type", json!("player.casino-login.v1"))),
        ("invalid_source", with("/source", json!(7))),
        // `source` is compared with the gateway's constant: another application's envelope is refused.
        ("invalid_source", with("/source", json!("another-app"))),
        ("invalid_event_id", with("/metadata/event_id", json!("not-a-uuid"))),
        ("invalid_session_id", with("/event_payload/presence_session_id", json!("session-1"))),
        ("invalid_received_at", with("/metadata/received_at", json!("yesterday"))),
        ("received_at_in_future", with("/metadata/received_at", json!(in_ten_minutes))),
        ("invalid_occurred_at", with("/metadata/occurred_at", json!("soon"))),
        ("invalid_tenant_id", with("/body/tenant_id", json!("-3"))),
        ("invalid_site_id", with("/body/site_id", json!("main"))),
        ("invalid_user_id", with("/body/user/user_id", json!("x502"))),
        ("invalid_action", with("/event_payload/action", json!("left"))),
        ("invalid_close_reason", closed_with_crash.to_string().into_bytes()),
        ("invalid_close_reason", heartbeat_with_reason.to_string().into_bytes()),
    ];
    presence.publish(&invalid.iter().map(|(_, bytes)| bytes.clone()).collect::<Vec<_>>()).await;
    let letters =
        read_topic(&presence.host.ports, &presence.dead_letters, invalid.len(), Duration::from_secs(30)).await;
    assert_eq!(letters.len(), invalid.len(), "every invalid record is dead-lettered");
    let header = |record: &flowhost_core::ports::Record, name: &str| {
        record.headers.iter().find(|h| h.key == name).map(|h| String::from_utf8(h.value.clone()).unwrap()).unwrap()
    };
    // The dead-letter topic has its own partitions: each letter is found by its original bytes.
    let valid_event_id = valid["metadata"]["event_id"].as_str().unwrap().to_owned();
    let mut offsets = std::collections::BTreeSet::new();
    for (code, bytes) in &invalid {
        let letter = letters.iter().find(|r| &r.value == bytes).unwrap_or_else(|| panic!("no letter for {code}"));
        assert_eq!(header(letter, "error_code"), *code, "{}", String::from_utf8_lossy(bytes));
        let dlq_id = header(letter, "dlq_id");
        assert_eq!(letter.key.as_deref(), Some(dlq_id.as_bytes()));
        let (partition, offset) = (header(letter, "original_partition"), header(letter, "original_offset"));
        assert_eq!(dlq_id, format!("{}:{partition}:{offset}", presence.input));
        assert!(offsets.insert(dlq_id), "one letter per record");
        assert_eq!(header(letter, "original_topic"), presence.input);
        let expected_event_id = match *code {
            "malformed_json" | "invalid_event_id" => "",
            _ => valid_event_id.as_str(),
        };
        assert_eq!(header(letter, "event_id"), expected_event_id, "{code}");
        assert!(header(letter, "failed_at").ends_with('Z'));
        let detail = header(letter, "error_detail");
        assert!(!detail.is_empty() && detail.len() <= 256, "{code}: {detail}");
        assert_eq!(letter.headers.len(), 8, "{code}: the eight headers");
    }
    presence.metric_until("presence_invalid_records_total{error_code=\"malformed_json\"} 3").await;
    presence.metric_until("presence_invalid_records_total{error_code=\"invalid_close_reason\"} 2").await;
    presence.metric_until("presence_invalid_records_total{error_code=\"invalid_source\"} 2").await;
    presence.metric_until(&format!("presence_dlq_publishes_total {}", invalid.len())).await;
    assert!(presence.document("502").await.is_none(), "an invalid record writes nothing");
    // absent + closed -> unchanged (a stale close): no document is created.
    presence.send(&presence.envelope("503", "34", SESSION_A, "closed")).await;
    presence.metric_until("presence_stale_closes_total 2").await;
    assert!(presence.document("503").await.is_none(), "a close of an absent site creates nothing");
    let metrics = presence.metrics().await;
    assert!(metrics.contains("presence_ready 1"));
    let written = "presence_records_total{event_type=\"player.casino-presence.v1\",outcome=\"written\"}";
    assert!(presence.metric(written).await >= 4, "{metrics}");
    presence.host.stop().await;
}

/// A failure that is not the record's (here a stored document the projector refuses, `bad_state`; a trap, fuel
/// or memory failure of a bad plugin version is classified the same way) blocks and retries the partition: the
/// valid event is never dead-lettered, `/ready` and `presence_ready` say not ready although the store answers,
/// and once the document is mended the event is applied.
async fn a_projector_failure_blocks_the_partition_and_dead_letters_nothing(backends: Backends) {
    let presence = Presence::start(backends, 120).await;
    let documents = presence.documents().await;
    let id = format!("{}:601", presence.tenant);
    // The document of the player, as a bad writer left it: the projector refuses it (`bad_state`).
    let bad = json!({"tenant_id": presence.tenant, "player_id": "601", "state": "offline", "sites": "not a list"});
    documents.insert("presence_state", &id, bad).await.unwrap();
    presence.send(&presence.envelope("601", "34", SESSION_A, "opened")).await;

    let ready = format!("http://{}/ready", presence.addr);
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = presence.host.http.get(&ready).send().await.unwrap();
        let failing = response.headers().get("flowhost-failing-checks").map(|v| v.to_str().unwrap().to_owned());
        if response.status() == 503 {
            assert_eq!(failing.as_deref(), Some("presence_consumer"), "the store answers; the consumer is blocked");
            assert_eq!(response.text().await.unwrap(), "not ready");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "/ready never reported the blocked partition");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The last readiness result: the consumer's failure, not the store's success that ran beside it.
    assert!(presence.metrics().await.contains("presence_ready 0"), "{}", presence.metrics().await);
    // Retried, never dead-lettered, while it lasts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(presence.metric("presence_dlq_publishes_total").await, 0);
    assert!(presence.metric("presence_retry_delay_seconds_count").await >= 2, "{}", presence.metrics().await);
    assert_eq!(documents.get("presence_state", &id).await.unwrap().unwrap()["sites"], "not a list");

    // Mended (the bad document removed): the blocked record is applied, nothing was lost.
    documents.delete("presence_state", &id).await.unwrap();
    let document = presence.document_until("601", |d| d.body["state"] == "online").await;
    assert_eq!(site(&document, "34")["session_id"], SESSION_A);
    presence.wait_ready().await;
    presence.metric_until("presence_ready 1").await;
    assert_eq!(presence.metric("presence_dlq_publishes_total").await, 0);
    presence.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_a_projector_failure_blocks_the_partition_and_dead_letters_nothing() {
    a_projector_failure_blocks_the_partition_and_dead_letters_nothing(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_mongodb_a_projector_failure_blocks_the_partition_and_dead_letters_nothing() {
    a_projector_failure_blocks_the_partition_and_dead_letters_nothing(Backends::Distributed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_transitions_guards_and_dead_letters() {
    transitions_guards_and_dead_letters(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_mongodb_transitions_guards_and_dead_letters() {
    transitions_guards_and_dead_letters(Backends::Distributed).await;
}

/// A backlog published at once is projected in batches: each player's records fold in order onto its document
/// (a repeat and a stale close between them are no-ops, a malformed record among them is dead-lettered), and
/// the result is what one-at-a-time projection gives, with at most one write per record.
async fn a_backlog_folds_each_players_records_in_order(backends: Backends) {
    let presence = Presence::start(backends, 120).await;
    let players: Vec<String> = (701..=720).map(|p| p.to_string()).collect();
    let mut values = Vec::new();
    for player in &players {
        let heartbeat = presence.envelope(player, "34", SESSION_A, "heartbeat");
        for envelope in [
            presence.envelope(player, "34", SESSION_A, "opened"),
            heartbeat.clone(),
            heartbeat,
            presence.envelope(player, "34", SESSION_B, "closed"),
            presence.envelope(player, "35", SESSION_B, "opened"),
            presence.envelope(player, "34", SESSION_A, "closed"),
        ] {
            values.push(envelope.to_string().into_bytes());
        }
    }
    values.insert(values.len() / 2, b"not json".to_vec());
    presence.publish(&values).await;
    for player in &players {
        let document = presence.document_until(player, |d| site_state(d, "34") == Some("offline")).await;
        assert_eq!(document.body["state"], "online", "{player}: site 35 is online");
        assert_eq!(site_state(&document, "35"), Some("online"));
        assert_eq!(site(&document, "34")["session_id"], SESSION_A);
        assert!(document.version <= 4, "{player}: at most one write per applied record: {}", document.version);
        assert_eq!(document.body["version"], document.version, "the body's version follows the store's");
    }
    presence.metric_until(&format!("presence_duplicate_records_total {}", players.len())).await;
    presence.metric_until(&format!("presence_stale_closes_total {}", players.len())).await;
    presence.metric_until("presence_invalid_records_total{error_code=\"malformed_json\"} 1").await;
    presence.host.stop().await;
}

fn site_state<'a>(document: &'a Versioned, site_id: &str) -> Option<&'a str> {
    document.body["sites"].as_array()?.iter().find(|s| s["site_id"] == site_id)?["state"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_a_backlog_folds_each_players_records_in_order() {
    a_backlog_folds_each_players_records_in_order(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_mongodb_a_backlog_folds_each_players_records_in_order() {
    a_backlog_folds_each_players_records_in_order(Backends::Distributed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_takes_due_sites_offline_and_keeps_the_document() {
    let presence = Presence::start(Backends::Embedded, 1).await;
    presence.send(&presence.envelope("601", "34", SESSION_A, "opened")).await;
    presence.document_until("601", |d| d.body["state"] == "online").await;
    let swept = presence.document_until("601", |d| d.body["state"] == "offline").await;
    assert_eq!(site(&swept, "34")["state"], "offline");
    assert!(swept.body.get("next_expiry").is_none());
    assert!(presence.metric("presence_expired_sites_total").await >= 1, "the probe player's site expires too");
    // A heartbeat of a new session brings the site back.
    presence.send(&presence.envelope("601", "34", SESSION_B, "heartbeat")).await;
    presence.document_until("601", |d| d.body["state"] == "online").await;
    presence.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operational_listener_answers_get_only() {
    let presence = Presence::start(Backends::Embedded, 120).await;
    let health = presence.host.http.get(format!("http://{}/health", presence.addr)).send().await.unwrap();
    assert_eq!((health.status().as_u16(), health.text().await.unwrap()), (200, "ok".to_owned()));
    for path in ["/health", "/ready", "/metrics"] {
        let response = presence.host.http.post(format!("http://{}{path}", presence.addr)).send().await.unwrap();
        assert_eq!(response.status(), 405, "{path}");
    }
    presence.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_document_store_blocks_the_partition_until_it_answers_and_loses_nothing() {
    let port = free_port();
    let mongo = flowhost_tests::process::mongodb(port).await;
    let presence = Presence::start_with(Backends::Embedded, 120, |config| {
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_uri =
            Some(flowhost_core::config::Secret::new(format!("mongodb://127.0.0.1:{port}")));
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_timeout_ms = 1000;
    })
    .await;
    presence.send(&presence.envelope("701", "34", SESSION_A, "opened")).await;
    presence.document_until("701", |d| d.version == 1).await;

    mongo.signal("STOP");
    presence.send(&presence.envelope("701", "34", SESSION_A, "heartbeat")).await;
    let ready = format!("http://{}/ready", presence.addr);
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let response = presence.host.http.get(&ready).send().await.unwrap();
        // The store's own probe fails first; the blocked partition follows once its record timed out.
        let failing = response.headers().get("flowhost-failing-checks").map(|v| v.to_str().unwrap().to_owned());
        if response.status() == 503 && failing.is_some_and(|f| f.contains("presence_consumer")) {
            assert_eq!(response.text().await.unwrap(), "not ready");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "/ready never reported the blocked partition");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let health = presence.host.http.get(format!("http://{}/health", presence.addr)).send().await.unwrap();
    assert_eq!(health.status(), 200, "liveness stays up while the store is retried");

    mongo.signal("CONT");
    // The blocked record is retried and written: nothing was lost, nothing dead-lettered.
    presence.document_until("701", |d| d.version == 2).await;
    presence.wait_ready().await;
    assert_eq!(presence.metric("presence_dlq_publishes_total").await, 0);
    assert!(presence.metric("presence_docdb_errors_total{operation=\"projection\"}").await >= 1);
    presence.host.stop().await;
}

/// `flowhost serve --roles presence` processes of one test on Kafka and MongoDB: their shared settings (one
/// input topic, one group, one data directory) and the test's view of the topic and the documents.
struct Processes {
    tenant: String,
    input: String,
    addr: String,
    env: Vec<(&'static str, String)>,
    dir: tempfile::TempDir,
    kafka: flowhost_kafka::KafkaTopics,
    documents: flowhost_mongo::MongoDocuments,
    http: reqwest::Client,
}

impl Processes {
    /// `kafka_file` is the `[kafka.properties]` section's body, if any.
    async fn new(kafka_file: &str) -> Processes {
        let input = unique("presence.input");
        let kafka = flowhost_kafka::KafkaTopics::new(&servers::kafka_brokers(), &Default::default()).unwrap();
        flowhost_core::ports::Topics::create_topic(&kafka, &input, 2).await.unwrap();
        let tenant = (uuid::Uuid::new_v4().as_u128() % 1_000_000_000 + 1).to_string();
        let documents = flowhost_mongo::MongoDocuments::connect(&servers::mongodb_uri(), "presence").await.unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let dir = tempfile::tempdir().unwrap();
        let config_file = dir.path().join("flowhost.toml");
        std::fs::write(&config_file, format!("[kafka.properties]\n{kafka_file}")).unwrap();
        let env = vec![
            ("PRESENCE_BROKER_BOOTSTRAP_SERVERS", servers::kafka_brokers()),
            ("DOCDB_URI", servers::mongodb_uri()),
            ("PRESENCE_INPUT_TOPIC", input.clone()),
            ("PRESENCE_CONSUMER_GROUP", unique("presence")),
            ("PRESENCE_HTTP_ADDR", addr.clone()),
            ("PRESENCE_BROKER_DLQ_REPLICATION_FACTOR", "1".to_owned()),
            // Long enough that the sweep never takes a site offline (a write) while a slow run goes on.
            ("PRESENCE_PRESENCE_EXPIRY_SECONDS", "3600".to_owned()),
            ("FLOWHOST_CONFIG", config_file.display().to_string()),
        ];
        Processes { tenant, input, addr, env, dir, kafka, documents, http: reqwest::Client::new() }
    }

    /// A new process; killed when dropped.
    fn spawn(&self) -> Private {
        let mut command = std::process::Command::new(flowhost_tests::cli::flowhost_bin());
        command
            .args(["serve", "--roles", "presence"])
            .env("FLOWHOST_DATA_DIR", self.dir.path())
            .env("API_PORT", free_port().to_string())
            .env("FLOWHOST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        Private::new(command.spawn().expect("flowhost"))
    }

    fn envelope(&self, player: u32, action: &str) -> String {
        let now = chrono_now();
        json!({"envelope_version": 1, "event_type": "player.casino-presence.v1", "source": "casino-web",
            "metadata": {"event_id": uuid::Uuid::new_v4().to_string(), "received_at": now, "occurred_at": now},
            "body": {"schema_version": 1, "tenant_id": self.tenant, "site_id": "34", "user": {"user_id": player.to_string()}},
            "event_payload": {"presence_session_id": SESSION_A, "action": action}})
        .to_string()
    }

    async fn publish(&self, values: Vec<String>) {
        let records: Vec<OutRecord> =
            values.into_iter().map(|v| OutRecord::new(self.input.clone(), v).with_key("k")).collect();
        flowhost_core::ports::Topics::publish(&self.kafka, &records).await.unwrap()
    }

    async fn document(&self, player: u32) -> Option<Versioned> {
        let id = format!("{}:{player}", self.tenant);
        flowhost_core::ports::DocumentStore::get_versioned(&self.documents, "presence_state", &id).await.unwrap()
    }

    /// The group's first process, consuming (see [`Processes::consuming`]). A first process that exits or is
    /// never assigned within a minute is replaced once by one of new processes (new ports, topic and group):
    /// nothing was published yet, so what the test checks is unchanged. Both happen on a loaded machine: a port
    /// chosen free is taken by another test before the process binds it, or the Kafka-protocol test broker
    /// never completes a group's first join.
    async fn first_consuming(kafka_file: &str) -> (Processes, Private) {
        let mut failures = Vec::new();
        for _ in 0..2 {
            let processes = Processes::new(kafka_file).await;
            let mut first = processes.spawn();
            match processes.consuming(&mut first, 1000, 0, Duration::from_secs(60)).await {
                Ok(()) => return (processes, first),
                Err(failure) => {
                    eprintln!("the first process is replaced: {failure}");
                    failures.push(failure);
                }
            }
        }
        panic!("no first process consumed: {failures:?}");
    }

    /// Waits until the running process consumes, asserting it does within 90 s (see [`Processes::consuming`]).
    async fn wait_consuming(&self, process: &mut Private, probe: u32, after: u64) {
        if let Err(failure) = self.consuming(process, probe, after, Duration::from_secs(90)).await {
            panic!("{failure}");
        }
    }

    /// Waits until `process` consumes: a probe player's heartbeat, sent once `/ready` answers 200, materializes
    /// its document (or raises its version past `after`). Fails when the process exits or `limit` passes first.
    async fn consuming(&self, process: &mut Private, probe: u32, after: u64, limit: Duration) -> Result<(), String> {
        let until = tokio::time::Instant::now() + limit;
        while self.document(probe).await.is_none_or(|d| d.version <= after) {
            if let Some(status) = process.child.try_wait().unwrap() {
                return Err(format!("the process exited before it consumed: {status}"));
            }
            if tokio::time::Instant::now() >= until {
                let ready = self.http.get(format!("http://{}/ready", self.addr)).send().await;
                let ready = match ready {
                    Ok(response) => format!("{} {:?}", response.status(), response.text().await.unwrap_or_default()),
                    Err(error) => error.to_string(),
                };
                return Err(format!("the process never consumed within {limit:?}; /ready: {ready}"));
            }
            let ready = self.http.get(format!("http://{}/ready", self.addr)).send().await;
            if ready.is_ok_and(|r| r.status() == 200) {
                self.publish(vec![self.envelope(probe, "heartbeat")]).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // The probe's offset gets committed (every second): a rebalance now resumes after it, not at the latest
        // offset (where a group without a committed offset starts), which would skip what the test publishes.
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(())
    }

    /// Four events for each of `players`, in four rounds: an `opened` and three heartbeats. Each of the first
    /// three rounds is published once the previous one is reflected (every player at its version), so a player
    /// never has two events in one batch and each event is one write; the fourth is not waited for.
    async fn publish_four_rounds(&self, players: &[u32]) {
        for (round, action) in ["opened", "heartbeat", "heartbeat"].into_iter().enumerate() {
            self.publish(players.iter().map(|p| self.envelope(*p, action)).collect()).await;
            self.wait_version_each(players, round as u64 + 1).await;
        }
        self.publish(players.iter().map(|p| self.envelope(*p, "heartbeat")).collect()).await;
    }

    /// Waits until every player is at `version` (one write per event), never beyond it.
    async fn wait_version_each(&self, players: &[u32], expected: u64) {
        let until = tokio::time::Instant::now() + Duration::from_secs(120);
        for player in players {
            loop {
                let version = self.document(*player).await.map(|d| d.version);
                if version == Some(expected) {
                    break;
                }
                assert!(
                    version.is_none_or(|v| v < expected),
                    "player {player} written more than once per event: {version:?}"
                );
                assert!(tokio::time::Instant::now() < until, "player {player} stopped at {version:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Waits until the last round reached `player` (version 4): the process is working through it.
    async fn wait_last_round_started(&self, player: u32) {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        while self.document(player).await.is_none_or(|d| d.version < 4) {
            assert!(tokio::time::Instant::now() < until, "the last round was not projected");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn metric(&self, series: &str) -> u64 {
        let text = self.http.get(format!("http://{}/metrics", self.addr)).send().await.unwrap().text().await.unwrap();
        text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_replays_the_uncommitted_suffix_as_no_ops() {
    // A short session, so the killed member leaves the group in seconds rather than the broker's default.
    let (processes, mut first) = Processes::first_consuming("\"session.timeout.ms\" = \"6000\"\n").await;
    // Four events per player; the process is killed while it works through the last round.
    let players: Vec<u32> = (1..=60).collect();
    processes.publish_four_rounds(&players).await;
    processes.wait_last_round_started(30).await;
    first.signal("KILL");
    let _ = first.child.wait();

    // The second process resumes after the committed offsets: the replayed suffix is a no-op, so every player
    // ends at exactly four writes (version 4), whatever the first process had done.
    let _second = processes.spawn();
    processes.wait_version_each(&players, 4).await;
}

/// SIGTERM while the process works through a backlog: it stops within 20 s (spec: closes its claims, commits
/// what it marked, leaves its group). The next process of the group gets the partitions at once (the broker's
/// default session of 45 s would hold them if the first had not left) and replays nothing: no record it
/// processes is a duplicate, and every player still ends at exactly four writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_commits_what_was_marked_and_leaves_the_group_within_20_s() {
    let (processes, mut first) = Processes::first_consuming("").await;
    let players: Vec<u32> = (1..=200).collect();
    processes.publish_four_rounds(&players).await;
    processes.wait_last_round_started(60).await;
    first.signal("TERM");
    let stopping = std::time::Instant::now();
    let status = loop {
        if let Some(status) = first.child.try_wait().unwrap() {
            break status;
        }
        assert!(stopping.elapsed() < Duration::from_secs(20), "still running 20 s after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "SIGTERM ends the process cleanly: {status}");

    let mut second = processes.spawn();
    let joined = std::time::Instant::now();
    let probe_version = processes.document(1000).await.map_or(0, |d| d.version);
    processes.wait_consuming(&mut second, 1000, probe_version).await;
    assert!(joined.elapsed() < Duration::from_secs(40), "the first process did not leave its group");
    processes.wait_version_each(&players, 4).await;
    let duplicates = "presence_records_total{event_type=\"player.casino-presence.v1\",outcome=\"duplicate\"}";
    assert_eq!(processes.metric(duplicates).await, 0, "a committed record was replayed");
}

/// Two replicas in one group and the sweep (1 s expiry, 1 s interval) work on the same players at once: each
/// player's heartbeats are spread over both partitions, so the replicas apply them concurrently and out of
/// order. A checker reading the documents throughout asserts that a document never goes back: its version only
/// grows and no site's last event ever gets older. At the end every player reflects its newest heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_and_the_sweep_never_overwrite_a_newer_state() {
    let first = Presence::start(Backends::Distributed, 1).await;
    let (input, group, tenant) = (
        first.input.clone(),
        first.host.config.section::<flowhost_presence::PresenceConfig>().group.clone(),
        first.tenant.clone(),
    );
    let second = Presence::start_with(Backends::Distributed, 1, |config| {
        config.section_mut::<flowhost_presence::PresenceConfig>().input_topic = input.clone();
        config.section_mut::<flowhost_presence::PresenceConfig>().group = group.clone();
        TestHost::join_deployment(config, &first.host.config);
    })
    .await;
    let second = Presence { tenant: tenant.clone(), ..second };
    // Both partitions get a committed offset before the race (a partition without one starts at the latest
    // offset when it changes owner): probes on many keys until each materialized, then a commit interval.
    let probes: Vec<String> = (900..916).map(|p| p.to_string()).collect();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut missing = Vec::new();
        for probe in &probes {
            if first.document(probe).await.is_none() {
                missing.push(
                    OutRecord::new(input.clone(), first.envelope(probe, "34", SESSION_A, "heartbeat").to_string())
                        .with_key(probe.clone()),
                );
            }
        }
        if missing.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the replicas never consumed every partition");
        first.topics().publish(&missing).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let players: Vec<String> = (2..=21).map(|p| p.to_string()).collect();
    let started_ms = flowhost_core::Clock::now_ms(&flowhost_core::SystemClock);
    let mut records = Vec::new();
    for n in 0..25i64 {
        for (index, player) in players.iter().enumerate() {
            let at = flowhost_core::digest::iso_utc(started_ms + n * 40 + index as i64);
            let mut envelope = first.envelope(player, "34", SESSION_A, if n == 0 { "opened" } else { "heartbeat" });
            envelope["metadata"]["received_at"] = json!(at);
            // Alternate keys so a player's records land on both partitions.
            records.push(OutRecord::new(input.clone(), envelope.to_string()).with_key(format!("{player}-{}", n % 2)));
        }
    }
    let newest: std::collections::HashMap<String, String> = players
        .iter()
        .enumerate()
        .map(|(index, p)| (p.clone(), flowhost_core::digest::iso_utc(started_ms + 24 * 40 + index as i64)))
        .collect();
    let checker = {
        let documents = first.documents().await;
        let (players, tenant, newest) = (players.clone(), tenant.clone(), newest.clone());
        tokio::spawn(async move {
            let mut seen: std::collections::HashMap<String, (u64, String)> = std::collections::HashMap::new();
            let until = tokio::time::Instant::now() + Duration::from_secs(60);
            while tokio::time::Instant::now() < until {
                for player in &players {
                    let Some(document) =
                        documents.get_versioned("presence_state", &format!("{tenant}:{player}")).await.unwrap()
                    else {
                        continue;
                    };
                    let received = document.body["sites"][0]["last_event"]["received_at"].as_str().unwrap().to_owned();
                    if let Some((version, last)) = seen.get(player) {
                        assert!(document.version >= *version, "player {player}: version went back");
                        assert!(received >= *last, "player {player}: an older event overwrote {last} with {received}");
                    }
                    seen.insert(player.clone(), (document.version, received));
                }
                if players.iter().all(|p| seen.get(p).is_some_and(|(_, r)| r == &newest[p])) {
                    return Ok(seen);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err::<_, String>(format!("not every player reached its newest heartbeat: {seen:?}"))
        })
    };
    first.topics().publish(&records).await.unwrap();
    let seen = match checker.await.unwrap() {
        Ok(seen) => seen,
        Err(problem) => {
            let outcomes = |metrics: String| {
                metrics
                    .lines()
                    .filter(|l| l.starts_with("presence_records_total") || l.starts_with("presence_consumer_lag"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            panic!(
                "{problem}\nnewest: {newest:?}\nfirst: {:?}\nsecond: {:?}",
                outcomes(first.metrics().await),
                outcomes(second.metrics().await)
            );
        }
    };
    assert_eq!(seen.len(), players.len());
    second.host.stop().await;
    first.host.stop().await;
}
