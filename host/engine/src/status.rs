//! [`EngineStatus`]: what the engine's readiness checks read, written by its loops: whether a rule set has been
//! loaded, and whether consuming the source topics currently fails (joining the group, creating the topics or
//! polling), with the last error for the log.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Shared between the engine's loops (writers) and its readiness checks (readers).
#[derive(Debug, Default)]
pub struct EngineStatus {
    rules_loaded: AtomicBool,
    source_failing: AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl EngineStatus {
    pub(crate) fn rules_loaded(&self) {
        self.rules_loaded.store(true, Ordering::Release);
    }

    pub(crate) fn source_failed(&self, error: &dyn std::fmt::Display) {
        self.source_failing.store(true, Ordering::Release);
        *self.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error.to_string());
    }

    pub(crate) fn source_ok(&self) {
        self.source_failing.store(false, Ordering::Release);
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
        if !self.source_failing.load(Ordering::Acquire) {
            return Ok(());
        }
        let last = self.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        Err(last.unwrap_or_else(|| "consuming the source topics fails".to_owned()))
    }
}
