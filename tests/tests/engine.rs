//! The rule engine end to end: events published to a source topic come out of the right output topics,
//! mapped and filtered by tenant overrides; records that are not events are moved, not lost; a restart resumes
//! from the committed offsets without losing events; a change through the API is picked up at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowhost_core::ports::Record;
use flowhost_runs::nodes::{ConditionNode, MappingNode, NodeAnswer, NodeCall, NodeRef, PluginNode};
use flowhost_runs::NodeKindsMode;
use flowhost_runs::{CallError, NodeFailure, NodeKinds, Runner};
use flowhost_tests::host::{json_value, read_topic};
use flowhost_tests::{on_both_backends, unique, Backends, TestHost};
use serde_json::Map;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

on_both_backends!(
    rules_route_events,
    rules_route_events_through_the_node_kind_components,
    compiled_flow_routes_events,
    change_signal_applies_without_waiting_for_the_tick,
    one_records_failures_are_retried_alone_and_dead_lettered,
);

const WAIT: Duration = Duration::from_secs(45);

async fn setup_schema(host: &TestHost) {
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
}

fn rule(id: &str, source: &str, expression: &str, output: &str) -> Value {
    json!({
        "id": id, "name": id,
        "source": {"type": "kafka", "topic": source},
        "conditions": {"event_type": "deposit", "expression": expression},
        "output_topic": output
    })
}

fn values(records: &[Record]) -> Vec<Value> {
    records.iter().map(json_value).collect()
}

/// Waits until the engine has consumed `count` records in total (so it has joined and caught up).
async fn wait_consumed(host: &TestHost, count: u64) {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let consumed = host.metric("flowhost_engine_events_consumed_total").await;
        if consumed >= count as f64 {
            return;
        }
        assert!(tokio::time::Instant::now() < until, "engine consumed {consumed} of {count}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn rules_route_events(backends: Backends) {
    let host = TestHost::start(backends).await;
    route_events(&host).await;
    host.stop().await;
}

/// The same routing with conditions and mappings run by the bundled `condition` and `mapping` components.
async fn rules_route_events_through_the_node_kind_components(backends: Backends) {
    let host = TestHost::start_configured(backends, None, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().node_kinds = NodeKindsMode::Wasm;
        config.plugins.bundled = true;
    })
    .await;
    route_events(&host).await;
    // The events went through the components, not the native path.
    for plugin in ["condition", "mapping"] {
        let calls =
            host.metric(&format!("flowhost_plugin_invocations_total{{plugin=\"{plugin}\",result=\"ok\"}}")).await;
        assert!(calls > 0.0, "{plugin} was never invoked");
    }
    host.stop().await;
}

async fn route_events(host: &TestHost) {
    setup_schema(host).await;
    let (source, big, defaults) = (unique("deposits"), unique("big"), unique("default-out"));
    let put_default = json!({"default_output_topic": defaults});
    assert_eq!(host.call("PUT", &format!("/api/v1/event-sources/{source}"), Some(put_default)).await.0, 200);
    // The extension libraries run in the engine's rules as they validate (natively, and in the `condition`
    // component in the node-kinds mode): strings, math and sets.
    let big_rule = "amount > 100.0 && math.greatest(amount, 100.0) == amount \
                    && sets.intersects([player.lowerAscii()], ['p1', 'p2']) && player.upperAscii().startsWith('P')";
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule("big", &source, big_rule, &big))).await.0, 201);
    let mut mapped = rule("mapped", &source, "amount > 0.0", "");
    mapped["output_mapping"] = json!({"mode": "select", "fields": [{"source": "player", "target": "who"}, {"source": "amount", "target": "amount"}]});
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(mapped)).await.0, 201);
    assert_eq!(host.call("PUT", "/api/v1/triggers/big/tenants/t2", Some(json!({"enabled": false}))).await.0, 200);
    host.wait_for_reload().await;

    host.publish(
        &source,
        &[
            json!({"event_type": "deposit", "tenant_id": "t1", "amount": 150.0, "player": "p1"}),
            json!({"event_type": "deposit", "tenant_id": "t2", "amount": 250.0, "player": "p2"}),
            json!({"event_type": "deposit", "tenant_id": "t1", "amount": 5.0, "player": "p3"}),
            json!({"event_type": "withdrawal", "tenant_id": "t1", "amount": 500.0}),
            json!({"no_event_type": true}),
        ],
    )
    .await;

    let big_out = host.read(&big, 1, WAIT).await;
    assert_eq!(
        values(&big_out),
        vec![json!({"event_type": "deposit", "tenant_id": "t1", "amount": 150.0, "player": "p1"})]
    );
    assert_eq!(big_out[0].header("flowhost-rule-id"), Some(&b"big"[..]));
    assert_eq!(big_out[0].key.as_deref(), Some(&b"k"[..]), "the source key is kept");
    let mut mapped_out = values(&host.read(&defaults, 3, WAIT).await);
    mapped_out.sort_by_key(|v| v["who"].as_str().unwrap().to_owned());
    assert_eq!(
        mapped_out,
        vec![
            json!({"who": "p1", "amount": 150.0}),
            json!({"who": "p2", "amount": 250.0}),
            json!({"who": "p3", "amount": 5.0})
        ]
    );
    let invalid = host.read(&host.config.section::<flowhost_runs::EngineConfig>().invalid_events_topic, 1, WAIT).await;
    assert_eq!(values(&invalid), vec![json!({"no_event_type": true})]);
    assert_eq!(invalid[0].header("flowhost-source-topic"), Some(source.as_bytes()));
    assert_eq!(invalid[0].header("flowhost-invalid-reason"), Some(&b"missing_event_type"[..]));

    // Nothing else was published to the rule's topic (t2 was switched off for rule `big`).
    assert_eq!(host.read(&big, 2, host.quiet_period()).await.len(), 1);
}

async fn compiled_flow_routes_events(backends: Backends) {
    let host = TestHost::start(backends).await;
    setup_schema(&host).await;
    let (source, vip, standard) = (unique("deposits"), unique("vip"), unique("standard"));
    let flow = json!({
        "id": "routing", "name": "routing",
        "source": {"node_id": "src", "event_type": "deposit", "source_topic": source},
        "conditions": [
            {"node_id": "big", "expression": "amount >= 100.0"},
            {"node_id": "else", "is_else": true}
        ],
        "outputs": [{"node_id": "vip", "output_topic": vip}, {"node_id": "std", "output_topic": standard}],
        "edges": [
            {"from": "src", "to": "big"}, {"from": "src", "to": "else"},
            {"from": "big", "to": "vip"}, {"from": "else", "to": "std"}
        ]
    });
    assert_eq!(host.call("POST", "/api/v1/flows", Some(flow)).await.0, 201);
    assert_eq!(host.call("POST", "/api/v1/flows/routing/compile", None).await.0, 200);
    host.wait_for_reload().await;
    host.publish(
        &source,
        &[
            json!({"event_type": "deposit", "amount": 100.0, "player": "a"}),
            json!({"event_type": "deposit", "amount": 99.5, "player": "b"}),
        ],
    )
    .await;
    // Each event takes exactly one branch: the else branch misses what `big` matched, and the other way round.
    // (Reading for a second record until the quiet period ends proves none arrives.)
    let vip_out = values(&host.read(&vip, 2, host.quiet_period()).await);
    let std_out = values(&host.read(&standard, 2, host.quiet_period()).await);
    let players = |out: &[Value]| out.iter().map(|v| v["player"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(players(&vip_out), ["a"]);
    assert_eq!(players(&std_out), ["b"]);
    host.stop().await;
}

async fn change_signal_applies_without_waiting_for_the_tick(backends: Backends) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.section_mut::<flowhost_runs::EngineConfig>().reload_interval_ms = 3_600_000;
    let host = TestHost::start_with(config).await;
    // Wait for the first (immediate) reload to pass, so only the change signal can load the rule.
    let until = tokio::time::Instant::now() + WAIT;
    while host.metric("flowhost_engine_rule_cache_reloads_total").await < 1.0 {
        assert!(tokio::time::Instant::now() < until, "the engine never loaded its rules");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    setup_schema(&host).await;
    let (source, out) = (unique("in"), unique("out"));
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule("r", &source, "amount > 1.0", &out))).await.0, 201);
    host.publish(&source, &[json!({"event_type": "deposit", "amount": 2.0, "player": "p"})]).await;
    assert_eq!(host.read(&out, 1, WAIT).await.len(), 1, "the rule was loaded by the change signal");
    host.stop().await;
}

/// Stopping the engine and publishing while it is down loses nothing: the next start resumes from the
/// committed offsets of the same group (embedded: same data directory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resumes_from_committed_offsets_without_loss() {
    for backends in [Backends::Embedded, Backends::Distributed] {
        let dir = tempfile::tempdir().unwrap();
        let config = TestHost::config(backends, dir.path());
        let (source, out) = (unique("in"), unique("out"));
        let event = |n: i64| json!({"event_type": "deposit", "amount": n as f64, "player": format!("p{n}")});

        let host = TestHost::start_with(config.clone()).await;
        setup_schema(&host).await;
        assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule("r", &source, "amount > 0.0", &out))).await.0, 201);
        host.wait_for_reload().await;
        host.publish(&source, &[event(1), event(2), event(3)]).await;
        wait_consumed(&host, 3).await;
        assert_eq!(host.read(&out, 3, WAIT).await.len(), 3);
        let ports = host.ports.clone();
        host.stop().await;

        ports.topics.publish(&[]).await.unwrap();
        let records: Vec<_> = [event(4), event(5)]
            .iter()
            .map(|v| flowhost_core::ports::OutRecord::new(&source, v.to_string()).with_key("k"))
            .collect();
        ports.topics.publish(&records).await.unwrap();
        drop(ports);

        let host = TestHost::start_with(config).await;
        let outputs = host.read(&out, 5, WAIT).await;
        let mut players: Vec<String> =
            outputs.iter().map(|r| json_value(r)["player"].as_str().unwrap().to_owned()).collect();
        players.sort();
        players.dedup();
        if players.len() != 5 {
            // What the restarted engine did, for the failure's message.
            let consumed = host.metric("flowhost_engine_events_consumed_total").await;
            let lag =
                host.ports.topics.lag(&host.config.section::<flowhost_runs::EngineConfig>().group_id, &source).await;
            let ready = host.call("GET", "/ready", None).await;
            eprintln!("{backends:?}: the restarted engine consumed {consumed}; group lag {lag:?}; ready {ready:?}");
        }
        assert_eq!(players, vec!["p1", "p2", "p3", "p4", "p5"], "{backends:?}: every event came out");
        // Committed offsets mean no replay of the first three.
        assert_eq!(read_topic(&host.ports, &out, 6, host.quiet_period()).await.len(), 5, "{backends:?}");
        host.stop().await;
    }
}

/// A condition node kind that decides by the event's `fail` field, the way a plugin's outcomes reach the
/// engine: `retry:N` fails retryably on the first N calls for that event, `permanent` fails for good, `skip`
/// asks to be skipped; anything else passes.
#[derive(Default)]
struct ScriptedCondition {
    calls: Mutex<HashMap<String, u32>>,
}

impl ScriptedCondition {
    fn condition(&self, fields: &Map<String, Value>) -> Result<bool, NodeFailure> {
        let player = fields["player"].as_str().unwrap_or_default().to_owned();
        let mut calls = self.calls.lock().unwrap();
        let call = calls.entry(player).or_default();
        *call += 1;
        match fields.get("fail").and_then(Value::as_str) {
            Some("permanent") => Err(NodeFailure::Permanent("the guest refused this event".into())),
            Some("skip") => Err(NodeFailure::SkipForward("not for this node".into())),
            Some(retry) if retry.starts_with("retry:") => {
                let failures: u32 = retry["retry:".len()..].parse().unwrap();
                if *call <= failures {
                    Err(NodeFailure::Retryable(format!("call {call} of {failures} failing")))
                } else {
                    Ok(true)
                }
            }
            _ => Ok(true),
        }
    }
}

#[async_trait::async_trait]
impl NodeKinds for ScriptedCondition {
    async fn conditions(
        &self,
        _node: NodeRef<'_>,
        _condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, NodeFailure>> {
        calls.iter().map(|call| self.condition(call.payload)).collect()
    }

    async fn mappings(
        &self,
        _node: NodeRef<'_>,
        _mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, NodeFailure>> {
        calls.iter().map(|call| Ok(call.payload.clone())).collect()
    }

    async fn plugin_nodes(
        &self,
        _node: NodeRef<'_>,
        _plugin_node: &PluginNode,
        _config: &str,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<NodeAnswer, CallError>> {
        calls.iter().map(|_| Err(CallError::permanent("no plugin node kinds here"))).collect()
    }
}

/// A record whose node fails retryably is retried alone with the retry policy, while the records after it are
/// published; one that fails for good, or runs out of attempts, goes to the dead-letter topic with headers
/// naming its origin and cause; a skipped condition publishes nothing; every record is accounted for.
async fn one_records_failures_are_retried_alone_and_dead_lettered(backends: Backends) {
    let host = TestHost::start_configured(backends, None, |config| config.roles = vec!["admin".to_owned()]).await;
    setup_schema(&host).await;
    let (source, out, dead) = (unique("in"), unique("out"), unique("dead"));
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule("r", &source, "true", &out))).await.0, 201);

    let mut config = host.config.section::<flowhost_runs::EngineConfig>().into_owned();
    config.dead_letter_topic = dead.clone();
    config.retry.max_attempts = 3;
    config.retry.initial_backoff_ms = 1000;
    config.retry.backoff_factor = 2.0;
    config.retry.max_backoff_ms = 2000;
    let executor = Runner::standalone(host.ports.clone(), config, host.config.topics.partitions)
        .with_nodes(Arc::new(ScriptedCondition::default()));
    let metrics = executor.rule_metrics();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(executor.run(shutdown.clone()));

    let event =
        |player: &str, fail: &str| json!({"event_type": "deposit", "amount": 1.0, "player": player, "fail": fail});
    host.publish(
        &source,
        &[
            event("first", ""),
            event("slow", "retry:2"),
            event("poison", "permanent"),
            event("hopeless", "retry:9"),
            event("skipper", "skip"),
            event("last", ""),
        ],
    )
    .await;

    let outputs = values(&host.read(&out, 3, WAIT).await);
    let players: Vec<&str> = outputs.iter().map(|v| v["player"].as_str().unwrap()).collect();
    // The retried record did not hold back the ones after it: they were published before its retry succeeded.
    assert_eq!(players, ["first", "last", "slow"]);

    let letters = host.read(&dead, 3, host.quiet_period()).await;
    assert_eq!(letters.len(), 2, "{:?}", values(&letters));
    let header = |record: &Record, key: &str| String::from_utf8(record.header(key).unwrap().to_vec()).unwrap();
    let by_player: HashMap<String, &Record> =
        letters.iter().map(|r| (json_value(r)["player"].as_str().unwrap().to_owned(), r)).collect();
    let poison = by_player["poison"];
    assert_eq!(header(poison, "flowhost-dead-letter-reason"), "permanent");
    assert_eq!(header(poison, "flowhost-attempts"), "1");
    assert_eq!(header(poison, "flowhost-rule-id"), "r");
    assert_eq!(header(poison, "flowhost-source-topic"), source);
    assert!(header(poison, "flowhost-dead-letter-cause").contains("refused"));
    assert_eq!(poison.key.as_deref(), Some(&b"k"[..]), "the key is kept");
    let hopeless = by_player["hopeless"];
    assert_eq!(header(hopeless, "flowhost-dead-letter-reason"), "exhausted");
    assert_eq!(header(hopeless, "flowhost-attempts"), "3");
    assert!(header(hopeless, "flowhost-dead-letter-cause").contains("call 3 of 9"));
    assert!(header(hopeless, "flowhost-source-offset").parse::<i64>().is_ok());

    assert_eq!(metrics.dead_letters.with_label_values(&["permanent"]).get(), 1);
    assert_eq!(metrics.dead_letters.with_label_values(&["exhausted"]).get(), 1);
    assert_eq!(metrics.retries.get(), 4, "slow: attempts 2 and 3; hopeless: attempts 2 and 3");
    assert_eq!(metrics.skipped.with_label_values(&["skip_forward"]).get(), 1);
    assert_eq!(host.read(&out, 4, host.quiet_period()).await.len(), 3, "nothing else was published");
    shutdown.cancel();
    running.await.unwrap();
    host.stop().await;
}
