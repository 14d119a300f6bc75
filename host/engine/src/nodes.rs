//! [`WasmNodes`]: rule conditions and output mappings run by the bundled (or an operator's newer) `condition`
//! and `mapping` node-kind components through the plugin runtime, instead of natively. Each call takes the
//! plugin's active version at that moment, so a hot-swapped node kind applies from the next call on.
//!
//! A component invocation is tens of microseconds against well under a microsecond natively (see the README's
//! benchmark table), so this mode is for deployments that want operator-replaceable node kinds, not for peak
//! throughput; the default stays native.

use std::sync::Arc;

use flowhost_components::ComponentStore;
use flowhost_core::model::OutputMapping;
use flowhost_runtime::{InvokeError, Outcome};
use serde_json::{json, Map, Value};
use tokio::runtime::Handle;

use crate::process::{NodeFailure, NodeKinds};
use crate::CompiledRule;

/// The plugin id (and action) of the condition node kind.
pub const CONDITION_PLUGIN: &str = "condition";
/// The plugin id (and action) of the mapping node kind.
pub const MAPPING_PLUGIN: &str = "mapping";

/// Node kinds run by components (see the module documentation). Calls block the calling thread, which must be
/// a blocking one (`tokio::task::spawn_blocking`), on the runtime `handle`.
pub struct WasmNodes {
    store: Arc<ComponentStore>,
    handle: Handle,
}

impl std::fmt::Debug for WasmNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmNodes").finish_non_exhaustive()
    }
}

impl WasmNodes {
    pub fn new(store: Arc<ComponentStore>, handle: Handle) -> WasmNodes {
        WasmNodes { store, handle }
    }

    /// Invokes node kind `kind` with `{ config, event }` and returns its JSON output.
    fn invoke(&self, kind: &str, config: Value, fields: &Map<String, Value>) -> Result<Value, NodeFailure> {
        let plugin = self
            .store
            .active(kind)
            .ok_or_else(|| NodeFailure::Unavailable(format!("the {kind} node kind has no active component")))?;
        let input = json!({ "config": config, "event": fields }).to_string();
        let output = self.handle.block_on(plugin.invoke(kind, &input)).map_err(|error| failure(kind, &error))?;
        serde_json::from_str(&output).map_err(|error| NodeFailure::Permanent(format!("{kind}: {error}")))
    }
}

/// How the engine treats a failed node-kind call: a guest's own permanent failure of a condition means "cannot
/// decide this event" (no match, as a native evaluation error), of a mapping a dead letter; skip-forward is
/// honoured; a full instance pool is the node kind being unavailable (the batch waits); a deadline or the
/// guest's retryable failure retries the record; anything else the guest did (trap, fuel, memory, bad output)
/// dead-letters it.
fn failure(kind: &str, error: &InvokeError) -> NodeFailure {
    let message = format!("{kind}: {error}");
    match (error, error.outcome()) {
        (InvokeError::Busy(_), _) => NodeFailure::Unavailable(message),
        (InvokeError::Permanent(_), _) if kind == CONDITION_PLUGIN => NodeFailure::NoMatch(message),
        (_, Outcome::SkipForward) => NodeFailure::SkipForward(message),
        (_, Outcome::Retryable) => NodeFailure::Retryable(message),
        (_, Outcome::Permanent) => NodeFailure::Permanent(message),
    }
}

impl NodeKinds for WasmNodes {
    fn blocking(&self) -> bool {
        true
    }

    fn condition(&self, rule: &CompiledRule, fields: &Map<String, Value>) -> Result<bool, NodeFailure> {
        let config = json!({ "expression": rule.rule.conditions.expression });
        let output = self.invoke(CONDITION_PLUGIN, config, fields)?;
        output
            .get("pass")
            .and_then(Value::as_bool)
            .ok_or_else(|| NodeFailure::Permanent(format!("condition: expected {{\"pass\": bool}}, got {output}")))
    }

    fn mapping(&self, mapping: &OutputMapping, fields: &Map<String, Value>) -> Result<Value, NodeFailure> {
        let config = serde_json::to_value(mapping).unwrap_or(Value::Null);
        let mut output = self.invoke(MAPPING_PLUGIN, config, fields)?;
        output
            .get_mut("event")
            .map(Value::take)
            .ok_or_else(|| NodeFailure::Permanent(format!("mapping: expected {{\"event\": ...}}, got {output}")))
    }
}
