//! The `log` capability: a guest's structured messages into the host's log, tagged with the plugin's identity,
//! one line each (control characters escaped), cut at the runtime's `max_log_message_bytes`, and within the
//! invocation's log budget shared with its stdout and stderr.

use crate::bindings::v1::action::flowhost::plugin::log as log_v1;
use crate::bindings::v2::action::flowhost::plugin::log as log_v2;
use crate::host::HostState;

#[derive(Clone, Copy)]
enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl HostState {
    /// Writes one message: its control characters escaped (it stays one line), cut at `max_log_message_bytes`,
    /// and within the invocation's log budget (shared with stdout and stderr; past it messages are dropped).
    fn write_log(&mut self, level: Level, message: String) {
        let allowed = crate::wasi::spend(&self.output.budget, message.len().min(self.max_log_message_bytes));
        if allowed == 0 {
            if !self.log_dropped {
                self.log_dropped = true;
                let plugin = &*self.plugin;
                tracing::warn!(
                    plugin,
                    limit = crate::wasi::MAX_OUTPUT_BYTES_PER_CALL,
                    "the plugin logged more than the limit per invocation; the rest is dropped"
                );
            }
            return;
        }
        let mut message = crate::wasi::escape_controls(&message).into_owned();
        crate::wasi::cut_for_log(&mut message, allowed.max(1));
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// Implements the `log` host trait of one package version.
macro_rules! log_host {
    ($log:ident) => {
        impl $log::Host for HostState {
            fn log(&mut self, level: $log::Level, message: String) -> wasmtime::Result<()> {
                use $log::Level as L;
                let level = match level {
                    L::Trace => Level::Trace,
                    L::Debug => Level::Debug,
                    L::Info => Level::Info,
                    L::Warn => Level::Warn,
                    L::Error => Level::Error,
                };
                self.write_log(level, message);
                Ok(())
            }
        }
    };
}

log_host!(log_v1);
log_host!(log_v2);
