//! The one validation engine of v2 flows: draft validation, the flow validate route, save, release and the
//! drift pass all call [`validate`] with a body and [`Dependencies`] loaded fresh, so they agree by
//! construction.
//!
//! The walk starts at the source with the fields of its event type's schema (plus `event_type` and
//! `tenant_id` as strings unless the schema declares them) and carries them down each path: a `select`
//! mapping keeps only its targets, a `merge` mapping adds or renames, a lookup adds its `target` and an action
//! adds `result` (both dynamic: their shape is known only at run time). Every CEL expression, mapping source,
//! rate-limit key and `{{placeholder}}` is checked against the fields that reach its node. Each node has at
//! most one incoming edge, so the fields at a node are those of its one path.
//!
//! This module walks the graph, carries the fields and holds what several kinds check alike (services,
//! placeholders, configuration schemas); each node kind's own checks are a module of their own: [`source`],
//! [`condition`], [`mapping`], [`lookup`], [`service_in`], [`action`], [`plugin_node`].

mod action;
mod condition;
mod lookup;
mod mapping;
mod plugin_node;
mod service_in;
mod source;

use std::collections::{HashMap, HashSet};

use flowhost_core::model::FieldType;
use flowhost_core::placeholders::{pieces, whole_placeholder, Piece};
use flowhost_expr::FieldKind;
use serde_json::{Map, Value};

use crate::deps::{ActiveService, Dependencies};
use crate::issues::{Code, Issue};
use crate::model::{FlowBody, Node, NodeKind};

/// The fields an action adds to the payload: its result.
pub const ACTION_RESULT_FIELD: &str = "result";
/// Longest node id accepted.
pub const MAX_NODE_ID_LEN: usize = 128;

type Fields = Vec<(String, FieldKind)>;

/// Validates `body` against `deps`: every issue, blocking ones and warnings, in graph order.
pub fn validate(body: &FlowBody, deps: &Dependencies) -> Vec<Issue> {
    let mut check = Check::new(body, deps);
    check.run();
    check.issues
}

/// The fields that reach each node of `body` (as validation computes them: the source schema changed by the
/// mappings, lookups and actions before the node); nodes without a known source schema are absent. Runs
/// compile their conditions against these, so an expression reads its fields with the types validation
/// checked.
pub fn node_fields(body: &FlowBody, deps: &Dependencies) -> HashMap<String, Vec<(String, FieldKind)>> {
    let mut check = Check::new(body, deps);
    check.run();
    check.fields_at
}

/// The Kafka topics a body retargets service segments to, whose existence validation needs
/// ([`Dependencies::check_topics`]).
pub fn retarget_topics(body: &FlowBody) -> Vec<String> {
    body.nodes
        .iter()
        .filter(|n| n.kind == NodeKind::ServiceIn.as_str())
        .filter_map(|n| config_str(&n.config, "kafka_topic").map(str::to_owned))
        .collect()
}

/// The services a body references (service segments, lookups and service sources) and the plugins whose node
/// kinds it places (by component id: the drift pass looks flows up by both), sorted and distinct.
pub fn referenced_services(body: &FlowBody) -> Vec<String> {
    let mut services: Vec<String> = body
        .nodes
        .iter()
        .filter_map(|n| match NodeKind::parse(&n.kind)? {
            NodeKind::ServiceIn | NodeKind::Lookup | NodeKind::Source => config_str(&n.config, "service"),
            NodeKind::PluginNode => config_str(&n.config, "plugin"),
            _ => None,
        })
        .map(str::to_owned)
        .collect();
    services.sort();
    services.dedup();
    services
}

/// A non-empty string setting of a node's config.
pub(crate) fn config_str<'a>(config: &'a Value, key: &str) -> Option<&'a str> {
    config.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// What the walk carries down a path.
#[derive(Clone)]
struct PathState<'a> {
    /// The fields that reach the node; `None` when the source has no schema (nothing can be type-checked).
    fields: Option<Fields>,
    /// Where the fields come from, for messages (the source's event type).
    origin: String,
    /// The source topic (for output-topic defaults).
    source_topic: Option<String>,
    /// The nearest service segment before the node: its id and service.
    segment: Option<(&'a str, Option<&'a str>)>,
    /// Whether an action already ran in that segment on this path.
    segment_used: bool,
}

struct Check<'a> {
    body: &'a FlowBody,
    deps: &'a Dependencies,
    issues: Vec<Issue>,
    segments_with_action: HashSet<&'a str>,
    /// The fields that reached each node the walk visited.
    fields_at: HashMap<String, Fields>,
}

fn label(node: &Node) -> String {
    format!("{} node {:?}", node.kind, node.id)
}

impl<'a> Check<'a> {
    fn new(body: &'a FlowBody, deps: &'a Dependencies) -> Check<'a> {
        Check { body, deps, issues: Vec::new(), segments_with_action: HashSet::new(), fields_at: HashMap::new() }
    }

    fn push(&mut self, node: &Node, code: Code, pointer: Option<&str>, message: impl AsRef<str>) {
        let mut issue = Issue::new(code, format!("{}: {}", label(node), message.as_ref())).at_node(&node.id);
        if let Some(pointer) = pointer {
            issue = issue.pointer(pointer);
        }
        self.issues.push(issue);
    }

    fn run(&mut self) {
        let body = self.body;
        if body.nodes.is_empty() {
            self.issues.push(Issue::new(Code::EmptyFlow, "the flow has no nodes"));
            return;
        }
        // Nodes by id (the first of duplicates), kinds parsed.
        let mut nodes: HashMap<&'a str, (&'a Node, Option<NodeKind>)> = HashMap::new();
        let mut sources = Vec::new();
        for node in &body.nodes {
            if node.id.trim().is_empty() || node.id.len() > MAX_NODE_ID_LEN {
                self.issues.push(Issue::new(
                    Code::NodeIdInvalid,
                    format!("a {} node has an empty id or one longer than {MAX_NODE_ID_LEN} characters", node.kind),
                ));
                continue;
            }
            if nodes.contains_key(node.id.as_str()) {
                self.push(node, Code::DuplicateNodeId, Some("/id"), "another node has the same id");
                continue;
            }
            let kind = NodeKind::parse(&node.kind);
            if kind.is_none() {
                let known: Vec<&str> = NodeKind::ALL.iter().map(|k| k.as_str()).collect();
                self.push(
                    node,
                    Code::UnknownNodeKind,
                    Some("/kind"),
                    format!("unknown kind {:?} (known: {})", node.kind, known.join(", ")),
                );
            }
            if !node.config.is_object() {
                self.push(node, Code::ConfigNotObject, Some("/config"), "config must be a JSON object");
            }
            if kind == Some(NodeKind::Source) {
                sources.push(node);
            }
            nodes.insert(node.id.as_str(), (node, kind));
        }
        match sources.as_slice() {
            [] => self.issues.push(Issue::new(Code::SourceMissing, "the flow has no source node")),
            [_] => {}
            [_, extra @ ..] => {
                for node in extra {
                    self.push(node, Code::SourceDuplicate, None, "a flow has exactly one source node");
                }
            }
        }

        // Edges.
        let mut children: HashMap<&'a str, Vec<&'a str>> = HashMap::new();
        let mut parents: HashMap<&'a str, usize> = HashMap::new();
        for edge in &body.edges {
            let edge_label = if edge.id.is_empty() { format!("{}->{}", edge.from, edge.to) } else { edge.id.clone() };
            let mut known = true;
            for end in [&edge.from, &edge.to] {
                if !nodes.contains_key(end.as_str()) {
                    known = false;
                    self.issues.push(
                        Issue::new(Code::EdgeUnknownNode, format!("edge {edge_label:?}: unknown node {end:?}"))
                            .at_edge(&edge_label),
                    );
                }
            }
            if !known {
                continue;
            }
            if nodes[edge.to.as_str()].1 == Some(NodeKind::Source) {
                self.issues.push(
                    Issue::new(
                        Code::EdgeIntoSource,
                        format!("edge {edge_label:?}: the source node {:?} cannot have incoming edges", edge.to),
                    )
                    .at_node(&edge.to)
                    .at_edge(&edge_label),
                );
                continue;
            }
            children.entry(edge.from.as_str()).or_default().push(edge.to.as_str());
            *parents.entry(edge.to.as_str()).or_default() += 1;
        }
        for node in &body.nodes {
            if nodes.get(node.id.as_str()).is_some_and(|(n, _)| std::ptr::eq(*n, node))
                && parents.get(node.id.as_str()).copied().unwrap_or(0) > 1
            {
                self.push(node, Code::MultipleInputs, None, "has more than one incoming edge");
            }
        }
        let in_cycle = cycle_nodes(&body.nodes, &children);
        for node in &body.nodes {
            if in_cycle.contains(node.id.as_str()) {
                self.push(node, Code::Cycle, None, "is part of a cycle");
            }
        }

        // The walk from the source.
        let mut reached: HashSet<&str> = HashSet::new();
        if let [source] = sources.as_slice() {
            let state = PathState {
                fields: None,
                origin: String::new(),
                source_topic: None,
                segment: None,
                segment_used: false,
            };
            self.walk(source, state, &nodes, &children, &mut reached);
        }
        for node in &body.nodes {
            let first = nodes.get(node.id.as_str()).is_some_and(|(n, _)| std::ptr::eq(*n, node));
            if first
                && !reached.contains(node.id.as_str())
                && !in_cycle.contains(node.id.as_str())
                && sources.len() == 1
            {
                self.push(node, Code::OrphanNode, None, "cannot be reached from the source");
            }
        }
        for (id, (node, kind)) in &nodes {
            if *kind == Some(NodeKind::ServiceIn) && reached.contains(id) && !self.segments_with_action.contains(id) {
                self.push(
                    node,
                    Code::SegmentWithoutAction,
                    None,
                    "has no action after it (a service segment is followed by the action it runs)",
                );
            }
        }
        // Stable order: graph order of the body's nodes, whole-flow issues first.
        let position: HashMap<&str, usize> =
            body.nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).rev().collect();
        self.issues.sort_by_key(|issue| {
            issue.node_id.as_deref().and_then(|id| position.get(id).copied()).map_or(0, |p| p + 1)
        });
    }

    fn walk(
        &mut self,
        node: &'a Node,
        state: PathState<'a>,
        nodes: &HashMap<&'a str, (&'a Node, Option<NodeKind>)>,
        children: &HashMap<&'a str, Vec<&'a str>>,
        reached: &mut HashSet<&'a str>,
    ) {
        if !reached.insert(node.id.as_str()) {
            return;
        }
        let kind = nodes.get(node.id.as_str()).and_then(|(_, kind)| *kind);
        let next = match kind {
            Some(kind) if node.config.is_object() => self.node(node, kind, state),
            _ => state,
        };
        let kids = children.get(node.id.as_str()).cloned().unwrap_or_default();
        if kids.is_empty()
            && matches!(
                kind,
                Some(
                    NodeKind::Condition
                        | NodeKind::RateLimit
                        | NodeKind::Mapping
                        | NodeKind::Lookup
                        | NodeKind::PluginNode
                )
            )
        {
            self.push(node, Code::DeadEnd, None, "leads nowhere: connect it to a further node or remove it");
        }
        self.else_branches(node, &kids, nodes);
        for child in kids {
            if let Some((child, _)) = nodes.get(child) {
                self.walk(child, next.clone(), nodes, children, reached);
            }
        }
    }

    /// At most one else branch among a node's conditions, and an else branch has a sibling to be the else of.
    fn else_branches(
        &mut self,
        parent: &Node,
        kids: &[&'a str],
        nodes: &HashMap<&'a str, (&'a Node, Option<NodeKind>)>,
    ) {
        let conditions: Vec<&Node> = kids
            .iter()
            .filter_map(|id| nodes.get(id))
            .filter(|(_, kind)| *kind == Some(NodeKind::Condition))
            .map(|(node, _)| *node)
            .collect();
        let (elses, others): (Vec<&Node>, Vec<&Node>) = conditions.into_iter().partition(|n| is_else(&n.config));
        for extra in elses.iter().skip(1) {
            self.push(
                extra,
                Code::MultipleElse,
                Some("/config/else"),
                format!("{} already has an else branch", label(parent)),
            );
        }
        if let (Some(first), true) = (elses.first(), others.is_empty()) {
            self.push(
                first,
                Code::ElseWithoutSiblings,
                Some("/config/else"),
                "has no sibling condition, so it always matches",
            );
        }
    }

    /// Checks one node and returns the state its children see.
    fn node(&mut self, node: &'a Node, kind: NodeKind, mut state: PathState<'a>) -> PathState<'a> {
        if let Some(fields) = &state.fields {
            self.fields_at.insert(node.id.clone(), fields.clone());
        }
        let config = &node.config;
        match kind {
            NodeKind::Source => self.source(node, &mut state),
            NodeKind::Condition => self.condition(node, &state),
            NodeKind::RateLimit => {
                for key in ["limit", "window_seconds"] {
                    if config.get(key).and_then(Value::as_u64).is_none_or(|n| n < 1) {
                        self.push(
                            node,
                            Code::RateLimitInvalid,
                            Some(&format!("/config/{key}")),
                            format!("{key} must be a positive integer"),
                        );
                    }
                }
                if let Some(key) = config.get("key") {
                    match key.as_str() {
                        Some(name) => self.field_exists(node, &state, name, "/config/key"),
                        None => {
                            self.push(node, Code::RateLimitInvalid, Some("/config/key"), "key must be a field name")
                        }
                    }
                }
            }
            NodeKind::Mapping => self.mapping(node, &mut state),
            NodeKind::Lookup => self.lookup(node, &mut state),
            NodeKind::OutputTopic => {
                let defaulted = state.source_topic.as_ref().and_then(|t| self.deps.output_defaults.get(t));
                if config_str(config, "topic").is_none() && defaulted.is_none() {
                    self.push(
                        node,
                        Code::OutputTopicMissing,
                        Some("/config/topic"),
                        "has no topic and the source topic has no default output topic",
                    );
                }
            }
            NodeKind::ServiceIn => {
                self.service_in(node);
                state.segment = Some((node.id.as_str(), config_str(config, "service")));
                state.segment_used = false;
            }
            NodeKind::Action => {
                self.action(node, &state);
                state.segment_used = true;
                if let Some(fields) = &mut state.fields {
                    set_field(fields, ACTION_RESULT_FIELD, FieldKind::Dyn);
                }
            }
            NodeKind::PluginNode => self.plugin_node(node, &mut state),
        }
        state
    }

    /// The service a node names, or an issue at `/config/service`.
    fn service(&mut self, node: &Node, code_if_missing: Code) -> Option<&'a ActiveService> {
        let deps = self.deps;
        let Some(name) = config_str(&node.config, "service") else {
            self.push(node, code_if_missing, Some("/config/service"), "names no service");
            return None;
        };
        let service = deps.services.get(name);
        if service.is_none() {
            self.push(
                node,
                Code::ServiceNotRegistered,
                Some("/config/service"),
                format!("service {name:?} has not registered a manifest"),
            );
        }
        service
    }

    /// One `code` issue per error of `settings` against a `config_schema`, pointing at the config field it is
    /// about (a missing required property or an unexpected one at that property, so an editor shows it under
    /// its field); values that are whole placeholders (`whole`) are left to the placeholder type check.
    fn schema_issues(
        &mut self,
        node: &Node,
        validator: &jsonschema::Validator,
        settings: &Value,
        whole: &HashSet<String>,
        code: Code,
    ) {
        use jsonschema::error::ValidationErrorKind;
        for error in validator.iter_errors(settings) {
            let path = error.instance_path().as_str().to_owned();
            if whole.contains(&path) {
                continue; // A whole-value placeholder: its type is checked against the field's.
            }
            let property = match error.kind() {
                ValidationErrorKind::Required { property } => property.as_str().map(str::to_owned),
                ValidationErrorKind::AdditionalProperties { unexpected } => unexpected.first().cloned(),
                _ => None,
            };
            let at = match &property {
                Some(name) => format!("{path}/{}", escape_pointer(name)),
                None => path,
            };
            let named = if at.is_empty() { "config".to_owned() } else { format!("config field {at}") };
            self.push(node, code, Some(&format!("/config{at}")), format!("{named}: {error}"));
        }
    }

    /// Checks every `{{placeholder}}` in the strings of `value` (at `pointer`). With a schema, whole-value
    /// placeholders are recorded in `whole` (their paths) and their field type is checked against the schema's
    /// type at that place.
    fn placeholders(
        &mut self,
        node: &Node,
        value: &Value,
        pointer: &str,
        state: &PathState<'a>,
        mut schema: Option<(Option<&Value>, &mut HashSet<String>)>,
    ) {
        let mut strings = Vec::new();
        collect_strings(value, String::new(), &mut strings);
        for (path, text) in strings {
            let at = format!("{pointer}{path}");
            let names = match pieces(text) {
                Ok(pieces) => pieces
                    .into_iter()
                    .filter_map(|p| match p {
                        Piece::Placeholder(name) => Some(name),
                        Piece::Text(_) => None,
                    })
                    .collect::<Vec<_>>(),
                Err(error) => {
                    self.push(node, Code::PlaceholderInvalid, Some(&at), format!("{at}: {error}"));
                    continue;
                }
            };
            let whole_name = whole_placeholder(text);
            if let (Some((_, whole)), Some(_)) = (schema.as_mut(), whole_name) {
                // Rendered with the field's own type: the schema check of this value is the type check below.
                whole.insert(path.clone());
            }
            let Some(fields) = &state.fields else { continue };
            for name in &names {
                if field(fields, name).is_none() {
                    self.push(
                        node,
                        Code::PlaceholderUnknownField,
                        Some(&at),
                        format!("placeholder {{{{{name}}}}} at {at} names a field that does not reach this node"),
                    );
                }
            }
            let (Some((Some(schema), _)), Some(name)) = (schema.as_ref(), whole_name) else { continue };
            let Some(FieldKind::Typed(kind)) = field(fields, name) else { continue };
            let Some(accepted) = schema_types_at(schema, &path) else { continue };
            if !accepted.iter().any(|t| accepts(t, kind)) {
                self.push(
                    node,
                    Code::PlaceholderTypeMismatch,
                    Some(&at),
                    format!(
                        "placeholder {{{{{name}}}}} at {at} is a {} field, but the config field takes {}",
                        type_name(kind),
                        accepted.join(" or ")
                    ),
                );
            }
        }
    }
}

fn is_else(config: &Value) -> bool {
    config.get("else").and_then(Value::as_bool).unwrap_or(false)
}

fn field(fields: &Fields, name: &str) -> Option<FieldKind> {
    fields.iter().find(|(n, _)| n == name).map(|(_, kind)| *kind)
}

fn set_field(fields: &mut Fields, name: &str, kind: FieldKind) {
    match fields.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = kind,
        None => fields.push((name.to_owned(), kind)),
    }
}

fn type_name(kind: FieldType) -> &'static str {
    match kind {
        FieldType::Int => "int",
        FieldType::Double => "double",
        FieldType::String => "string",
        FieldType::Bool => "bool",
    }
}

/// Whether a JSON Schema `type` accepts a rendered field of `kind` (a value renders into a string too).
fn accepts(schema_type: &str, kind: FieldType) -> bool {
    match kind {
        FieldType::Int => matches!(schema_type, "integer" | "number" | "string"),
        FieldType::Double => matches!(schema_type, "number" | "string"),
        FieldType::String => schema_type == "string",
        FieldType::Bool => matches!(schema_type, "boolean" | "string"),
    }
}

/// Every string in `value` with its JSON Pointer.
fn collect_strings<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::String(s) => out.push((path, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_strings(item, format!("{path}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                collect_strings(item, format!("{path}/{}", escape_pointer(key)), out);
            }
        }
        _ => {}
    }
}

fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The `type`s a schema declares at `pointer` (following `properties`, `items` and `additionalProperties`);
/// `None` when the schema does not say.
fn schema_types_at(schema: &Value, pointer: &str) -> Option<Vec<String>> {
    let mut at = schema;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        at = match at.get("properties").and_then(|p| p.get(&segment)) {
            Some(next) => next,
            None => match (at.get("items"), segment.parse::<usize>()) {
                (Some(items), Ok(_)) if items.is_object() => items,
                _ => at.get("additionalProperties").filter(|a| a.is_object())?,
            },
        };
    }
    match at.get("type")? {
        Value::String(t) => Some(vec![t.clone()]),
        Value::Array(types) => Some(types.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
        _ => None,
    }
}

/// Nodes on a cycle (edges between known nodes), found by a depth-first search per node.
fn cycle_nodes<'a>(nodes: &'a [Node], children: &HashMap<&'a str, Vec<&'a str>>) -> HashSet<&'a str> {
    // Tarjan-free: a node is on a cycle when it can reach itself. Graphs are small (hundreds of nodes).
    let mut on_cycle = HashSet::new();
    for node in nodes {
        let start = node.id.as_str();
        let mut stack: Vec<&str> = children.get(start).cloned().unwrap_or_default();
        let mut seen: HashSet<&str> = HashSet::new();
        while let Some(next) = stack.pop() {
            if next == start {
                on_cycle.insert(start);
                break;
            }
            if seen.insert(next) {
                stack.extend(children.get(next).into_iter().flatten().copied());
            }
        }
    }
    on_cycle
}
