//! [`EngineStatus`]: what the engine's readiness checks read: whether a rule set has been loaded (written by
//! the reloader), and whether consuming the source topics currently fails (the source consumer's
//! [`SourceHealth`]: joining the group, creating the topics or polling), with the last error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use flowhost_core::source::SourceHealth;

/// Shared between the engine's loops (writers) and its readiness checks (readers).
#[derive(Debug, Default)]
pub struct EngineStatus {
    rules_loaded: AtomicBool,
    sources: OnceLock<Arc<SourceHealth>>,
}

impl EngineStatus {
    pub(crate) fn rules_loaded(&self) {
        self.rules_loaded.store(true, Ordering::Release);
    }

    pub(crate) fn watch_sources(&self, health: Arc<SourceHealth>) {
        let _ = self.sources.set(health);
    }

    /// Ok once the first rule set loaded.
    pub fn check_rules(&self) -> Result<(), String> {
        if self.rules_loaded.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("no rule set loaded yet".to_owned())
        }
    }

    /// Ok unless the last attempt to consume the source topics failed.
    pub fn check_sources(&self) -> Result<(), String> {
        match self.sources.get().and_then(|health| health.error()) {
            None => Ok(()),
            Some(error) => Err(format!("consuming the source topics fails: {error}")),
        }
    }
}
