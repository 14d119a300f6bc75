//! The `log` capability: a guest's structured messages into the host's log, tagged with the plugin's identity
//! and cut at the runtime's `max_log_message_bytes`.

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
    fn write_log(&self, level: Level, mut message: String) {
        crate::wasi::cut_for_log(&mut message, self.max_log_message_bytes);
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
