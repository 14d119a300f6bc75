//! What the host gives a guest: the capabilities (`log`, `clock`, `documents`) and the per-store state behind
//! them, including the memory limiter that records whether the cap was hit (so a guest abort after a failed allocation is
//! reported as [`crate::InvokeError::MemoryLimit`], not as a bare trap).

use std::sync::Arc;
use std::time::Instant;

use flowhost_core::collections::PLUGIN_DOCUMENTS;
use flowhost_core::ports::DocumentStore;
use flowhost_core::Clock;
use serde_json::{json, Value};
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::action::flowhost::plugin::{clock, documents, log};

/// A host capability a plugin may be granted. Each is a WIT interface of `flowhost:plugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `flowhost:plugin/log`: write into the host's log.
    Log,
    /// `flowhost:plugin/clock`: read the host's clock.
    Clock,
    /// `flowhost:plugin/documents`: read and write JSON documents scoped to the plugin's id.
    Documents,
}

impl Capability {
    /// Every capability this version of the host offers.
    pub const ALL: [Capability; 3] = [Capability::Log, Capability::Clock, Capability::Documents];

    /// The name used in manifests (`log`, `clock`, `documents`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Log => "log",
            Capability::Clock => "clock",
            Capability::Documents => "documents",
        }
    }

    /// The capability called `name` in manifests and configuration.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|capability| capability.name() == name)
    }

    /// The capability whose WIT interface a component imports under `import`
    /// (e.g. `flowhost:plugin/log@0.1.0`).
    pub(crate) fn from_import(import: &str) -> Option<Capability> {
        match import {
            "flowhost:plugin/log@0.1.0" => Some(Capability::Log),
            "flowhost:plugin/clock@0.1.0" => Some(Capability::Clock),
            "flowhost:plugin/documents@0.1.0" => Some(Capability::Documents),
            _ => None,
        }
    }

    pub(crate) fn add_to_linker(self, linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        match self {
            Capability::Log => log::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state),
            Capability::Clock => clock::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state),
            Capability::Documents => documents::add_to_linker::<HostState, HasSelf<HostState>>(linker, |state| state),
        }
    }
}

/// Imports of `flowhost:plugin` that carry only types (no functions): always satisfiable.
pub(crate) const TYPE_ONLY_IMPORTS: [&str; 1] = ["flowhost:plugin/types@0.1.0"];

/// The state of one store (one invocation).
pub(crate) struct HostState {
    /// `id@version`, for log lines.
    pub plugin: Arc<str>,
    /// The plugin's id: the scope of its documents.
    pub scope: Arc<str>,
    pub clock: Arc<dyn Clock>,
    pub documents: Option<Arc<dyn DocumentStore>>,
    /// When the invocation's wall-clock deadline passes: a host call (documents) is not interrupted by the
    /// epoch, so it stops waiting at this instant itself.
    pub deadline: Instant,
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

/// Longest document key a plugin may use, in bytes.
pub(crate) const MAX_DOCUMENT_KEY_BYTES: usize = 256;
/// Largest document a plugin may store, in bytes of JSON.
pub(crate) const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

impl HostState {
    fn document_store(&self) -> Result<&Arc<dyn DocumentStore>, String> {
        self.documents.as_ref().ok_or_else(|| "this host has no document store for plugins".to_owned())
    }

    /// The id of `key`'s document in [`PLUGIN_DOCUMENTS`]: keys of one plugin can never reach another's.
    fn document_id(&self, key: &str) -> Result<String, String> {
        if key.is_empty() || key.len() > MAX_DOCUMENT_KEY_BYTES || key.chars().any(char::is_control) {
            return Err(format!(
                "a document key must be 1 to {MAX_DOCUMENT_KEY_BYTES} bytes without control characters"
            ));
        }
        Ok(format!("{}/{key}", self.scope))
    }

    /// Runs a document operation, giving up at the invocation's deadline.
    async fn bounded<T>(
        &self,
        operation: impl std::future::Future<Output = Result<T, flowhost_core::PortError>>,
    ) -> Result<T, String> {
        match tokio::time::timeout_at(self.deadline.into(), operation).await {
            Ok(result) => result.map_err(|error| format!("document store: {error}")),
            Err(_) => Err("document store: the invocation's deadline passed".to_owned()),
        }
    }
}

impl documents::Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<String>, String>> {
        let result = async {
            let id = self.document_id(&key)?;
            let store = self.document_store()?;
            let stored = self.bounded(store.get(PLUGIN_DOCUMENTS, &id)).await?;
            Ok(stored.and_then(|mut doc| doc.get_mut("value").map(Value::take)).map(|value| value.to_string()))
        };
        Ok(result.await)
    }

    async fn put(&mut self, key: String, value: String) -> wasmtime::Result<Result<(), String>> {
        let result = async {
            let id = self.document_id(&key)?;
            if value.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("a document may hold at most {MAX_DOCUMENT_BYTES} bytes ({} given)", value.len()));
            }
            let value: Value = serde_json::from_str(&value).map_err(|error| format!("not a JSON document: {error}"))?;
            let store = self.document_store()?;
            let doc = json!({ "plugin": &*self.scope, "key": key, "value": value });
            self.bounded(store.upsert(PLUGIN_DOCUMENTS, &id, doc)).await
        };
        Ok(result.await)
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<Result<bool, String>> {
        let result = async {
            let id = self.document_id(&key)?;
            let store = self.document_store()?;
            self.bounded(store.delete(PLUGIN_DOCUMENTS, &id)).await
        };
        Ok(result.await)
    }
}
