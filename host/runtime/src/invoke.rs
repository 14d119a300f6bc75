//! What every call into a guest needs, whichever world it calls: the state a runtime's plugins share
//! ([`Inner`]: the engine and its epoch ticker, the configuration, the clock, the capabilities' backends), a
//! store made and armed with the call's limits and deadline, and how a finished call is classified (the guest's
//! own failure, a trap, fuel, memory, time) and its output checked. [`crate::plugin`] and the runtime's loading
//! ([`crate::runtime`]) both build on it; it knows neither.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flowhost_core::notify::Notifications;
use flowhost_core::ports::DocumentStore;
use flowhost_core::Clock;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use crate::host::{HostState, MemoryLimiter};
use crate::{InvokeError, Limits, RuntimeConfig, RuntimeMetrics};

/// What the plugins of one runtime share.
pub(crate) struct Inner {
    pub(crate) engine: Engine,
    pub(crate) config: RuntimeConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) documents: Option<Arc<dyn DocumentStore>>,
    pub(crate) metrics: Option<RuntimeMetrics>,
    /// The host side of the `notifications` capability, once a sender runs in this process.
    pub(crate) notifications: std::sync::RwLock<Option<Arc<dyn Notifications>>>,
    /// Idle instances across every plugin of this runtime ([`crate::reuse`]).
    pub(crate) idle_budget: Arc<crate::reuse::IdleBudget>,
    pub(crate) _ticker: EpochTicker,
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
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine, tick: Duration) -> EpochTicker {
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
}
