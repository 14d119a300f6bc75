//! The [`Runtime`] (engine, pooling allocator, epoch ticker) and loaded [`Plugin`]s, with a fresh store and
//! instance per invocation.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flowhost_core::digest::sha256_bytes_hex;
use flowhost_core::notify::Notifications;
use flowhost_core::ports::DocumentStore;
use flowhost_core::{Clock, SystemClock};
use sha2::Digest;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap, UpdateDeadline};

use crate::host::{HostState, MemoryLimiter};
use crate::plugin::Plugin;
use crate::providers::Import;
use crate::{Capability, InvokeError, Limits, LoadError, Manifest, RuntimeConfig, RuntimeError, RuntimeMetrics};

/// Runs plugin components. Cheap to clone; plugins keep it alive.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Inner {
    /// The clock the `clock` capability and invocation deadlines read.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Counts and times a finished call of plugin `id`.
    pub(crate) fn observe(&self, id: &str, result: &Result<String, InvokeError>, started: Instant) {
        if let Some(metrics) = &self.metrics {
            metrics.observe(id, result, started.elapsed());
        }
    }
}

pub(crate) struct Inner {
    engine: Engine,
    pub(crate) config: RuntimeConfig,
    clock: Arc<dyn Clock>,
    documents: Option<Arc<dyn DocumentStore>>,
    metrics: Option<RuntimeMetrics>,
    /// The host side of the `notifications` capability, once a sender runs in this process.
    notifications: std::sync::RwLock<Option<Arc<dyn Notifications>>>,
    /// Idle instances across every plugin of this runtime ([`crate::reuse`]).
    pub(crate) idle_budget: Arc<crate::reuse::IdleBudget>,
    _ticker: EpochTicker,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime with `config` and the system clock.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A runtime whose `clock` capability reads `clock` (tests inject a manual one), without a document store
    /// (the `documents` capability then answers every call with an error).
    pub fn with_clock(config: RuntimeConfig, clock: Arc<dyn Clock>) -> Result<Runtime, RuntimeError> {
        Self::with_host(config, clock, None, None)
    }

    /// A runtime whose capabilities are served by `clock` and `documents` (plugin documents live in its
    /// `plugin_documents` collection, scoped by plugin id), counting invocations in `metrics`.
    pub fn with_host(
        config: RuntimeConfig,
        clock: Arc<dyn Clock>,
        documents: Option<Arc<dyn DocumentStore>>,
        metrics: Option<RuntimeMetrics>,
    ) -> Result<Runtime, RuntimeError> {
        if config.limits.memory_bytes > config.pool.max_memory_bytes {
            return Err(RuntimeError(format!(
                "limits.memory_bytes ({}) exceeds pool.max_memory_bytes ({})",
                config.limits.memory_bytes, config.pool.max_memory_bytes
            )));
        }
        if config.epoch_tick.is_zero() {
            return Err(RuntimeError("epoch_tick must be positive".into()));
        }
        let pool_config = &config.pool;
        let instances = pool_config.max_instances.max(1);
        let per_component = pool_config.max_core_instances_per_component.max(1);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(instances)
            .total_core_instances(instances.saturating_mul(per_component))
            .max_core_instances_per_component(per_component)
            .total_memories(instances)
            .max_memories_per_component(1)
            .total_tables(instances.saturating_mul(per_component))
            .total_stacks(instances)
            .max_memory_size(pool_config.max_memory_bytes)
            .decommit_batch_size(pool_config.decommit_batch_size.max(1))
            .linear_memory_keep_resident(pool_config.memory_keep_resident_bytes)
            .table_keep_resident(pool_config.memory_keep_resident_bytes)
            .async_stack_keep_resident(pool_config.stack_keep_resident_bytes)
            .pagemap_scan(if pool_config.pagemap_scan { Enabled::Auto } else { Enabled::No });

        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true)
            .epoch_interruption(true)
            .consume_fuel(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm).map_err(|error| RuntimeError(format!("{error:#}")))?;
        let ticker = EpochTicker::start(&engine, config.epoch_tick);
        let notifications = std::sync::RwLock::new(None);
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                config,
                clock,
                documents,
                metrics,
                notifications,
                idle_budget: crate::reuse::IdleBudget::of_pool(instances),
                _ticker: ticker,
            }),
        })
    }

    /// Serves the `notifications` capability with `sender` from now on (the sender role installs it once its
    /// keys and stores are ready). Until then, and after [`Runtime::withdraw_notifications`], every call of the
    /// capability answers `not-ready`.
    pub fn provide_notifications(&self, sender: Arc<dyn Notifications>) {
        *self.inner.notifications.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender);
    }

    /// Stops serving the `notifications` capability (the sender role shutting down).
    pub fn withdraw_notifications(&self) {
        *self.inner.notifications.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Whether the `notifications` capability is served.
    pub fn notifications_provided(&self) -> bool {
        self.inner.notifications.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// The configuration this runtime runs with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Compiles a component to this engine's native code, for [`Runtime::load_precompiled`] (the component
    /// catalog stores both the `.wasm` and this).
    pub fn precompile(&self, wasm: &[u8]) -> Result<Vec<u8>, LoadError> {
        self.inner.engine.precompile_component(wasm).map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))
    }

    /// Loads a component (`.wasm` bytes) granting it `grants`: compiles it, checks and links its imports,
    /// prepares the instance and reads its manifest. Compiling takes tens of milliseconds of CPU on the calling
    /// thread; a server compiles with [`Runtime::compile`] on a blocking thread and then calls
    /// [`Runtime::load_compiled`].
    pub async fn load(&self, wasm: &[u8], grants: &[Capability]) -> Result<Plugin, LoadError> {
        let compiled = self.compile(wasm)?;
        self.load_compiled(compiled, grants).await
    }

    /// Compiles a component to native code (CPU-bound, synchronous: about 50-150 ms for a small component).
    pub fn compile(&self, wasm: &[u8]) -> Result<Compiled, LoadError> {
        Component::new(&self.inner.engine, wasm)
            .map(Compiled)
            .map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))
    }

    /// [`Runtime::compile`] with a cache of native code in `cache_dir`: the first compile of some bytes writes
    /// `<sha256 of the wasm>-<engine fingerprint>.cwasm` there (checksummed), later ones, also in later processes,
    /// load it in about a millisecond instead of compiling again (a 2 MB component takes seconds). A missing,
    /// unreadable, damaged or incompatible cache entry is compiled again and rewritten; a cache that cannot be
    /// written is only logged.
    #[allow(unsafe_code)]
    pub fn compile_cached(&self, wasm: &[u8], cache_dir: &Path) -> Result<Compiled, LoadError> {
        let engine = &self.inner.engine;
        let fingerprint = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        let path = cache_dir.join(format!("{}-{fingerprint:016x}.cwasm", sha256_bytes_hex(wasm)));
        if let Some(native) = std::fs::read(&path).ok().and_then(checked_payload) {
            // SAFETY: the file holds `Component::serialize` output of an engine with the same compatibility
            // fingerprint, written by this host into its own data directory, and its checksum matches.
            match unsafe { Component::deserialize(engine, &native) } {
                Ok(component) => return Ok(Compiled(component)),
                Err(error) => tracing::warn!(path = %path.display(), %error, "cached component unusable; compiling"),
            }
        }
        let compiled = self.compile(wasm)?;
        if let Err(error) =
            compiled.0.serialize().map_err(|e| std::io::Error::other(format!("{e:#}"))).and_then(|native| {
                std::fs::create_dir_all(cache_dir)?;
                // Unique per writer: nodes sharing the directory may compile the same component at once.
                static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let temporary = path.with_extension(format!("{}-{write}.tmp", std::process::id()));
                let mut file = sha2::Sha256::digest(&native).to_vec();
                file.extend_from_slice(&native);
                std::fs::write(&temporary, file)?;
                std::fs::rename(&temporary, &path)
            })
        {
            tracing::warn!(path = %path.display(), %error, "cannot cache a compiled component");
        }
        Ok(compiled)
    }

    /// Loads a component compiled by [`Runtime::compile`]: checks and links its imports, prepares the instance
    /// and reads its manifest.
    pub async fn load_compiled(&self, compiled: Compiled, grants: &[Capability]) -> Result<Plugin, LoadError> {
        self.prepare(compiled.0, grants).await
    }

    /// Loads a component precompiled by [`Runtime::precompile`] (about 100 times faster than compiling).
    ///
    /// # Safety
    /// `bytes` are native code that will run in this process. wasmtime checks that they were produced by the same
    /// wasmtime version with a compatible configuration, but not that they are intact: pass only the output of
    /// [`Runtime::precompile`], read back from storage that only the host writes.
    #[allow(unsafe_code)]
    pub async unsafe fn load_precompiled(&self, bytes: &[u8], grants: &[Capability]) -> Result<Plugin, LoadError> {
        // SAFETY: the caller guarantees that `bytes` come from `precompile` of a compatible engine (see above).
        let component = unsafe { Component::deserialize(&self.inner.engine, bytes) }
            .map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))?;
        self.prepare(component, grants).await
    }

    /// Checks the component's imports against `grants` and links them: the granted capabilities it imports and
    /// WASI (locked down; traps for interfaces the host does not implement).
    pub(crate) fn link(
        &self,
        component: &Component,
        grants: &[Capability],
    ) -> Result<(InstancePre<HostState>, Vec<Capability>), LoadError> {
        let engine = &self.inner.engine;
        let mut imported = Vec::new();
        let mut linker = Linker::new(engine);
        for (name, _) in component.component_type().imports(engine) {
            match Import::of(name) {
                Import::Capability(provider, link) => {
                    if !grants.contains(&provider.capability) {
                        return Err(LoadError::NotGranted { capability: provider.capability.name().to_string() });
                    }
                    link(&mut linker).map_err(|error| LoadError::Link(format!("{error:#}")))?;
                    if !imported.contains(&provider.capability) {
                        imported.push(provider.capability);
                    }
                }
                Import::TypesOnly | Import::Wasi => {}
                Import::Unknown => return Err(LoadError::UnsatisfiableImport(name.to_string())),
            }
        }
        // WASI 0.2 with a locked-down context per store (see `crate::wasi`). A guest built against an older 0.2.x
        // links to it by semver. (Not `define_unknown_imports_as_traps`: it would define the guest's exact 0.2.x
        // names as traps, shadowing the real WASI.) A WASI interface this host does not implement (`wasi:http`)
        // fails the link below, naming the import.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let pre = linker.instantiate_pre(component).map_err(|error| LoadError::Link(format!("{error:#}")))?;
        Ok((pre, imported))
    }

    /// A fresh store for reading a manifest, with the default limits.
    pub(crate) fn loading_store(&self) -> Result<Store<HostState>, LoadError> {
        let loading = Identity { plugin: "(loading)".into(), scope: "(loading)".into() };
        new_store(&self.inner, loading, &self.inner.config.limits, crate::host::TenantScope::None)
            .map_err(LoadError::Manifest)
    }

    /// Parses the text a `manifest` export returned and checks that it declares every imported capability;
    /// returns it with the plugin's identity and limits (the defaults tightened by the manifest).
    pub(crate) fn read_manifest(
        &self,
        text: wasmtime::Result<String>,
        store: Store<HostState>,
        imported: &[Capability],
    ) -> Result<(Manifest, Identity, Limits), LoadError> {
        let limits = &self.inner.config.limits;
        let text = text.map_err(|error| LoadError::Manifest(classify(error, &store, limits)))?;
        drop(store);
        let (manifest, limits) = Manifest::read(&text, imported, limits)?;
        let identity = Identity {
            plugin: format!("{}@{}", manifest.id, manifest.version).into(),
            scope: manifest.id.as_str().into(),
        };
        Ok((manifest, identity, limits))
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

/// The payload of a cache file (a SHA-256 of the payload, then the payload), when the checksum matches.
fn checked_payload(mut file: Vec<u8>) -> Option<Vec<u8>> {
    if file.len() < 32 {
        return None;
    }
    let payload = file.split_off(32);
    (sha2::Sha256::digest(&payload).as_slice() == file.as_slice()).then_some(payload)
}

/// A compiled component, not yet linked: the output of [`Runtime::compile`]. Cheap to clone.
#[derive(Clone)]
pub struct Compiled(pub(crate) Component);

/// Who a store runs for: `plugin` (`id@version`) tags log lines, `scope` (the id) scopes documents.
#[derive(Clone)]
pub(crate) struct Identity {
    pub(crate) plugin: Arc<str>,
    pub(crate) scope: Arc<str>,
}

/// Classifies a finished guest call (run in `store`) and checks its output.
pub(crate) fn finish<E: GuestError>(
    result: wasmtime::Result<Result<String, E>>,
    store: &Store<HostState>,
    limits: &Limits,
) -> Result<String, InvokeError> {
    let output = match result {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(error.into_invoke_error()),
        Err(error) => return Err(classify(error, store, limits)),
    };
    check_output(&output, limits)?;
    Ok(output)
}

/// A `plugin-error` of some package version: the guest's own classified failure.
pub(crate) trait GuestError {
    fn into_invoke_error(self) -> InvokeError;
}

/// Implements [`GuestError`] for the `plugin-error` of one package version.
macro_rules! guest_error {
    ($types:ident) => {
        impl GuestError for $types::PluginError {
            fn into_invoke_error(self) -> InvokeError {
                use $types::Outcome;
                match self.outcome {
                    Outcome::SkipForward => InvokeError::SkipForward(self.message),
                    Outcome::Permanent => InvokeError::Permanent(self.message),
                    Outcome::Retryable => InvokeError::Retryable(self.message),
                }
            }
        }
    };
}

use crate::bindings::v1::action::flowhost::plugin::types as types_v1;
use crate::bindings::v2::action::flowhost::plugin::types as types_v2;
guest_error!(types_v1);
guest_error!(types_v2);

/// A fresh store with `limits`, armed for its first call ([`arm`]).
pub(crate) fn new_store(
    runtime: &Inner,
    identity: Identity,
    limits: &Limits,
    tenant: crate::host::TenantScope,
) -> Result<Store<HostState>, InvokeError> {
    let memory_bytes = store_memory_bytes(runtime, limits);
    let (wasi, output) = crate::wasi::locked_down_context(&identity.plugin, runtime.config.max_log_message_bytes);
    let state = HostState {
        plugin: identity.plugin.clone(),
        scope: identity.scope,
        clock: runtime.clock.clone(),
        documents: runtime.documents.clone(),
        notifications: None,
        deadline: Instant::now() + limits.timeout,
        tenant,
        documents_written: 0,
        sends: 0,
        smoke_test: false,
        max_log_message_bytes: runtime.config.max_log_message_bytes,
        limiter: MemoryLimiter { memory_bytes, hit: false },
        wasi,
        output,
        log_dropped: false,
        table: wasmtime::component::ResourceTable::new(),
    };
    let mut store = Store::new(&runtime.engine, state);
    store.limiter(|state| &mut state.limiter);
    // Every epoch tick the guest yields to the async executor (a busy guest never holds a worker thread for
    // longer than a tick); the first tick past the deadline interrupts it (`Trap::Interrupt`). The clock, not a
    // count of ticks, decides: ticks do not come while the guest waits in a host call. The deadline is read at
    // each tick, so a reused store's next call has its own.
    store.epoch_deadline_callback(|store| {
        Ok(if Instant::now() >= store.data().deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    arm(&mut store, runtime, limits)?;
    Ok(store)
}

/// The memory cap of a store for `limits`: theirs, within the pool's ceiling.
pub(crate) fn store_memory_bytes(runtime: &Inner, limits: &Limits) -> usize {
    limits.memory_bytes.min(runtime.config.pool.max_memory_bytes)
}

/// Readies `store` for one call with `limits`: a new deadline, full fuel, and the per-invocation budgets (documents
/// written, sends, log output) and flags (smoke test, memory limit hit) as for a fresh store. The store's memory
/// cap stays what it was made with.
pub(crate) fn arm(store: &mut Store<HostState>, runtime: &Inner, limits: &Limits) -> Result<(), InvokeError> {
    let state = store.data_mut();
    state.deadline = Instant::now() + limits.timeout;
    state.documents_written = 0;
    state.sends = 0;
    state.smoke_test = false;
    state.limiter.hit = false;
    state.log_dropped = false;
    state.output.begin_call();
    state.notifications = runtime.notifications.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    store.set_fuel(limits.fuel.unwrap_or(u64::MAX)).map_err(|error| InvokeError::Trap(format!("{error:#}")))?;
    store.set_epoch_deadline(1);
    Ok(())
}

/// Runs one guest call (its instantiation included) until it ends or its deadline has passed, whichever comes
/// first. The epoch interrupts a guest while it runs wasm; a guest waiting in a host call (a WASI sleep, a
/// capability that does not answer) runs no wasm, so past `limits.timeout` and one epoch tick more (the
/// epoch's precision, so a running guest is interrupted first and classified as usual) the call is dropped,
/// and with it the store it owns: [`InvokeError::Timeout`].
pub(crate) async fn within_deadline<T>(
    limits: &Limits,
    tick: Duration,
    call: impl std::future::Future<Output = Result<T, InvokeError>>,
) -> Result<T, InvokeError> {
    match tokio::time::timeout(limits.timeout.saturating_add(tick), call).await {
        Ok(result) => result,
        Err(_elapsed) => Err(timeout_error(limits)),
    }
}

fn timeout_error(limits: &Limits) -> InvokeError {
    InvokeError::Timeout(u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX))
}

/// Turns a wasmtime failure into the class the engine acts on.
pub(crate) fn classify(error: wasmtime::Error, store: &Store<HostState>, limits: &Limits) -> InvokeError {
    // A refused memory growth comes first: a Rust guest then aborts, which would otherwise look like any trap.
    if store.data().limiter.hit {
        return InvokeError::MemoryLimit(store.data().limiter.memory_bytes);
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        return match trap {
            Trap::Interrupt => timeout_error(limits),
            Trap::OutOfFuel => InvokeError::OutOfFuel,
            other => InvokeError::Trap(other.to_string()),
        };
    }
    if error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() {
        return InvokeError::Busy(format!("{error:#}"));
    }
    InvokeError::Trap(format!("{error:#}"))
}

/// The output must fit the limit and be JSON.
pub(crate) fn check_output(output: &str, limits: &Limits) -> Result<(), InvokeError> {
    if output.len() > limits.max_output_bytes {
        return Err(InvokeError::OutputTooLarge { size: output.len(), limit: limits.max_output_bytes });
    }
    serde_json::from_str::<serde::de::IgnoredAny>(output)
        .map(drop)
        .map_err(|error| InvokeError::InvalidOutput(format!("not JSON: {error}")))
}

/// Advances the engine's epoch every tick on a background thread, until dropped.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: &Engine, tick: Duration) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("flowhost-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .ok();
        EpochTicker { stop, thread }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that never ends (as a guest waiting in a host call) is dropped once the deadline and a tick have
    /// passed.
    #[tokio::test(start_paused = true)]
    async fn a_call_is_dropped_at_its_deadline() {
        let limits = Limits { timeout: Duration::from_millis(100), ..Limits::default() };
        let started = tokio::time::Instant::now();
        let never = std::future::pending::<Result<(), InvokeError>>();
        assert_eq!(within_deadline(&limits, Duration::from_millis(10), never).await, Err(InvokeError::Timeout(100)));
        assert_eq!(started.elapsed(), Duration::from_millis(110));
        let quick = async { Ok::<_, InvokeError>(7) };
        assert_eq!(within_deadline(&limits, Duration::from_millis(10), quick).await, Ok(7));
    }

    #[test]
    fn output_must_be_json_within_the_limit() {
        let limits = Limits { max_output_bytes: 8, ..Limits::default() };
        assert_eq!(check_output("[1, 2]", &limits), Ok(()));
        assert!(matches!(check_output("{nope", &limits), Err(InvokeError::InvalidOutput(_))));
        assert_eq!(check_output("\"123456789\"", &limits), Err(InvokeError::OutputTooLarge { size: 11, limit: 8 }));
    }

    #[test]
    fn memory_cap_above_the_pool_ceiling_is_refused() {
        let mut config = RuntimeConfig::default();
        config.limits.memory_bytes = config.pool.max_memory_bytes + 1;
        assert!(Runtime::new(config).is_err());
    }
}
