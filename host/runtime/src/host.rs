//! What the host gives a guest: the capabilities (`log`, `clock`) and the per-store state behind them, including
//! the memory limiter that records whether the cap was hit (so a guest abort after a failed allocation is
//! reported as [`crate::InvokeError::MemoryLimit`], not as a bare trap).

use std::sync::Arc;

use flowhost_core::Clock;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::flowhost::plugin::{clock, log};

/// A host capability a plugin may be granted. Each is a WIT interface of `flowhost:plugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `flowhost:plugin/log`: write into the host's log.
    Log,
    /// `flowhost:plugin/clock`: read the host's clock.
    Clock,
}

impl Capability {
    /// Every capability this version of the host offers.
    pub const ALL: [Capability; 2] = [Capability::Log, Capability::Clock];

    /// The name used in manifests (`log`, `clock`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Log => "log",
            Capability::Clock => "clock",
        }
    }

    /// The capability whose WIT interface a component imports under `import`
    /// (e.g. `flowhost:plugin/log@0.1.0`).
    pub(crate) fn from_import(import: &str) -> Option<Capability> {
        match import {
            "flowhost:plugin/log@0.1.0" => Some(Capability::Log),
            "flowhost:plugin/clock@0.1.0" => Some(Capability::Clock),
            _ => None,
        }
    }

    pub(crate) fn add_to_linker(self, linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        match self {
            Capability::Log => log::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state),
            Capability::Clock => clock::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state),
        }
    }
}

/// Imports of `flowhost:plugin` that carry only types (no functions): always satisfiable.
pub(crate) const TYPE_ONLY_IMPORTS: [&str; 1] = ["flowhost:plugin/types@0.1.0"];

/// The state of one store (one invocation).
pub(crate) struct HostState {
    pub plugin: Arc<str>,
    pub clock: Arc<dyn Clock>,
    pub max_log_message_bytes: usize,
    pub limiter: MemoryLimiter,
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

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, mut message: String) -> wasmtime::Result<()> {
        if message.len() > self.max_log_message_bytes {
            let mut end = self.max_log_message_bytes;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("...");
        }
        let plugin = &*self.plugin;
        match level {
            log::Level::Trace => tracing::trace!(plugin, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, "{message}"),
            log::Level::Info => tracing::info!(plugin, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, "{message}"),
            log::Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

impl clock::Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(u64::try_from(self.clock.now_ms()).unwrap_or(0))
    }
}
