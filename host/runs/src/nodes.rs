//! The node-kinds port: how the executor evaluates condition, mapping and plugin node-kind nodes. Conditions and
//! mappings go by `engine.node_kinds`: [`NativeNodes`] evaluates them in process (the compiled CEL expression,
//! the field copy); [`ComponentNodes`] runs them through the active `condition` and `mapping` components of the
//! component store by the batch contract (`flowhost:plugin@0.2.0`: the node's configuration prepared once per
//! instance, then every event of the batch evaluated in it), or natively too
//! ([`ComponentNodes::with_native_bundled`]). A plugin's node kind always runs in its plugin's active component.
//! Each call takes the active version at that moment, so activating a new version changes what released flows
//! run from the next call on, on every node that loaded it.
//!
//! The runs of a consumed batch advance concurrently, each reaching its nodes on its own; [`ComponentNodes`]
//! gathers the calls of one node that arrive together (the runs advancing on one task, and any other task's
//! calls that arrive while a batch is being gathered) into one component batch, so a component's prepare (a
//! CEL compilation) and instance serve many runs.
//!
//! Answers: a condition answers whether it holds; an expression that cannot be evaluated on a payload (a
//! missing field, a guest's own permanent failure) does not hold, as natively. A plugin's node kind answers
//! `{"event": {...}}` (go on with this payload), `{"pass": true}` (go on unchanged) or `{"pass": false}` (the
//! branch ends), or fails with an outcome class; an answer its manifest does not declare fails the step
//! permanently. An error is the node failing:
//! skip-forward ends the branch, retryable (no active component, no free instance, a deadline, the guest's
//! retryable failure) retries the step with the engine's retry policy, permanent (a trap, fuel or memory, an
//! output of another shape) dead-letters it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flowhost_components::ComponentStore;
use flowhost_expr::Expression;
use flowhost_runtime::{BatchContext, InvokeError, NodeEvent, Outcome};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::call::CallError;
use flowhost_catalog::{ANSWER_CONTINUE, ANSWER_STOP};
use flowhost_core::ports::Record;

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

/// A node kind a plugin declares, as placed in a flow: which component and kind, its configuration, and the
/// answers its manifest declares.
#[derive(Debug)]
pub struct PluginNode {
    pub plugin: String,
    pub kind: String,
    /// The configuration as placed (without `plugin` and `kind`), `{{placeholders}}` not rendered yet.
    pub config: Value,
    /// The configuration's JSON text when it holds no placeholder: the same for every payload.
    fixed: Option<String>,
    answers: Vec<String>,
}

impl PluginNode {
    pub fn new(plugin: String, kind: String, config: Value, answers: Vec<String>) -> PluginNode {
        let text = config.to_string();
        let fixed = (!text.contains("{{")).then_some(text);
        PluginNode { plugin, kind, config, fixed, answers }
    }

    /// The configuration the kind is prepared with for `payload`: placeholders rendered from its fields.
    pub fn config_for(&self, payload: &Map<String, Value>) -> Result<Cow<'_, str>, String> {
        if let Some(fixed) = &self.fixed {
            return Ok(Cow::Borrowed(fixed));
        }
        flowhost_core::placeholders::render_value(&self.config, &|name| payload.get(name))
            .map(|rendered| Cow::Owned(rendered.to_string()))
            .map_err(|error| format!("config: {error}"))
    }

    /// `answer` when the manifest declares it, else the permanent failure of answering outside the declaration.
    fn declared(&self, answer: &str) -> Result<(), CallError> {
        if self.answers.iter().any(|declared| declared == answer) {
            return Ok(());
        }
        Err(CallError::permanent(format!(
            "node kind {}/{} answered {answer:?}, which its manifest does not declare (it declares {})",
            self.plugin,
            self.kind,
            self.answers.join(", ")
        )))
    }

    /// What the component's raw output for one event means.
    fn answer(&self, output: Result<String, Failed>) -> Result<NodeAnswer, CallError> {
        let text = match output {
            Ok(text) => text,
            Err(Failed::Guest { outcome, message }) => {
                self.declared(outcome.as_str())?;
                return Err(CallError { outcome, message });
            }
            Err(host) => return Err(host.into_call()),
        };
        let shape = || {
            CallError::permanent(format!(
                "node kind {}/{}: expected {{\"event\": {{...}}}} or {{\"pass\": bool}}, got {text}",
                self.plugin, self.kind
            ))
        };
        let Ok(Value::Object(mut output)) = serde_json::from_str::<Value>(&text) else { return Err(shape()) };
        match (output.remove("event"), output.get("pass").and_then(Value::as_bool)) {
            (Some(Value::Object(event)), _) => {
                self.declared(ANSWER_CONTINUE).map(|()| NodeAnswer::Continue(Some(event)))
            }
            (None, Some(true)) => self.declared(ANSWER_CONTINUE).map(|()| NodeAnswer::Continue(None)),
            (None, Some(false)) => self.declared(ANSWER_STOP).map(|()| NodeAnswer::Stop),
            _ => Err(shape()),
        }
    }
}

/// What a plugin's node kind answered for one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAnswer {
    /// Go on, with this payload (`None`: the payload unchanged).
    Continue(Option<Map<String, Value>>),
    /// The branch ends here.
    Stop,
}

/// Which node of which flow is evaluated (a rule's plan: the rule's flow, when it names one, and the rule as
/// the node).
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    pub flow_id: Option<&'a str>,
    pub node_id: &'a str,
}

/// What an evaluation belongs to, which makes its idempotency key.
#[derive(Debug, Clone, Copy)]
pub enum CallOrigin<'a> {
    /// A run of a flow: the key is the run's at the node ([`crate::ids::idempotency_key`]).
    Run(&'a str),
    /// A rule's evaluation of a consumed record, recorded in no run: no run id; the key is
    /// `topic/partition/offset/<rule>`, the same on every attempt, and the component sees the record's value as
    /// the event (a rule's payload is the record's fields unchanged).
    Record(&'a Record),
}

/// One evaluation: a payload at the node and its part of the invocation context.
#[derive(Debug, Clone, Copy)]
pub struct NodeCall<'a> {
    pub tenant_id: Option<&'a str>,
    pub origin: CallOrigin<'a>,
    pub attempt: u32,
    pub payload: &'a Map<String, Value>,
}

/// Why a condition or mapping gave no answer. The port keeps every distinction; the executor reads them by
/// the plan's dialect: a flow step by [`NodeFailure::into_call`], a rule as the v1 engine always did (see
/// `crate::rule_batch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeFailure {
    /// A condition could not be evaluated on this payload (a field missing or of another type, the guest's own
    /// permanent failure): it does not hold. The same payload always gives the same answer.
    NoMatch(String),
    /// The node asks to be skipped.
    SkipForward(String),
    /// The node fails on this payload for good.
    Permanent(String),
    /// The node may succeed on this payload later.
    Retryable(String),
    /// The node kind cannot run at all right now (no active component, no free instance, cancelled).
    Unavailable(String),
}

impl NodeFailure {
    /// The failure as a flow's step: skip-forward ends the branch, permanent dead-letters, the rest retries
    /// (a condition's [`NodeFailure::NoMatch`] is read as "does not hold" before this).
    pub fn into_call(self) -> CallError {
        match self {
            NodeFailure::SkipForward(message) => CallError { outcome: Outcome::SkipForward, message },
            NodeFailure::NoMatch(message) | NodeFailure::Permanent(message) => CallError::permanent(message),
            NodeFailure::Retryable(message) | NodeFailure::Unavailable(message) => CallError::retryable(message),
        }
    }

    /// From a failure's outcome class.
    fn of(outcome: Outcome, message: String) -> NodeFailure {
        match outcome {
            Outcome::SkipForward => NodeFailure::SkipForward(message),
            Outcome::Permanent => NodeFailure::Permanent(message),
            Outcome::Retryable => NodeFailure::Retryable(message),
        }
    }
}

/// Evaluates condition, mapping and plugin node-kind nodes (see the module documentation); one answer per call,
/// in order.
#[async_trait]
pub trait NodeKinds: Send + Sync {
    async fn conditions(
        &self,
        node: NodeRef<'_>,
        condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, NodeFailure>>;

    async fn mappings(
        &self,
        node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, NodeFailure>>;

    /// `plugin_node` prepared with `config` (rendered for these calls' payloads) over `calls`.
    async fn plugin_nodes(
        &self,
        node: NodeRef<'_>,
        plugin_node: &PluginNode,
        config: &str,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<NodeAnswer, CallError>>;
}

/// Conditions by the compiled expression (one that cannot be evaluated on a payload is
/// [`NodeFailure::NoMatch`]), mappings by [`MappingNode::apply`]: no I/O, never waiting.
#[derive(Debug, Clone, Copy, Default)]
pub struct NativeNodes;

#[async_trait]
impl NodeKinds for NativeNodes {
    async fn conditions(
        &self,
        _node: NodeRef<'_>,
        condition: &ConditionNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<bool, NodeFailure>> {
        calls
            .iter()
            .map(|call| condition.expression.evaluate(call.payload).map_err(|e| NodeFailure::NoMatch(e.to_string())))
            .collect()
    }

    async fn mappings(
        &self,
        _node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, NodeFailure>> {
        calls.iter().map(|call| Ok(mapping.apply(call.payload))).collect()
    }

    /// A plugin's node kind needs its component: without a component store it waits (retryable) until a
    /// runner that has one takes the run.
    async fn plugin_nodes(
        &self,
        _node: NodeRef<'_>,
        plugin_node: &PluginNode,
        _config: &str,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<NodeAnswer, CallError>> {
        let message = format!(
            "node kind {}/{} runs in its plugin's component, and this runner has no component store",
            plugin_node.plugin, plugin_node.kind
        );
        calls.iter().map(|_| Err(CallError::retryable(message.clone()))).collect()
    }
}

/// What one gathered call waits for: its raw output per event.
type Answers = Vec<Result<String, Failed>>;

/// Why a component gave no output for an event.
#[derive(Debug, Clone)]
enum Failed {
    /// The guest's own failure, with the class it chose (a condition the guest cannot evaluate on the payload,
    /// a permanent failure, does not hold).
    Guest { outcome: Outcome, message: String },
    /// The kind cannot run at all right now: no active component, no free instance, cancelled.
    Unavailable(String),
    /// Anything else (a deadline, a trap, fuel, memory, a bad output), classified by the host.
    Call(CallError),
}

impl Failed {
    /// The failure of a plugin's node kind: the host's unavailability retries the step.
    fn into_call(self) -> CallError {
        match self {
            Failed::Guest { outcome, message } => CallError { outcome, message },
            Failed::Unavailable(message) => CallError::retryable(message),
            Failed::Call(failure) => failure,
        }
    }

    /// The failure of a condition (`condition`: the guest's own permanent failure does not hold) or a mapping.
    fn into_node_failure(self, condition: bool) -> NodeFailure {
        match self {
            Failed::Guest { outcome: Outcome::Permanent, message } if condition => NodeFailure::NoMatch(message),
            Failed::Guest { outcome, message } | Failed::Call(CallError { outcome, message }) => {
                NodeFailure::of(outcome, message)
            }
            Failed::Unavailable(message) => NodeFailure::Unavailable(message),
        }
    }
}

/// Calls of one node gathered into one component batch.
struct Gathering {
    events: Vec<NodeEvent>,
    /// Per waiting caller: how many of `events` are its (in order), and where its answers go.
    waiting: Vec<(usize, oneshot::Sender<Answers>)>,
}

/// Node kinds run by components of the component store, gathered into batches (see the module documentation).
pub struct ComponentNodes {
    store: Arc<ComponentStore>,
    /// Whether conditions and mappings evaluate natively (plugin node kinds always run in components).
    native_bundled: bool,
    /// Batches being gathered, by plugin, kind, flow, node and configuration.
    gathering: Mutex<HashMap<GatherKey, Gathering>>,
}

/// (plugin, kind, flow (empty for a rule without one), node, configuration).
type GatherKey = (String, String, String, String, String);

/// A node kind of a component: the plugin id and the kind (the bundled kinds are plugins of their own name).
#[derive(Clone, Copy)]
struct KindRef<'a> {
    plugin: &'a str,
    kind: &'a str,
}

impl<'a> KindRef<'a> {
    fn bundled(kind: &'a str) -> KindRef<'a> {
        KindRef { plugin: kind, kind }
    }
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
    /// Every node kind through components (`engine.node_kinds = wasm`).
    pub fn new(store: Arc<ComponentStore>) -> ComponentNodes {
        ComponentNodes { store, native_bundled: false, gathering: Mutex::new(HashMap::new()) }
    }

    /// Conditions and mappings natively, plugin node kinds through their components (`engine.node_kinds =
    /// native`).
    pub fn with_native_bundled(store: Arc<ComponentStore>) -> ComponentNodes {
        ComponentNodes { native_bundled: true, ..ComponentNodes::new(store) }
    }

    /// Evaluates `kind` configured with `config` at `node` for `calls`, in a batch with the other calls of the
    /// same node that arrive meanwhile: the raw JSON output per call.
    async fn evaluate(&self, kind: KindRef<'_>, config: &str, node: NodeRef<'_>, calls: &[NodeCall<'_>]) -> Answers {
        let events: Vec<NodeEvent> = calls.iter().map(|call| node_event(node, call)).collect();
        let key = (
            kind.plugin.to_owned(),
            kind.kind.to_owned(),
            node.flow_id.unwrap_or_default().to_owned(),
            node.node_id.to_owned(),
            config.to_owned(),
        );
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
                let failure = Failed::Unavailable(format!("the {} evaluation was cancelled", kind.kind));
                calls.iter().map(|_| Err(failure.clone())).collect()
            }
        }
    }

    /// One component batch of `kind` over `events`.
    async fn run(&self, kind: KindRef<'_>, config: &str, node: NodeRef<'_>, events: Vec<NodeEvent>) -> Answers {
        let batch = BatchContext { flow_id: node.flow_id.map(str::to_owned), node_id: Some(node.node_id.to_owned()) };
        let count = events.len();
        match evaluate_active(&self.store, kind.plugin, kind.kind, config, batch, events).await {
            Ok(results) => {
                results.into_iter().map(|result| result.map_err(|error| failure(kind.kind, &error))).collect()
            }
            Err(unavailable) => {
                let failure = Failed::Unavailable(unavailable);
                (0..count).map(|_| Err(failure.clone())).collect()
            }
        }
    }
}

/// Evaluates node kind `kind` of component `plugin` configured with `config` over `events` in the plugin's active
/// version, on a task of its own (the nodes of other runs and rules evaluate in parallel on the runtime's worker
/// threads): one output per event; `Err` with the reason when the kind cannot run at all now (no active
/// component, cancelled).
pub async fn evaluate_active(
    store: &ComponentStore,
    plugin: &str,
    kind: &str,
    config: &str,
    batch: BatchContext,
    events: Vec<NodeEvent>,
) -> Result<Vec<Result<String, InvokeError>>, String> {
    let Some(plugin) = store.active(plugin) else {
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

/// One call as an event of the node, with its idempotency key (see [`CallOrigin`]), the same on every attempt.
fn node_event(node: NodeRef<'_>, call: &NodeCall<'_>) -> NodeEvent {
    let (run_id, idempotency_key, event) = match call.origin {
        CallOrigin::Run(run_id) => (
            Some(run_id.to_owned()),
            crate::ids::idempotency_key(run_id, node.node_id),
            // A map of JSON values always serializes.
            serde_json::to_string(call.payload).unwrap_or_default(),
        ),
        // The record's value is the event's fields: a JSON object (it parsed as one).
        CallOrigin::Record(record) => (
            None,
            crate::ids::record_idempotency_key(record, node.node_id),
            String::from_utf8_lossy(&record.value).into_owned(),
        ),
    };
    NodeEvent { tenant_id: call.tenant_id.map(str::to_owned), run_id, idempotency_key, attempt: call.attempt, event }
}

/// A failed component call as the executor treats it: the guest's own failures are told apart (a condition's
/// permanent one then does not hold, as a native evaluation error); a full instance pool is the kind being
/// unavailable; anything else by its outcome class (a deadline retries; a trap, fuel, memory, a bad output are
/// permanent).
fn failure(kind: &str, error: &InvokeError) -> Failed {
    let message = format!("{kind}: {error}");
    match error {
        InvokeError::Permanent(_) | InvokeError::SkipForward(_) | InvokeError::Retryable(_) => {
            Failed::Guest { outcome: error.outcome(), message }
        }
        InvokeError::Busy(_) => Failed::Unavailable(message),
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
    ) -> Vec<Result<bool, NodeFailure>> {
        if self.native_bundled {
            return NativeNodes.conditions(node, condition, calls).await;
        }
        let outputs = self.evaluate(KindRef::bundled(CONDITION_PLUGIN), &condition.config, node, calls).await;
        outputs
            .into_iter()
            .map(|output| match output {
                // The bundled component's two answers, without parsing them.
                Ok(text) if text == r#"{"pass":true}"# => Ok(true),
                Ok(text) if text == r#"{"pass":false}"# => Ok(false),
                Ok(text) => serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|value| value.get("pass").and_then(Value::as_bool))
                    .ok_or_else(|| {
                        NodeFailure::Permanent(format!("condition: expected {{\"pass\": bool}}, got {text}"))
                    }),
                Err(failed) => Err(failed.into_node_failure(true)),
            })
            .collect()
    }

    async fn mappings(
        &self,
        node: NodeRef<'_>,
        mapping: &MappingNode,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<Map<String, Value>, NodeFailure>> {
        if self.native_bundled {
            return NativeNodes.mappings(node, mapping, calls).await;
        }
        let outputs = self.evaluate(KindRef::bundled(MAPPING_PLUGIN), &mapping.config, node, calls).await;
        outputs
            .into_iter()
            .map(|output| {
                let text = output.map_err(|failed| failed.into_node_failure(false))?;
                let shape = || NodeFailure::Permanent(format!("mapping: expected {{\"event\": {{...}}}}, got {text}"));
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(mut output)) => match output.remove("event") {
                        Some(Value::Object(event)) => Ok(event),
                        _ => Err(shape()),
                    },
                    _ => Err(shape()),
                }
            })
            .collect()
    }

    async fn plugin_nodes(
        &self,
        node: NodeRef<'_>,
        plugin_node: &PluginNode,
        config: &str,
        calls: &[NodeCall<'_>],
    ) -> Vec<Result<NodeAnswer, CallError>> {
        let kind = KindRef { plugin: &plugin_node.plugin, kind: &plugin_node.kind };
        let outputs = self.evaluate(kind, config, node, calls).await;
        outputs.into_iter().map(|output| plugin_node.answer(output)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn score(answers: &[&str]) -> PluginNode {
        let answers = answers.iter().map(|a| a.to_string()).collect();
        PluginNode::new("score".into(), "score".into(), json!({"min": 10, "field": "{{field}}"}), answers)
    }

    #[test]
    fn plugin_answers_are_read_and_held_to_the_declaration() {
        let node = score(&["continue", "stop", "retryable"]);
        let event = json!({"amount": 1.0}).as_object().unwrap().clone();
        let answer = |text: &str| node.answer(Ok(text.to_owned()));
        assert_eq!(answer(r#"{"event": {"amount": 1.0}}"#), Ok(NodeAnswer::Continue(Some(event))));
        assert_eq!(answer(r#"{"pass": true}"#), Ok(NodeAnswer::Continue(None)));
        assert_eq!(answer(r#"{"pass": false}"#), Ok(NodeAnswer::Stop));
        let shape = answer(r#"{"score": 3}"#).unwrap_err();
        assert_eq!(shape.outcome, Outcome::Permanent);
        assert!(shape.message.contains(r#"expected {"event": {...}} or {"pass": bool}"#), "{}", shape.message);

        let guest = |outcome| Err(Failed::Guest { outcome, message: "score: no amount".into() });
        assert_eq!(node.answer(guest(Outcome::Retryable)), Err(CallError::retryable("score: no amount")));
        let undeclared = node.answer(guest(Outcome::Permanent)).unwrap_err();
        assert_eq!(undeclared.outcome, Outcome::Permanent);
        assert!(undeclared.message.contains(r#"answered "permanent", which its manifest does not declare"#));
        let only_stop = score(&["stop"]);
        assert!(only_stop.answer(Ok(r#"{"pass": true}"#.into())).unwrap_err().message.contains("\"continue\""));
        let host = Err(Failed::Call(CallError::retryable("no free instance")));
        assert_eq!(only_stop.answer(host), Err(CallError::retryable("no free instance")), "the host's own class");
    }

    #[test]
    fn a_plugin_config_is_rendered_per_payload_only_when_it_has_placeholders() {
        let payload = json!({"field": "stake"}).as_object().unwrap().clone();
        let templated = score(&[]);
        let rendered: Value = serde_json::from_str(&templated.config_for(&payload).unwrap()).unwrap();
        assert_eq!(rendered, json!({"field": "stake", "min": 10}));
        let fixed = PluginNode::new("score".into(), "score".into(), json!({"min": 10}), vec![]);
        assert!(matches!(fixed.config_for(&payload), Ok(Cow::Borrowed(_))));
    }
}
