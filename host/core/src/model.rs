//! The flow runtime's resources as stored and as served by the v1 administration API (spec 001,
//! "Resources and their fields"). Unknown enum values fail deserialization, which the API turns into a 400.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

fn default_true() -> bool {
    true
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Where a rule reads events. Only Kafka-protocol topics exist today.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    Kafka,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuleSource {
    #[serde(rename = "type")]
    pub kind: SourceType,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RuleConditions {
    pub event_type: String,
    /// A CEL expression over the fields of the event type's schema; must evaluate to a boolean.
    pub expression: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MappingMode {
    /// Only the listed fields are copied, each from `source` to `target`.
    Select,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FieldMapping {
    pub source: String,
    pub target: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OutputMapping {
    pub mode: MappingMode,
    pub fields: Vec<FieldMapping>,
}

/// A rule (trigger): events of `conditions.event_type` on `source.topic` that satisfy the expression are
/// published to `output_topic`, or the source topic's default output topic when it is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Rule {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub source: RuleSource,
    pub conditions: RuleConditions,
    #[serde(default)]
    pub output_topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_mapping: Option<OutputMapping>,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Set on rules compiled from a flow; such rules are edited through the flow, never directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_id: Option<String>,
}

/// A per-tenant switch on one rule. `enabled: None` inherits the rule's own setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TenantOverride {
    pub rule_id: String,
    pub tenant_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl TenantOverride {
    /// The document id of the override of `tenant_id` on `rule_id`.
    pub fn document_id(rule_id: &str, tenant_id: &str) -> String {
        format!("{rule_id}/{tenant_id}")
    }
}

/// The default output topic of a source topic, used by rules whose `output_topic` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventSource {
    #[serde(default)]
    pub source_topic: String,
    pub default_output_topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    Int,
    Double,
    String,
    Bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SchemaField {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
}

/// The typed fields of one event type: the variables a rule expression may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventSchema {
    #[serde(default)]
    pub event_type: String,
    pub fields: Vec<SchemaField>,
}

impl EventSchema {
    /// A schema from `(name, type)` pairs.
    pub fn new(event_type: impl Into<String>, fields: &[(&str, FieldType)]) -> Self {
        Self {
            event_type: event_type.into(),
            fields: fields.iter().map(|(name, kind)| SchemaField { name: (*name).to_owned(), kind: *kind }).collect(),
        }
    }

    /// Problems with the field list: empty, duplicate or unusable names.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.fields.is_empty() {
            problems.push("fields must not be empty".to_owned());
        }
        let mut seen = std::collections::HashSet::new();
        for field in &self.fields {
            if !is_identifier(&field.name) {
                problems.push(format!(
                    "field name {:?} is not an identifier (letters, digits and _, not starting with a digit)",
                    field.name
                ));
            } else if !seen.insert(field.name.as_str()) {
                problems.push(format!("field {:?} is declared more than once", field.name));
            }
        }
        problems
    }
}

/// The longest flow id (and so campaign id).
pub const MAX_FLOW_ID_LEN: usize = 128;
/// The longest tenant id.
pub const MAX_TENANT_ID_LEN: usize = 64;

/// Whether `text` is 1 to `max_len` ASCII letters, digits, `-`, `_` or `.`: the shape of flow ids
/// ([`MAX_FLOW_ID_LEN`]) and tenant ids ([`MAX_TENANT_ID_LEN`]). Safe in a URL path segment and never containing
/// `:`, which composite document ids use as their separator.
pub fn is_slug(text: &str, max_len: usize) -> bool {
    !text.is_empty()
        && text.len() <= max_len
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `name` can be used as a CEL variable.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Flow status values. v1 flows move `draft` -> `active` on compile; released v2 flows carry `valid`/`invalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FlowStatus {
    #[default]
    Draft,
    Active,
    Valid,
    Invalid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowSource {
    pub node_id: String,
    #[serde(default)]
    pub event_type: String,
    #[serde(default)]
    pub source_topic: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowCondition {
    pub node_id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// An else branch matches the events that none of its sibling conditions match (see `flows`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_else: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowOutput {
    pub node_id: String,
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub output_topic: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowEdge {
    #[serde(default)]
    pub id: String,
    pub from: String,
    pub to: String,
}

/// A Studio graph (v1 model). Fields this version does not model (v2 nodes, layout) are kept as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Flow {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub status: FlowStatus,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<FlowSource>,
    #[serde(default)]
    pub conditions: Vec<FlowCondition>,
    #[serde(default)]
    pub outputs: Vec<FlowOutput>,
    #[serde(default)]
    pub edges: Vec<FlowEdge>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_enum_values_are_rejected() {
        let bad_type =
            r#"{"source":{"type":"rabbit","topic":"t"},"conditions":{"event_type":"e","expression":"true"}}"#;
        assert!(serde_json::from_str::<Rule>(bad_type).is_err());
        let bad_field = r#"{"fields":[{"name":"a","type":"float"}]}"#;
        assert!(serde_json::from_str::<EventSchema>(bad_field).is_err());
    }

    #[test]
    fn rule_defaults() {
        let rule: Rule = serde_json::from_str(
            r#"{"source":{"type":"kafka","topic":"t"},"conditions":{"event_type":"e","expression":"true"}}"#,
        )
        .unwrap();
        assert!(rule.enabled);
        assert_eq!(rule.output_topic, "");
        assert_eq!(rule.flow_id, None);
    }

    #[test]
    fn schema_problems() {
        let schema = |names: &[&str]| EventSchema {
            event_type: "e".into(),
            fields: names.iter().map(|n| SchemaField { name: (*n).into(), kind: FieldType::Int }).collect(),
        };
        assert!(schema(&["amount", "_x1"]).problems().is_empty());
        assert_eq!(schema(&[]).problems(), vec!["fields must not be empty"]);
        assert_eq!(schema(&["a", "a"]).problems().len(), 1);
        assert_eq!(schema(&["1a"]).problems().len(), 1);
        assert_eq!(schema(&["a-b"]).problems().len(), 1);
    }
}
