//! The v2 flow as written and stored: the graph body (nodes and edges), the flow record, released versions,
//! release attempts and the edit lock.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::issues::Issue;

/// The kinds of node a v2 flow is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// Where a run starts: an event type on a topic, or an external service's events.
    Source,
    /// A CEL expression over the fields that reach it, or an else branch (`else: true`).
    Condition,
    /// At most `limit` events per `key` in `window_seconds`; the rest stop here.
    RateLimit,
    /// Selects or renames fields of the payload.
    Mapping,
    /// Reads a service's data source into a field of the payload.
    Lookup,
    /// Publishes the payload to a topic and continues.
    OutputTopic,
    /// The editor's "service segment": the payload enters a service; actions after it run in that service.
    ServiceIn,
    /// Runs `config.action_ref` of the segment's service.
    Action,
    /// A node kind a plugin declares: `config.kind` of the component `config.plugin`, configured by the rest of
    /// `config` (checked against the declaration's `config_schema`).
    PluginNode,
}

impl NodeKind {
    pub const ALL: [NodeKind; 9] = [
        NodeKind::Source,
        NodeKind::Condition,
        NodeKind::RateLimit,
        NodeKind::Mapping,
        NodeKind::Lookup,
        NodeKind::OutputTopic,
        NodeKind::ServiceIn,
        NodeKind::Action,
        NodeKind::PluginNode,
    ];

    /// The name written in a node's `kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Source => "source",
            NodeKind::Condition => "condition",
            NodeKind::RateLimit => "rate-limit",
            NodeKind::Mapping => "mapping",
            NodeKind::Lookup => "lookup",
            NodeKind::OutputTopic => "output-topic",
            NodeKind::ServiceIn => "service-in",
            NodeKind::Action => "action",
            NodeKind::PluginNode => "node-kind",
        }
    }

    pub fn parse(kind: &str) -> Option<NodeKind> {
        NodeKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

/// One node of the graph. `kind` stays a string so that an unknown kind is a validation issue naming the node,
/// not an unreadable body; `config` is the kind's settings (an object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub kind: String,
    /// A label for people; an action node's `name` is stripped at release (its identity is `config.action_ref`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "empty_object")]
    pub config: Value,
    /// Where the editor draws the node; kept as given, never interpreted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Value>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A connection from one node's output to another node's input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    #[serde(default)]
    pub id: String,
    pub from: String,
    pub to: String,
}

/// The graph: what a draft holds, what validation reads and what a release freezes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowBody {
    #[serde(default)]
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// Where a v2 flow is in its life (spec 001's state table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowStatus {
    /// Never released.
    Draft,
    /// Released, and its released version passed validation the last time it was checked.
    Valid,
    /// Released, and the drift pass found blocking issues in its released version (`broken_reasons`).
    Invalid,
}

/// Campaign metadata of a v2 flow, edited with the flow: the flow is then a campaign of `tenant_id` (the
/// campaign events API reads it). The flow's `description` is the campaign's description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignMeta {
    /// The tenant the campaign belongs to: 1 to 64 letters, digits, `-`, `_` or `.`.
    pub tenant_id: String,
    /// What the campaign offers players (free text, at most 1024 characters).
    #[serde(default)]
    pub offering: String,
    /// RFC 3339 instants; the campaign has ended once `ends_at` passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// An archived campaign counts as ended.
    #[serde(default)]
    pub archived: bool,
}

/// The marker a stored flow carries to tell v2 flows from v1 flows (both live in the `flows` collection).
pub const API_VERSION: u32 = 2;

/// A v2 flow as stored in the `flows` collection (one id space with v1 flows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    pub id: String,
    pub api_version: u32,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Set when the flow is a campaign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub campaign: Option<CampaignMeta>,
    pub status: FlowStatus,
    pub enabled: bool,
    /// The body being edited. Saving a draft never changes what runs.
    pub draft: FlowBody,
    /// What validation said about the draft when it was last saved.
    #[serde(default)]
    pub draft_issues: Vec<Issue>,
    /// The released version's blocking issues as of the last release or drift pass (empty when valid).
    #[serde(default)]
    pub broken_reasons: Vec<Issue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<String>,
    /// SHA-256 of the draft as it was released, to tell whether the draft changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_draft_hash: Option<String>,
    /// Whether the draft differs from the released body (always true before the first release).
    #[serde(default)]
    pub draft_changed: bool,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_by: Option<String>,
}

/// What `GET /api/v2/flows` lists per flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSummary {
    pub id: String,
    pub name: String,
    pub status: FlowStatus,
    pub enabled: bool,
    pub broken_reasons: Vec<Issue>,
    pub released_version: Option<u64>,
    pub released_at: Option<String>,
    pub draft_changed: bool,
    pub updated_at: String,
}

impl From<&FlowRecord> for FlowSummary {
    fn from(flow: &FlowRecord) -> Self {
        FlowSummary {
            id: flow.id.clone(),
            name: flow.name.clone(),
            status: flow.status,
            enabled: flow.enabled,
            broken_reasons: flow.broken_reasons.clone(),
            released_version: flow.released_version,
            released_at: flow.released_at.clone(),
            draft_changed: flow.draft_changed,
            updated_at: flow.updated_at.clone(),
        }
    }
}

/// An immutable released version (collection `flow_versions`, id `{flow_id}/{version}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowVersion {
    pub flow_id: String,
    pub version: u64,
    /// The normalized body: action node names stripped, defaults filled.
    pub body: FlowBody,
    /// SHA-256 of the normalized body's JSON.
    pub body_hash: String,
    /// The services the version references (segments, lookups, service sources), sorted.
    pub services: Vec<String>,
    pub released_at: String,
    pub released_by: String,
    /// Every warning validation reported at release (warnings never block a release).
    pub warnings: Vec<Issue>,
    /// The codes of those warnings the release request acknowledged.
    #[serde(default)]
    pub acknowledged_warnings: Vec<String>,
    /// The codes of those warnings the request did not acknowledge (released all the same).
    #[serde(default)]
    pub unacknowledged_warnings: Vec<String>,
}

/// One release request, whatever its outcome (collection `flow_release_attempts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseAttempt {
    pub id: String,
    pub flow_id: String,
    pub at: String,
    pub at_ms: i64,
    pub by: String,
    pub outcome: ReleaseOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Every issue validation reported.
    pub issues: Vec<Issue>,
    /// The warning codes the request acknowledged.
    pub acknowledged: Vec<String>,
    /// Warning codes present but not acknowledged (recorded; never a reason to block).
    pub unacknowledged: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseOutcome {
    Released,
    Blocked,
}

/// Who edits a draft, and until when (collection `flow_edit_locks`, id: the flow id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditLock {
    pub flow_id: String,
    pub holder: String,
    pub acquired_at: String,
    pub expires_at: String,
    pub expires_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::NodeKind;

    /// A manifest's `supports_nodes` accepts exactly the node kinds a flow can hold.
    #[test]
    fn the_catalog_knows_every_node_kind() {
        let names: Vec<&str> = NodeKind::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(names, flowhost_catalog::NODE_KINDS);
    }
}
