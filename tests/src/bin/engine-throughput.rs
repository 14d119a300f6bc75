//! Rule throughput end to end: N events already on a source topic, 10 rules on their event type, the executor
//! started cold; measures consume + evaluate + publish + commit until every event is consumed and every output
//! acknowledged. Runs on the embedded log, and on Kafka when `FLOWHOST_TEST_KAFKA_BROKERS` is set (the test
//! servers' environment, see tests/scripts/servers.sh). Also prints the pure processing rate (no I/O), natively
//! and with the wasm `condition` node kind (on a hundredth of the events: it is about 500 times slower).
//!
//!     cargo run --release -p flowhost-tests --bin engine-throughput [-- EVENTS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::collections::{RULES, SCHEMAS};
use flowhost_core::config::Config;
use flowhost_core::model::{EventSchema, FieldType, Rule, RuleConditions, RuleSource, SourceType};
use flowhost_core::ports::{OutRecord, Ports, Record, Topics};
use flowhost_runs::EngineConfig;
use flowhost_runs::{
    process_batch, process_batch_with, ComponentNodes, Destinations, EngineMetrics, ExpressionMemo, RuleSet, Runner,
};
use flowhost_tests::unique;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const RULE_EXPRESSIONS: [&str; 10] = [
    "amount > 100.0",
    "amount > 100.0 && count >= 2",
    "game == 'slots' && !vip",
    "vip",
    "count > 50",
    "amount < 1.0",
    "game.startsWith('live')",
    "amount >= 500.0 && game == 'slots'",
    "count == 3 && vip == false",
    "amount > 0.0 && count > 0 && game != '' && !vip",
];

fn schema() -> EventSchema {
    EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("count", FieldType::Int),
            ("game", FieldType::String),
            ("vip", FieldType::Bool),
        ],
    )
}

fn rules(source: &str, output: &str) -> Vec<Rule> {
    RULE_EXPRESSIONS
        .iter()
        .enumerate()
        .map(|(i, expression)| Rule {
            id: format!("r{i}"),
            name: format!("rule {i}"),
            source: RuleSource { kind: SourceType::Kafka, topic: source.into() },
            conditions: RuleConditions { event_type: "deposit".into(), expression: (*expression).into() },
            output_topic: output.into(),
            output_mapping: None,
            enabled: true,
            flow_id: None,
        })
        .collect()
}

fn event(i: usize) -> serde_json::Value {
    json!({"event_type": "deposit", "tenant_id": format!("t{}", i % 7), "amount": (i % 1000) as f64,
           "count": i % 5, "game": if i.is_multiple_of(2) { "slots" } else { "live-roulette" }, "vip": i.is_multiple_of(10),
           "player_id": format!("p{i}")})
}

/// Publishes `events` records in chunks; returns how many outputs the rules produce for them.
async fn fill(topics: &dyn Topics, source: &str, events: usize) -> u64 {
    let set = RuleSet::build(rules(source, "out"), vec![], vec![], vec![schema()], &mut ExpressionMemo::default());
    let mut expected = 0;
    for chunk in (0..events).collect::<Vec<_>>().chunks(5_000) {
        let records: Vec<OutRecord> = chunk
            .iter()
            .map(|i| OutRecord::new(source, event(*i).to_string()).with_key(format!("p{}", i % 1000)))
            .collect();
        let as_consumed: Vec<Record> = records
            .iter()
            .map(|r| Record {
                topic: r.topic.clone(),
                partition: 0,
                offset: 0,
                key: r.key.clone(),
                value: r.value.clone(),
                headers: vec![],
                timestamp_ms: 0,
            })
            .collect();
        expected += process_batch(&set, &as_consumed, "invalid", &EngineMetrics::unregistered()).records.len() as u64;
        topics.publish(&records).await.expect("fill the source topic");
    }
    expected
}

/// Prints the engine's row and records its figures as `name` (`embedded`, `kafka`); gives back the source topic
/// it filled and how many outputs the rules made of it.
async fn run_engine(report: &mut Report, name: &str, label: &str, ports: Ports, events: usize) -> (String, u64) {
    let (source, output) = (unique("bench-in"), unique("bench-out"));
    ports.topics.create_topic(&source, 4).await.unwrap();
    ports.topics.create_topic(&output, 4).await.unwrap();
    let expected_outputs = fill(ports.topics.as_ref(), &source, events).await;
    ports.documents.upsert(SCHEMAS, "deposit", serde_json::to_value(schema()).unwrap()).await.unwrap();
    for rule in rules(&source, &output) {
        ports.documents.upsert(RULES, &rule.id, serde_json::to_value(&rule).unwrap()).await.unwrap();
    }
    let config = EngineConfig { group_id: unique("bench"), batch_size: 2_000, ..EngineConfig::default() };
    let executor = Runner::standalone(ports.clone(), config, 4);
    let metrics = executor.rule_metrics();
    let shutdown = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn(executor.run(shutdown.clone()));
    // Time to the first consumed record (group join) is reported apart from the steady rate.
    while metrics.consumed.get() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let joined = started.elapsed();
    let deadline = Instant::now() + Duration::from_secs(600);
    while (metrics.consumed.get() as usize) < events || metrics.published.get() < expected_outputs {
        assert!(Instant::now() < deadline, "engine did not finish");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let total = started.elapsed();
    shutdown.cancel();
    let _ = task.await;
    let steady = total - joined;
    let (events_per_s, outputs_per_s) =
        (events as f64 / steady.as_secs_f64(), expected_outputs as f64 / steady.as_secs_f64());
    println!(
        "| {label} | {events} | {expected_outputs} | {:.2} | {events_per_s:.0} | {outputs_per_s:.0} |",
        joined.as_secs_f64()
    );
    report.higher(&format!("{name}: events/s"), "/s", events_per_s);
    report.higher(&format!("{name}: outputs/s"), "/s", outputs_per_s);
    report.lower(&format!("{name}: to the first consumed record (group join)"), "s", joined.as_secs_f64());
    (source, expected_outputs)
}

fn consumed(events: usize) -> Vec<Record> {
    (0..events)
        .map(|i| Record {
            topic: "in".into(),
            partition: 0,
            offset: i as i64,
            key: None,
            value: event(i).to_string().into_bytes(),
            headers: vec![],
            timestamp_ms: 0,
        })
        .collect()
}

fn pure_processing(report: &mut Report, events: usize) {
    let set = RuleSet::build(rules("in", "out"), vec![], vec![], vec![schema()], &mut ExpressionMemo::default());
    let batch = consumed(events);
    let metrics = EngineMetrics::unregistered();
    let started = Instant::now();
    let mut outputs = 0;
    for chunk in batch.chunks(2_000) {
        outputs += process_batch(&set, chunk, "invalid", &metrics).records.len();
    }
    let elapsed = started.elapsed();
    let (events_per_s, outputs_per_s) = (events as f64 / elapsed.as_secs_f64(), outputs as f64 / elapsed.as_secs_f64());
    println!(
        "| process_batch only (parse, 10 rules, map; no I/O) | {events} | {outputs} | - | {events_per_s:.0} | {outputs_per_s:.0} |"
    );
    report.higher("process_batch only: events/s", "/s", events_per_s);
    report.higher("process_batch only: outputs/s", "/s", outputs_per_s);
}

/// The same processing with conditions run by the bundled `condition` component (`engine.node_kinds = wasm`).
/// The runtime and store are started as `serve` starts them (bundled plugins, compile cache, capabilities).
async fn wasm_processing(report: &mut Report, config: &Config, ports: &Ports, events: usize) {
    let store = flowhost::start_components(config, ports, &prometheus::Registry::new()).await.unwrap();
    let nodes = ComponentNodes::new(store);
    let set = RuleSet::build(rules("in", "out"), vec![], vec![], vec![schema()], &mut ExpressionMemo::default());
    let batch = consumed(events);
    let native = process_batch(&set, &batch, "invalid", &EngineMetrics::unregistered()).records.len();
    let metrics = EngineMetrics::unregistered();
    let started = Instant::now();
    let mut outputs = 0;
    for chunk in batch.chunks(500) {
        let to = Destinations::only("invalid");
        outputs += process_batch_with(&set, chunk, to, &metrics, &nodes, 1).await.unwrap().records.len();
    }
    let elapsed = started.elapsed();
    assert_eq!(outputs, native, "the wasm node kinds decide as the native ones");
    let (events_per_s, outputs_per_s) = (events as f64 / elapsed.as_secs_f64(), outputs as f64 / elapsed.as_secs_f64());
    println!(
        "| process_batch with the wasm `condition` node kind (batches of 500: one instance per rule per batch; no I/O) | {events} | {outputs} | - | {events_per_s:.0} | {outputs_per_s:.0} |"
    );
    report.higher("process_batch, wasm condition node kind: events/s", "/s", events_per_s);
    report.higher("process_batch, wasm condition node kind: outputs/s", "/s", outputs_per_s);
}

/// The anchor of the Kafka figure: librdkafka alone doing the engine's I/O on the same source topic, with the
/// same guarantees and without the engine. A consumer of a new group reads the `events`; a producer with the
/// adapter's settings (`acks=all`, idempotent) writes `outputs` records spread over them (each the consumed event's
/// key and value, as the rules' outputs carry it); every `BATCH` events the outputs are awaited, then the offsets
/// committed, as the engine commits a batch only once its outputs are acknowledged. Events/s from the first
/// consumed record, as the engine's steady rate is timed.
async fn raw_librdkafka(brokers: &str, source: &str, output: &str, events: usize, outputs: u64) -> f64 {
    use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
    use rdkafka::error::{KafkaError, RDKafkaErrorCode};
    use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
    use rdkafka::{ClientConfig, Message};

    const BATCH: usize = 2_000;
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("bench-raw"))
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "10")
        .set("session.timeout.ms", "6000")
        .create()
        .expect("a librdkafka consumer");
    consumer.subscribe(&[source]).expect("subscribed");
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .expect("a librdkafka producer");
    async fn settle(pending: &mut Vec<DeliveryFuture>) {
        for delivery in pending.drain(..) {
            delivery.await.expect("not cancelled").expect("an output acknowledged");
        }
    }
    let mut pending = Vec::new();
    let (mut produced, mut started) = (0u64, None);
    for n in 1..=events {
        let message = consumer.recv().await.expect("an event");
        started.get_or_insert_with(Instant::now);
        let (key, value) = (message.key().unwrap_or_default(), message.payload().unwrap_or_default());
        while produced < outputs * n as u64 / events as u64 {
            let mut record = FutureRecord::to(output).key(key).payload(value);
            loop {
                match producer.send_result(record) {
                    Ok(delivery) => break pending.push(delivery),
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), refused)) => {
                        record = refused;
                        settle(&mut pending).await;
                    }
                    Err((error, _)) => panic!("producing an output: {error}"),
                }
            }
            produced += 1;
        }
        if n % BATCH == 0 || n == events {
            settle(&mut pending).await;
            consumer.commit_consumer_state(CommitMode::Async).expect("offsets committed");
        }
    }
    events as f64 / started.expect("at least one event").elapsed().as_secs_f64()
}

#[tokio::main]
async fn main() {
    let mut report = Report::new("engine-throughput");
    let events: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    println!("| backend | events | outputs | join s | events/s | outputs/s |");
    println!("|---|---|---|---|---|---|");
    pure_processing(&mut report, events);

    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().to_path_buf(), ..Config::default() };
    let embedded = flowhost::connect(&config).await.unwrap();
    wasm_processing(&mut report, &config, &embedded, events).await;
    run_engine(&mut report, "embedded", "embedded (SQLite log)", embedded.clone(), events).await;

    if let Ok(brokers) = std::env::var("FLOWHOST_TEST_KAFKA_BROKERS") {
        let mut properties = std::collections::BTreeMap::new();
        properties.insert("session.timeout.ms".to_owned(), "6000".to_owned());
        let kafka =
            Ports { topics: Arc::new(flowhost_kafka::KafkaTopics::new(&brokers, &properties).unwrap()), ..embedded };
        let (source, expected_outputs) =
            run_engine(&mut report, "kafka", "Kafka (tansu, in-memory storage)", kafka.clone(), events).await;
        let output = unique("bench-raw-out");
        kafka.topics.create_topic(&output, 4).await.unwrap();
        let raw = raw_librdkafka(&brokers, &source, &output, events, expected_outputs).await;
        println!("| anchor: librdkafka alone, the same consume, produce and commit | {events} | {expected_outputs} | | {raw:.0} | |");
        report.anchor("kafka: events/s", "librdkafka alone", raw);
    } else {
        println!("(set FLOWHOST_TEST_KAFKA_BROKERS to include Kafka)");
    }
}
