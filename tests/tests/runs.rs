//! Released v2 flows running, as an operator sees them (spec 001, the v2 loop; spec 000's outcome and retry
//! tables): a source event through a condition, a mapping and a wasm action (the `ledger` fixture) to an
//! output, with runs listed and read over the API and completion events on their topic; a flaky action's
//! retries on the spec's backoff, checked on an injected clock; a permanent failure on its dead-letter subject
//! and in the store, replayed to the run's version (failing again) and to the latest release (succeeding); a
//! source record consumed again starting no second run and no second action record; runs and dead letters
//! removed past their retention, the embedded file shrinking; with `engine.node_kinds = wasm` conditions and
//! mappings run in the `condition` and `mapping` components, and a newly activated `condition` version decides
//! the next runs without a restart. Every case runs on the embedded backends and on the
//! real servers.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::collections::FLOW_RUNS;
use flowhost_core::ManualClock;
use flowhost_tests::{eventually, on_both_backends, unique, Backends, TestHost};
use futures::StreamExt;
use serde_json::{json, Value};

on_both_backends!(
    a_source_event_runs_through_condition_mapping_action_and_output,
    a_flaky_action_is_retried_on_the_spec_backoff,
    a_permanent_failure_is_dead_lettered_and_replayed,
    a_record_consumed_again_starts_no_second_run,
    runs_and_dead_letters_expire_and_the_store_shrinks,
    finished_runs_keep_node_payloads_as_configured,
    conditions_and_mappings_run_as_components_of_the_active_version
);

const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

fn configure(config: &mut flowhost_core::config::Config) {
    config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50;
}

async fn start(backends: Backends, clock: Option<Arc<ManualClock>>) -> TestHost {
    let clock = clock.map(|c| c as Arc<dyn flowhost_core::Clock>);
    let host = TestHost::start_configured(backends, clock, configure).await;
    prepare(&host).await;
    host
}

/// The `deposit` schema and the `ledger` plugin (service `ledger`, in process).
async fn prepare(host: &TestHost) {
    let schema = json!({"fields": [
        {"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}
    ]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let url = host.url("/api/v1/plugins/ledger/versions/0.1.0");
    let wasm = flowhost_runtime_fixtures::bytes("ledger");
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload ledger: {}", response.text().await.unwrap());
}

fn node(id: &str, kind: &str, config: Value) -> Value {
    json!({"id": id, "kind": kind, "config": config})
}

fn edge(from: &str, to: &str) -> Value {
    json!({"from": from, "to": to})
}

/// source -> condition `amount > 100.0` -> mapping (merge) -> ledger segment -> `action` with `config` ->
/// output `out_topic`.
fn flow(source_topic: &str, out_topic: &str, action: &str, config: Value) -> Value {
    let mut action_config = config;
    action_config["action_ref"] = json!(action);
    json!({
        "nodes": [
            node("src", "source", json!({"event_type": "deposit", "topic": source_topic})),
            node("big", "condition", json!({"expression": "amount > 100.0"})),
            node("map", "mapping", json!({"mode": "merge", "fields": [{"source": "player_id", "target": "player"}]})),
            node("seg", "service-in", json!({"service": "ledger"})),
            node("act", "action", action_config),
            node("out", "output-topic", json!({"topic": out_topic})),
        ],
        "edges": [edge("src", "big"), edge("big", "map"), edge("map", "seg"), edge("seg", "act"), edge("act", "out")]
    })
}

fn deposit(amount: f64, player: &str) -> Value {
    json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": amount, "player_id": player})
}

/// Waits until the flow has `count` runs matching `done`, then answers the run list.
async fn runs_until(host: &TestHost, flow_id: &str, count: usize, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, page) = host.call("GET", &format!("/api/v2/flows/{flow_id}/runs?page_size=200"), None).await;
        assert_eq!(status, 200, "{page}");
        let runs = page["runs"].as_array().unwrap().clone();
        if runs.len() >= count && runs.iter().filter(|r| done(r)).count() >= count {
            return runs;
        }
        assert!(tokio::time::Instant::now() < until, "runs of {flow_id} never reached {count}: {page:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run(host: &TestHost, run_id: &str) -> Value {
    let (status, run) = host.call("GET", &format!("/api/v2/runs/{run_id}"), None).await;
    assert_eq!(status, 200, "{run}");
    run
}

/// The run once it is stored as completed (outputs are published before the run is stored).
async fn completed_run(host: &TestHost, run_id: &str) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stored = run(host, run_id).await;
        if stored["status"] == "completed" {
            return stored;
        }
        assert!(tokio::time::Instant::now() < until, "the run never completed: {stored:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn node_of<'a>(run: &'a Value, id: &str) -> &'a Value {
    run["nodes"].as_array().unwrap().iter().find(|n| n["node_id"] == id).unwrap_or_else(|| panic!("no {id}: {run}"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    flowhost_core::digest::sha256_bytes_hex(bytes)
}

async fn a_source_event_runs_through_condition_mapping_action_and_output(backends: Backends) {
    let host = start(backends, None).await;
    let (source, out) = (unique("deposits"), unique("rewarded"));
    let id = host.release_flow(flow(&source, &out, "record", json!({"amount": "{{amount}}"}))).await;
    host.publish(&source, &[deposit(250.0, "p1"), deposit(5.0, "p2"), deposit(120.5, "p3")]).await;

    let outputs = host.read(&out, 2, Duration::from_secs(60)).await;
    assert_eq!(outputs.len(), 2);
    for record in &outputs {
        let value: Value = serde_json::from_slice(&record.value).unwrap();
        let run_id = String::from_utf8(record.header("flowhost-run-id").unwrap().to_vec()).unwrap();
        assert_eq!(record.header("flowhost-flow-id"), Some(id.as_bytes()));
        // The action ran once with the spec's idempotency key: sha256 of the run id followed by the node id.
        assert_eq!(value["result"]["key"], sha256_hex(format!("{run_id}act").as_bytes()), "{value}");
        assert_eq!(value["result"]["invocations"], 1);
        assert_eq!(
            (value["result"]["run_id"].as_str(), value["result"]["tenant_id"].as_str()),
            (Some(run_id.as_str()), Some("casino-1"))
        );
        assert_eq!(value["player"], value["player_id"], "the mapping merged player: {value}");
        assert!(record.header("traceparent").is_some());
    }

    let runs = runs_until(&host, &id, 3, |r| r["status"] == "completed").await;
    assert_eq!(runs.len(), 3);
    let stopped = runs.iter().find(|r| r["path"].as_array().unwrap().len() == 2).expect("the small deposit's run");
    assert_eq!(
        stopped["path"],
        json!([{"node_id": "src", "outcome": "passed"}, {"node_id": "big", "outcome": "not_matched"}])
    );
    let full = runs.iter().find(|r| r["path"].as_array().unwrap().len() == 6).expect("a big deposit's run");
    let detail = run(&host, full["run_id"].as_str().unwrap()).await;
    let action = node_of(&detail, "act");
    assert_eq!(action["outcome"], "passed");
    assert_eq!(action["attempts"][0]["outcome"], "success");
    assert_eq!(action["input"]["player"], detail["event"]["player_id"]);
    assert!(action["output"]["result"]["key"].is_string());
    assert_eq!(detail["trace_id"].as_str().map(str::len), Some(32));

    // Paging and the status filter.
    let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs?page=2&page_size=2"), None).await;
    assert_eq!((page["total"].clone(), page["runs"].as_array().unwrap().len()), (json!(3), 1));
    let (_, none) = host.call("GET", &format!("/api/v2/flows/{id}/runs?status=dead_lettered"), None).await;
    assert_eq!(none["total"], 0);
    let (status, bad) = host.call("GET", &format!("/api/v2/flows/{id}/runs?status=sleeping"), None).await;
    assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("INVALID_QUERY")));
    assert_eq!(host.call("GET", "/api/v2/runs/nope", None).await.0, 404);

    // Completion events: one per run status, and one per action attempt.
    let events = host.read("flowhost.flow-completions", usize::MAX, host.quiet_period()).await;
    let events: Vec<Value> = events.iter().map(|r| serde_json::from_slice(&r.value).unwrap()).collect();
    let mine: Vec<&Value> = events.iter().filter(|e| e["flow_id"] == id.as_str()).collect();
    assert_eq!(mine.iter().filter(|e| e["kind"] == "run" && e["outcome"] == "completed").count(), 3, "{mine:#?}");
    assert_eq!(mine.iter().filter(|e| e["kind"] == "node" && e["node_kind"] == "action").count(), 2);
    assert!(host.metric("flowhost_flow_runs_started_total").await >= 3.0);
    host.stop().await;
}

/// The attempts of the action node of the flow's only run, once there are `count`.
async fn attempts(host: &TestHost, flow_id: &str, count: usize) -> (Value, Vec<Value>) {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let runs = runs_until(host, flow_id, 1, |_| true).await;
        let detail = run(host, runs[0]["run_id"].as_str().unwrap()).await;
        let found = detail["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node_id"] == "act")
            .map(|n| n["attempts"].as_array().unwrap().clone())
            .unwrap_or_default();
        if found.len() >= count {
            return (detail, found);
        }
        assert!(tokio::time::Instant::now() < until, "never {count} attempts: {detail:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_flaky_action_is_retried_on_the_spec_backoff(backends: Backends) {
    let clock = Arc::new(ManualClock::new(T0));
    let host = start(backends, Some(clock.clone())).await;
    let (source, out) = (unique("deposits"), unique("rewarded"));
    let id = host.release_flow(flow(&source, &out, "flaky", json!({"failures": 2}))).await;
    host.publish(&source, &[deposit(500.0, "p1")]).await;

    let (detail, first) = attempts(&host, &id, 1).await;
    assert_eq!(detail["status"], "waiting");
    assert_eq!((first[0]["at_ms"].as_i64(), first[0]["outcome"].as_str()), (Some(T0), Some("retryable")));
    assert_eq!(detail["pending"][0]["due_ms"], T0 + 2000, "the first retry waits 2 s");

    // Nothing happens before the backoff has passed, however long the scheduler polls.
    clock.advance_ms(1999);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(attempts(&host, &id, 1).await.1.len(), 1);
    clock.advance_ms(1);
    let (detail, second) = attempts(&host, &id, 2).await;
    assert_eq!(second[1]["at_ms"], T0 + 2000);
    assert_eq!(detail["pending"][0]["due_ms"], T0 + 2000 + 6000, "then 2 s x 3");
    clock.advance_ms(6000);
    let (_, third) = attempts(&host, &id, 3).await;
    assert_eq!((third[2]["at_ms"].as_i64(), third[2]["outcome"].as_str()), (Some(T0 + 8000), Some("success")));
    let runs = runs_until(&host, &id, 1, |r| r["status"] == "completed").await;
    assert_eq!(runs[0]["status"], "completed");
    let outputs = host.read(&out, 1, Duration::from_secs(30)).await;
    let value: Value = serde_json::from_slice(&outputs[0].value).unwrap();
    assert_eq!(value["result"]["attempt"], 3);
    host.stop().await;
}

async fn a_permanent_failure_is_dead_lettered_and_replayed(backends: Backends) {
    let host = start(backends, None).await;
    let mut letters = host.ports.subjects.subscribe("triggers.v2.dlq.ledger.limit").await.unwrap();
    let (source, out) = (unique("deposits"), unique("accepted"));
    let body = flow(&source, &out, "limit", json!({"amount": "{{amount}}", "limit": 100}));
    let id = host.release_flow(body.clone()).await;
    host.publish(&source, &[deposit(150.0, "p1")]).await;

    let message = tokio::time::timeout(Duration::from_secs(60), letters.next()).await.expect("a dead letter").unwrap();
    let published: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!((published["service"].as_str(), published["action"].as_str()), (Some("ledger"), Some("limit")));
    assert_eq!(published["reason"], "permanent");
    assert!(published["error"].as_str().unwrap().contains("over the limit"), "{published}");
    let runs = runs_until(&host, &id, 1, |r| r["status"] == "dead_lettered").await;
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(node_of(&run(&host, &run_id).await, "act")["outcome"], "dead_lettered");

    let (status, listed) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={id}&status=open"), None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["total"], 1);
    let letter = listed["dead_letters"][0].clone();
    assert_eq!((letter["id"].clone(), letter["run_id"].as_str()), (published["id"].clone(), Some(run_id.as_str())));
    let letter_id = letter["id"].as_str().unwrap().to_owned();
    assert_eq!(host.call("GET", &format!("/api/v2/dead-letters/{letter_id}"), None).await.0, 200);

    // Replayed to the run's own version, it fails again the same way.
    let (status, replayed) =
        host.call("POST", &format!("/api/v2/dead-letters/{letter_id}/replay"), Some(json!({"to": "run"}))).await;
    assert_eq!(status, 200, "{replayed}");
    assert_eq!((replayed["run_id"].as_str(), replayed["version"].as_i64()), (Some(run_id.as_str()), Some(1)));
    tokio::time::timeout(Duration::from_secs(60), letters.next()).await.expect("dead-lettered again").unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let letter = loop {
        let (_, letter) = host.call("GET", &format!("/api/v2/dead-letters/{letter_id}"), None).await;
        if letter["status"] == "open" && letter["replays"].as_array().map(Vec::len) == Some(1) {
            break letter;
        }
        assert!(tokio::time::Instant::now() < until, "{letter}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(letter["replays"][0]["to"], "run");

    // A release with a higher limit, and a replay to it: a new run of version 2 accepts the deposit.
    let mut fixed = body;
    fixed["nodes"][4]["config"]["limit"] = json!(1000);
    assert_eq!(host.call("PUT", &format!("/api/v2/flows/{id}"), Some(fixed)).await.0, 200);
    let (status, _) = host.call("POST", &format!("/api/v2/flows/{id}/release"), Some(json!({}))).await;
    assert_eq!(status, 200);
    let (status, answer) = host
        .call("POST", "/api/v2/dead-letters/replay", Some(json!({"ids": [letter_id, "dl-unknown"], "to": "latest"})))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["replayed"]["version"], 2, "{answer}");
    assert_eq!(answer["results"][1]["error"]["code"], "DEAD_LETTER_NOT_FOUND");
    let new_run = answer["results"][0]["replayed"]["run_id"].as_str().unwrap().to_owned();
    assert_ne!(new_run, run_id);
    let outputs = host.read(&out, 1, Duration::from_secs(60)).await;
    let value: Value = serde_json::from_slice(&outputs[0].value).unwrap();
    assert_eq!(value["result"]["accepted"], 150.0);
    // The output is published before the run is stored (effects: publish, then store): wait for the store.
    let replay_run = completed_run(&host, &new_run).await;
    assert_eq!((replay_run["version"].as_i64(), replay_run["replay_of"].as_str()), (Some(2), Some(run_id.as_str())));
    let (_, letter) = host.call("GET", &format!("/api/v2/dead-letters/{letter_id}"), None).await;
    assert_eq!(letter["status"], "replayed");
    let (status, again) = host.call("POST", &format!("/api/v2/dead-letters/{letter_id}/replay"), Some(json!({}))).await;
    assert_eq!((status, again["error"]["code"].as_str()), (409, Some("REPLAY_CONFLICT")));
    host.stop().await;
}

async fn a_record_consumed_again_starts_no_second_run(backends: Backends) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    configure(&mut config);
    let host = TestHost::start_with(config.clone()).await;
    prepare(&host).await;
    let (source, out) = (unique("deposits"), unique("rewarded"));
    let id = host.release_flow(flow(&source, &out, "record", json!({}))).await;
    host.publish(&source, &[deposit(300.0, "p1"), deposit(400.0, "p2")]).await;
    runs_until(&host, &id, 2, |r| r["status"] == "completed").await;
    host.stop().await;

    // The first run as a build before time-ordered run ids stored it: under its earlier id. The record is
    // consumed again below, after the upgrade, and must still find it.
    let ports = flowhost::connect(&config).await.unwrap();
    let documents = ports.documents.as_ref();
    let mut first = documents.list(FLOW_RUNS).await.unwrap().into_iter().find(|r| r["flow_id"] == id.as_str()).unwrap();
    let place = &first["source"];
    let record = flowhost_core::ports::Record {
        topic: place["topic"].as_str().unwrap().to_owned(),
        partition: place["partition"].as_i64().unwrap() as i32,
        offset: place["offset"].as_i64().unwrap(),
        key: None,
        value: Vec::new(),
        headers: Vec::new(),
        timestamp_ms: 0,
    };
    let earlier = flowhost_runs::ids::legacy_run_id(&id, &record);
    assert!(documents.delete(FLOW_RUNS, first["run_id"].as_str().unwrap()).await.unwrap());
    first["run_id"] = json!(earlier);
    documents.insert(FLOW_RUNS, &earlier, first).await.unwrap();
    drop(ports);

    // The same store, another consumer group: every source record is consumed again from the start.
    config.section_mut::<flowhost_runs::EngineConfig>().group_id = unique("engine");
    let host = TestHost::start_with(config).await;
    tokio::time::sleep(host.quiet_period()).await;
    host.publish(&source, &[deposit(500.0, "p3")]).await;
    let runs = runs_until(&host, &id, 3, |r| r["status"] == "completed").await;
    assert_eq!(runs.len(), 3, "the two consumed again started nothing (one found under its earlier id): {runs:#?}");
    // Each action ran once per run: one record per idempotency key, counted once.
    for summary in &runs {
        let detail = run(&host, summary["run_id"].as_str().unwrap()).await;
        assert_eq!(node_of(&detail, "act")["output"]["result"]["invocations"], 1, "{detail}");
    }
    let outputs = host.read(&out, 4, host.quiet_period()).await;
    assert_eq!(outputs.len(), 3, "outputs of the two first runs are not published again");
    host.stop().await;
}

/// The flow's runs in `status`, counted by the run list.
async fn run_count(host: &TestHost, flow_id: &str, status: &str) -> u64 {
    let path = format!("/api/v2/flows/{flow_id}/runs?status={status}&page_size=1");
    let (code, page) = host.call("GET", &path, None).await;
    assert_eq!(code, 200, "{page}");
    page["total"].as_u64().unwrap()
}

/// `[engine.runs]`: completed runs go once unchanged for the run retention; a run with an open dead letter stays
/// (so a replay to it works) until the dead-letter retention, and takes its letter with it. On the embedded
/// store the file gives the freed pages back (incremental vacuum).
async fn runs_and_dead_letters_expire_and_the_store_shrinks(backends: Backends) {
    // Enough kilobyte runs for the embedded file's shrinking to show; on the real servers, where only the
    // expiry is checked, fewer: the MongoDB-protocol test server stores a few runs a second beside the suite.
    let runs = if backends == Backends::Embedded { 600 } else { 40 };
    let clock = Arc::new(ManualClock::new(T0));
    let host = TestHost::start_configured(backends, Some(clock.clone() as Arc<dyn flowhost_core::Clock>), |config| {
        configure(config);
        config.section_mut::<flowhost_runs::EngineConfig>().runs.sweep_interval_ms = 50;
        // The source events stay in their topics, so the file shrinks by the runs alone.
        config.topics.retention_ms = 10 * 365 * 24 * 60 * 60 * 1000;
    })
    .await;
    prepare(&host).await;
    let storage = host.config.section::<flowhost_runs::EngineConfig>().runs.clone();
    assert_eq!((storage.retention_ms, storage.dead_letter_retention_ms), (7 * 86_400_000, 30 * 86_400_000));
    let (source, out) = (unique("deposits"), unique("accepted"));
    let id = host.release_flow(flow(&source, &out, "limit", json!({"amount": "{{amount}}", "limit": 1000}))).await;
    // Runs of a kilobyte and more each (the player id is carried through every node's payload).
    let padding = "x".repeat(1024);
    let events: Vec<Value> = (0..runs).map(|n| deposit(150.0, &format!("p{n}-{padding}"))).collect();
    for chunk in events.chunks(100) {
        host.publish(&source, chunk).await;
    }
    host.publish(&source, &[deposit(5000.0, "over-the-limit")]).await;
    eventually("every run stored", 180, || async {
        (run_count(&host, &id, "completed").await == runs as u64 && run_count(&host, &id, "dead_lettered").await == 1)
            .then_some(())
    })
    .await;
    let (_, letters) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={id}"), None).await;
    let letter_id = letters["dead_letters"][0]["id"].as_str().unwrap().to_owned();
    let kept_run = letters["dead_letters"][0]["run_id"].as_str().unwrap().to_owned();
    let file = host.config.data_dir.join("flowhost.db");
    let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    // The write-ahead log reaches the file at the next checkpoint (every 250 ms).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let full = size();

    // A day short of the run retention nothing goes; past it the completed runs do, the dead-lettered one stays.
    clock.advance_ms(6 * 86_400_000);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(run_count(&host, &id, "completed").await, runs as u64, "nothing expires early");
    clock.advance_ms(86_400_000 + 60_000);
    eventually("the completed runs removed", 60, || async {
        (run_count(&host, &id, "completed").await == 0).then_some(())
    })
    .await;
    assert_eq!(host.call("GET", &format!("/api/v2/runs/{kept_run}"), None).await.0, 200, "its letter is open");
    assert_eq!(host.call("GET", &format!("/api/v2/dead-letters/{letter_id}"), None).await.0, 200);
    if backends == Backends::Embedded {
        // Every run carried over a kilobyte: the file gives back at least that much.
        let shrunk = full.saturating_sub(runs as u64 * 1024);
        eventually(&format!("the file shrinks from {full} to {shrunk} bytes"), 60, || async {
            (size() <= shrunk).then_some(())
        })
        .await;
    }

    // Past the dead-letter retention, the letter goes and its run with it.
    clock.advance_ms(30 * 86_400_000);
    eventually("the dead letter removed", 60, || async {
        (host.call("GET", &format!("/api/v2/dead-letters/{letter_id}"), None).await.0 == 404).then_some(())
    })
    .await;
    eventually("its run removed", 60, || async {
        (host.call("GET", &format!("/api/v2/runs/{kept_run}"), None).await.0 == 404).then_some(())
    })
    .await;
    host.stop().await;
}

/// `engine.runs.node_payloads = failed`: a completed run keeps its summary and source event but not its nodes'
/// inputs and outputs; a dead-lettered run keeps them all (what an operator fixing it needs).
async fn finished_runs_keep_node_payloads_as_configured(backends: Backends) {
    let host = TestHost::start_configured(backends, None, |config| {
        configure(config);
        config.section_mut::<flowhost_runs::EngineConfig>().runs.node_payloads = flowhost_runs::NodePayloads::Failed;
    })
    .await;
    prepare(&host).await;
    let (source, out) = (unique("deposits"), unique("accepted"));
    let id = host.release_flow(flow(&source, &out, "limit", json!({"amount": "{{amount}}", "limit": 1000}))).await;
    host.publish(&source, &[deposit(150.0, "kept-small"), deposit(5000.0, "over-the-limit")]).await;
    let runs = runs_until(&host, &id, 2, |r| r["status"] != "waiting").await;
    let by_status = |status: &str| runs.iter().find(|r| r["status"] == status).unwrap()["run_id"].clone();
    let completed = completed_run(&host, by_status("completed").as_str().unwrap()).await;
    assert_eq!(completed["node_payloads_dropped"], true, "{completed:#}");
    assert_eq!(completed["event"]["player_id"], "kept-small", "the source event stays");
    assert_eq!(node_of(&completed, "src")["input"]["player_id"], "kept-small");
    let action = node_of(&completed, "act");
    assert_eq!(action["input"], Value::Null, "the action's input is not kept: {action}");
    assert!(action["outcome"].is_string() && action["duration_us"].is_u64(), "its outcome and timing are: {action}");
    let failed = run(&host, by_status("dead_lettered").as_str().unwrap()).await;
    assert!(failed.get("node_payloads_dropped").is_none(), "{failed:#}");
    assert_eq!(node_of(&failed, "act")["input"]["amount"], 5000.0, "a dead-lettered run keeps every payload");
    host.stop().await;
}

/// `engine.node_kinds = wasm`: the flow's condition and mapping run in the bundled components (counted as their
/// invocations) with the same results; an operator's new `condition` version (the `condition_always` fixture,
/// holding for every event) decides the runs after its activation, without a restart.
async fn conditions_and_mappings_run_as_components_of_the_active_version(backends: Backends) {
    let host = TestHost::start_configured(backends, None, |config| {
        configure(config);
        config.section_mut::<flowhost_runs::EngineConfig>().node_kinds = flowhost_runs::NodeKindsMode::Wasm;
        config.plugins.bundled = true;
    })
    .await;
    prepare(&host).await;
    let (source, out) = (unique("deposits"), unique("rewarded"));
    let id = host.release_flow(flow(&source, &out, "record", json!({"amount": "{{amount}}"}))).await;
    host.publish(&source, &[deposit(250.0, "big-one"), deposit(5.0, "small-one")]).await;
    let outputs = host.read(&out, 1, Duration::from_secs(60)).await;
    let value: Value = serde_json::from_slice(&outputs[0].value).unwrap();
    assert_eq!((value["player"].as_str(), value["player_id"].as_str()), (Some("big-one"), Some("big-one")), "{value}");
    let runs = runs_until(&host, &id, 2, |r| r["status"] == "completed").await;
    assert!(
        runs.iter().any(|r| r["path"]
            == json!([{"node_id": "src", "outcome": "passed"}, {"node_id": "big", "outcome": "not_matched"}])),
        "the small deposit does not match: {runs:#?}"
    );
    for plugin in ["condition", "mapping"] {
        let calls =
            host.metric(&format!("flowhost_plugin_invocations_total{{plugin=\"{plugin}\",result=\"ok\"}}")).await;
        assert!(calls > 0.0, "{plugin} was never invoked");
    }

    let url = host.url("/api/v1/plugins/condition/versions/0.9.0");
    let wasm = flowhost_runtime_fixtures::bytes("condition_always");
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload condition 0.9.0: {}", response.text().await.unwrap());
    host.publish(&source, &[deposit(5.0, "small-after-the-swap")]).await;
    let outputs = host.read(&out, 2, Duration::from_secs(60)).await;
    let players: Vec<Value> =
        outputs.iter().map(|r| serde_json::from_slice::<Value>(&r.value).unwrap()["player"].clone()).collect();
    assert_eq!(players, vec![json!("big-one"), json!("small-after-the-swap")], "the new version holds for it");
    host.stop().await;
}
