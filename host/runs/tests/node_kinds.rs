//! The executor's two node-kind ports agree: [`NativeNodes`] and [`ComponentNodes`] (the bundled `condition` and
//! `mapping` components by the batch contract) give the same answers over the condition table
//! (`flowhost_runtime_fixtures::conformance`) and over every mapping mode, whether the calls come as one batch or
//! one by one at the same moment (gathered into batches); and `ComponentNodes` runs whatever version is active at
//! the call, with a missing component a retryable failure.

use std::sync::Arc;

use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::{Clock, SystemClock};
use flowhost_embedded::EmbeddedStore;
use flowhost_expr::Expression;
use flowhost_runs::nodes::{ConditionNode, MappingNode, NodeCall, NodeRef};
use flowhost_runs::{CallError, ComponentNodes, NativeNodes, NodeKinds};
use flowhost_runtime::{Outcome, Runtime, RuntimeConfig};
use flowhost_runtime_fixtures as fixtures;
use serde_json::{json, Map, Value};

const NODE: NodeRef<'static> = NodeRef { flow_id: "flow-1", node_id: "node-1" };

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
        .map(|(i, payload)| NodeCall { tenant_id: Some("t1"), run_id: RUN_IDS[i % RUN_IDS.len()], attempt: 1, payload })
        .collect()
}

const RUN_IDS: [&str; 3] = ["run-a", "run-b", "run-c"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_answer_alike_natively_and_as_components() {
    let (store, _dir) = store(&["condition"]).await;
    let components = ComponentNodes::new(store);
    let events = fixtures::conformance::events();
    let (mut held, mut not_held) = (0, 0);
    for source in fixtures::conformance::EXPRESSIONS {
        let compiled = Expression::compile(source, None).unwrap_or_else(|errors| panic!("{source:?}: {errors:?}"));
        let condition = ConditionNode::new(source, compiled);
        let calls = calls(&events);
        let native = NativeNodes.conditions(NODE, &condition, &calls).await;
        let batched = components.conditions(NODE, &condition, &calls).await;
        assert_eq!(batched, native, "{source:?} as one batch");
        // One call per run, all at once: gathered into batches, each run still gets its own answer.
        let single = futures::future::join_all(
            calls.iter().map(|call| components.conditions(NODE, &condition, std::slice::from_ref(call))),
        )
        .await
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
        assert_eq!(single, native, "{source:?} one call per run");
        for answer in native {
            match answer {
                Ok(true) => held += 1,
                Ok(false) => not_held += 1,
                Err(error) => panic!("{source:?}: the native port never fails: {error:?}"),
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
        }
    }
    // The modes differ where they should: merge keeps the event's other fields, select drops them.
    let payload = json!({"game": "slots", "amount": 5}).as_object().cloned().unwrap();
    let call = [NodeCall { tenant_id: None, run_id: "run-a", attempt: 1, payload: &payload }];
    let select = components.mappings(NODE, &MappingNode::new(false, pairs(&[("game", "g")])), &call).await;
    let merge = components.mappings(NODE, &MappingNode::new(true, pairs(&[("game", "g")])), &call).await;
    assert_eq!(select, vec![Ok(json!({"g": "slots"}).as_object().cloned().unwrap())]);
    assert_eq!(merge, vec![Ok(json!({"game": "slots", "amount": 5, "g": "slots"}).as_object().cloned().unwrap())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_run_the_active_version_and_a_missing_one_is_retryable() {
    let (store, _dir) = store(&["mapping"]).await;
    let components = ComponentNodes::new(store.clone());
    let compiled = Expression::compile("amount > 1000.0", None).unwrap();
    let condition = ConditionNode::new("amount > 1000.0", compiled);
    let payload = json!({"amount": 5.0}).as_object().cloned().unwrap();
    let call = [NodeCall { tenant_id: None, run_id: "run-a", attempt: 1, payload: &payload }];
    let missing = components.conditions(NODE, &condition, &call).await;
    assert!(
        matches!(&missing[..], [Err(CallError { outcome: Outcome::Retryable, message })] if message.contains("no active component")),
        "{missing:?}"
    );
    store.install_bundled(&[("condition", &fixtures::bytes("condition"))]).await.unwrap();
    assert_eq!(components.conditions(NODE, &condition, &call).await, vec![Ok(false)]);
    // An operator's newer version (one that always holds) is what the next call runs.
    let prepared = store.prepare("condition", "0.9.0", fixtures::bytes("condition_always")).await.unwrap();
    store.commit(prepared, true).await.unwrap();
    assert_eq!(components.conditions(NODE, &condition, &call).await, vec![Ok(true)]);
}
