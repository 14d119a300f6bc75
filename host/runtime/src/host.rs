//! The state of one store (one invocation): what the capability providers (`crate::providers`) and WASI serve
//! from, and the memory limiter that records whether the cap was hit (so a guest abort after a failed
//! allocation is reported as [`crate::InvokeError::MemoryLimit`], not as a bare trap).

use std::sync::Arc;
use std::time::Instant;

use flowhost_core::notify::Notifications;
use flowhost_core::ports::DocumentStore;
use flowhost_core::Clock;

/// The state of one store (one invocation).
pub(crate) struct HostState {
    /// `id@version`, for log lines.
    pub plugin: Arc<str>,
    /// The plugin's id: the scope of its documents.
    pub scope: Arc<str>,
    pub clock: Arc<dyn Clock>,
    pub documents: Option<Arc<dyn DocumentStore>>,
    /// The host side of the `notifications` capability, when a sender runs in this process.
    pub notifications: Option<Arc<dyn Notifications>>,
    /// When the invocation's wall-clock deadline passes: a host call (documents) is not interrupted by the
    /// epoch, so it stops waiting at this instant itself.
    pub deadline: Instant,
    /// The tenant the invocation works for, which scopes what the `documents` and `notifications`
    /// capabilities reach.
    pub tenant: TenantScope,
    /// Documents written (put or deleted) by this invocation so far, against [`MAX_DOCUMENT_WRITES`].
    pub documents_written: u32,
    /// Notifications asked for by this invocation so far, against [`MAX_SENDS`].
    pub sends: u32,
    /// Whether this is an editor's smoke send ([`crate::InvocationContext::smoke_test`]): the only invocation
    /// that may notify `player_id` 0.
    pub smoke_test: bool,
    pub max_log_message_bytes: usize,
    /// What the invocation may still write into the log (its `log` calls and WASI output together), and its
    /// stdout and stderr.
    pub output: crate::wasi::GuestOutput,
    /// Whether a `log` call was already dropped for the budget (the drop is logged once).
    pub log_dropped: bool,
    pub limiter: MemoryLimiter,
    /// WASI, locked down (see `crate::wasi`), and the resources (streams) the guest holds through it.
    pub wasi: wasmtime_wasi::WasiCtx,
    pub table: wasmtime::component::ResourceTable,
}

impl wasmtime_wasi::WasiView for HostState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        wasmtime_wasi::WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Documents one invocation may write (put or delete).
pub(crate) const MAX_DOCUMENT_WRITES: u32 = 100;
/// Notifications (web push or in-app, one recipient each) one invocation may ask for.
pub(crate) const MAX_SENDS: u32 = 10;

/// Whose data an invocation may reach through the capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TenantScope {
    /// No tenant (a one-off call, a data source, an operator's test): the plugin's own tenant-less documents;
    /// notifications to any tenant (the capability is granted only to plugins an operator trusts with it).
    None,
    /// One tenant: its documents only, notifications to it only.
    Tenant(Arc<str>),
    /// A node-kind batch whose events belong to several tenants: no tenant data at all.
    Mixed,
}

impl TenantScope {
    /// The scope of invocations for `tenants` (the events of a batch; one for an action).
    pub(crate) fn of<'a>(mut tenants: impl Iterator<Item = Option<&'a str>>) -> TenantScope {
        let Some(first) = tenants.next() else { return TenantScope::None };
        if tenants.any(|other| other != first) {
            return TenantScope::Mixed;
        }
        match first {
            Some(tenant) if !tenant.is_empty() => TenantScope::Tenant(tenant.into()),
            _ => TenantScope::None,
        }
    }
}

/// Caps linear memory and table growth; remembers a refused memory growth.
pub(crate) struct MemoryLimiter {
    pub memory_bytes: usize,
    pub hit: bool,
}

/// Table elements allowed per table; Rust guests need a few hundred at most.
const MAX_TABLE_ELEMENTS: usize = 20_000;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
