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
    pub max_log_message_bytes: usize,
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
