//! v1 rules on the executor. [`RuleSet`] is the rule cache: every enabled rule compiled to a flow plan
//! (`source -> condition -> mapping? -> output?`, the plan type v2 flows compile to: [`FlowPlan::for_rule`]),
//! with its tenant overrides, indexed by source topic and `event_type`; built whole from the documents port and
//! swapped atomically; conditions are compiled once per (expression, schema) and reused across reloads.
//!
//! - [`batch`]: a consumed batch through the rules' plans, recorded in no run (the v1 contract: outputs with
//!   the rule's header, invalid records moved, dead letters with their headers);
//! - [`delivery`]: publishing a batch's outputs, retrying one record alone, dead-lettering;
//! - [`metrics`]: the `flowhost_engine_*` metrics v1 users read.

pub mod batch;
pub(crate) mod delivery;
pub mod metrics;

pub use metrics::EngineMetrics;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::nodes::{ConditionNode, MappingNode};
use crate::plan::FlowPlan;
use flowhost_core::collections::{EVENT_SOURCES, RULES, SCHEMAS, TENANT_OVERRIDES};
use flowhost_core::model::{EventSchema, EventSource, MappingMode, Rule, TenantOverride};
use flowhost_core::ports::{DocumentStore, PortError};
use flowhost_expr::Expression;
use serde::de::DeserializeOwned;
use tracing::warn;

/// One rule ready to run: its plan and its tenant switches.
#[derive(Debug)]
pub struct CompiledRule {
    pub rule: Rule,
    /// `source -> condition -> mapping? -> output?`: the output is the rule's `output_topic`, else its source
    /// topic's default (none when neither exists); the mapping only when there is an output.
    pub plan: Arc<FlowPlan>,
    /// Per-tenant switches; a tenant without an entry follows the rule.
    pub tenant_enabled: HashMap<String, bool>,
}

impl CompiledRule {
    /// Whether the rule runs for an event of `tenant`. The rule's own `enabled` is the master switch (disabled
    /// rules are not loaded at all); an override can turn it off, or back on, for one tenant.
    pub fn enabled_for(&self, tenant: Option<&str>) -> bool {
        tenant.and_then(|t| self.tenant_enabled.get(t)).copied().unwrap_or(true)
    }
}

/// Compiled conditions kept across reloads, keyed by event type, schema and source text, so an unchanged
/// rule is never recompiled.
#[derive(Default)]
pub struct ExpressionMemo {
    compiled: HashMap<MemoKey, Arc<ConditionNode>>,
}

/// (event type, the schema's (field, type) list when one exists, expression source).
type MemoKey = (String, Option<Vec<(String, String)>>, String);

impl ExpressionMemo {
    fn get(&mut self, source: &str, schema: Option<&EventSchema>) -> Result<Arc<ConditionNode>, Vec<String>> {
        let schema_key = schema.map(|s| s.fields.iter().map(|f| (f.name.clone(), format!("{:?}", f.kind))).collect());
        let key = (schema.map(|s| s.event_type.clone()).unwrap_or_default(), schema_key, source.to_owned());
        if let Some(condition) = self.compiled.get(&key) {
            return Ok(condition.clone());
        }
        let condition = Arc::new(ConditionNode::new(source, Expression::compile(source, schema)?));
        self.compiled.insert(key, condition.clone());
        Ok(condition)
    }

    /// Drops entries no rule used in the last load.
    fn retain_used(&mut self, used: &[Arc<ConditionNode>]) {
        self.compiled.retain(|_, e| used.iter().any(|u| Arc::ptr_eq(u, e)));
    }
}

/// The loaded rules, indexed by source topic, then event type.
#[derive(Debug, Default)]
pub struct RuleSet {
    by_topic: HashMap<String, HashMap<String, Vec<Arc<CompiledRule>>>>,
    problems: Vec<(String, String)>,
    len: usize,
}

async fn load_all<T: DeserializeOwned>(documents: &dyn DocumentStore, collection: &str) -> Result<Vec<T>, PortError> {
    let mut out = Vec::new();
    for doc in documents.list(collection).await? {
        match serde_json::from_value(doc) {
            Ok(item) => out.push(item),
            Err(error) => warn!(%error, collection, "skipping a stored document that does not parse"),
        }
    }
    Ok(out)
}

impl RuleSet {
    /// Reads rules, overrides, event sources and schemas, and compiles what changed.
    pub async fn load(documents: &dyn DocumentStore, memo: &mut ExpressionMemo) -> Result<RuleSet, PortError> {
        let rules: Vec<Rule> = load_all(documents, RULES).await?;
        let overrides: Vec<TenantOverride> = load_all(documents, TENANT_OVERRIDES).await?;
        let sources: Vec<EventSource> = load_all(documents, EVENT_SOURCES).await?;
        let schemas: Vec<EventSchema> = load_all(documents, SCHEMAS).await?;
        Ok(Self::build(rules, overrides, sources, schemas, memo))
    }

    /// Builds the index from already loaded resources.
    pub fn build(
        rules: Vec<Rule>,
        overrides: Vec<TenantOverride>,
        sources: Vec<EventSource>,
        schemas: Vec<EventSchema>,
        memo: &mut ExpressionMemo,
    ) -> RuleSet {
        let defaults: HashMap<String, String> =
            sources.into_iter().map(|s| (s.source_topic, s.default_output_topic)).collect();
        let schemas: HashMap<String, EventSchema> = schemas.into_iter().map(|s| (s.event_type.clone(), s)).collect();
        let mut tenant_enabled: HashMap<String, HashMap<String, bool>> = HashMap::new();
        for o in overrides {
            if let Some(enabled) = o.enabled {
                tenant_enabled.entry(o.rule_id).or_default().insert(o.tenant_id, enabled);
            }
        }
        let mut set = RuleSet::default();
        let mut used = Vec::new();
        for rule in rules.into_iter().filter(|r| r.enabled) {
            let schema = schemas.get(&rule.conditions.event_type);
            let condition = match memo.get(&rule.conditions.expression, schema) {
                Ok(condition) => condition,
                Err(errors) => {
                    set.problems.push((rule.id.clone(), errors.join("; ")));
                    continue;
                }
            };
            used.push(condition.clone());
            let output_topic = if rule.output_topic.is_empty() {
                defaults.get(&rule.source.topic).cloned()
            } else {
                Some(rule.output_topic.clone())
            };
            let mapping = rule.output_mapping.as_ref().map(|mapping| {
                let fields = mapping.fields.iter().map(|f| (f.source.clone(), f.target.clone())).collect();
                // `select` is v1's only mode: the targets alone.
                let MappingMode::Select = mapping.mode;
                Arc::new(MappingNode::new(false, fields))
            });
            let plan = FlowPlan::for_rule(&rule, condition, mapping, output_topic.as_deref());
            let compiled = CompiledRule {
                tenant_enabled: tenant_enabled.remove(&rule.id).unwrap_or_default(),
                plan: Arc::new(plan),
                rule,
            };
            set.by_topic
                .entry(compiled.rule.source.topic.clone())
                .or_default()
                .entry(compiled.rule.conditions.event_type.clone())
                .or_default()
                .push(Arc::new(compiled));
            set.len += 1;
        }
        memo.retain_used(&used);
        set
    }

    /// The rules for events of `event_type` on `topic`.
    pub fn matching(&self, topic: &str, event_type: &str) -> &[Arc<CompiledRule>] {
        self.by_topic.get(topic).and_then(|m| m.get(event_type)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether some enabled rule reads `topic`.
    pub fn reads(&self, topic: &str) -> bool {
        self.by_topic.contains_key(topic)
    }

    /// Every topic some enabled rule reads.
    pub fn source_topics(&self) -> BTreeSet<String> {
        self.by_topic.keys().cloned().collect()
    }

    /// Rules left out because their expression does not compile: (rule id, messages).
    pub fn problems(&self) -> impl Iterator<Item = (&str, &str)> {
        self.problems.iter().map(|(id, p)| (id.as_str(), p.as_str()))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
