//! v2 flow validation and the drift pass, on the embedded store:
//!
//! 1. validation of a 50-node draft (10 conditions, 5 service segments with 5 actions, mappings, lookups,
//!    rate limits and outputs) as `POST /api/v2/flows/validate-draft` runs it: dependencies loaded fresh from
//!    the documents port, then the walk; and the walk alone over loaded dependencies;
//! 2. the drift pass over `FLOWS` released flows referencing one service, when a registration breaks them
//!    all, when the next registration fixes them all, and when nothing changed.
//!
//! Prints a table. Uses a fresh data directory each run.
//!
//!     cargo run --release -p flowhost-tests --bin flows-validation [-- FLOWS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_catalog::{Catalog, ServiceManifest};
use flowhost_core::model::{EventSchema, EventSource, FieldType};
use flowhost_core::ports::Ports;
use flowhost_core::SystemClock;
use flowhost_embedded::EmbeddedStore;
use flowhost_flows::{drift, validate, Dependencies, FlowBody, FlowInput, Flows};
use serde_json::{json, Value};

const DRAFT_RUNS: usize = 200;

fn manifest(version: &str, with_action: bool) -> ServiceManifest {
    let mut actions = vec![json!({"name": "send_inapp", "config_schema": {"type": "object",
        "properties": {"message": {"type": "string"}, "ttl": {"type": "integer", "default": 60}}}})];
    if with_action {
        actions.push(json!({"name": "send_webpush", "config_schema": {"type": "object",
            "properties": {"template_id": {"type": "integer"}, "title": {"type": "string"},
                "urgency": {"enum": ["low", "normal", "high"], "default": "normal"}},
            "required": ["template_id"]}}));
    }
    serde_json::from_value(json!({
        "service": "notifications",
        "components": [{"id": "sender", "version": version}],
        "actions": actions,
        "service_sources": ["nats", "kafka", "http"],
        "supports_nodes": ["condition", "lookup", "mapping"],
        "data_sources": [{"name": "templates", "path": "/data/templates", "params": ["tenant_id"]}],
        "transports": {"http": {"endpoint": "http://127.0.0.1:9"}}
    }))
    .expect("manifest")
}

fn node(id: String, kind: &str, config: Value) -> Value {
    json!({"id": id, "kind": kind, "config": config})
}

/// 50 nodes: a source, then 5 branches of 9 nodes (2 conditions, 2 mappings, a rate limit, a lookup, a segment,
/// an action, an output) and 4 else outputs.
fn draft() -> FlowBody {
    let mut nodes = vec![node("src".into(), "source", json!({"event_type": "deposit", "topic": "deposits"}))];
    let mut edges = Vec::new();
    let mut link = |from: &str, to: &str| edges.push(json!({"from": from, "to": to}));
    for b in 0..5 {
        let n = |name: &str| format!("{name}{b}");
        nodes.push(node(n("gate"), "condition", json!({"expression": format!("amount > {b}00.0 && level >= {b}")})));
        nodes.push(node(n("country"), "condition", json!({"expression": "country == 'DE' || country == 'AT'"})));
        nodes.push(node(
            n("map"),
            "mapping",
            json!({"mode": "merge",
            "fields": [{"source": "player_id", "target": "player"}, {"source": "amount", "target": "stake"}]}),
        ));
        nodes.push(node(
            n("market"),
            "mapping",
            json!({"mode": "merge", "fields": [{"source": "country", "target": "market"}]}),
        ));
        nodes.push(node(n("rl"), "rate-limit", json!({"limit": 3, "window_seconds": 3600, "key": "player"})));
        nodes.push(node(
            n("tpl"),
            "lookup",
            json!({"service": "notifications", "data_source": "templates",
            "params": {"tenant_id": "{{tenant_id}}"}, "target": "template"}),
        ));
        nodes.push(node(n("seg"), "service-in", json!({"service": "notifications", "transport": "nats"})));
        nodes.push(node(
            n("push"),
            "action",
            json!({"action_ref": "send_webpush", "template_id": "{{level}}",
            "title": "A {{stake}} deposit, {{player}}!"}),
        ));
        nodes.push(node(n("out"), "output-topic", json!({})));
        link("src", &n("gate"));
        link(&n("gate"), &n("country"));
        link(&n("country"), &n("map"));
        link(&n("map"), &n("market"));
        link(&n("market"), &n("rl"));
        link(&n("rl"), &n("tpl"));
        link(&n("tpl"), &n("seg"));
        link(&n("seg"), &n("push"));
        link(&n("push"), &n("out"));
        if b < 4 {
            nodes.push(node(n("else"), "output-topic", json!({"topic": format!("else-{b}")})));
        }
    }
    // Else branches after the second condition of four branches, as siblings of the mapping.
    for b in 0..4 {
        edges.push(json!({"from": format!("country{b}"), "to": format!("else{b}")}));
    }
    let body: FlowBody = serde_json::from_value(json!({"nodes": nodes, "edges": edges})).expect("body");
    assert_eq!(body.nodes.len(), 50);
    body
}

async fn setup(ports: &Ports) {
    let schema = EventSchema::new(
        "deposit",
        &[
            ("amount", FieldType::Double),
            ("player_id", FieldType::String),
            ("level", FieldType::Int),
            ("country", FieldType::String),
        ],
    );
    let documents = ports.documents.as_ref();
    documents
        .upsert(flowhost_core::collections::SCHEMAS, "deposit", serde_json::to_value(&schema).unwrap())
        .await
        .unwrap();
    let source =
        EventSource { source_topic: "deposits".into(), default_output_topic: "deposits-out".into(), description: None };
    documents
        .upsert(flowhost_core::collections::EVENT_SOURCES, "deposits", serde_json::to_value(&source).unwrap())
        .await
        .unwrap();
    Catalog::new(ports).register(manifest("1.0.0", true)).await.expect("register");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", millis(d))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The benchmark's figures (`report` below is the draft's validation report).
    let mut figures = Report::new("flows-validation");
    let flow_count: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = tempfile::tempdir().expect("data directory");
    let clock = Arc::new(SystemClock);
    let store = EmbeddedStore::open(dir.path(), 4, clock.clone()).expect("embedded store");
    let ports = store.ports(clock);
    setup(&ports).await;
    let flows = Flows::new(ports.clone());
    flows.ensure_indexes().await.expect("indexes");
    let body = draft();

    // 1. Draft validation.
    let report = flows.validate_draft(&body).await.expect("validate");
    assert!(report.valid && report.issues.is_empty(), "the bench draft is clean: {:?}", report.issues);
    let mut fresh = Vec::with_capacity(DRAFT_RUNS);
    let mut walk = Vec::with_capacity(DRAFT_RUNS);
    for _ in 0..DRAFT_RUNS {
        let started = Instant::now();
        let report = flows.validate_draft(&body).await.expect("validate");
        fresh.push(started.elapsed());
        assert!(report.valid);
        let deps = Dependencies::load(&ports).await.expect("dependencies");
        let started = Instant::now();
        let issues = validate(&body, &deps);
        walk.push(started.elapsed());
        assert!(issues.is_empty());
    }
    fresh.sort();
    walk.sort();

    // 2. The drift pass over released flows.
    let started = Instant::now();
    for i in 0..flow_count {
        let input = FlowInput { id: Some(format!("flow-{i:05}")), body: body.clone(), ..FlowInput::default() };
        flows.create(input, None).await.expect("create");
        flows.release(&format!("flow-{i:05}"), vec![], "bench").await.expect("release");
    }
    let seeding = started.elapsed();
    drift::pass(&flows).await.expect("first pass"); // Records the current hash.
    let catalog = Catalog::new(&ports);
    let mut passes = Vec::new();
    for (label, version, with_action) in
        [("breaks every flow", "1.1.0", false), ("fixes every flow", "1.2.0", true), ("nothing changed", "", true)]
    {
        if !version.is_empty() {
            catalog.register(manifest(version, with_action)).await.expect("register");
        }
        let started = Instant::now();
        let summary = drift::pass(&flows).await.expect("drift pass");
        passes.push((label, started.elapsed(), summary.revalidated, summary.changed));
    }

    println!("v2 flow validation, embedded store ({} runs of the draft)", DRAFT_RUNS);
    println!();
    println!("| What | p50 | p99 | mean |");
    println!("|---|---|---|---|");
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let drafts =
        [("50-node draft, fresh dependency load + validation", &fresh), ("50-node draft, validation alone", &walk)];
    for (what, samples) in drafts {
        let (p50, p99, average) = (percentile(samples, 0.5), percentile(samples, 0.99), mean(samples));
        println!("| {what} | {} | {} | {} |", ms(p50), ms(p99), ms(average));
        figures.lower(&format!("{what}: p50"), "ms", millis(p50));
        figures.lower(&format!("{what}: p99"), "ms", millis(p99));
        figures.lower(&format!("{what}: mean"), "ms", millis(average));
    }
    println!();
    println!("Drift pass, {flow_count} released flows of the 50-node draft referencing one service (seeded by create + release in {:.1} s)", seeding.as_secs_f64());
    figures.lower("drift: seed the released flows by create + release", "s", seeding.as_secs_f64());
    println!();
    println!("| Pass | time | re-validated | changed | per flow |");
    println!("|---|---|---|---|---|");
    for (label, elapsed, revalidated, changed) in passes {
        let per = if revalidated > 0 { ms(elapsed / revalidated as u32) } else { "-".into() };
        println!("| {label} | {} | {revalidated} | {changed} | {per} |", ms(elapsed));
        figures.lower(&format!("drift pass, {label}"), "ms", millis(elapsed));
        if revalidated > 0 {
            figures.lower(&format!("drift pass, {label}: per flow"), "ms", millis(elapsed / revalidated as u32));
        }
    }
}
