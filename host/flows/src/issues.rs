//! What validation reports: one [`Issue`] per problem, with a stable code, a severity, the node (and the
//! config field as a JSON Pointer) and a message that names the node.

use serde::{Deserialize, Serialize};

/// Whether an issue stops a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Blocks release; on a released flow, makes it `invalid`.
    Blocking,
    /// Never blocks a release; the release records whether the request acknowledged the code.
    Warning,
}

macro_rules! codes {
    ($($code:ident => $severity:ident, $doc:literal;)*) => {
        /// Every issue code validation can report, with its severity.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        #[allow(clippy::upper_case_acronyms)]
        pub enum Code {
            $(#[doc = $doc] $code,)*
        }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$code,)*];

            pub fn severity(self) -> Severity {
                match self { $(Code::$code => Severity::$severity,)* }
            }

            /// What the code means, for the table in docs/flows.md and Studio's help.
            pub fn description(self) -> &'static str {
                match self { $(Code::$code => $doc,)* }
            }
        }
    };
}

codes! {
    EmptyFlow => Blocking, "The flow has no nodes.";
    NodeIdInvalid => Blocking, "A node id is empty or longer than 128 characters.";
    DuplicateNodeId => Blocking, "Two nodes share an id.";
    UnknownNodeKind => Blocking, "A node's kind is not one of the v2 node kinds.";
    ConfigNotObject => Blocking, "A node's config is not a JSON object.";
    SourceMissing => Blocking, "The flow has no source node.";
    SourceDuplicate => Blocking, "The flow has more than one source node.";
    EdgeUnknownNode => Blocking, "An edge names a node that does not exist.";
    EdgeIntoSource => Blocking, "An edge leads into the source node.";
    MultipleInputs => Blocking, "A node has more than one incoming edge (each node continues exactly one path).";
    Cycle => Blocking, "Edges form a cycle.";
    OrphanNode => Warning, "A node cannot be reached from the source; it never runs.";
    DeadEnd => Warning, "A condition, rate-limit, mapping or lookup leads nowhere; its result is dropped.";
    SourceEventTypeMissing => Blocking, "The source names no event type.";
    SourceOriginInvalid => Blocking, "The source names neither a topic nor a service, or both.";
    SourceServiceUnsupported => Blocking, "The source names a service: runs start only from a topic's events, so the flow would never run.";
    SourceSchemaMissing => Blocking, "The source's event type has no schema, so nothing after it can be type-checked.";
    ConditionExpressionMissing => Blocking, "A condition that is not an else branch has no expression.";
    ElseWithExpression => Blocking, "An else branch carries an expression (it matches when its siblings do not).";
    MultipleElse => Blocking, "A node has more than one else branch.";
    ElseWithoutSiblings => Warning, "An else branch has no sibling condition, so it always matches.";
    CelInvalid => Blocking, "A CEL expression does not parse or type-check against the fields that reach it.";
    RateLimitInvalid => Blocking, "A rate-limit's limit or window is not a positive integer.";
    MappingInvalid => Blocking, "A mapping's mode or field list is malformed.";
    FieldUnknown => Blocking, "A node reads a field that does not reach it.";
    ServiceNotRegistered => Blocking, "A node names a service that has no registered manifest.";
    TransportNotOffered => Blocking, "A service segment's transport is not among the service's `service_sources`.";
    HttpEndpointMissing => Blocking, "A segment's transport is `http` but the service's active manifest has no `transports.http.endpoint`.";
    RetargetNotKafka => Blocking, "A Kafka topic retarget is set on a segment whose transport is not `kafka`.";
    KafkaTopicMissing => Blocking, "A segment's Kafka retarget topic does not exist (fails closed).";
    LookupInvalid => Blocking, "A lookup misses its service, data source or target field, or passes an undeclared parameter.";
    DataSourceUnknown => Blocking, "A lookup's data source is not declared by its service.";
    NodeKindNotSupported => Blocking, "A lookup's service does not list `lookup` in `supports_nodes`.";
    ActionRefMissing => Blocking, "An action node has no `config.action_ref`.";
    ActionWithoutSegment => Blocking, "An action has no service segment before it.";
    ActionNeedsSegment => Blocking, "An action follows another action without a service segment of its own.";
    ActionNotDeclared => Blocking, "The active manifest of the action's parent service does not declare the action.";
    ActionConfigInvalid => Blocking, "An action's config does not satisfy the action's `config_schema`.";
    NodeKindRefMissing => Blocking, "A plugin node kind (`node-kind`) has no `config.plugin` or `config.kind`.";
    NodeKindNotDeclared => Blocking, "A plugin node kind's plugin has no active version, or its active manifest does not declare the kind.";
    NodeKindConfigInvalid => Blocking, "A plugin node kind's config does not satisfy the kind's `config_schema`.";
    PlaceholderInvalid => Blocking, "A `{{placeholder}}` is malformed.";
    PlaceholderUnknownField => Blocking, "A `{{placeholder}}` names a field that does not reach the node.";
    PlaceholderTypeMismatch => Blocking, "A whole-value `{{placeholder}}` has a type the config field does not accept.";
    SegmentWithoutAction => Blocking, "A service segment has no action after it.";
    OutputTopicMissing => Blocking, "An output-topic node has no topic and its source topic has no default output topic.";
}

impl Code {
    /// The code as written in responses (`ACTION_NOT_DECLARED`).
    pub fn as_str(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    }
}

/// One problem validation found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub code: Code,
    pub severity: Severity,
    /// The node concerned; `None` for problems of the whole flow or of an edge alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge_id: Option<String>,
    /// The field within the node, as a JSON Pointer from the node (`/config/expression`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    pub message: String,
}

impl Issue {
    pub fn new(code: Code, message: impl Into<String>) -> Issue {
        Issue { code, severity: code.severity(), node_id: None, edge_id: None, pointer: None, message: message.into() }
    }

    pub fn at_node(mut self, node_id: &str) -> Issue {
        self.node_id = Some(node_id.to_owned());
        self
    }

    pub fn at_edge(mut self, edge_id: &str) -> Issue {
        self.edge_id = Some(edge_id.to_owned());
        self
    }

    pub fn pointer(mut self, pointer: impl Into<String>) -> Issue {
        self.pointer = Some(pointer.into());
        self
    }

    pub fn is_blocking(&self) -> bool {
        self.severity == Severity::Blocking
    }
}

/// A validation result as the v2 routes answer it: `valid` (no blocking issue), `errors` (the blocking
/// issues' messages, as the spec's routes answer), `warnings` (the warnings' messages) and every `issue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub valid: bool,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub issues: Vec<Issue>,
}

impl Report {
    pub fn new(issues: Vec<Issue>) -> Report {
        let message_of = |blocking: bool| {
            issues.iter().filter(|i| i.is_blocking() == blocking).map(|i| i.message.clone()).collect::<Vec<_>>()
        };
        Report {
            valid: !issues.iter().any(Issue::is_blocking),
            errors: message_of(true),
            warnings: message_of(false),
            issues,
        }
    }

    pub fn blocking(&self) -> Vec<Issue> {
        self.issues.iter().filter(|i| i.is_blocking()).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_screaming_snake_case() {
        assert_eq!(Code::ActionNotDeclared.as_str(), "ACTION_NOT_DECLARED");
        assert_eq!(Code::EmptyFlow.severity(), Severity::Blocking);
        assert_eq!(Code::OrphanNode.severity(), Severity::Warning);
        let issue = Issue::new(Code::Cycle, "x").at_node("n1").pointer("/config");
        let json = serde_json::to_value(&issue).unwrap();
        assert_eq!(json["code"], "CYCLE");
        assert_eq!(json["severity"], "blocking");
        assert_eq!(json["pointer"], "/config");
    }

    #[test]
    fn the_docs_list_every_code_with_its_severity() {
        let page = include_str!("../../../docs/flows.md");
        for code in Code::ALL {
            let severity = serde_json::to_value(code.severity()).unwrap();
            let row = format!("| `{}` | {} | {} |", code.as_str(), severity.as_str().unwrap(), code.description());
            assert!(page.contains(&row), "docs/flows.md lacks the row {row}");
        }
    }
}
