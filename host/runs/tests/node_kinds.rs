//! The executor's two node-kind ports agree: [`NativeNodes`] and [`ComponentNodes`] (the bundled `condition` and
//! `mapping` components by the batch contract) give the same answers over the condition table
//! (`flowhost_runtime_fixtures::conformance`) and over every mapping mode, whether the calls come as one batch or
//! one by one at the same moment (gathered into batches); and `ComponentNodes` runs whatever version is active at
//! the call, with a missing component unavailable. Rules' calls (by record, recorded in no run) answer as runs' do.

use std::sync::Arc;

use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::ports::Record;
use flowhost_core::{Clock, SystemClock};
use flowhost_embedded::EmbeddedStore;
use flowhost_expr::Expression;
use flowhost_runs::nodes::{CallOrigin, ConditionNode, MappingNode, NodeCall, NodeRef};
use flowhost_runs::{ComponentNodes, NativeNodes, NodeFailure, NodeKinds};
use flowhost_runtime::{Runtime, RuntimeConfig};
use flowhost_runtime_fixtures as fixtures;
use serde_json::{json, Map, Value};

const NODE: NodeRef<'static> = NodeRef { flow_id: Some("flow-1"), node_id: "node-1" };

async fn store(components: &[&str]) -> (Arc<ComponentStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let ports = EmbeddedStore::open(dir.path(), 1, clock.clone()).unwrap().ports(clock);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let store = Arc::new(ComponentStore::new(ports, runtime, StoreConfig::default()));
    let bytes: Vec<(&str, Vec<u8>)> = components.iter().map(|name| (*name, fixtures::bytes(name))).collect();
    let bundled: Vec<(&str, &[u8])> = bytes.iter().map(|(name, bytes)| (*name, bytes.as_slice())).collect();
    store.install_bundled(&bundled).await.unwrap();
    (store, dir)
}

fn calls(payloads: &[Map<String, Value>]) -> Vec<NodeCall<'_>> {
    payloads
        .iter()
        .enumerate()
        .map(|(i, payload)| NodeCall {
            tenant_id: Some("t1"),
            origin: CallOrigin::Run(RUN_IDS[i % RUN_IDS.len()]),
            attempt: 1,
            payload,
        })
        .collect()
}

/// The payloads as consumed records (what a rule evaluates).
fn records(payloads: &[Map<String, Value>]) -> Vec<Record> {
    payloads
        .iter()
        .enumerate()
        .map(|(offset, payload)| Record {
            topic: "in".into(),
            partition: 0,
            offset: offset as i64,
            key: None,
            value: serde_json::to_vec(payload).unwrap(),
            headers: vec![],
            timestamp_ms: 0,
        })
        .collect()
}

/// A rule's calls: by record.
fn record_calls<'a>(payloads: &'a [Map<String, Value>], records: &'a [Record]) -> Vec<NodeCall<'a>> {
    payloads
        .iter()
        .zip(records)
        .map(|(payload, record)| NodeCall {
            tenant_id: Some("t1"),
            origin: CallOrigin::Record(record),
            attempt: 1,
            payload,
        })
        .collect()
}

/// A condition's answer by class: holds, does not hold, or cannot be evaluated (the messages differ: the
/// native evaluator's and the guest's words).
fn class(answer: &Result<bool, NodeFailure>) -> &'static str {
    match answer {
        Ok(true) => "holds",
        Ok(false) => "does not hold",
        Err(NodeFailure::NoMatch(_)) => "cannot be evaluated",
        Err(other) => panic!("a condition of the table fails otherwise: {other:?}"),
    }
}

fn classes(answers: &[Result<bool, NodeFailure>]) -> Vec<&'static str> {
    answers.iter().map(class).collect()
}

const RUN_IDS: [&str; 3] = ["run-a", "run-b", "run-c"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_answer_alike_natively_and_as_components() {
    let (store, _dir) = store(&["condition"]).await;
    let components = ComponentNodes::new(store);
    let events = fixtures::conformance::events();
    let records = records(&events);
    let rule = NodeRef { flow_id: None, node_id: "rule-1" };
    let (mut held, mut not_held) = (0, 0);
    for source in fixtures::conformance::EXPRESSIONS {
        let compiled = Expression::compile(source, None).unwrap_or_else(|errors| panic!("{source:?}: {errors:?}"));
        let condition = ConditionNode::new(source, compiled);
        let calls = calls(&events);
        let native = classes(&NativeNodes.conditions(NODE, &condition, &calls).await);
        let batched = classes(&components.conditions(NODE, &condition, &calls).await);
        assert_eq!(batched, native, "{source:?} as one batch");
        let by_record = classes(&components.conditions(rule, &condition, &record_calls(&events, &records)).await);
        assert_eq!(by_record, native, "{source:?} as a rule's batch");
        // One call per run, all at once: gathered into batches, each run still gets its own answer.
        let single = futures::future::join_all(
            calls.iter().map(|call| components.conditions(NODE, &condition, std::slice::from_ref(call))),
        )
        .await
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
        assert_eq!(classes(&single), native, "{source:?} one call per run");
        for answer in native {
            match answer {
                "holds" => held += 1,
                _ => not_held += 1,
            }
        }
    }
    // The table exercises both answers, so a port that always or never holds cannot pass.
    assert!(held > 40 && not_held > 40, "{held} held, {not_held} did not");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mappings_answer_alike_natively_and_as_components_in_every_mode() {
    let (store, _dir) = store(&["mapping"]).await;
    let components = ComponentNodes::new(store);
    let events = fixtures::conformance::events();
    let pairs = |list: &[(&str, &str)]| list.iter().map(|(s, t)| (s.to_string(), t.to_string())).collect::<Vec<_>>();
    let field_lists = [
        pairs(&[("game", "kind"), ("amount", "amount")]),
        pairs(&[("missing", "x"), ("count", "n")]),
        pairs(&[("game", "amount"), ("amount", "game")]),
        pairs(&[("meta", "meta_copy"), ("tags", "labels"), ("nothing", "none")]),
    ];
    for merge in [false, true] {
        for fields in &field_lists {
            let mapping = MappingNode::new(merge, fields.clone());
            let calls = calls(&events);
            let native = NativeNodes.mappings(NODE, &mapping, &calls).await;
            assert!(native.iter().all(Result::is_ok));
            let batched = components.mappings(NODE, &mapping, &calls).await;
            assert_eq!(batched, native, "merge {merge}, {fields:?}");
            let records = records(&events);
            let rule = NodeRef { flow_id: None, node_id: "rule-1" };
            let by_record = components.mappings(rule, &mapping, &record_calls(&events, &records)).await;
            assert_eq!(by_record, native, "merge {merge}, {fields:?} as a rule's batch");
        }
    }
    // The modes differ where they should: merge keeps the event's other fields, select drops them.
    let payload = json!({"game": "slots", "amount": 5}).as_object().cloned().unwrap();
    let call = [NodeCall { tenant_id: None, origin: CallOrigin::Run("run-a"), attempt: 1, payload: &payload }];
    let select = components.mappings(NODE, &MappingNode::new(false, pairs(&[("game", "g")])), &call).await;
    let merge = components.mappings(NODE, &MappingNode::new(true, pairs(&[("game", "g")])), &call).await;
    assert_eq!(select, vec![Ok(json!({"g": "slots"}).as_object().cloned().unwrap())]);
    assert_eq!(merge, vec![Ok(json!({"game": "slots", "amount": 5, "g": "slots"}).as_object().cloned().unwrap())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_run_the_active_version_and_a_missing_one_is_unavailable() {
    let (store, _dir) = store(&["mapping"]).await;
    let components = ComponentNodes::new(store.clone());
    let compiled = Expression::compile("amount > 1000.0", None).unwrap();
    let condition = ConditionNode::new("amount > 1000.0", compiled);
    let payload = json!({"amount": 5.0}).as_object().cloned().unwrap();
    let call = [NodeCall { tenant_id: None, origin: CallOrigin::Run("run-a"), attempt: 1, payload: &payload }];
    let missing = components.conditions(NODE, &condition, &call).await;
    assert!(
        matches!(&missing[..], [Err(NodeFailure::Unavailable(message))] if message.contains("no active component")),
        "{missing:?}"
    );
    store.install_bundled(&[("condition", &fixtures::bytes("condition"))]).await.unwrap();
    assert_eq!(components.conditions(NODE, &condition, &call).await, vec![Ok(false)]);
    // An operator's newer version (one that always holds) is what the next call runs.
    let prepared = store.prepare("condition", "0.9.0", fixtures::bytes("condition_always")).await.unwrap();
    store.commit(prepared, true).await.unwrap();
    assert_eq!(components.conditions(NODE, &condition, &call).await, vec![Ok(true)]);
}
