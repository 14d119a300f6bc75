//! The presence projector's figures on this machine (the `presence` role in process, with the bundled plugin):
//!
//! 1. **Projected events per second**: a backlog of presence envelopes for 5,000 players (an `opened` each, then
//!    heartbeats) published at once and drained: per record the plugin's projection and a compare-and-replace of
//!    the player's document, commits every 100 records. On the embedded store and log, and, when the test
//!    servers' environment is set, on the MongoDB-protocol test server (`nx-27017`: not MongoDB, labelled so)
//!    with Kafka (tansu).
//! 2. **Sweep**: one pass over 10,000 due documents (32 workers, each through the projector and a
//!    compare-and-replace), read from `presence_sweep_duration_seconds`.
//!
//!     cargo run --release -p flowhost-tests --bin presence-throughput [-- EVENTS]

use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::config::{Config, Secret};
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::OutRecord;
use flowhost_core::{Clock, SystemClock};
use flowhost_tests::{servers, unique, Backends, TestHost};
use serde_json::json;

const PLAYERS: usize = 5_000;
const SWEEP_DOCUMENTS: usize = 10_000;
const SESSION: &str = "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99";
const WRITTEN: &str = "presence_records_total{event_type=\"player.casino-presence.v1\",outcome=\"written\"}";

async fn metric(http: &reqwest::Client, addr: &str, series: &str) -> f64 {
    // 0 while the listener is not up yet.
    let Ok(response) = http.get(format!("http://{addr}/metrics")).send().await else { return 0.0 };
    let text = response.text().await.unwrap_or_default();
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}

fn envelope(tenant: &str, player: usize, n: usize) -> String {
    let at = iso_utc(SystemClock.now_ms());
    json!({"envelope_version": 1, "event_type": "player.casino-presence.v1", "source": "casino-web",
        "metadata": {"event_id": uuid::Uuid::new_v4().to_string(), "received_at": at, "occurred_at": at},
        "body": {"schema_version": 1, "tenant_id": tenant, "site_id": "34", "user": {"user_id": (player + 1).to_string()}},
        "event_payload": {"presence_session_id": SESSION, "action": if n < PLAYERS { "opened" } else { "heartbeat" }}})
    .to_string()
}

fn config(backends: Backends, dir: &std::path::Path, addr: &str, input: &str, sweep_interval_seconds: u64) -> Config {
    let mut config = TestHost::config(backends, dir);
    config.roles = vec!["presence".to_owned()];
    config.plugins.bundled = true;
    config.section_mut::<flowhost_presence::PresenceConfig>().http_addr = addr.to_owned();
    config.section_mut::<flowhost_presence::PresenceConfig>().group = unique("presence");
    config.section_mut::<flowhost_presence::PresenceConfig>().input_topic = input.to_owned();
    config.section_mut::<flowhost_presence::PresenceConfig>().sweep_interval_seconds = sweep_interval_seconds;
    if backends == Backends::Distributed {
        config.section_mut::<flowhost_presence::PresenceConfig>().bootstrap_servers = vec![servers::kafka_brokers()];
        config.section_mut::<flowhost_presence::PresenceConfig>().docdb_uri = Some(Secret::new(servers::mongodb_uri()));
        config.section_mut::<flowhost_presence::PresenceConfig>().dlq_replication_factor = 1;
    } else {
        config.section_mut::<flowhost_presence::PresenceConfig>().bootstrap_servers = vec!["embedded".to_owned()];
    }
    config
}

/// Returns the projected events per second.
async fn projected_per_second(label: &str, backends: Backends, events: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", flowhost_tests::gateway::free_port());
    let input = unique("presence.bench");
    if backends == Backends::Distributed {
        let kafka = flowhost_kafka::KafkaTopics::new(&servers::kafka_brokers(), &Default::default()).unwrap();
        flowhost_core::ports::Topics::create_topic(&kafka, &input, 4).await.unwrap();
    }
    let host = TestHost::start_with(config(backends, dir.path(), &addr, &input, 3600)).await;
    let http = reqwest::Client::new();
    let tenant = (uuid::Uuid::new_v4().as_u128() % 1_000_000_000 + 1).to_string();
    // The group starts at the latest offset once it has its partitions: a probe shows when that happened.
    while metric(&http, &addr, WRITTEN).await < 1.0 {
        let probe = OutRecord::new(input.clone(), envelope(&tenant, PLAYERS + 10, 0)).with_key("probe");
        host.ports.topics.publish(&[probe]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let before = metric(&http, &addr, WRITTEN).await;
    let started = Instant::now();
    for chunk in (0..events).collect::<Vec<_>>().chunks(2000) {
        let records: Vec<OutRecord> = chunk
            .iter()
            .map(|n| {
                OutRecord::new(input.clone(), envelope(&tenant, n % PLAYERS, *n)).with_key((n % PLAYERS).to_string())
            })
            .collect();
        host.ports.topics.publish(&records).await.unwrap();
    }
    let published = started.elapsed();
    while metric(&http, &addr, WRITTEN).await < before + events as f64 {
        assert!(started.elapsed() < Duration::from_secs(1800), "the backlog was not drained");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let rate = events as f64 / elapsed.as_secs_f64();
    println!(
        "| projected events/s, {label} | {events} ({PLAYERS} players) | {rate:.0}/s | published in {:.1} s, drained in {:.1} s |",
        published.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    host.stop().await;
    rate
}

/// Returns the seconds the sweep took (`presence_sweep_duration_seconds_sum`).
async fn sweep(label: &str, backends: Backends) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", flowhost_tests::gateway::free_port());
    let input = unique("presence.bench");
    let ports = flowhost::connect(&config(backends, dir.path(), &addr, &input, 1)).await.unwrap();
    let documents = match backends {
        Backends::Distributed => std::sync::Arc::new(
            flowhost_mongo::MongoDocuments::connect(&servers::mongodb_uri(), "presence").await.unwrap(),
        ) as std::sync::Arc<dyn flowhost_core::ports::DocumentStore>,
        Backends::Embedded => ports.documents.database("presence").await.unwrap(),
    };
    let tenant = (uuid::Uuid::new_v4().as_u128() % 1_000_000_000 + 1).to_string();
    let due = iso_utc(SystemClock.now_ms() - 60_000);
    let documents_due: Vec<(String, serde_json::Value)> = (1..=SWEEP_DOCUMENTS)
        .map(|player| {
            let body = json!({"tenant_id": tenant, "player_id": player.to_string(), "state": "online", "next_expiry": due,
                "updated_at": due, "version": 1, "sites": [{"site_id": "34", "session_id": SESSION, "state": "online",
                "expires_at": due, "last_event": {"event_id": uuid::Uuid::new_v4().to_string(), "received_at": due,
                "topic": input, "partition": 0, "offset": player}}]});
            (format!("{tenant}:{player}"), body)
        })
        .collect();
    for chunk in documents_due.chunks(1000) {
        documents.upsert_many("presence_state", chunk.to_vec()).await.unwrap();
    }
    let host = TestHost::start_on(config(backends, dir.path(), &addr, &input, 1), ports).await;
    let http = reqwest::Client::new();
    let started = Instant::now();
    while metric(&http, &addr, "presence_expired_sites_total").await < SWEEP_DOCUMENTS as f64 {
        assert!(started.elapsed() < Duration::from_secs(600), "the sweep did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seconds = metric(&http, &addr, "presence_sweep_duration_seconds_sum").await;
    let passes = metric(&http, &addr, "presence_sweep_duration_seconds_count").await;
    println!(
        "| sweep of {SWEEP_DOCUMENTS} due documents, {label} | {SWEEP_DOCUMENTS} | {seconds:.2} s in {passes} pass(es) | {:.0} documents/s |",
        SWEEP_DOCUMENTS as f64 / seconds.max(0.001)
    );
    host.stop().await;
    seconds
}

#[tokio::main]
async fn main() {
    let events: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let mut report = Report::new("presence-throughput");
    let sweep_figure = format!("sweep of {SWEEP_DOCUMENTS} due documents");
    println!("Presence projector, {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
    println!();
    println!("| What | Records | Figure | Note |");
    println!("|---|---|---|---|");
    let rate = projected_per_second("embedded store and log", Backends::Embedded, events).await;
    report.higher("embedded: projected events/s", "/s", rate).target(30_000.0);
    let seconds = sweep("embedded store", Backends::Embedded).await;
    report.lower(&format!("embedded: {sweep_figure}"), "s", seconds);
    if std::env::var("FLOWHOST_TEST_KAFKA_BROKERS").is_ok() {
        let rate = projected_per_second(
            "MongoDB-protocol test server (nx-27017, not MongoDB) + Kafka (tansu)",
            Backends::Distributed,
            events,
        )
        .await;
        report.higher("nx-27017 + Kafka (tansu): projected events/s", "/s", rate);
        let seconds = sweep("MongoDB-protocol test server (nx-27017, not MongoDB)", Backends::Distributed).await;
        report.lower(&format!("nx-27017: {sweep_figure}"), "s", seconds);
    }
}
