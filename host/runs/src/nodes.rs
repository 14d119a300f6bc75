//! The node-kinds port: how the executor evaluates condition and mapping nodes, by `engine.node_kinds`.
//! [`NativeNodes`] evaluates them in process (the compiled CEL expression, the field copy); [`ComponentNodes`]
//! runs them through the active `condition` and `mapping` components of the component store by the batch
//! contract (`flowhost:plugin@0.2.0`: the node's configuration prepared once per instance, then every event of
//! the batch evaluated in it). Each call takes the kind's active version at that moment, so activating a new
//! version changes what released flows run from the next call on, on every node that loaded it.
//!
//! The runs of a consumed batch advance concurrently, each reaching its nodes on its own; [`ComponentNodes`]
//! gathers the calls of one node that arrive together (the runs advancing on one task, and any other task's
//! calls that arrive while a batch is being gathered) into one component batch, so a component's prepare (a
//! CEL compilation) and instance serve many runs.
//!
//! Answers: a condition answers whether it holds; an expression that cannot be evaluated on a payload (a
//! missing field, a guest's own permanent failure) does not hold, as natively. An error is the node failing:
//! skip-forward ends the branch, retryable (no active component, no free instance, a deadline, the guest's
//! retryable failure) retries the step with the engine's retry policy, permanent (a trap, fuel or memory, an
//! output of another shape) dead-letters it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flowhost_components::ComponentStore;
use flowhost_expr::Expression;
use flowhost_runtime::{BatchContext, InvokeError, NodeEvent};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::execute::CallError;

/// The plugin id (and action) of the condition node kind.
pub const CONDITION_PLUGIN: &str = "condition";
/// The plugin id (and action) of the mapping node kind.
pub const MAPPING_PLUGIN: &str = "mapping";

/// A condition node with an expression: compiled for the native evaluation, and its component configuration.
#[derive(Debug)]
pub struct ConditionNode {
    pub expression: Expression,
    /// `{"expression": "<CEL>"}`, the `condition` component's configuration.
    pub config: String,
}

impl ConditionNode {
    pub fn new(source: &str, expression: Expression) -> ConditionNode {
        ConditionNode { expression, config: serde_json::json!({ "expression": source }).to_string() }
    }
}

/// A mapping node: `select` keeps only its targets, `merge` adds them to the payload.
#[derive(Debug)]
pub struct MappingNode {
    pub merge: bool,
    /// `(source, target)` pairs, in order.
    pub fields: Vec<(String, String)>,
    /// `{"mode": "select" | "merge", "fields": [{"source", "target"}]}`, the `mapping` component's configuration.
    pub config: String,
}

impl MappingNode {
    pub fn new(merge: bool, fields: Vec<(String, String)>) -> MappingNode {
        let listed: Vec<Value> =
            fields.iter().map(|(source, target)| serde_json::json!({ "source": source, "target": target })).collect();
        let mode = if merge { "merge" } else { "select" };
        let config = serde_json::json!({ "mode": mode, "fields": listed }).to_string();
        MappingNode { merge, fields, config }
    }

    /// The native mapping of `payload`.
    pub fn apply(&self, payload: &Map<String, Value>) -> Map<String, Value> {
        let mut out = if self.merge { payload.clone() } else { Map::new() };
        for (source, target) in &self.fields {
            if let Some(value) = payload.get(source) {
                out.insert(target.clone(), value.clone());
            }
        }
        out
    }
}

/// Which node of which flow is evaluated.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    pub flow_id: &'a str,
    pub node_id: &'a str,
}

/// One evaluation: a run's payload at the node and its part of the invocation context.
#[derive(Debug, Clone, Copy)]
pub struct NodeCall<'a> {
    pub tenant_id: Option<&'a str>,
    pub run_id: &'a str,
    pub attempt: u32,
    pub payload: &'a Map<String, Value>,
}

/// Evaluates condition and mapping nodes (see the module documentation); one answer per call, in order.
#[async_trait]
pub trait NodeKinds: Send + Sync {
    async fn conditions(
        &self,
        node: NodeRef<'_>,
        condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, CallError>>;

    async fn mappings(
        &self,
        node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, CallError>>;
}

/// Conditions by the compiled expression, mappings by [`MappingNode::apply`]: no I/O, never failing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeNodes;

#[async_trait]
impl NodeKinds for NativeNodes {
    async fn conditions(
        &self,
        _node: NodeRef<'_>,
        condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, CallError>> {
        calls.iter().map(|call| Ok(condition.expression.evaluate(call.payload).unwrap_or(false))).collect()
    }

    async fn mappings(
        &self,
        _node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, CallError>> {
        calls.iter().map(|call| Ok(mapping.apply(call.payload))).collect()
    }
}

/// What one gathered call waits for: its raw output per event.
type Answers = Vec<Result<String, Failed>>;

/// Why a component gave no output for an event.
#[derive(Debug, Clone)]
enum Failed {
    /// The guest's own permanent failure: a condition that cannot be evaluated on the payload does not hold.
    Guest(String),
    /// Anything else, classified for the executor.
    Call(CallError),
}

impl Failed {
    fn retryable(message: String) -> Failed {
        Failed::Call(CallError::retryable(message))
    }

    /// The failure as the node failing (a mapping's answer).
    fn into_call(self) -> CallError {
        match self {
            Failed::Guest(message) => CallError::permanent(message),
            Failed::Call(failure) => failure,
        }
    }
}

/// Calls of one node gathered into one component batch.
struct Gathering {
    events: Vec<NodeEvent>,
    /// Per waiting caller: how many of `events` are its (in order), and where its answers go.
    waiting: Vec<(usize, oneshot::Sender<Answers>)>,
}

/// Node kinds run by the component store's `condition` and `mapping` components, gathered into batches (see
/// the module documentation).
pub struct ComponentNodes {
    store: Arc<ComponentStore>,
    /// Batches being gathered, by kind, flow, node and configuration.
    gathering: Mutex<HashMap<(String, String, String, String), Gathering>>,
}

impl std::fmt::Debug for ComponentNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentNodes").finish_non_exhaustive()
    }
}

/// How many times the caller that opened a batch yields before it runs it, letting the other runs of its task
/// reach the same node.
const GATHER_YIELDS: usize = 2;

impl ComponentNodes {
    pub fn new(store: Arc<ComponentStore>) -> ComponentNodes {
        ComponentNodes { store, gathering: Mutex::new(HashMap::new()) }
    }

    /// Evaluates `kind` configured with `config` at `node` for `calls`, in a batch with the other calls of the
    /// same node that arrive meanwhile: the raw JSON output per call.
    async fn evaluate(&self, kind: &str, config: &str, node: NodeRef<'_>, calls: &[NodeCall<'_>]) -> Answers {
        let events: Vec<NodeEvent> = calls.iter().map(|call| node_event(node, call)).collect();
        let key = (kind.to_owned(), node.flow_id.to_owned(), node.node_id.to_owned(), config.to_owned());
        let (sender, answers) = oneshot::channel();
        let opened = {
            let mut gathering = self.gathering.lock().unwrap_or_else(|p| p.into_inner());
            match gathering.get_mut(&key) {
                Some(batch) => {
                    batch.waiting.push((events.len(), sender));
                    batch.events.extend(events);
                    false
                }
                None => {
                    let waiting = vec![(events.len(), sender)];
                    gathering.insert(key.clone(), Gathering { events, waiting });
                    true
                }
            }
        };
        if opened {
            for _ in 0..GATHER_YIELDS {
                tokio::task::yield_now().await;
            }
            let batch = self.gathering.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
            if let Some(Gathering { events, waiting }) = batch {
                let mut results = self.run(kind, config, node, events).await.into_iter();
                for (count, sender) in waiting {
                    let _ = sender.send(results.by_ref().take(count).collect());
                }
            }
        }
        match answers.await {
            Ok(answers) => answers,
            Err(_) => {
                let failure = Failed::retryable(format!("the {kind} evaluation was cancelled"));
                calls.iter().map(|_| Err(failure.clone())).collect()
            }
        }
    }

    /// One component batch of `kind` over `events`.
    async fn run(&self, kind: &str, config: &str, node: NodeRef<'_>, events: Vec<NodeEvent>) -> Answers {
        let batch = BatchContext { flow_id: Some(node.flow_id.to_owned()), node_id: Some(node.node_id.to_owned()) };
        let count = events.len();
        match evaluate_active(&self.store, kind, config, batch, events).await {
            Ok(results) => results.into_iter().map(|result| result.map_err(|error| failure(kind, &error))).collect(),
            Err(unavailable) => {
                let failure = Failed::retryable(unavailable);
                (0..count).map(|_| Err(failure.clone())).collect()
            }
        }
    }
}

/// Evaluates node kind `kind` configured with `config` over `events` in the kind's active component, on a task of
/// its own (the nodes of other runs and rules evaluate in parallel on the runtime's worker threads): one output
/// per event; `Err` with the reason when the kind cannot run at all now (no active component, cancelled).
pub async fn evaluate_active(
    store: &ComponentStore,
    kind: &str,
    config: &str,
    batch: BatchContext,
    events: Vec<NodeEvent>,
) -> Result<Vec<Result<String, InvokeError>>, String> {
    let Some(plugin) = store.active(kind) else {
        return Err(format!("the {kind} node kind has no active component"));
    };
    let (kind_name, config) = (kind.to_owned(), config.to_owned());
    let evaluation = tokio::spawn(async move { plugin.evaluate(&kind_name, &config, &batch, events).await });
    match evaluation.await {
        Ok(results) => Ok(results),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => Err(format!("the {kind} evaluation was cancelled")),
    }
}

/// One call as an event of the node: the idempotency key is the run's at this node, the same on every attempt.
fn node_event(node: NodeRef<'_>, call: &NodeCall<'_>) -> NodeEvent {
    NodeEvent {
        tenant_id: call.tenant_id.map(str::to_owned),
        run_id: Some(call.run_id.to_owned()),
        idempotency_key: crate::ids::idempotency_key(call.run_id, node.node_id),
        attempt: call.attempt,
        // A map of JSON values always serializes.
        event: serde_json::to_string(call.payload).unwrap_or_default(),
    }
}

/// A failed component call as the executor treats it: the guest's own permanent failure is told apart (a
/// condition then does not hold, as a native evaluation error); a full instance pool, a deadline and the
/// guest's retryable failure retry the step; skip-forward ends the branch; anything else the guest did (trap,
/// fuel, memory, bad output) is permanent.
fn failure(kind: &str, error: &InvokeError) -> Failed {
    let message = format!("{kind}: {error}");
    match error {
        InvokeError::Permanent(_) => Failed::Guest(message),
        _ => Failed::Call(CallError { outcome: error.outcome(), message }),
    }
}

#[async_trait]
impl NodeKinds for ComponentNodes {
    async fn conditions(
        &self,
        node: NodeRef<'_>,
        condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, CallError>> {
        let outputs = self.evaluate(CONDITION_PLUGIN, &condition.config, node, calls).await;
        outputs
            .into_iter()
            .map(|output| match output {
                // The bundled component's two answers, without parsing them.
                Ok(text) if text == r#"{"pass":true}"# => Ok(true),
                Ok(text) if text == r#"{"pass":false}"# => Ok(false),
                Ok(text) => serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|value| value.get("pass").and_then(Value::as_bool))
                    .ok_or_else(|| CallError::permanent(format!("condition: expected {{\"pass\": bool}}, got {text}"))),
                // The guest could not evaluate the expression on this payload: it does not hold.
                Err(Failed::Guest(_)) => Ok(false),
                Err(Failed::Call(failure)) => Err(failure),
            })
            .collect()
    }

    async fn mappings(
        &self,
        node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, CallError>> {
        let outputs = self.evaluate(MAPPING_PLUGIN, &mapping.config, node, calls).await;
        outputs
            .into_iter()
            .map(|output| {
                let text = output.map_err(Failed::into_call)?;
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(mut output)) => match output.remove("event") {
                        Some(Value::Object(event)) => Ok(event),
                        _ => Err(CallError::permanent(format!("mapping: expected {{\"event\": {{...}}}}, got {text}"))),
                    },
                    _ => Err(CallError::permanent(format!("mapping: expected {{\"event\": {{...}}}}, got {text}"))),
                }
            })
            .collect()
    }
}
