//! [`WasmNodes`]: rule conditions and output mappings run by the bundled (or an operator's newer) `condition`
//! and `mapping` node-kind components through the plugin runtime, instead of natively. Each call takes the
//! plugin's active version at that moment, so a hot-swapped node kind applies from the next batch on.
//!
//! A call is one rule's node over every event of a batch it applies to: a `flowhost:plugin@0.2.0` node kind
//! prepares the rule's configuration (compiles the CEL expression) once and evaluates all the events in one
//! instance; an older component is invoked once per event (see `Plugin::evaluate`). Every event carries its
//! invocation context: the tenant, the rule's flow, the rule as the node, the record's position as the
//! idempotency key, and the attempt. The README's benchmark table has the figures against the native node kinds.

use std::sync::Arc;

use flowhost_components::ComponentStore;
use flowhost_runs::nodes::{evaluate_active, MappingNode};
use flowhost_runtime::{BatchContext, InvokeError, NodeEvent, Outcome};
use serde_json::Value;

use crate::process::{NodeFailure, NodeInput, NodeKinds};
use crate::CompiledRule;

pub use flowhost_runs::nodes::{CONDITION_PLUGIN, MAPPING_PLUGIN};

/// Node kinds run by components (see the module documentation).
pub struct WasmNodes {
    store: Arc<ComponentStore>,
}

impl std::fmt::Debug for WasmNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmNodes").finish_non_exhaustive()
    }
}

impl WasmNodes {
    pub fn new(store: Arc<ComponentStore>) -> WasmNodes {
        WasmNodes { store }
    }

    /// Evaluates node kind `kind` configured with `config` for `rule` on `events`: one JSON output (text) per
    /// event.
    async fn evaluate(
        &self,
        kind: &str,
        rule: &CompiledRule,
        config: &str,
        events: &[NodeInput<'_>],
    ) -> Vec<Result<String, NodeFailure>> {
        let batch = BatchContext { flow_id: rule.rule.flow_id.clone(), node_id: Some(rule.rule.id.clone()) };
        let node_events: Vec<NodeEvent> = events.iter().map(|input| node_event(rule, input)).collect();
        match evaluate_active(&self.store, kind, kind, config, batch, node_events).await {
            Ok(results) => results.into_iter().map(|result| result.map_err(|error| failure(kind, &error))).collect(),
            Err(unavailable) => events.iter().map(|_| Err(NodeFailure::Unavailable(unavailable.clone()))).collect(),
        }
    }
}

/// The JSON output of a node kind, parsed.
fn parse(kind: &str, output: &str) -> Result<Value, NodeFailure> {
    serde_json::from_str(output).map_err(|error| NodeFailure::Permanent(format!("{kind}: {error}")))
}

/// One record as an event of `rule`'s node: the idempotency key is the record's position and the rule, the same
/// on every attempt.
fn node_event(rule: &CompiledRule, input: &NodeInput<'_>) -> NodeEvent {
    let record = input.record;
    NodeEvent {
        tenant_id: input.event.tenant_id.clone(),
        run_id: None,
        idempotency_key: idempotency_key(record, &rule.rule.id),
        attempt: input.attempt,
        // The record's value is the event's fields: a JSON object (it parsed as one).
        event: String::from_utf8_lossy(&record.value).into_owned(),
    }
}

/// `topic/partition/offset/rule`, written into one allocation (it is made for every event and rule of a batch).
fn idempotency_key(record: &flowhost_core::ports::Record, rule_id: &str) -> String {
    use std::fmt::Write;
    let mut key = String::with_capacity(record.topic.len() + rule_id.len() + 32);
    key.push_str(&record.topic);
    let _ = write!(key, "/{}/{}/", record.partition, record.offset);
    key.push_str(rule_id);
    key
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

#[async_trait::async_trait]
impl NodeKinds for WasmNodes {
    async fn conditions(&self, rule: &CompiledRule, events: &[NodeInput<'_>]) -> Vec<Result<bool, NodeFailure>> {
        let outputs = self.evaluate(CONDITION_PLUGIN, rule, &rule.condition.config, events).await;
        outputs
            .into_iter()
            .map(|output| match output?.as_str() {
                // The bundled component's two answers, without parsing them.
                r#"{"pass":true}"# => Ok(true),
                r#"{"pass":false}"# => Ok(false),
                other => parse(CONDITION_PLUGIN, other)?.get("pass").and_then(Value::as_bool).ok_or_else(|| {
                    NodeFailure::Permanent(format!("condition: expected {{\"pass\": bool}}, got {other}"))
                }),
            })
            .collect()
    }

    async fn mappings(
        &self,
        rule: &CompiledRule,
        mapping: &MappingNode,
        events: &[NodeInput<'_>],
    ) -> Vec<Result<Value, NodeFailure>> {
        let outputs = self.evaluate(MAPPING_PLUGIN, rule, &mapping.config, events).await;
        outputs
            .into_iter()
            .map(|output| {
                let mut output = parse(MAPPING_PLUGIN, &output?)?;
                output.get_mut("event").map(Value::take).ok_or_else(|| {
                    NodeFailure::Permanent(format!("mapping: expected {{\"event\": ...}}, got {output}"))
                })
            })
            .collect()
    }
}
