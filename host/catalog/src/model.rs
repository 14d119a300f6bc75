//! The catalog's data model: service manifests as registered, component rows as stored and listed, the
//! compatibility report, and the checks a manifest must pass.

use std::collections::{BTreeMap, BTreeSet};

use flowhost_core::digest::{iso_utc, sha256_hex};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// The transports a service may offer a flow (`service_sources`).
pub const SERVICE_SOURCES: [&str; 3] = ["nats", "kafka", "http"];
/// The node kinds a service may support (`supports_nodes`): every v2 node kind (`flowhost_flows::NodeKind`
/// names the same, a test there holds the two lists equal).
pub const NODE_KINDS: [&str; 9] =
    ["source", "condition", "rate-limit", "mapping", "lookup", "output-topic", "service-in", "action", "node-kind"];
/// What a plugin node kind may answer (`NodeKindDecl::answers`): go on (`continue`), end the branch (`stop`), or
/// one of the failure classes a guest reports.
pub const NODE_KIND_ANSWERS: [&str; 5] = ["continue", "stop", "skip-forward", "permanent", "retryable"];
/// The answer that goes on with a payload.
pub const ANSWER_CONTINUE: &str = "continue";
/// The answer that ends the branch.
pub const ANSWER_STOP: &str = "stop";
/// The payload field types a plugin node kind may add (`NodeKindDecl::adds_fields`): the event-schema types.
pub const FIELD_TYPES: [&str; 4] = ["int", "double", "string", "bool"];

/// One action a component offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionDecl {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the action's node configuration, checked by Studio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<Value>,
}

/// A node kind a component declares for flows to place (`{"kind": "node-kind", "config": {"plugin", "kind", ...}}`
/// in a v2 graph): its configuration's schema, what it answers and the fields it adds to the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeKindDecl {
    /// What the node's `config.kind` names, and what the component's `prepare` receives.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the node's configuration (without `plugin` and `kind`), checked by validation and Studio.
    pub config_schema: Value,
    /// What the kind answers ([`NODE_KIND_ANSWERS`]); absent: all of them.
    #[serde(default = "all_answers")]
    pub answers: Vec<String>,
    /// Payload fields the kind adds when it goes on, by type ([`FIELD_TYPES`]): what later nodes may read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub adds_fields: BTreeMap<String, String>,
}

fn all_answers() -> Vec<String> {
    NODE_KIND_ANSWERS.iter().map(|a| a.to_string()).collect()
}

impl NodeKindDecl {
    /// Whether the kind declares `answer` (one of [`NODE_KIND_ANSWERS`]).
    pub fn declares(&self, answer: &str) -> bool {
        self.answers.iter().any(|a| a == answer)
    }
}

/// A read-only query the service answers for forms (`GET {endpoint}{path}?{params}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataSourceDecl {
    pub name: String,
    pub path: String,
    #[serde(default)]
    pub params: Vec<String>,
}

/// The parts of a manifest a component inherits from its service unless it declares its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Declarations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<ActionDecl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_sources: Option<Vec<DataSourceDecl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_sources: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_nodes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_kinds: Option<Vec<NodeKindDecl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transports: Option<Value>,
}

/// One component of a service manifest.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ComponentEntry {
    pub id: String,
    pub version: String,
    #[serde(flatten)]
    pub declared: Declarations,
    /// Fields the catalog does not model, kept as given (an uploaded component's `runtime`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A service manifest: the body of `POST /api/v1/components/register`, and what an uploaded component
/// registers.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ServiceManifest {
    pub service: String,
    pub components: Vec<ComponentEntry>,
    #[serde(flatten)]
    pub declared: Declarations,
}

/// One registered component version, as stored and as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentManifestRow {
    pub service: String,
    pub component_id: String,
    pub version: String,
    pub actions: Vec<ActionDecl>,
    pub data_sources: Vec<DataSourceDecl>,
    pub service_sources: Vec<String>,
    pub supports_nodes: Vec<String>,
    /// Node kinds the component declares for flows to place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_kinds: Vec<NodeKindDecl>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transports: Option<Value>,
    /// Fields of the component entry this version of the catalog does not model, kept as given.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
    pub content_hash: String,
    pub first_registered_at: String,
    pub last_seen_at: String,
    /// Milliseconds of `first_registered_at`, for ordering versions by registration.
    pub registered_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_compatibility: Option<Compatibility>,
}

/// How a new component version differs from the one registered before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compatibility {
    pub previous_version: String,
    pub added_actions: Vec<String>,
    pub removed_actions: Vec<String>,
    /// Actions whose `config_schema` changed.
    pub changed_actions: Vec<String>,
    /// What can break flows built against the previous version: removed actions, and config-schema changes
    /// that reject configurations the previous schema accepted (a new required property, a removed property,
    /// a changed property type).
    pub breaking_changes: Vec<String>,
    pub compatible: bool,
}

impl ComponentManifestRow {
    /// The row's document id, `{service}/{component_id}/{version}`: the identity a version keeps forever.
    pub fn document_id(&self) -> String {
        format!("{}/{}/{}", self.service, self.component_id, self.version)
    }

    /// The identity and content that immutability compares (timestamps and the report excluded).
    fn content(&self) -> Value {
        let mut content = json!({
            "service": self.service, "component_id": self.component_id, "version": self.version,
            "actions": self.actions, "data_sources": self.data_sources, "service_sources": self.service_sources,
            "supports_nodes": self.supports_nodes, "transports": self.transports, "extra": self.extra,
        });
        // Only when declared, so the hash of a row without node kinds is what it was before they existed.
        if !self.node_kinds.is_empty() {
            content["node_kinds"] = json!(self.node_kinds);
        }
        content
    }

    /// The node kind `name` the component declares for flows.
    pub fn node_kind(&self, name: &str) -> Option<&NodeKindDecl> {
        self.node_kinds.iter().find(|k| k.name == name)
    }

    /// `transports.http.endpoint`, where the service answers data-source queries.
    pub fn endpoint(&self) -> Option<&str> {
        self.transports.as_ref()?.get("http")?.get("endpoint")?.as_str()
    }
}

/// What is wrong with a manifest, one message per problem (empty when it is fine).
pub fn problems_of(manifest: &ServiceManifest) -> Vec<String> {
    let mut problems = Vec::new();
    if manifest.service.trim().is_empty() {
        problems.push("service must not be empty".to_owned());
    } else if manifest.service.contains('/') {
        problems.push("service must not contain '/'".to_owned());
    }
    if manifest.components.is_empty() {
        problems.push("components must list at least one component".to_owned());
    }
    let mut ids = BTreeSet::new();
    for (i, component) in manifest.components.iter().enumerate() {
        let at = format!("components[{i}]");
        if component.id.trim().is_empty() || component.id.contains('/') {
            problems.push(format!("{at}.id must be non-empty and without '/'"));
        } else if !ids.insert(component.id.as_str()) {
            problems.push(format!("{at}.id {:?} is listed twice", component.id));
        }
        if component.version.trim().is_empty() || component.version.contains('/') {
            problems.push(format!("{at}.version must be non-empty and without '/'"));
        }
        check_declarations(&component.declared, &at, &mut problems);
    }
    check_declarations(&manifest.declared, "manifest", &mut problems);
    problems
}

fn check_declarations(declared: &Declarations, at: &str, problems: &mut Vec<String>) {
    let mut names = BTreeSet::new();
    for action in declared.actions.iter().flatten() {
        if action.name.trim().is_empty() {
            problems.push(format!("{at}: an action has no name"));
        } else if !names.insert(action.name.as_str()) {
            problems.push(format!("{at}: action {:?} is declared twice", action.name));
        }
        if let Some(schema) = &action.config_schema {
            if let Err(error) = jsonschema::meta::validate(schema) {
                problems.push(format!("{at}: action {:?} has an invalid config_schema: {error}", action.name));
            } else if let Err(error) = jsonschema::validator_for(schema) {
                problems.push(format!("{at}: action {:?} has an unusable config_schema: {error}", action.name));
            }
        }
    }
    let mut sources = BTreeSet::new();
    for source in declared.data_sources.iter().flatten() {
        if source.name.trim().is_empty() || !sources.insert(source.name.as_str()) {
            problems.push(format!("{at}: data source names must be non-empty and unique ({:?})", source.name));
        }
        if !source.path.starts_with('/') {
            problems.push(format!("{at}: data source {:?} path must start with '/'", source.name));
        }
    }
    for value in declared.service_sources.iter().flatten() {
        if !SERVICE_SOURCES.contains(&value.as_str()) {
            problems.push(format!("{at}: unknown service source {value:?} (known: nats, kafka, http)"));
        }
    }
    for value in declared.supports_nodes.iter().flatten() {
        if !NODE_KINDS.contains(&value.as_str()) {
            problems.push(format!(
                "{at}: unknown node kind {value:?} in supports_nodes (known: {})",
                NODE_KINDS.join(", ")
            ));
        }
    }
    let mut kinds = BTreeSet::new();
    for kind in declared.node_kinds.iter().flatten() {
        let named = format!("{at}: node kind {:?}", kind.name);
        if kind.name.trim().is_empty() || !kinds.insert(kind.name.as_str()) {
            problems.push(format!("{at}: node kind names must be non-empty and unique ({:?})", kind.name));
        }
        if let Err(error) = jsonschema::meta::validate(&kind.config_schema) {
            problems.push(format!("{named} has an invalid config_schema: {error}"));
        } else if let Err(error) = jsonschema::validator_for(&kind.config_schema) {
            problems.push(format!("{named} has an unusable config_schema: {error}"));
        }
        for answer in kind.answers.iter().filter(|a| !NODE_KIND_ANSWERS.contains(&a.as_str())) {
            problems.push(format!("{named}: unknown answer {answer:?} (known: {})", NODE_KIND_ANSWERS.join(", ")));
        }
        if !kind.declares(ANSWER_CONTINUE) && !kind.declares(ANSWER_STOP) {
            problems.push(format!("{named}: answers must include \"continue\" or \"stop\""));
        }
        for (field, kind_type) in kind.adds_fields.iter().filter(|(_, t)| !FIELD_TYPES.contains(&t.as_str())) {
            problems.push(format!(
                "{named}: field {field:?} has unknown type {kind_type:?} (known: {})",
                FIELD_TYPES.join(", ")
            ));
        }
    }
    if let Some(transports) = &declared.transports {
        match transports.get("http").map(|http| http.get("endpoint")) {
            None => {}
            Some(Some(Value::String(endpoint)))
                if endpoint.starts_with("http://") || endpoint.starts_with("https://") => {}
            Some(_) => problems.push(format!("{at}: transports.http.endpoint must be an http(s) URL")),
        }
    }
}

/// The rows a manifest registers, with the service's declarations filled in where a component has none.
pub(crate) fn rows_of(manifest: ServiceManifest, now_ms: i64) -> Vec<ComponentManifestRow> {
    let service = manifest.declared;
    manifest
        .components
        .into_iter()
        .map(|c| {
            let mut row = ComponentManifestRow {
                service: manifest.service.clone(),
                component_id: c.id,
                version: c.version,
                actions: c.declared.actions.or_else(|| service.actions.clone()).unwrap_or_default(),
                data_sources: c.declared.data_sources.or_else(|| service.data_sources.clone()).unwrap_or_default(),
                service_sources: c
                    .declared
                    .service_sources
                    .or_else(|| service.service_sources.clone())
                    .unwrap_or_default(),
                supports_nodes: c
                    .declared
                    .supports_nodes
                    .or_else(|| service.supports_nodes.clone())
                    .unwrap_or_default(),
                node_kinds: c.declared.node_kinds.or_else(|| service.node_kinds.clone()).unwrap_or_default(),
                transports: c.declared.transports.or_else(|| service.transports.clone()),
                extra: c.extra,
                content_hash: String::new(),
                first_registered_at: iso_utc(now_ms),
                last_seen_at: iso_utc(now_ms),
                registered_ms: now_ms,
                server_compatibility: None,
            };
            row.content_hash = sha256_hex(&[&row.content().to_string()]);
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(node_kinds: Value) -> ServiceManifest {
        serde_json::from_value(
            json!({"service": "s", "components": [{"id": "c", "version": "1", "node_kinds": node_kinds}]}),
        )
        .unwrap()
    }

    #[test]
    fn node_kind_declarations_are_checked() {
        let good = manifest(
            json!([{"name": "score", "config_schema": {"type": "object"}, "adds_fields": {"score": "double"}}]),
        );
        assert_eq!(problems_of(&good), Vec::<String>::new());
        let row = &rows_of(good, 0)[0];
        assert_eq!(row.node_kinds[0].answers, NODE_KIND_ANSWERS, "answers default to all of them");

        let bad = manifest(json!([
            {"name": "score", "config_schema": {"type": 7}, "answers": ["maybe", "permanent"], "adds_fields": {"x": "float"}},
            {"name": "score", "config_schema": {"type": "object"}}
        ]));
        assert_eq!(
            problems_of(&bad),
            vec![
                "components[0]: node kind \"score\" has an invalid config_schema: 7 is not valid under any of the schemas listed in the 'anyOf' keyword".to_owned(),
                "components[0]: node kind \"score\": unknown answer \"maybe\" (known: continue, stop, skip-forward, permanent, retryable)".to_owned(),
                "components[0]: node kind \"score\": answers must include \"continue\" or \"stop\"".to_owned(),
                "components[0]: node kind \"score\": field \"x\" has unknown type \"float\" (known: int, double, string, bool)".to_owned(),
                "components[0]: node kind names must be non-empty and unique (\"score\")".to_owned(),
            ]
        );
    }

    #[test]
    fn a_row_without_node_kinds_hashes_as_before() {
        let row = &rows_of(manifest(json!([])), 0)[0];
        assert!(row.content().get("node_kinds").is_none(), "old rows keep their content hash");
    }
}
