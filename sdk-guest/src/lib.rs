//! `flowhost-sdk-guest`: write a Flowhost action or node kind in Rust and build it into a WebAssembly component
//! (`cargo build --release --target wasm32-wasip2`) that the host's plugin runtime loads.
//!
//! The SDK hides the raw WIT bindings of `flowhost:plugin@0.2.0` (`wit/flowhost-plugin-0.2.0/`, the `plugin`
//! world): a plugin declares a [`Manifest`] (actions with their `config_schema`, the node kinds it implements,
//! its data sources, tighter limits), handles [`Call`]s with typed (serde) input and output and the
//! [`Context`] of the invocation, answers data sources with [`Plugin::data_source`], implements node kinds with
//! [`Plugin::prepare`] (the configuration once, then [`Prepared::evaluate`] for every event of a batch; a
//! [`NodeKind`] declared with [`Manifest::declare_node_kind`] is one flows can place), uses
//! the host capabilities in [`log`], [`clock`] and [`documents`], and reports failures as an [`Error`] carrying
//! the spec's [`Outcome`] class. One macro, [`export_plugin!`], exports it.
//!
//! **An action's input is its configuration.** The action's `config_schema` ([`Action::config_schema`])
//! describes exactly what a flow author sets on the action's node; string values may hold `{{placeholders}}`
//! that the host renders from the event reaching the node, and the rendered configuration is the input
//! [`Call::handle`] decodes. So the schema is the input's contract: derive both from one type, and make whatever
//! the action needs from the event a configuration field set to a placeholder.
//!
//! Ordinary crates work in a plugin: the host gives guests WASI with clocks, random numbers, and stdout and
//! stderr into the plugin's log (`println!`, `chrono`, `rand`, `uuid`, the default panic hook); there are no
//! files, no environment and no network.
//!
//! ```ignore
//! use flowhost_sdk_guest::{export_plugin, Action, Call, Error, Manifest, Output, Plugin};
//!
//! struct Greeter;
//!
//! #[derive(serde::Deserialize)]
//! struct In { name: String }
//!
//! impl Plugin for Greeter {
//!     fn manifest() -> Manifest {
//!         Manifest::new("greeter", "0.1.0").action(Action::new("greet").description("Says hello."))
//!     }
//!     fn invoke(call: Call) -> Result<Output, Error> {
//!         match call.action() {
//!             "greet" => call.handle(|input: In| Ok(serde_json::json!({ "greeting": format!("hello {}", input.name) }))),
//!             _ => Err(call.unknown_action()),
//!         }
//!     }
//! }
//!
//! export_plugin!(Greeter);
//! ```
//!
//! A component imports only the capabilities it calls, and the host must grant each of them (declare them in
//! [`Manifest::capability`]). Secrets never enter a plugin: capabilities that need one do the work in the host.
//!
//! tidy: over the line budget: the SDK's whole surface is one module so that its documentation reads as one
//! page and a plugin imports it from one path.
#![deny(missing_docs)]

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The generated bindings. Not part of the API: use the typed wrappers of this crate.
#[doc(hidden)]
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/flowhost-plugin-0.2.0",
        world: "plugin",
        pub_export_macro: true,
        export_macro_name: "__export_plugin",
        default_bindings_module: "flowhost_sdk_guest::bindings",
    });
}

/// The generated bindings of the `notifications` capability (`wit/flowhost-notify-0.2.0`). Not part of the API:
/// use [`notify`].
#[doc(hidden)]
#[allow(missing_docs)]
pub mod notify_bindings {
    wit_bindgen::generate!({
        path: "../wit/flowhost-notify-0.2.0",
        world: "imports",
    });
}

use bindings::flowhost::plugin::types as wit;

/// How the engine treats a failed invocation (the spec's outcome classes; success is `Ok`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Skip this node and continue the flow run with the next one.
    SkipForward,
    /// Fail for good (dead-letter queue); retrying cannot help.
    Permanent,
    /// A transient failure: the engine retries with backoff.
    Retryable,
}

/// A failure reported by the plugin, with its outcome class and a message for operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// How the engine treats it.
    pub outcome: Outcome,
    /// What went wrong, for operators and logs. Never put a secret or personal data here.
    pub message: String,
}

impl Error {
    /// A failure of the given class.
    pub fn new(outcome: Outcome, message: impl Into<String>) -> Self {
        Self { outcome, message: message.into() }
    }
    /// Skip this node and continue the run.
    pub fn skip_forward(message: impl Into<String>) -> Self {
        Self::new(Outcome::SkipForward, message)
    }
    /// A failure that retrying cannot fix (bad input, bad configuration).
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(Outcome::Permanent, message)
    }
    /// A transient failure worth retrying.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(Outcome::Retryable, message)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.outcome, self.message)
    }
}

impl std::error::Error for Error {}

/// One action a plugin offers.
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config_schema: Option<serde_json::Value>,
}

impl Action {
    /// An action called `name` (what the host passes to [`Plugin::invoke`] as [`Call::action`]).
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), description: None, config_schema: None }
    }
    /// A one-line description shown to flow authors.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// The JSON Schema of the action's configuration (validated by the host at registration).
    pub fn config_schema(mut self, schema: serde_json::Value) -> Self {
        self.config_schema = Some(schema);
        self
    }
}

/// A node kind flows can place (a `"kind": "node-kind"` node whose `config` names the plugin and the kind),
/// declared with [`Manifest::declare_node_kind`] and implemented by [`Plugin::prepare`].
///
/// The host validates a node's configuration (its `config` without `plugin` and `kind`) against
/// [`config_schema`](NodeKind::new), renders its `{{placeholders}}` per event, and calls
/// `prepare(name, config)` once per batch, then [`Prepared::evaluate`] for each event. The kind answers with
/// one of its declared [`Answer`]s:
///
/// - [`Answer::Continue`]: [`Output::continue_with`] (`{"event": {...}}`, the run goes on with this payload) or
///   [`Output::pass`] (`{"pass": true}`, it goes on with the payload unchanged);
/// - [`Answer::Stop`]: [`Output::stop`] (`{"pass": false}`, the branch ends here, outcome `not_matched`);
/// - [`Answer::SkipForward`], [`Answer::Permanent`], [`Answer::Retryable`]: an [`Error`] of that [`Outcome`].
///
/// An answer the declaration does not list fails the step permanently (dead letter).
///
/// ```
/// use flowhost_sdk_guest::{Answer, FieldType, Manifest, NodeKind};
///
/// let manifest = Manifest::new("score", "0.1.0").declare_node_kind(
///     NodeKind::new("score", serde_json::json!({
///         "type": "object",
///         "properties": { "min": { "type": "number" } },
///         "required": ["min"],
///     }))
///     .description("Scores a deposit; drops low scores.")
///     .answers(&[Answer::Continue, Answer::Stop, Answer::Permanent])
///     .adds_field("score", FieldType::Double),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeKind {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    config_schema: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    answers: Option<Vec<Answer>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    adds_fields: BTreeMap<String, FieldType>,
}

impl NodeKind {
    /// A node kind called `name` (what [`Plugin::prepare`] receives as `kind`) whose configuration is described
    /// by the JSON Schema `config_schema` (required: the host validates every node's configuration with it).
    pub fn new(name: impl Into<String>, config_schema: serde_json::Value) -> Self {
        Self { name: name.into(), description: None, config_schema, answers: None, adds_fields: BTreeMap::new() }
    }
    /// A one-line description shown to flow authors.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// The answers the kind may give (replacing any declared before). Without this call, all five.
    pub fn answers(mut self, answers: &[Answer]) -> Self {
        self.answers = Some(answers.to_vec());
        self
    }
    /// Declares a payload field the kind adds when it continues: the nodes after it may use `name` as a field
    /// of type `field_type`. A second call with the same name replaces its type.
    pub fn adds_field(mut self, name: impl Into<String>, field_type: FieldType) -> Self {
        self.adds_fields.insert(name.into(), field_type);
        self
    }
}

/// What a [`NodeKind`] may answer for an event (the contract's `answers`; serialized as `continue`, `stop`,
/// `skip-forward`, `permanent`, `retryable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// Go on: [`Output::continue_with`] (`{"event": {...}}`) or [`Output::pass`] (`{"pass": true}`).
    Continue,
    /// End the branch here (outcome `not_matched`): [`Output::stop`] (`{"pass": false}`).
    Stop,
    /// Fail with [`Outcome::SkipForward`].
    SkipForward,
    /// Fail with [`Outcome::Permanent`].
    Permanent,
    /// Fail with [`Outcome::Retryable`].
    Retryable,
}

/// The type of a payload field a [`NodeKind`] adds (the event-schema field types; serialized as `int`,
/// `double`, `string`, `bool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A 64-bit integer.
    Int,
    /// A 64-bit floating-point number.
    Double,
    /// A string.
    String,
    /// A boolean.
    Bool,
}

/// One entry of a manifest's `node_kinds`: a bare name (a kind the host itself evaluates through the component,
/// not offered to flows) or a declaration flows can place.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum NodeKindEntry {
    Name(String),
    Declared(NodeKind),
}

impl NodeKindEntry {
    fn name(&self) -> &str {
        match self {
            NodeKindEntry::Name(name) => name,
            NodeKindEntry::Declared(kind) => &kind.name,
        }
    }
}

/// What a plugin declares about itself; the host reads it from the component when loading it.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    id: String,
    version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service: Option<String>,
    capabilities: Vec<String>,
    actions: Vec<Action>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    node_kinds: Vec<NodeKindEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    data_sources: Vec<DataSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    supports_nodes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    service_sources: Vec<String>,
    #[serde(skip_serializing_if = "Limits::is_empty")]
    limits: Limits,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    reuse_instances: bool,
}

/// A data source the plugin answers (see [`Plugin::data_source`]).
#[derive(Debug, Clone, Serialize)]
struct DataSource {
    name: String,
    params: Vec<String>,
}

/// Per-invocation limits a plugin asks for; the host applies the lower of these and its own.
#[derive(Debug, Clone, Default, Serialize)]
struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fuel: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_bytes: Option<u64>,
}

impl Limits {
    fn is_empty(&self) -> bool {
        self.timeout_ms.is_none()
            && self.fuel.is_none()
            && self.memory_bytes.is_none()
            && self.max_output_bytes.is_none()
    }
}

impl Manifest {
    /// A manifest for the component `id` at `version` (a `(id, version)` pair is immutable once registered).
    pub fn new(id: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            version: version.into(),
            description: None,
            service: None,
            capabilities: Vec::new(),
            actions: Vec::new(),
            node_kinds: Vec::new(),
            data_sources: Vec::new(),
            supports_nodes: None,
            service_sources: Vec::new(),
            limits: Limits::default(),
            reuse_instances: false,
        }
    }
    /// Declares a node kind a flow may place inside the service's segment (`condition`, `lookup`, `mapping`,
    /// ...: the catalog's `supports_nodes`). Without any, the catalog lists the kinds the plugin implements.
    pub fn supports_node(mut self, kind: impl Into<String>) -> Self {
        self.supports_nodes.get_or_insert_with(Vec::new).push(kind.into());
        self
    }
    /// Declares a transport over which the service also takes work from flows (`nats`, `kafka`, `http`: the
    /// catalog's `service_sources`); the host running the service serves it.
    pub fn service_source(mut self, transport: impl Into<String>) -> Self {
        self.service_sources.push(transport.into());
        self
    }
    /// The service the component belongs to in the component catalog (default: the plugin's id).
    pub fn service(mut self, name: impl Into<String>) -> Self {
        self.service = Some(name.into());
        self
    }
    /// Declares that the plugin implements node kind `kind` (`condition`, `mapping`, ...) through the action of
    /// the same name: a bare name in `node_kinds`, a kind the host itself evaluates through the component, not
    /// offered to flows as a plugin node kind (for that, use [`Manifest::declare_node_kind`]).
    pub fn node_kind(mut self, kind: impl Into<String>) -> Self {
        self.node_kinds.push(NodeKindEntry::Name(kind.into()));
        self
    }
    /// Declares a node kind flows can place (a declaration object in `node_kinds`), implemented by
    /// [`Plugin::prepare`]; see [`NodeKind`] for the answers it gives.
    pub fn declare_node_kind(mut self, kind: NodeKind) -> Self {
        self.node_kinds.push(NodeKindEntry::Declared(kind));
        self
    }
    /// The names `node_kinds` lists, bare or declared.
    fn node_kind_names(&self) -> Vec<&str> {
        self.node_kinds.iter().map(NodeKindEntry::name).collect()
    }
    /// Whether `node_kinds` lists exactly the kinds of `declared` ([`Plugin::NODE_KINDS`]), in any order; else
    /// what differs, in words. A plugin's unit test can call it:
    /// `manifest.check_node_kinds(MyPlugin::NODE_KINDS).unwrap()`.
    pub fn check_node_kinds(&self, declared: &[&str]) -> Result<(), String> {
        let mut listed = self.node_kind_names();
        let mut constant = declared.to_vec();
        listed.sort_unstable();
        constant.sort_unstable();
        if listed == constant {
            return Ok(());
        }
        Err(format!(
            "plugin {:?}: Plugin::NODE_KINDS is {constant:?} but the manifest declares the node kinds {listed:?}; \
             list every node kind of the manifest in NODE_KINDS",
            self.id
        ))
    }
    /// Declares a data source answered by [`Plugin::data_source`]; the host passes on only the listed `params`.
    pub fn data_source(mut self, name: impl Into<String>, params: &[&str]) -> Self {
        self.data_sources
            .push(DataSource { name: name.into(), params: params.iter().map(|p| p.to_string()).collect() });
        self
    }
    /// Asks for a shorter wall-clock limit per call than the host's default (it can only be lowered).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.limits.timeout_ms = Some(ms);
        self
    }
    /// Asks for less fuel per call than the host's default.
    pub fn fuel(mut self, fuel: u64) -> Self {
        self.limits.fuel = Some(fuel);
        self
    }
    /// Asks for a smaller memory cap than the host's default, in bytes.
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.limits.memory_bytes = Some(bytes);
        self
    }
    /// Asks for a smaller output limit than the host's default, in bytes.
    pub fn max_output_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_output_bytes = Some(bytes);
        self
    }
    /// A one-line description of the plugin.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }
    /// Declares an action.
    pub fn action(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }
    /// Lets the host run the plugin's actions in an instance kept from an earlier call of the same tenant
    /// instead of a fresh one each time (`reuse_instances`): a call then skips instantiation, which is most of
    /// a small action's cost. Declare it only when the plugin keeps nothing from one call that the next must
    /// not see: statics and the heap live on between calls (a cache built once is fine). The host still gives
    /// every call its own deadline, fuel and budgets, and drops an instance after a trap.
    pub fn reuse_instances(mut self) -> Self {
        self.reuse_instances = true;
        self
    }
    /// Declares a host capability the plugin uses (`"log"`, `"clock"`, `"documents"`); the host grants only
    /// declared ones.
    pub fn capability(mut self, name: impl Into<String>) -> Self {
        self.capabilities.push(name.into());
        self
    }
    /// The manifest as the JSON document the host reads.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }
}

/// A JSON output of an action, a data source or a node kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output(String);

/// `{"event": ...}`, serialized without copying the payload.
#[derive(Serialize)]
struct Continue<'a, T> {
    event: &'a T,
}

impl Output {
    /// Serializes `value` as the output.
    pub fn json<T: Serialize>(value: &T) -> Result<Self, Error> {
        serde_json::to_string(value)
            .map(Output)
            .map_err(|error| Error::permanent(format!("output is not serializable: {error}")))
    }
    /// A node kind's [`Answer::Continue`] with a new payload: `{"event": payload}` (`payload` a JSON object).
    pub fn continue_with<T: Serialize>(payload: &T) -> Result<Self, Error> {
        Self::json(&Continue { event: payload })
    }
    /// A node kind's [`Answer::Continue`] with the payload unchanged: `{"pass": true}`.
    pub fn pass() -> Self {
        Output(String::from(r#"{"pass":true}"#))
    }
    /// A node kind's [`Answer::Stop`]: `{"pass": false}`, the branch ends here (outcome `not_matched`).
    pub fn stop() -> Self {
        Output(String::from(r#"{"pass":false}"#))
    }
    /// Uses `text` as the output as is. The host rejects text that is not JSON; prefer [`Output::json`].
    pub fn raw(text: impl Into<String>) -> Self {
        Output(text.into())
    }
    /// The output text.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// Who and what an invocation runs for, as the host passes it (WIT `invocation-context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// The tenant the event belongs to.
    pub tenant_id: Option<String>,
    /// The flow the node belongs to.
    pub flow_id: Option<String>,
    /// The flow run this invocation is a step of.
    pub run_id: Option<String>,
    /// The node that invokes the plugin.
    pub node_id: Option<String>,
    /// The same for every attempt of the same step: do side effects once per key.
    pub idempotency_key: String,
    /// 1 for the first attempt, 2 for the first retry, ...
    pub attempt: u32,
    /// When the host stops the invocation, in milliseconds since the Unix epoch.
    pub deadline_ms: u64,
}

impl From<wit::InvocationContext> for Context {
    fn from(context: wit::InvocationContext) -> Self {
        Context {
            tenant_id: context.tenant_id,
            flow_id: context.flow_id,
            run_id: context.run_id,
            node_id: context.node_id,
            idempotency_key: context.idempotency_key,
            attempt: context.attempt,
            deadline_ms: context.deadline_ms,
        }
    }
}

/// One invocation: the action's name, its JSON input and its [`Context`].
#[derive(Debug, Clone)]
pub struct Call {
    action: String,
    input: String,
    context: Context,
}

impl Call {
    /// A call of `action` with the JSON text `input` (the host builds these; tests of a plugin may too).
    pub fn new(action: impl Into<String>, input: impl Into<String>) -> Self {
        Self { action: action.into(), input: input.into(), context: Context::default() }
    }
    /// This call with `context`.
    pub fn with_context(mut self, context: Context) -> Self {
        self.context = context;
        self
    }
    /// Who and what the call runs for.
    pub fn context(&self) -> &Context {
        &self.context
    }
    /// The action's name.
    pub fn action(&self) -> &str {
        &self.action
    }
    /// The input as JSON text.
    pub fn input_json(&self) -> &str {
        &self.input
    }
    /// Decodes the input as `T`; a mismatch is a [`Outcome::Permanent`] error naming the field.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.input)
            .map_err(|error| Error::permanent(format!("invalid input for {}: {error}", self.action)))
    }
    /// Decodes the input as `I`, runs `handler`, and serializes its result as the output.
    pub fn handle<I, O, F>(&self, handler: F) -> Result<Output, Error>
    where
        I: DeserializeOwned,
        O: Serialize,
        F: FnOnce(I) -> Result<O, Error>,
    {
        let output = handler(self.input()?)?;
        Output::json(&output)
    }
    /// The error for an action this plugin does not offer.
    pub fn unknown_action(&self) -> Error {
        Error::permanent(format!("unknown action {:?}", self.action))
    }
}

/// A node's configuration prepared by [`Plugin::prepare`]: evaluates the events of a batch one by one.
pub trait Prepared {
    /// Evaluates one event (its fields as JSON text) for `context`: the node kind's JSON output or a classified
    /// error of this event alone. The outputs a flow understands:
    ///
    /// - `{"event": {...}}` ([`Output::continue_with`]): continue with this payload;
    /// - `{"pass": true}` ([`Output::pass`]): continue with the payload unchanged;
    /// - `{"pass": false}` ([`Output::stop`]): stop, the branch ends here (outcome `not_matched`).
    ///
    /// The bundled kinds answer `condition`: `{"pass": bool}`, `mapping`: `{"event": {...}}`. A declared
    /// [`NodeKind`] must give only the [`Answer`]s it lists (an error's [`Outcome`] is an answer too).
    fn evaluate(&self, context: &Context, event: &str) -> Result<Output, Error>;
}

/// A plugin: its manifest, its actions, data sources and node kinds. Export it with [`export_plugin!`]. Every
/// method but [`Plugin::manifest`] has a default that answers "not offered".
pub trait Plugin {
    /// The node kinds the manifest declares ([`Manifest::node_kind`], [`Manifest::declare_node_kind`]), by
    /// name: what an action call by one of these names is routed to ([`Plugin::prepare`]). The SDK checks it
    /// against the manifest when the host reads the manifest, and refuses to load a component where they
    /// differ; actions never build the manifest.
    const NODE_KINDS: &'static [&'static str] = &[];
    /// The manifest the host reads when loading the component.
    fn manifest() -> Manifest;
    /// Runs one action. By default a plugin has none (a node-kind plugin needs only [`Plugin::prepare`]).
    fn invoke(call: Call) -> Result<Output, Error> {
        Err(call.unknown_action())
    }
    /// Prepares node kind `kind` (declared with [`Manifest::declare_node_kind`] or [`Manifest::node_kind`]) with
    /// its JSON `config`, once per batch of events; an error fails every event of the batch. By default a plugin
    /// implements no node kind.
    ///
    /// A node kind is also callable as an action named after it, with the input `{"config": ..., "event": ...}`
    /// (the SDK prepares and evaluates it), so operators can try one with the invoke route.
    fn prepare(kind: &str, config: &str) -> Result<Box<dyn Prepared>, Error> {
        let _ = config;
        Err(Error::permanent(format!("this plugin implements no node kind {kind:?}")))
    }
    /// Answers the data source `name` (declared with [`Manifest::data_source`]) for the query `params`.
    /// By default a plugin has none.
    fn data_source(name: &str, params: &[(String, String)]) -> Result<Output, Error> {
        let _ = params;
        Err(Error::permanent(format!("unknown data source {name:?}")))
    }
}

/// Host capability `log`: writes into the host's log, tagged with the plugin. Declare `"log"` in the manifest.
pub mod log {
    use crate::bindings::flowhost::plugin::log as wit;

    /// Log levels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Level {
        /// Very detailed tracing.
        Trace,
        /// Debugging detail.
        Debug,
        /// Normal operation.
        Info,
        /// Something unexpected that the plugin handled.
        Warn,
        /// A failure.
        Error,
    }

    /// Writes `message` at `level`.
    pub fn log(level: Level, message: &str) {
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    /// Writes `message` at debug level.
    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }
    /// Writes `message` at info level.
    pub fn info(message: &str) {
        log(Level::Info, message)
    }
    /// Writes `message` at warn level.
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
    /// Writes `message` at error level.
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// Host capability `clock`: the host's clock. Declare `"clock"` in the manifest.
pub mod clock {
    /// Milliseconds since the Unix epoch, as the host sees them.
    pub fn now_ms() -> u64 {
        crate::bindings::flowhost::plugin::clock::now_ms()
    }
}

/// Host capability `notifications` (`flowhost:notify/sender@0.2.0`): web-push and in-app delivery done by the
/// host, which keeps the VAPID keys and the interaction-token secret. Declare `"notifications"` in the manifest.
/// The host reports facts (each subscription's delivery outcome, whether an in-app message reached an open
/// socket); the plugin classifies them into outcomes. `player_id` must be positive (0 only in an editor's
/// smoke send), and `WebPushRequest::data`, the payload's passthrough fields, a JSON object of at most
/// [`MAX_PASSTHROUGH_DATA_BYTES`](notify::MAX_PASSTHROUGH_DATA_BYTES).
pub mod notify {
    use crate::notify_bindings::flowhost::notify::sender as wit;
    pub use wit::{
        Channel, Delivery, DeliveryOutcome, InAppOutcome, InAppReport, InAppRequest, SendFailure, WebPushReport,
        WebPushRequest,
    };

    /// The most bytes of `WebPushRequest::data` (JSON text) the host passes through into the payload.
    pub const MAX_PASSTHROUGH_DATA_BYTES: usize = 1024;

    /// Renders the web-push template and delivers it to every active subscription of the recipient.
    pub fn send_webpush(request: &WebPushRequest) -> Result<WebPushReport, SendFailure> {
        wit::send_webpush(request)
    }
    /// Records the plugin's classification of a notification (`status`, `delivered`).
    pub fn complete(notification_id: &str, status: &str, delivered: bool) -> Result<(), SendFailure> {
        wit::complete(notification_id, status, delivered)
    }
    /// Renders the in-app template, stores it in the player's inbox and hands it to the player's open sockets
    /// (`delivered` when one took it, `stored` when none is open).
    pub fn send_inapp(request: &InAppRequest) -> Result<InAppReport, SendFailure> {
        wit::send_inapp(request)
    }
    /// The templates of `channel` (of one tenant, or every tenant), as JSON.
    pub fn templates(channel: Channel, tenant_id: Option<&str>) -> Result<String, SendFailure> {
        wit::templates(channel, tenant_id)
    }
    /// The fields a template takes, as JSON.
    pub fn template_fields(channel: Channel, template_id: i64) -> Result<String, SendFailure> {
        wit::template_fields(channel, template_id)
    }
    /// The known tenants, as JSON.
    pub fn tenants() -> Result<String, SendFailure> {
        wit::tenants()
    }
}

/// Host capability `documents`: JSON documents scoped to the plugin's id (shared by its versions, invisible to
/// other plugins). Declare `"documents"` in the manifest. Keys are 1 to 256 bytes, documents at most 256 KiB;
/// a host-side failure (storage unavailable) is a [`Outcome::Retryable`] error.
pub mod documents {
    use crate::bindings::flowhost::plugin::documents as wit;
    use crate::Error;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    /// The document under `key`, decoded as `T`; `None` when there is none.
    pub fn get<T: DeserializeOwned>(key: &str) -> Result<Option<T>, Error> {
        match wit::get(key).map_err(Error::retryable)? {
            None => Ok(None),
            Some(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|error| Error::permanent(format!("document {key:?} does not decode: {error}"))),
        }
    }

    /// Stores `value` under `key`, replacing what was there.
    pub fn put<T: Serialize>(key: &str, value: &T) -> Result<(), Error> {
        let text = serde_json::to_string(value)
            .map_err(|error| Error::permanent(format!("document {key:?} is not serializable: {error}")))?;
        wit::put(key, &text).map_err(Error::retryable)
    }

    /// Removes the document under `key`; `true` when there was one.
    pub fn delete(key: &str) -> Result<bool, Error> {
        wit::delete(key).map_err(Error::retryable)
    }
}

/// Glue used by [`export_plugin!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use super::*;
    use crate::bindings::exports::flowhost::plugin::node_kinds as wit_nodes;

    /// The manifest as JSON, once [`Plugin::NODE_KINDS`] is checked against it: a mismatch panics, which the
    /// host reports as a failed load with this message in the plugin's log.
    /// The component's version marker, the custom section [`SDK_MARKER_SECTION`] written by
    /// [`export_plugin!`](crate::export_plugin): which SDK built it, against which WIT package. The host reads
    /// it before compiling and refuses, with a clear error, a component whose package it does not serve.
    pub const SDK_MARKER: &str =
        concat!("{\"sdk\":\"", env!("CARGO_PKG_VERSION"), "\",\"wit\":\"flowhost:plugin@0.2.0\"}");
    /// The name of the marker's custom section.
    pub const SDK_MARKER_SECTION: &str = "flowhost:sdk";

    /// [`SDK_MARKER`] as the array the marker's static holds (`N` is its length).
    pub const fn sdk_marker<const N: usize>() -> [u8; N] {
        let bytes = SDK_MARKER.as_bytes();
        let mut marker = [0u8; N];
        let mut at = 0;
        while at < N {
            marker[at] = bytes[at];
            at += 1;
        }
        marker
    }

    pub fn manifest<P: Plugin>() -> String {
        let manifest = P::manifest();
        if let Err(mismatch) = manifest.check_node_kinds(P::NODE_KINDS) {
            panic!("{mismatch}");
        }
        manifest.to_json()
    }

    pub fn invoke<P: Plugin>(
        context: wit::InvocationContext,
        action: String,
        input: String,
    ) -> Result<String, wit::PluginError> {
        let context = Context::from(context);
        if P::NODE_KINDS.contains(&action.as_str()) {
            return invoke_node_kind::<P>(&context, &action, &input).map(Output::into_string).map_err(to_wit);
        }
        P::invoke(Call { action, input, context }).map(Output::into_string).map_err(to_wit)
    }

    /// A node kind called as an action: `{"config": ..., "event": ...}`, prepared and evaluated once.
    fn invoke_node_kind<P: Plugin>(context: &Context, kind: &str, input: &str) -> Result<Output, Error> {
        #[derive(serde::Deserialize)]
        struct NodeInput {
            config: Box<serde_json::value::RawValue>,
            event: Box<serde_json::value::RawValue>,
        }
        let input: NodeInput = serde_json::from_str(input)
            .map_err(|error| Error::permanent(format!("invalid input for {kind}: {error}")))?;
        P::prepare(kind, input.config.get())?.evaluate(context, input.event.get())
    }

    pub fn data_source<P: Plugin>(name: String, params: Vec<(String, String)>) -> Result<String, wit::PluginError> {
        P::data_source(&name, &params).map(Output::into_string).map_err(to_wit)
    }

    /// The resource behind WIT `prepared-node`.
    pub struct PreparedNode(Box<dyn Prepared>);

    pub fn prepare<P: Plugin>(kind: String, config: String) -> Result<wit_nodes::PreparedNode, wit::PluginError> {
        P::prepare(&kind, &config).map(|prepared| wit_nodes::PreparedNode::new(PreparedNode(prepared))).map_err(to_wit)
    }

    impl wit_nodes::GuestPreparedNode for PreparedNode {
        fn evaluate(
            &self,
            batch: wit_nodes::BatchContext,
            events: Vec<wit_nodes::NodeEvent>,
        ) -> Vec<Result<String, wit::PluginError>> {
            // One context for the batch; each event moves its own fields in (nothing of the batch is copied).
            let mut context = Context {
                flow_id: batch.flow_id,
                node_id: batch.node_id,
                deadline_ms: batch.deadline_ms,
                ..Context::default()
            };
            events
                .into_iter()
                .map(|node_event| {
                    context.tenant_id = node_event.tenant_id;
                    context.run_id = node_event.run_id;
                    context.idempotency_key = node_event.idempotency_key;
                    context.attempt = node_event.attempt;
                    self.0.evaluate(&context, &node_event.event).map(Output::into_string).map_err(to_wit)
                })
                .collect()
        }
    }

    fn to_wit(error: Error) -> wit::PluginError {
        wit::PluginError {
            outcome: match error.outcome {
                Outcome::SkipForward => wit::Outcome::SkipForward,
                Outcome::Permanent => wit::Outcome::Permanent,
                Outcome::Retryable => wit::Outcome::Retryable,
            },
            message: error.message,
        }
    }
}

/// Exports a type implementing [`Plugin`] as the component's `manifest`, `invoke` and `data-sources`.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        pub struct __FlowhostPluginExport;

        // The version marker (`__private::SDK_MARKER`), a custom section the host checks at load.
        #[used]
        #[unsafe(link_section = "flowhost:sdk")]
        static __FLOWHOST_SDK_MARKER: [u8; $crate::__private::SDK_MARKER.len()] = $crate::__private::sdk_marker();

        impl $crate::bindings::Guest for __FlowhostPluginExport {
            fn manifest() -> ::std::string::String {
                $crate::__private::manifest::<$plugin>()
            }
            fn invoke(
                context: $crate::bindings::flowhost::plugin::types::InvocationContext,
                action: ::std::string::String,
                input: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::string::String,
                $crate::bindings::flowhost::plugin::types::PluginError,
            > {
                $crate::__private::invoke::<$plugin>(context, action, input)
            }
        }

        impl $crate::bindings::exports::flowhost::plugin::data_sources::Guest for __FlowhostPluginExport {
            fn query(
                name: ::std::string::String,
                params: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<
                ::std::string::String,
                $crate::bindings::flowhost::plugin::types::PluginError,
            > {
                $crate::__private::data_source::<$plugin>(name, params)
            }
        }

        impl $crate::bindings::exports::flowhost::plugin::node_kinds::Guest for __FlowhostPluginExport {
            type PreparedNode = $crate::__private::PreparedNode;

            fn prepare(
                kind: ::std::string::String,
                config: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::exports::flowhost::plugin::node_kinds::PreparedNode,
                $crate::bindings::flowhost::plugin::types::PluginError,
            > {
                $crate::__private::prepare::<$plugin>(kind, config)
            }
        }

        $crate::bindings::__export_plugin!(__FlowhostPluginExport with_types_in $crate::bindings);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Greet {
        name: String,
    }

    #[test]
    fn manifest_serializes_to_the_documented_json() {
        let manifest = Manifest::new("greeter", "0.1.0").capability("log").action(
            Action::new("greet").description("Says hello.").config_schema(serde_json::json!({"type": "object"})),
        );
        let json: serde_json::Value = serde_json::from_str(&manifest.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "greeter", "version": "0.1.0", "capabilities": ["log"],
                "actions": [{ "name": "greet", "description": "Says hello.", "config_schema": {"type": "object"} }]
            })
        );
    }

    #[test]
    fn service_fields_node_kinds_data_sources_and_limits_serialize() {
        let manifest = Manifest::new("greeter", "0.2.0")
            .service("greetings")
            .node_kind("condition")
            .data_source("greetings", &["lang"])
            .timeout_ms(200)
            .memory_bytes(8 << 20);
        let json: serde_json::Value = serde_json::from_str(&manifest.to_json()).unwrap();
        assert_eq!(json["service"], "greetings");
        assert_eq!(json["node_kinds"], serde_json::json!(["condition"]));
        assert_eq!(json["data_sources"], serde_json::json!([{ "name": "greetings", "params": ["lang"] }]));
        assert_eq!(json["limits"], serde_json::json!({ "timeout_ms": 200, "memory_bytes": 8388608 }));
        let plain: serde_json::Value = serde_json::from_str(&Manifest::new("x", "1").to_json()).unwrap();
        assert!(plain.get("limits").is_none() && plain.get("node_kinds").is_none(), "{plain}");
    }

    #[test]
    fn declared_node_kinds_serialize_beside_bare_names() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "min": { "type": "number" }, "field": { "type": "string" } },
            "required": ["min"],
            "additionalProperties": false
        });
        let manifest = Manifest::new("score", "0.1.0")
            .node_kind("condition")
            .declare_node_kind(
                NodeKind::new("score", schema.clone())
                    .description("Scores a deposit; drops low scores")
                    .answers(&[Answer::Continue, Answer::Stop])
                    .adds_field("score", FieldType::Double),
            )
            .declare_node_kind(NodeKind::new("bare", serde_json::json!({"type": "object"})));
        let json: serde_json::Value = serde_json::from_str(&manifest.to_json()).unwrap();
        assert_eq!(
            json["node_kinds"],
            serde_json::json!([
                "condition",
                {
                    "name": "score",
                    "description": "Scores a deposit; drops low scores",
                    "config_schema": schema,
                    "answers": ["continue", "stop"],
                    "adds_fields": { "score": "double" }
                },
                // Optional fields are left out: the host's defaults (all five answers, no added field) apply.
                { "name": "bare", "config_schema": { "type": "object" } }
            ])
        );
        assert_eq!(manifest.node_kind_names(), ["condition", "score", "bare"]);
    }

    #[test]
    fn answers_and_field_types_serialize_to_the_contract_strings() {
        let kind = NodeKind::new("k", serde_json::json!({}))
            .answers(&[Answer::Continue, Answer::Stop, Answer::SkipForward, Answer::Permanent, Answer::Retryable])
            .adds_field("i", FieldType::Int)
            .adds_field("d", FieldType::Double)
            .adds_field("s", FieldType::String)
            .adds_field("b", FieldType::Bool)
            .adds_field("d", FieldType::Int);
        let json = serde_json::to_value(&kind).unwrap();
        assert_eq!(json["answers"], serde_json::json!(["continue", "stop", "skip-forward", "permanent", "retryable"]));
        assert_eq!(json["adds_fields"], serde_json::json!({ "i": "int", "d": "int", "s": "string", "b": "bool" }));
    }

    #[test]
    fn node_kind_answers_as_outputs() {
        assert_eq!(Output::pass().into_string(), r#"{"pass":true}"#);
        assert_eq!(Output::stop().into_string(), r#"{"pass":false}"#);
        let payload = serde_json::json!({ "amount": 50, "score": 5.0 });
        assert_eq!(Output::continue_with(&payload).unwrap().into_string(), r#"{"event":{"amount":50,"score":5.0}}"#);
    }

    #[test]
    fn a_declared_node_kind_is_callable_as_an_action() {
        struct Doubler;
        struct Double;
        impl Prepared for Double {
            fn evaluate(&self, _context: &Context, event: &str) -> Result<Output, Error> {
                let event: serde_json::Value = serde_json::from_str(event).unwrap();
                Output::continue_with(&serde_json::json!({ "n": event["n"].as_i64().unwrap() * 2 }))
            }
        }
        impl Plugin for Doubler {
            const NODE_KINDS: &'static [&'static str] = &["double"];

            fn manifest() -> Manifest {
                Manifest::new("doubler", "1").declare_node_kind(NodeKind::new("double", serde_json::json!({})))
            }
            fn prepare(kind: &str, _config: &str) -> Result<Box<dyn Prepared>, Error> {
                match kind {
                    "double" => Ok(Box::new(Double)),
                    _ => Err(Error::permanent("no such kind")),
                }
            }
        }
        let context = || wit::InvocationContext {
            tenant_id: None,
            flow_id: None,
            run_id: None,
            node_id: None,
            idempotency_key: "k".into(),
            attempt: 1,
            deadline_ms: 0,
        };
        let output =
            __private::invoke::<Doubler>(context(), "double".into(), r#"{"config":{},"event":{"n":21}}"#.into());
        assert_eq!(output.unwrap(), r#"{"event":{"n":42}}"#);
        let refused = __private::invoke::<Doubler>(context(), "triple".into(), "{}".into()).unwrap_err();
        assert_eq!(refused.message, "unknown action \"triple\"");
    }

    #[test]
    fn handle_decodes_input_and_encodes_output() {
        let call = Call::new("greet", r#"{"name":"ada"}"#);
        let output = call.handle(|input: Greet| Ok(serde_json::json!({ "hello": input.name }))).unwrap();
        assert_eq!(output.into_string(), r#"{"hello":"ada"}"#);
    }

    #[test]
    fn a_call_carries_its_context_and_a_plugin_offers_nothing_by_default() {
        struct Bare;
        impl Plugin for Bare {
            fn manifest() -> Manifest {
                Manifest::new("bare", "1")
            }
        }
        let context =
            Context { tenant_id: Some("12".into()), idempotency_key: "k".into(), attempt: 2, ..Context::default() };
        let call = Call::new("greet", "{}").with_context(context.clone());
        assert_eq!(call.context(), &context);
        assert_eq!(Bare::invoke(call).unwrap_err(), Error::permanent("unknown action \"greet\""));
        let refused = Bare::prepare("condition", "{}").err().expect("no node kind");
        assert_eq!(refused.outcome, Outcome::Permanent);
        assert!(Bare::data_source("x", &[]).is_err());
    }

    #[test]
    fn undecodable_input_is_a_permanent_error_naming_the_action() {
        let call = Call::new("greet", r#"{"nom":"ada"}"#);
        let error = call.handle(|input: Greet| Ok(input.name)).unwrap_err();
        assert_eq!(error.outcome, Outcome::Permanent);
        assert!(error.message.starts_with("invalid input for greet: missing field `name`"), "{}", error.message);
        assert_eq!(call.unknown_action(), Error::permanent("unknown action \"greet\""));
    }
}
