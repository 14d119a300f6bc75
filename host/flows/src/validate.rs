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

    /// A plugin's node kind: declared by the plugin's active manifest, its configuration (the rest of `config`)
    /// satisfying the declaration's `config_schema` with the placeholder rules of actions; the fields it adds
    /// reach the nodes after it.
    fn plugin_node(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let (Some(plugin), Some(kind)) = (config_str(config, "plugin"), config_str(config, "kind")) else {
            for key in ["plugin", "kind"].into_iter().filter(|key| config_str(config, key).is_none()) {
                self.push(
                    node,
                    Code::NodeKindRefMissing,
                    Some(&format!("/config/{key}")),
                    format!("missing config.{key}"),
                );
            }
            // What the node adds is unknown: the nodes after it are not type-checked rather than reported for it.
            state.fields = None;
            return;
        };
        let (service, declaration) = match self.deps.node_kind(plugin, kind) {
            Ok(found) => found,
            Err(problem) => {
                let pointer = if problem.plugin_known { "/config/kind" } else { "/config/plugin" };
                self.push(node, Code::NodeKindNotDeclared, Some(pointer), problem.message);
                state.fields = None;
                return;
            }
        };
        let mut settings = config.as_object().cloned().unwrap_or_default();
        settings.remove("plugin");
        settings.remove("kind");
        let settings = Value::Object(settings);
        let mut whole: HashSet<String> = HashSet::new();
        let schema = &declaration.config_schema;
        self.placeholders(node, &settings, "/config", state, Some((Some(schema), &mut whole)));
        if let Some(validator) = self.deps.validator(&service.hash, &format!("node-kind {plugin}/{kind}"), schema) {
            self.schema_issues(node, &validator, &settings, &whole, Code::NodeKindConfigInvalid);
        }
        if let Some(fields) = &mut state.fields {
            for (name, type_name) in &declaration.adds_fields {
                let kind =
                    serde_json::from_value(Value::String(type_name.clone())).map_or(FieldKind::Dyn, FieldKind::Typed);
                set_field(fields, name, kind);
            }
        }
    }

    fn source(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let event_type = config_str(config, "event_type");
        if event_type.is_none() {
            self.push(node, Code::SourceEventTypeMissing, Some("/config/event_type"), "missing event_type");
        }
        let topic = config_str(config, "topic");
        let service = config_str(config, "service");
        match (topic, service) {
            (Some(_), Some(_)) | (None, None) => self.push(
                node,
                Code::SourceOriginInvalid,
                Some("/config"),
                "names either a topic (`topic`) or an external service (`service`), exactly one of them",
            ),
            (None, Some(service)) => {
                if !self.deps.services.contains_key(service) {
                    self.push(
                        node,
                        Code::ServiceNotRegistered,
                        Some("/config/service"),
                        format!("service {service:?} has not registered a manifest"),
                    );
                }
                // Spec 001 names one inbound path for source events, the rule's source topic; a service has no
                // channel on which to start runs. Refused, so no flow is `valid` and never runs.
                self.push(
                    node,
                    Code::SourceServiceUnsupported,
                    Some("/config/service"),
                    format!(
                        "starts from service {service:?}, but runs start only from a topic's events: name the \
                         topic the service publishes to (`topic`) instead"
                    ),
                );
            }
            _ => {}
        }
        state.source_topic = topic.map(str::to_owned);
        let Some(event_type) = event_type else { return };
        state.origin = event_type.to_owned();
        match self.deps.schemas.get(event_type) {
            None => self.push(
                node,
                Code::SourceSchemaMissing,
                Some("/config/event_type"),
                format!("event type {event_type:?} has no schema (PUT /api/v1/schemas/{event_type})"),
            ),
            Some(schema) => {
                let mut fields: Fields =
                    schema.fields.iter().map(|f| (f.name.clone(), FieldKind::Typed(f.kind))).collect();
                for implicit in ["event_type", "tenant_id"] {
                    if !fields.iter().any(|(name, _)| name == implicit) {
                        fields.push((implicit.to_owned(), FieldKind::Typed(FieldType::String)));
                    }
                }
                state.fields = Some(fields);
            }
        }
    }

    fn condition(&mut self, node: &Node, state: &PathState<'a>) {
        let expression = config_str(&node.config, "expression");
        if is_else(&node.config) {
            if expression.is_some() {
                self.push(
                    node,
                    Code::ElseWithExpression,
                    Some("/config/expression"),
                    "an else branch takes no expression (it matches when its siblings do not)",
                );
            }
            return;
        }
        let Some(expression) = expression else {
            self.push(node, Code::ConditionExpressionMissing, Some("/config/expression"), "missing expression");
            return;
        };
        let errors = match &state.fields {
            Some(fields) => flowhost_expr::validate_fields(expression, fields, &state.origin),
            None => flowhost_expr::validate(expression, None),
        };
        for error in errors {
            self.push(node, Code::CelInvalid, Some("/config/expression"), error);
        }
    }

    fn field_exists(&mut self, node: &Node, state: &PathState<'a>, name: &str, pointer: &str) {
        if let Some(fields) = &state.fields {
            if field(fields, name).is_none() {
                self.push(node, Code::FieldUnknown, Some(pointer), format!("field {name:?} does not reach this node"));
            }
        }
    }

    fn mapping(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let mode = config.get("mode").map_or(Some("select"), Value::as_str);
        if !matches!(mode, Some("select" | "merge")) {
            self.push(node, Code::MappingInvalid, Some("/config/mode"), "mode must be \"select\" or \"merge\"");
        }
        let Some(entries) = config.get("fields").and_then(Value::as_array).filter(|f| !f.is_empty()) else {
            self.push(
                node,
                Code::MappingInvalid,
                Some("/config/fields"),
                "fields must list at least one {source, target}",
            );
            return;
        };
        let mut mapped: Fields = Vec::new();
        let mut targets = HashSet::new();
        for (i, entry) in entries.iter().enumerate() {
            let source = entry.get("source").and_then(Value::as_str).unwrap_or_default();
            let target = entry.get("target").and_then(Value::as_str).unwrap_or_default();
            if source.is_empty() {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/source")),
                    format!("fields[{i}] has no source"),
                );
            } else {
                self.field_exists(node, state, source, &format!("/config/fields/{i}/source"));
            }
            if !flowhost_core::placeholders::is_placeholder_name(target) {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/target")),
                    format!("fields[{i}].target {target:?} is not a field name (letters, digits, '_')"),
                );
            } else if !targets.insert(target) {
                self.push(
                    node,
                    Code::MappingInvalid,
                    Some(&format!("/config/fields/{i}/target")),
                    format!("target {target:?} is mapped twice"),
                );
            }
            let kind = state.fields.as_ref().and_then(|f| field(f, source)).unwrap_or(FieldKind::Dyn);
            mapped.push((target.to_owned(), kind));
        }
        if let Some(fields) = &mut state.fields {
            // An unknown mode (reported above) keeps the fields, so later nodes are not reported for it too.
            if mode == Some("select") {
                *fields = mapped;
            } else {
                for (name, kind) in mapped {
                    set_field(fields, &name, kind);
                }
            }
        }
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

    fn lookup(&mut self, node: &Node, state: &mut PathState<'a>) {
        let config = &node.config;
        let target = config.get("target").and_then(Value::as_str).unwrap_or_default();
        if !flowhost_core::placeholders::is_placeholder_name(target) {
            self.push(
                node,
                Code::LookupInvalid,
                Some("/config/target"),
                "target must name the field that receives the answer",
            );
        } else if let Some(fields) = &mut state.fields {
            set_field(fields, target, FieldKind::Dyn);
        }
        let params = config.get("params").cloned().unwrap_or(Value::Object(Map::new()));
        if !params.is_object() {
            self.push(node, Code::LookupInvalid, Some("/config/params"), "params must be an object");
        }
        self.placeholders(node, &params, "/config/params", state, None);
        let Some(service) = self.service(node, Code::LookupInvalid) else { return };
        if !service.supports("lookup") {
            self.push(
                node,
                Code::NodeKindNotSupported,
                Some("/config/service"),
                format!("service {:?} does not list \"lookup\" in supports_nodes", service.name),
            );
        }
        let Some(name) = config_str(config, "data_source") else {
            self.push(node, Code::LookupInvalid, Some("/config/data_source"), "names no data_source");
            return;
        };
        let Some(source) = service.data_source(name) else {
            self.push(
                node,
                Code::DataSourceUnknown,
                Some("/config/data_source"),
                format!("service {:?} declares no data source {name:?}", service.name),
            );
            return;
        };
        for key in params.as_object().into_iter().flat_map(|p| p.keys()) {
            if !source.params.iter().any(|p| p == key) {
                self.push(
                    node,
                    Code::LookupInvalid,
                    Some(&format!("/config/params/{}", escape_pointer(key))),
                    format!("data source {name:?} takes no parameter {key:?} (it takes: {})", source.params.join(", ")),
                );
            }
        }
    }

    fn service_in(&mut self, node: &Node) {
        let config = &node.config;
        let Some(service) = self.service(node, Code::ServiceNotRegistered) else { return };
        let offered = service.transports();
        let transport = config_str(config, "transport");
        let effective = match transport {
            Some(t) if offered.iter().any(|o| o == t) => Some(t.to_owned()),
            Some(t) => {
                self.push(
                    node,
                    Code::TransportNotOffered,
                    Some("/config/transport"),
                    format!(
                        "service {:?} does not offer transport {t:?} (it offers: {})",
                        service.name,
                        offered.join(", ")
                    ),
                );
                None
            }
            None if offered.is_empty() => {
                self.push(
                    node,
                    Code::TransportNotOffered,
                    Some("/config/service"),
                    format!("service {:?} lists no service_sources, so nothing can reach it", service.name),
                );
                None
            }
            None => offered.first().cloned(),
        };
        // An external service over HTTP is reached at its manifest's endpoint; one running here is served by
        // Flowhost itself, under its own address.
        if effective.as_deref() == Some("http")
            && !service.in_process()
            && !service.components.iter().any(|c| c.endpoint().is_some())
        {
            self.push(
                node,
                Code::HttpEndpointMissing,
                Some("/config/transport"),
                format!(
                    "service {:?} offers transport \"http\" but its manifest has no transports.http.endpoint, so \
                     nothing can be sent to it",
                    service.name
                ),
            );
        }
        if let Some(topic) = config_str(config, "kafka_topic") {
            if effective.as_deref().is_some_and(|t| t != "kafka") {
                self.push(
                    node,
                    Code::RetargetNotKafka,
                    Some("/config/kafka_topic"),
                    "a Kafka topic retarget needs transport \"kafka\"",
                );
            } else if self.deps.topics.get(topic) != Some(&true) {
                self.push(
                    node,
                    Code::KafkaTopicMissing,
                    Some("/config/kafka_topic"),
                    format!(
                        "retarget topic {topic:?} does not exist (create it first; a missing retarget fails closed)"
                    ),
                );
            }
        }
    }

    fn action(&mut self, node: &'a Node, state: &PathState<'a>) {
        let config = &node.config;
        let action_ref = config_str(config, "action_ref");
        let hint = |deps: &Dependencies, action_ref: &str| {
            let declared_by: Vec<String> = deps
                .services
                .values()
                .filter(|s| s.action(action_ref).is_some())
                .map(|s| format!("{:?}", s.name))
                .collect();
            match declared_by.as_slice() {
                [] => "no registered service declares it".to_owned(),
                names => format!(
                    "declared by {}: place a service segment of that service before the action",
                    names.join(", ")
                ),
            }
        };
        let named = action_ref.map_or_else(|| "the action".to_owned(), |a| format!("action {a:?}"));
        let Some((segment_id, service_name)) = state.segment else {
            let hint = action_ref.map(|a| format!(" ({})", hint(self.deps, a))).unwrap_or_default();
            self.push(
                node,
                Code::ActionWithoutSegment,
                None,
                format!("{named} has no service segment before it{hint}"),
            );
            return;
        };
        if state.segment_used {
            self.push(
                node,
                Code::ActionNeedsSegment,
                None,
                format!(
                    "follows another action of segment {segment_id:?}: chaining actions needs a further service segment \
                     before {named}"
                ),
            );
            return;
        }
        // The segment has its action, even when the action itself is incomplete.
        self.segments_with_action.insert(segment_id);
        let Some(action_ref) = action_ref else {
            self.push(node, Code::ActionRefMissing, Some("/config/action_ref"), "missing config.action_ref");
            return;
        };
        let hint = hint(self.deps, action_ref);
        let Some(service) = service_name.and_then(|name| self.deps.services.get(name)) else {
            return; // The segment reports its missing or unknown service.
        };
        let Some(action) = service.action(action_ref) else {
            self.push(
                node,
                Code::ActionNotDeclared,
                Some("/config/action_ref"),
                format!(
                    "action {action_ref:?} is not declared by the active manifest of service {:?} (parent segment \
                     {segment_id:?}); {hint}",
                    service.name
                ),
            );
            return;
        };
        let mut settings = config.as_object().cloned().unwrap_or_default();
        settings.remove("action_ref");
        let settings = Value::Object(settings);
        let mut whole: HashSet<String> = HashSet::new();
        self.placeholders(node, &settings, "/config", state, Some((action.config_schema.as_ref(), &mut whole)));
        let Some(schema) = &action.config_schema else { return };
        let Some(validator) = self.deps.validator(&service.hash, action_ref, schema) else { return };
        self.schema_issues(node, &validator, &settings, &whole, Code::ActionConfigInvalid);
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
