//! Instance reuse: the idle instances of a plugin whose manifest declares `reuse_instances`, kept after a call
//! that returned so the next call of the same tenant skips instantiation and the store's teardown: a 0.2.0
//! action's, or a projector's (a projection is a pure function of its arguments, so a kept instance answers
//! exactly as a fresh one).
//!
//! A fresh instance per call is the default, and what a plugin gets unless it opts in: its memory and globals
//! start zeroed every time. A plugin that declares `reuse_instances: true` promises it keeps nothing from one
//! call to the next that the next must not see (a cache is fine; a half-finished state is not). The host keeps
//! these invariants either way:
//! - an instance serves one tenant scope only (`TenantScope`): one tenant's leftovers never reach another's call;
//! - every call starts with its own deadline, fuel and per-invocation budgets (`crate::invoke::arm`);
//! - an instance whose call trapped, timed out, ran out of fuel or hit its memory cap is dropped, never reused
//!   (wasmtime refuses to enter an instance after a trap; the others could be mid-way through anything);
//! - an instance is dropped after [`MAX_CALLS_PER_INSTANCE`] calls, so what a guest leaks stays bounded;
//! - idle instances hold pool slots, so at most a quarter of the pool ([`IdleBudget`]) is idle across the
//!   runtime; past it a finished instance is dropped as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::Store;

use crate::host::{HostState, TenantScope};

/// Calls one instance serves before it is dropped.
pub(crate) const MAX_CALLS_PER_INSTANCE: u32 = 10_000;

/// How many instances may be idle at once across the runtime.
pub(crate) struct IdleBudget {
    idle: AtomicUsize,
    max: usize,
}

impl IdleBudget {
    /// A budget of a quarter of `pool_instances` (the pooling allocator's slots).
    pub(crate) fn of_pool(pool_instances: u32) -> Arc<IdleBudget> {
        let max = usize::try_from(pool_instances / 4).unwrap_or(usize::MAX);
        Arc::new(IdleBudget { idle: AtomicUsize::new(0), max })
    }

    fn try_take(&self) -> bool {
        self.idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |idle| (idle < self.max).then_some(idle + 1))
            .is_ok()
    }

    fn release(&self, count: usize) {
        self.idle.fetch_sub(count, Ordering::AcqRel);
    }
}

/// An instance between calls, with the store it lives in (`I`: the bindings of the world it was instantiated
/// as).
pub(crate) struct Idle<I> {
    pub(crate) store: Store<HostState>,
    pub(crate) instance: I,
    /// Calls it has served.
    pub(crate) calls: u32,
}

/// The idle instances of one plugin version.
pub(crate) struct IdleInstances<I> {
    entries: Mutex<Vec<Idle<I>>>,
    budget: Arc<IdleBudget>,
}

impl<I> IdleInstances<I> {
    pub(crate) fn new(budget: Arc<IdleBudget>) -> IdleInstances<I> {
        IdleInstances { entries: Mutex::new(Vec::new()), budget }
    }

    /// An idle instance for `tenant` whose store has the memory cap `memory_bytes`, if one is kept.
    pub(crate) fn take(&self, tenant: &TenantScope, memory_bytes: usize) -> Option<Idle<I>> {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let position = entries.iter().rposition(|idle| {
            let state = idle.store.data();
            state.limiter.memory_bytes == memory_bytes && state.tenant == *tenant
        })?;
        let idle = entries.swap_remove(position);
        drop(entries);
        self.budget.release(1);
        Some(idle)
    }

    /// Keeps `idle` for a later call, unless it has served its calls or the runtime's idle budget is spent.
    pub(crate) fn give_back(&self, idle: Idle<I>) {
        if idle.calls >= MAX_CALLS_PER_INSTANCE || !self.budget.try_take() {
            return;
        }
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(idle);
    }
}

impl<I> Drop for IdleInstances<I> {
    fn drop(&mut self) {
        let entries = self.entries.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.budget.release(entries.len());
    }
}
