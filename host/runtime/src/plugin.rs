//! Loaded [`Plugin`]s of either package version, and what they can be asked: an action ([`Plugin::invoke_in`],
//! with an [`InvocationContext`]), a data source ([`Plugin::data_source`]) or a batch of node-kind evaluations
//! ([`Plugin::evaluate`]).
//!
//! Which of those a component answers follows from its exports ([`Exports`]): a `flowhost:plugin@0.1.0`
//! component exports `invoke(action, input)` (and maybe `data-sources`); a `0.2.0` component exports
//! `invoke(context, action, input)`, `data-sources`, `node-kinds`, or any of them; a projector of either version
//! exports `project` ([`Plugin::project`]). Every call runs in a fresh
//! instance, except a 0.2.0 action or a projection of a plugin that declares `reuse_instances`
//! ([`crate::reuse`]); a node-kind batch runs in one instance for the whole batch, which is the point of the
//! contract.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::component::{types::ComponentItem, Component, InstancePre};
use wasmtime::Store;

use crate::bindings::{v1, v2};
use crate::host::{HostState, TenantScope};
use crate::invoke::{arm, check_output, classify, finish, new_store, store_memory_bytes, GuestError, Identity, Inner};
use crate::reuse::{Idle, IdleInstances};
use crate::{Capability, InvokeError, Limits, LoadError, Manifest, PackageVersion, Runtime};

use v2::action::flowhost::plugin::types::InvocationContext as WitContext;
use v2::node_kind::exports::flowhost::plugin::node_kinds::{
    BatchContext as WitBatchContext, NodeEvent as WitNodeEvent,
};

/// Who and what one invocation runs for (WIT `invocation-context` of `flowhost:plugin@0.2.0`; a 0.1.0
/// component never sees it). The deadline is the host's: the invocation's start plus its timeout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvocationContext {
    pub tenant_id: Option<String>,
    pub flow_id: Option<String>,
    pub run_id: Option<String>,
    pub node_id: Option<String>,
    /// The same for every attempt of the same step. An empty key is replaced by a fresh unique one (a one-off
    /// invocation, e.g. an operator's test call).
    pub idempotency_key: String,
    /// 1 for the first attempt (0 is read as 1).
    pub attempt: u32,
    /// An editor's send from the dashboard (spec 000: `player_id` 0 is reserved for its smoke tests): the
    /// `notifications` capability accepts player 0 only then. Never lowered to the guest.
    pub smoke_test: bool,
}

impl InvocationContext {
    fn to_wit(&self, deadline_ms: u64) -> WitContext {
        self.clone().into_wit(deadline_ms)
    }

    /// The WIT record, moving the strings (a batch lowers thousands of them).
    fn into_wit(self, deadline_ms: u64) -> WitContext {
        WitContext {
            tenant_id: self.tenant_id,
            flow_id: self.flow_id,
            run_id: self.run_id,
            node_id: self.node_id,
            idempotency_key: if self.idempotency_key.is_empty() { one_off_key() } else { self.idempotency_key },
            attempt: self.attempt.max(1),
            deadline_ms,
        }
    }
}

/// A unique key for an invocation that has none: process start time and a counter.
fn one_off_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static EPOCH: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let epoch = EPOCH.get_or_init(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos())
    });
    format!("one-off-{epoch:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What the events of a node-kind batch share: the flow and the node (their invocation contexts' other fields
/// are per event, in [`NodeEvent`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchContext {
    pub flow_id: Option<String>,
    pub node_id: Option<String>,
}

/// One event of a node-kind batch: its fields (a JSON object) and its own part of the invocation context.
#[derive(Debug, Clone, Default)]
pub struct NodeEvent {
    pub tenant_id: Option<String>,
    pub run_id: Option<String>,
    /// The same for every attempt of this event at this node (an empty key is replaced by a unique one).
    pub idempotency_key: String,
    /// 1 for the first attempt (0 is read as 1).
    pub attempt: u32,
    pub event: String,
}

impl NodeEvent {
    fn into_wit(self) -> WitNodeEvent {
        WitNodeEvent {
            tenant_id: self.tenant_id,
            run_id: self.run_id,
            idempotency_key: if self.idempotency_key.is_empty() { one_off_key() } else { self.idempotency_key },
            attempt: self.attempt.max(1),
            event: self.event,
        }
    }

    /// The full invocation context of this event in `batch`.
    fn context(&self, batch: &BatchContext) -> InvocationContext {
        InvocationContext {
            tenant_id: self.tenant_id.clone(),
            flow_id: batch.flow_id.clone(),
            run_id: self.run_id.clone(),
            node_id: batch.node_id.clone(),
            idempotency_key: self.idempotency_key.clone(),
            attempt: self.attempt,
            smoke_test: false,
        }
    }
}

/// The per-event results of a batch, in the order of its events.
pub type BatchResults = Vec<Result<String, InvokeError>>;

/// What a component exports, by package version.
enum Exports {
    V1 {
        action: v1::action::ActionPluginPre<HostState>,
        service: Option<v1::service::ServicePluginPre<HostState>>,
    },
    V2 {
        action: Option<v2::action::ActionPluginPre<HostState>>,
        service: Option<v2::service::ServicePluginPre<HostState>>,
        node_kind: Option<v2::node_kind::NodeKindPre<HostState>>,
    },
    /// The `projector` world (either version).
    Projector(ProjectorPre),
}

impl Exports {
    /// The exports of `component` (linked as `pre`): the package version is read off the exported `invoke`
    /// (three parameters in 0.2.0, two in 0.1.0) or the `node-kinds` interface (0.2.0 only).
    fn of(component: &Component, pre: InstancePre<HostState>) -> Result<Exports, LoadError> {
        let engine = pre.component().engine().clone();
        let link = |error: wasmtime::Error| LoadError::Link(format!("{error:#}"));
        let mut version = None;
        for (name, item) in component.component_type().exports(&engine) {
            match (name, item.ty) {
                ("invoke", ComponentItem::ComponentFunc(func)) => {
                    version =
                        Some(if func.params().count() == 3 { PackageVersion::V0_2 } else { PackageVersion::V0_1 });
                }
                (name, _) if name.starts_with("flowhost:plugin/node-kinds@0.2.") => {
                    version.get_or_insert(PackageVersion::V0_2);
                }
                _ => {}
            }
        }
        match version {
            Some(PackageVersion::V0_1) => Ok(Exports::V1 {
                service: v1::service::ServicePluginPre::new(pre.clone()).ok(),
                action: v1::action::ActionPluginPre::new(pre).map_err(link)?,
            }),
            Some(PackageVersion::V0_2) => {
                let exports = Exports::V2 {
                    action: v2::action::ActionPluginPre::new(pre.clone()).ok(),
                    service: v2::service::ServicePluginPre::new(pre.clone()).ok(),
                    node_kind: v2::node_kind::NodeKindPre::new(pre).ok(),
                };
                match &exports {
                    Exports::V2 { action: None, node_kind: None, .. } => Err(LoadError::Link(
                        "the component exports neither a usable `invoke` nor `node-kinds` of flowhost:plugin@0.2.0"
                            .into(),
                    )),
                    _ => Ok(exports),
                }
            }
            None => ProjectorPre::of(pre).map(Exports::Projector).map_err(|_| {
                LoadError::Link(
                    "the component exports none of `invoke`, `node-kinds` and `project`: not a plugin of any world"
                        .into(),
                )
            }),
        }
    }

    fn version(&self) -> PackageVersion {
        match self {
            Exports::V1 { .. } => PackageVersion::V0_1,
            Exports::V2 { .. } => PackageVersion::V0_2,
            Exports::Projector(pre) => pre.version(),
        }
    }

    fn has_data_sources(&self) -> bool {
        matches!(self, Exports::V1 { service: Some(_), .. } | Exports::V2 { service: Some(_), .. })
    }

    /// Instantiates the component and calls its `manifest` export.
    async fn manifest(&self, store: &mut Store<HostState>) -> wasmtime::Result<String> {
        match self {
            Exports::V1 { action, .. } => action.instantiate_async(&mut *store).await?.call_manifest(store).await,
            Exports::V2 { action: Some(action), .. } => {
                action.instantiate_async(&mut *store).await?.call_manifest(store).await
            }
            Exports::V2 { node_kind: Some(node_kind), .. } => {
                node_kind.instantiate_async(&mut *store).await?.call_manifest(store).await
            }
            Exports::Projector(pre) => pre.manifest(store).await,
            Exports::V2 { .. } => unreachable!("Exports::of refuses a 0.2.0 component without invoke or node-kinds"),
        }
    }
}

impl Runtime {
    /// Checks and links the component's imports, finds out what it exports, and reads its manifest.
    pub(crate) async fn prepare(&self, component: Component, grants: &[Capability]) -> Result<Plugin, LoadError> {
        let (pre, imported) = self.link(&component, grants)?;
        let exports = Exports::of(&component, pre)?;
        let mut store = self.loading_store()?;
        let limits = &self.inner().config.limits;
        let reading = tokio::time::timeout(limits.timeout.saturating_add(self.inner().config.epoch_tick), async {
            exports.manifest(&mut store).await
        });
        let text = match reading.await {
            Ok(text) => text,
            Err(_elapsed) => {
                let ms = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
                return Err(LoadError::Manifest(InvokeError::Timeout(ms)));
            }
        };
        let (manifest, identity, limits) = self.read_manifest(text, store, &imported)?;
        let projector = matches!(exports, Exports::Projector(_));
        if manifest.actions.is_empty() && manifest.node_kinds.is_empty() && !projector {
            return Err(LoadError::InvalidManifest("the manifest declares no action and no node kind".into()));
        }
        if let Some(source) = manifest.data_sources.first() {
            if !exports.has_data_sources() {
                return Err(LoadError::InvalidManifest(format!(
                    "data source {:?} is declared but the component does not export `data-sources`",
                    source.name
                )));
            }
        }
        let runtime = self.inner().clone();
        let idle = match &exports {
            _ if !manifest.reuse_instances => None,
            Exports::V2 { action: Some(_), .. } => Some(Kept::Actions(IdleInstances::new(runtime.idle_budget.clone()))),
            Exports::Projector(_) => Some(Kept::Projections(IdleInstances::new(runtime.idle_budget.clone()))),
            _ => None,
        };
        Ok(Plugin { inner: Arc::new(PluginInner { runtime, exports, manifest, identity, imported, limits, idle }) })
    }
}

/// A loaded component, ready to invoke. Cheap to clone; an invocation in flight keeps the version it started
/// with alive.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

struct PluginInner {
    runtime: Arc<Inner>,
    exports: Exports,
    manifest: Manifest,
    identity: Identity,
    imported: Vec<Capability>,
    /// The runtime's default limits, tightened by the manifest's `limits`.
    limits: Limits,
    /// Instances kept between calls, when the manifest declares `reuse_instances` (0.2.0 actions and
    /// projectors).
    idle: Option<Kept>,
}

/// The instances a plugin keeps between calls ([`crate::reuse`]), by the world they were instantiated as.
enum Kept {
    Actions(IdleInstances<v2::action::ActionPlugin>),
    Projections(IdleInstances<ProjectorInstance>),
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("id", &self.inner.identity.plugin)
            .field("package", &self.inner.exports.version())
            .field("capabilities", &self.inner.imported)
            .finish()
    }
}

impl Plugin {
    /// The manifest read from the component.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// The capabilities the component imports (all granted and declared).
    pub fn capabilities(&self) -> &[Capability] {
        &self.inner.imported
    }

    /// The version of `flowhost:plugin` the component was built against.
    pub fn package_version(&self) -> PackageVersion {
        self.inner.exports.version()
    }

    /// Whether the component evaluates its node kinds in batches (it lists `node_kinds` and exports `node-kinds`
    /// of 0.2.0; an SDK plugin exports it always, answering "no such kind" when it has none). Node kinds of other
    /// components are evaluated one event per instance by [`Plugin::evaluate`].
    pub fn evaluates_batches(&self) -> bool {
        !self.inner.manifest.node_kinds.is_empty()
            && matches!(self.inner.exports, Exports::V2 { node_kind: Some(_), .. })
    }

    /// The limits [`Plugin::invoke`] applies: the runtime's defaults, tightened by the manifest's `limits`.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Runs `action` on the JSON `input` with [`Plugin::limits`], in a fresh instance, as a one-off invocation
    /// (an empty [`InvocationContext`]).
    ///
    /// The guest runs on the awaiting task and yields to the executor at every epoch tick, so a busy guest
    /// holds a worker thread for at most one tick at a time.
    pub async fn invoke(&self, action: &str, input: &str) -> Result<String, InvokeError> {
        self.invoke_with_limits(action, input, &self.inner.limits).await
    }

    /// [`Plugin::invoke`] with `limits` (e.g. tightened by the flow). `limits.memory_bytes` above the pool's
    /// ceiling is clamped to it.
    pub async fn invoke_with_limits(&self, action: &str, input: &str, limits: &Limits) -> Result<String, InvokeError> {
        self.invoke_in(&InvocationContext::default(), action, input, limits).await
    }

    /// Runs `action` on the JSON `input` for `context` with `limits`, in a fresh instance. A node kind of a
    /// batch-evaluating component is invoked with `{"config": ..., "event": ...}` as a batch of one.
    pub async fn invoke_in(
        &self,
        context: &InvocationContext,
        action: &str,
        input: &str,
        limits: &Limits,
    ) -> Result<String, InvokeError> {
        let started = Instant::now();
        let result = self.run_invoke(context, action, input, limits).await;
        self.observe(&result, started);
        result
    }

    async fn run_invoke(
        &self,
        context: &InvocationContext,
        action: &str,
        input: &str,
        limits: &Limits,
    ) -> Result<String, InvokeError> {
        self.within_deadline(limits, self.run_invoke_unbounded(context, action, input, limits)).await
    }

    async fn run_invoke_unbounded(
        &self,
        context: &InvocationContext,
        action: &str,
        input: &str,
        limits: &Limits,
    ) -> Result<String, InvokeError> {
        let manifest = &self.inner.manifest;
        let is_node_kind = manifest.has_node_kind(action);
        if !manifest.has_action(action) && !is_node_kind {
            return Err(InvokeError::UnknownAction(action.to_string()));
        }
        let tenant = TenantScope::of(std::iter::once(context.tenant_id.as_deref()));
        if let (Exports::V2 { action: Some(pre), .. }, Some(Kept::Actions(idle))) =
            (&self.inner.exports, &self.inner.idle)
        {
            return self.invoke_reusing(pre, idle, tenant, context, action, input, limits).await;
        }
        let mut store = self.store(limits, tenant)?;
        store.data_mut().smoke_test = context.smoke_test;
        match &self.inner.exports {
            Exports::V1 { action: pre, .. } => {
                let instance =
                    pre.instantiate_async(&mut store).await.map_err(|error| classify(error, &store, limits))?;
                let result = instance.call_invoke(&mut store, action, input).await;
                finish(result, &store, limits)
            }
            Exports::V2 { action: Some(pre), .. } => {
                let instance =
                    pre.instantiate_async(&mut store).await.map_err(|error| classify(error, &store, limits))?;
                let context = context.to_wit(self.deadline_ms(limits));
                let result = instance.call_invoke(&mut store, &context, action, input).await;
                finish(result, &store, limits)
            }
            Exports::Projector(_) => Err(InvokeError::UnknownAction(action.to_string())),
            Exports::V2 { node_kind: Some(_), .. } => {
                drop(store);
                let (config, event) = node_input(input)?;
                let batch = BatchContext { flow_id: context.flow_id.clone(), node_id: context.node_id.clone() };
                let event = NodeEvent {
                    tenant_id: context.tenant_id.clone(),
                    run_id: context.run_id.clone(),
                    idempotency_key: context.idempotency_key.clone(),
                    attempt: context.attempt,
                    event,
                };
                let events = [event.into_wit()];
                let mut results = self.run_batch(action, &config, &batch, &events, limits).await?;
                results.pop().unwrap_or_else(|| Err(missing_result()))
            }
            Exports::V2 { .. } => unreachable!("Exports::of refuses a 0.2.0 component without invoke or node-kinds"),
        }
    }

    /// Runs `action` in an idle instance of `tenant` when one is kept, else in a fresh one, and keeps the instance
    /// for the next call when the guest returned (an answer or its own classified error); see [`crate::reuse`].
    #[allow(clippy::too_many_arguments)]
    async fn invoke_reusing(
        &self,
        pre: &v2::action::ActionPluginPre<HostState>,
        idle: &IdleInstances<v2::action::ActionPlugin>,
        tenant: TenantScope,
        context: &InvocationContext,
        action: &str,
        input: &str,
        limits: &Limits,
    ) -> Result<String, InvokeError> {
        let mut kept = self
            .take_idle(idle, tenant, limits, async |store: &mut Store<HostState>| {
                pre.instantiate_async(&mut *store).await.map_err(|error| classify(error, store, limits))
            })
            .await?;
        kept.store.data_mut().smoke_test = context.smoke_test;
        let context = context.to_wit(self.deadline_ms(limits));
        let result = kept.instance.call_invoke(&mut kept.store, &context, action, input).await;
        let sound = result.is_ok();
        let output = finish(result, &kept.store, limits);
        give_back_if_sound(idle, kept, sound);
        output
    }

    /// An idle instance of `tenant`, re-armed with `limits`, or else a fresh one made by `instantiate` in a new
    /// store.
    async fn take_idle<I>(
        &self,
        idle: &IdleInstances<I>,
        tenant: TenantScope,
        limits: &Limits,
        instantiate: impl AsyncFnOnce(&mut Store<HostState>) -> Result<I, InvokeError>,
    ) -> Result<Idle<I>, InvokeError> {
        match idle.take(&tenant, store_memory_bytes(&self.inner.runtime, limits)) {
            Some(mut kept) => {
                arm(&mut kept.store, &self.inner.runtime, limits)?;
                Ok(kept)
            }
            None => {
                let mut store = self.store(limits, tenant)?;
                let instance = instantiate(&mut store).await?;
                Ok(Idle { store, instance, calls: 0 })
            }
        }
    }

    /// Runs one projection in an idle instance when one is kept, else in a fresh one, and keeps the instance
    /// when the guest returned.
    async fn project_reusing(
        &self,
        pre: &ProjectorPre,
        idle: &IdleInstances<ProjectorInstance>,
        state: Option<&str>,
        input: &str,
    ) -> Result<String, InvokeError> {
        let limits = &self.inner.limits;
        let mut kept = self
            .take_idle(idle, TenantScope::None, limits, async |store: &mut Store<HostState>| {
                pre.instantiate(&mut *store).await.map_err(|error| classify(error, store, limits))
            })
            .await?;
        let result = kept.instance.project(&mut kept.store, state, input).await;
        let sound = result.is_ok();
        let output = result.map_err(|error| classify(error, &kept.store, limits)).and_then(|answer| answer);
        give_back_if_sound(idle, kept, sound);
        output
    }

    /// Whether the component is a projector (the `projector` world: [`Plugin::project`]).
    pub fn is_projector(&self) -> bool {
        matches!(self.inner.exports, Exports::Projector(_))
    }

    /// Projects the record `input` (JSON) onto `state` (JSON; `None` for a new key) in a fresh instance (or a
    /// kept one, when the manifest declares `reuse_instances`): the new
    /// state, or the projector's rejection (`Permanent`) or request to retry (`Retryable`). A component that is
    /// not a projector answers [`InvokeError::UnknownAction`].
    pub async fn project(&self, state: Option<&str>, input: &str) -> Result<String, InvokeError> {
        let Exports::Projector(pre) = &self.inner.exports else {
            return Err(InvokeError::UnknownAction("project".into()));
        };
        let started = Instant::now();
        let limits = &self.inner.limits;
        let projection = async {
            let output = match &self.inner.idle {
                Some(Kept::Projections(idle)) => self.project_reusing(pre, idle, state, input).await?,
                _ => {
                    let mut store = self.store(limits, TenantScope::None)?;
                    pre.project(&mut store, limits, state, input).await??
                }
            };
            check_output(&output, limits)?;
            Ok(output)
        };
        let result = self.within_deadline(limits, projection).await;
        self.observe(&result, started);
        result
    }

    /// Whether the component answers data sources (it exports `data-sources`: the `service-plugin` world).
    pub fn has_data_sources(&self) -> bool {
        self.inner.exports.has_data_sources()
    }

    /// Answers the data source `name` for `params` with [`Plugin::limits`], in a fresh instance. Only the
    /// parameters the manifest declares for the source are passed on; an undeclared source is refused
    /// ([`InvokeError::UnknownDataSource`]) without running the guest.
    pub async fn data_source(&self, name: &str, params: &[(String, String)]) -> Result<String, InvokeError> {
        let started = Instant::now();
        let result = self.within_deadline(&self.inner.limits, self.run_data_source(name, params)).await;
        self.observe(&result, started);
        result
    }

    async fn run_data_source(&self, name: &str, params: &[(String, String)]) -> Result<String, InvokeError> {
        let declared = self.inner.manifest.data_sources.iter().find(|source| source.name == name);
        let Some(declared) = declared.filter(|_| self.has_data_sources()) else {
            return Err(InvokeError::UnknownDataSource(name.to_string()));
        };
        let params: Vec<(String, String)> =
            params.iter().filter(|(key, _)| declared.params.contains(key)).cloned().collect();
        let limits = &self.inner.limits;
        let mut store = self.store(limits, TenantScope::None)?;
        let fail = |error, store: &Store<HostState>| classify(error, store, limits);
        match &self.inner.exports {
            Exports::V1 { service: Some(pre), .. } => {
                let instance = pre.instantiate_async(&mut store).await.map_err(|error| fail(error, &store))?;
                let result = instance.flowhost_plugin_data_sources().call_query(&mut store, name, &params).await;
                finish(result, &store, limits)
            }
            Exports::V2 { service: Some(pre), .. } => {
                let instance = pre.instantiate_async(&mut store).await.map_err(|error| fail(error, &store))?;
                let result = instance.flowhost_plugin_data_sources().call_query(&mut store, name, &params).await;
                finish(result, &store, limits)
            }
            _ => Err(InvokeError::UnknownDataSource(name.to_string())),
        }
    }

    /// Evaluates node kind `kind` configured with `config` (JSON) on `events`: exactly one result per event, in
    /// order. A batch-evaluating component prepares the configuration once and evaluates every event in one
    /// instance; any other component (0.1.0, or 0.2.0 without `node-kinds`) is invoked once per event with
    /// `{"config": ..., "event": ...}`.
    ///
    /// The batch's fuel is the per-event fuel times the number of events. When the batch as a whole fails (a
    /// trap, the deadline, fuel or memory), each event is evaluated again in an instance of its own, so one
    /// event's failure is its own and the others still get their answers. A configuration the component refuses
    /// fails every event with the component's error.
    pub async fn evaluate(
        &self,
        kind: &str,
        config: &str,
        batch: &BatchContext,
        events: Vec<NodeEvent>,
    ) -> BatchResults {
        if !self.inner.manifest.has_node_kind(kind) {
            return events.iter().map(|_| Err(InvokeError::UnknownAction(kind.to_string()))).collect();
        }
        if events.is_empty() {
            return Vec::new();
        }
        let started = Instant::now();
        let limits = self.inner.limits.clone();
        let results = if self.evaluates_batches() {
            let batch_limits =
                Limits { fuel: limits.fuel.map(|fuel| fuel.saturating_mul(events.len() as u64)), ..limits.clone() };
            let inputs: Vec<WitNodeEvent> = events.into_iter().map(NodeEvent::into_wit).collect();
            match self.run_batch(kind, config, batch, &inputs, &batch_limits).await {
                Ok(results) => results,
                Err(error) if inputs.len() == 1 => vec![Err(error)],
                Err(error) => {
                    tracing::debug!(plugin = %self.inner.identity.plugin, kind, %error,
                                    "a node-kind batch failed as a whole; evaluating its events one by one");
                    let mut results = Vec::with_capacity(inputs.len());
                    for input in inputs.chunks(1) {
                        results.push(match self.run_batch(kind, config, batch, input, &limits).await {
                            Ok(mut result) => result.pop().unwrap_or_else(|| Err(missing_result())),
                            Err(error) => Err(error),
                        });
                    }
                    results
                }
            }
        } else {
            let config: Value = match serde_json::from_str(config) {
                Ok(config) => config,
                Err(error) => {
                    let error = InvokeError::Permanent(format!("the node's configuration is not JSON: {error}"));
                    return events.iter().map(|_| Err(error.clone())).collect();
                }
            };
            let mut results = Vec::with_capacity(events.len());
            for event in events {
                let input = format!(r#"{{"config":{config},"event":{}}}"#, event.event);
                results.push(self.run_invoke(&event.context(batch), kind, &input, &limits).await);
            }
            results
        };
        let summary = match results.iter().find_map(|result| result.as_ref().err()) {
            Some(error) => Err(error.clone()),
            None => Ok(String::new()),
        };
        self.observe(&summary, started);
        results
    }

    /// One instance: `prepare(kind, config)`, then `evaluate(events)`, within the deadline. `Err` is a failure
    /// of the whole batch (the caller may evaluate the events again, one by one).
    async fn run_batch(
        &self,
        kind: &str,
        config: &str,
        batch: &BatchContext,
        events: &[WitNodeEvent],
        limits: &Limits,
    ) -> Result<BatchResults, InvokeError> {
        self.within_deadline(limits, self.run_batch_unbounded(kind, config, batch, events, limits)).await
    }

    async fn run_batch_unbounded(
        &self,
        kind: &str,
        config: &str,
        batch: &BatchContext,
        events: &[WitNodeEvent],
        limits: &Limits,
    ) -> Result<BatchResults, InvokeError> {
        let Exports::V2 { node_kind: Some(pre), .. } = &self.inner.exports else {
            return Err(InvokeError::UnknownAction(kind.to_string()));
        };
        let mut store = self.store(limits, TenantScope::of(events.iter().map(|event| event.tenant_id.as_deref())))?;
        let instance = pre.instantiate_async(&mut store).await.map_err(|error| classify(error, &store, limits))?;
        let guest = instance.flowhost_plugin_node_kinds();
        let prepared = match guest.call_prepare(&mut store, kind, config).await {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(error)) => {
                let error = error.into_invoke_error();
                return Ok(events.iter().map(|_| Err(error.clone())).collect());
            }
            Err(error) => return Err(classify(error, &store, limits)),
        };
        let context = WitBatchContext {
            flow_id: batch.flow_id.clone(),
            node_id: batch.node_id.clone(),
            deadline_ms: self.deadline_ms(limits),
        };
        let outputs = guest
            .prepared_node()
            .call_evaluate(&mut store, prepared, &context, events)
            .await
            .map_err(|error| classify(error, &store, limits))?;
        drop(store);
        if outputs.len() != events.len() {
            return Err(InvokeError::InvalidOutput(format!(
                "{} results for {} events: a node kind answers exactly one result per event",
                outputs.len(),
                events.len()
            )));
        }
        Ok(outputs
            .into_iter()
            .map(|output| match output {
                Ok(output) => check_output(&output, limits).map(|()| output),
                Err(error) => Err(error.into_invoke_error()),
            })
            .collect())
    }

    /// [`crate::invoke::within_deadline`] with this runtime's epoch tick.
    async fn within_deadline<T>(
        &self,
        limits: &Limits,
        call: impl std::future::Future<Output = Result<T, InvokeError>>,
    ) -> Result<T, InvokeError> {
        crate::invoke::within_deadline(limits, self.inner.runtime.config.epoch_tick, call).await
    }

    /// A fresh store for an invocation for `tenant`.
    fn store(&self, limits: &Limits, tenant: TenantScope) -> Result<Store<HostState>, InvokeError> {
        new_store(&self.inner.runtime, self.inner.identity.clone(), limits, tenant)
    }

    /// When an invocation with `limits` starting now must end, by the runtime's clock.
    fn deadline_ms(&self, limits: &Limits) -> u64 {
        let now = u64::try_from(self.inner.runtime.clock().now_ms()).unwrap_or(0);
        now.saturating_add(u64::try_from(limits.timeout.min(Duration::from_secs(86_400)).as_millis()).unwrap_or(0))
    }

    fn observe(&self, result: &Result<String, InvokeError>, started: Instant) {
        self.inner.runtime.observe(&self.inner.manifest.id, result, started);
    }
}

fn missing_result() -> InvokeError {
    InvokeError::InvalidOutput("no result for the event".into())
}

/// Splits an action-style node-kind input `{"config": ..., "event": ...}` into the configuration and the event.
fn node_input(input: &str) -> Result<(String, String), InvokeError> {
    let mut value: Value = serde_json::from_str(input)
        .map_err(|error| InvokeError::Permanent(format!("a node-kind input is JSON: {error}")))?;
    let mut take = |field: &str| match value.get_mut(field).map(Value::take) {
        Some(part) => Ok(part.to_string()),
        None => {
            Err(InvokeError::Permanent(format!("a node-kind input has `config` and `event`; `{field}` is missing")))
        }
    };
    Ok((take("config")?, take("event")?))
}

/// The `projector` world of either package version (the same shape in both).
pub(crate) enum ProjectorPre {
    V1(v1::projector::ProjectorPre<HostState>),
    V2(v2::projector::ProjectorPre<HostState>),
}

impl ProjectorPre {
    pub(crate) fn of(pre: wasmtime::component::InstancePre<HostState>) -> Result<ProjectorPre, LoadError> {
        match v2::projector::ProjectorPre::new(pre.clone()) {
            Ok(pre) => Ok(ProjectorPre::V2(pre)),
            Err(_) => v1::projector::ProjectorPre::new(pre)
                .map(ProjectorPre::V1)
                .map_err(|error| LoadError::Link(format!("{error:#}"))),
        }
    }

    pub(crate) async fn manifest(&self, store: &mut wasmtime::Store<HostState>) -> wasmtime::Result<String> {
        match self {
            ProjectorPre::V1(pre) => pre.instantiate_async(&mut *store).await?.call_manifest(store).await,
            ProjectorPre::V2(pre) => pre.instantiate_async(&mut *store).await?.call_manifest(store).await,
        }
    }

    /// A new instance in `store`.
    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<HostState>,
    ) -> wasmtime::Result<ProjectorInstance> {
        Ok(match self {
            ProjectorPre::V1(pre) => ProjectorInstance::V1(pre.instantiate_async(store).await?),
            ProjectorPre::V2(pre) => ProjectorInstance::V2(pre.instantiate_async(store).await?),
        })
    }

    /// Runs `project` in a fresh instance in `store`: the guest's answer, or the failure of the call.
    pub(crate) async fn project(
        &self,
        store: &mut wasmtime::Store<HostState>,
        limits: &Limits,
        state: Option<&str>,
        input: &str,
    ) -> Result<Result<String, InvokeError>, InvokeError> {
        let project = async { self.instantiate(&mut *store).await?.project(&mut *store, state, input).await };
        project.await.map_err(|error| classify(error, store, limits))
    }

    pub(crate) fn version(&self) -> PackageVersion {
        match self {
            ProjectorPre::V1(_) => PackageVersion::V0_1,
            ProjectorPre::V2(_) => PackageVersion::V0_2,
        }
    }
}

/// An instance of the `projector` world of either package version.
pub(crate) enum ProjectorInstance {
    V1(v1::projector::Projector),
    V2(v2::projector::Projector),
}

impl ProjectorInstance {
    /// Calls `project`: the guest's answer, or the failure of the call (a trap, fuel, the deadline).
    async fn project(
        &self,
        store: &mut wasmtime::Store<HostState>,
        state: Option<&str>,
        input: &str,
    ) -> wasmtime::Result<Result<String, InvokeError>> {
        Ok(match self {
            ProjectorInstance::V1(instance) => {
                instance.call_project(store, state, input).await?.map_err(GuestError::into_invoke_error)
            }
            ProjectorInstance::V2(instance) => {
                instance.call_project(store, state, input).await?.map_err(GuestError::into_invoke_error)
            }
        })
    }
}

/// Keeps `kept` for a later call when the guest returned (an answer or its own classified error) and stayed
/// within its memory; an instance that trapped, ran out of fuel or time, or hit its memory cap is dropped.
fn give_back_if_sound<I>(idle: &IdleInstances<I>, mut kept: Idle<I>, returned: bool) {
    if returned && !kept.store.data().limiter.hit {
        kept.calls += 1;
        idle.give_back(kept);
    }
}
