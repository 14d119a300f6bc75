//! The component catalog (spec 001): services register their manifests (`POST /api/v1/components/register`,
//! on boot and as a heartbeat every 5 minutes), the catalog lists every registered component version, proxies
//! data-source queries to the owning service, and `GET /api/v2/services/{service}` reads a service's current
//! manifest.
//!
//! A manifest names a `service` and its `components` (each an `id` and a `version`). Service-level `actions`,
//! `data_sources`, `service_sources`, `supports_nodes` and `transports` apply to every component that does not
//! declare its own. Each component version is stored as one row with id `{service}/{component_id}/{version}` and
//! a SHA-256 content hash: the same triple with the same content is a heartbeat (only `last_seen_at` moves),
//! with different content a 409. A new version of a component gets a `server_compatibility` report against the
//! version registered before it.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_core::collections::COMPONENTS;
use flowhost_core::digest::{iso_utc, sha256_hex};
use flowhost_core::ports::Ports;
use flowhost_core::PortError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tracing::{info, warn};

use crate::error::ApiError;
use crate::json::JsonBody;
use crate::v1::{decode, encode, SharedState};

/// The largest manifest accepted (spec: 413 above 1 MiB), whatever the general body limit is.
pub const MANIFEST_LIMIT_BYTES: usize = 1024 * 1024;
/// How long the data-source proxy waits for the owning service.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// A catalog row of a component that runs in this host's WebAssembly runtime carries `runtime: "wasm"`; its
/// data sources are answered in process.
pub(crate) const RUNTIME_FIELD: &str = "runtime";
pub(crate) const WASM_RUNTIME: &str = "wasm";

const SERVICE_SOURCES: [&str; 3] = ["nats", "kafka", "http"];
const NODE_KINDS: [&str; 6] = ["condition", "lookup", "mapping", "rate-limit", "output-topic", "service-in"];

pub(crate) fn routes() -> Router<SharedState> {
    Router::new()
        .route("/api/v1/components/register", post(register).layer(DefaultBodyLimit::max(MANIFEST_LIMIT_BYTES)))
        .route("/api/v1/components", get(list))
        .route("/api/v1/components/{id}/data/{source}", get(data_source))
        .route("/api/v2/services/{service}", get(service))
}

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
struct Declarations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actions: Option<Vec<ActionDecl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_sources: Option<Vec<DataSourceDecl>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    service_sources: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    supports_nodes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transports: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct ComponentEntry {
    id: String,
    version: String,
    #[serde(flatten)]
    declared: Declarations,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The body of `POST /api/v1/components/register`.
#[derive(Debug, Deserialize)]
pub(crate) struct ServiceManifest {
    service: String,
    components: Vec<ComponentEntry>,
    #[serde(flatten)]
    declared: Declarations,
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
    fn document_id(&self) -> String {
        format!("{}/{}/{}", self.service, self.component_id, self.version)
    }

    /// The identity and content that immutability compares (timestamps and the report excluded).
    fn content(&self) -> Value {
        json!({
            "service": self.service, "component_id": self.component_id, "version": self.version,
            "actions": self.actions, "data_sources": self.data_sources, "service_sources": self.service_sources,
            "supports_nodes": self.supports_nodes, "transports": self.transports, "extra": self.extra,
        })
    }

    fn endpoint(&self) -> Option<&str> {
        self.transports.as_ref()?.get("http")?.get("endpoint")?.as_str()
    }
}

fn problems_of(manifest: &ServiceManifest) -> Vec<String> {
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
fn rows_of(manifest: ServiceManifest, now_ms: i64) -> Vec<ComponentManifestRow> {
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

async fn register(
    State(state): State<SharedState>,
    JsonBody(manifest): JsonBody<ServiceManifest>,
) -> Result<Json<Value>, ApiError> {
    register_manifest(&state.ports, manifest).await?;
    Ok(crate::v1::status_ok())
}

/// Registers a service manifest (checks, immutability, heartbeat): the body of `POST
/// /api/v1/components/register`, and what an uploaded WebAssembly component registers.
pub(crate) async fn register_manifest(ports: &Ports, manifest: ServiceManifest) -> Result<(), ApiError> {
    let problems = problems_of(&manifest);
    if !problems.is_empty() {
        return Err(ApiError::invalid("malformed manifest", problems));
    }
    let documents = ports.documents.as_ref();
    let now = ports.clock.now_ms();
    let rows = rows_of(manifest, now);
    // Check every component first, so a 409 on one registers none of them.
    let mut new_rows = Vec::new();
    let mut heartbeats = Vec::new();
    for row in rows {
        match crate::v1::load::<ComponentManifestRow>(documents, COMPONENTS, &row.document_id()).await? {
            None => new_rows.push(row),
            Some(stored) => {
                if stored.content_hash != row.content_hash {
                    return Err(ApiError::conflict(format!(
                        "component {:?} version {:?} of service {:?} is already registered with different content; \
                         publish a new version",
                        row.component_id, row.version, row.service
                    )));
                }
                heartbeats.push(stored);
            }
        }
    }
    for mut stored in heartbeats {
        stored.last_seen_at = iso_utc(now);
        documents.upsert(COMPONENTS, &stored.document_id(), encode(&stored)?).await?;
    }
    for mut row in new_rows {
        row.server_compatibility =
            previous_version(documents, &row).await?.map(|previous| compatibility(&previous, &row));
        match documents.insert(COMPONENTS, &row.document_id(), encode(&row)?).await {
            // Registered concurrently by another replica: identical content is a heartbeat, else a conflict.
            Err(PortError::Conflict(_)) => {
                let stored: Option<ComponentManifestRow> =
                    crate::v1::load(documents, COMPONENTS, &row.document_id()).await?;
                if stored.is_none_or(|s| s.content_hash != row.content_hash) {
                    return Err(ApiError::conflict(format!(
                        "component {:?} version {:?} was registered concurrently with different content",
                        row.component_id, row.version
                    )));
                }
            }
            Err(e) => return Err(e.into()),
            Ok(()) => info!(service = %row.service, component = %row.component_id, version = %row.version,
                            "component version registered"),
        }
    }
    Ok(())
}

/// Orders versions as semantic versions when both parse, else as text.
fn compare_versions(a: &str, b: &str) -> Ordering {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

async fn all_rows(documents: &dyn flowhost_core::DocumentStore) -> Result<Vec<ComponentManifestRow>, ApiError> {
    let mut rows: Vec<ComponentManifestRow> = crate::v1::load_all(documents, COMPONENTS).await?;
    rows.sort_by(|a, b| {
        (a.service.as_str(), a.component_id.as_str())
            .cmp(&(b.service.as_str(), b.component_id.as_str()))
            .then_with(|| compare_versions(&a.version, &b.version))
    });
    Ok(rows)
}

/// The catalog rows whose `field` equals `value`.
async fn rows_where(
    documents: &dyn flowhost_core::DocumentStore,
    field: &str,
    value: &str,
) -> Result<Vec<ComponentManifestRow>, ApiError> {
    documents.find(COMPONENTS, field, &json!(value)).await?.into_iter().map(|doc| decode(COMPONENTS, doc)).collect()
}

/// The most recently registered earlier version of the same component.
async fn previous_version(
    documents: &dyn flowhost_core::DocumentStore,
    row: &ComponentManifestRow,
) -> Result<Option<ComponentManifestRow>, ApiError> {
    let siblings = rows_where(documents, "component_id", &row.component_id).await?;
    Ok(siblings
        .into_iter()
        .filter(|s| s.service == row.service && s.version != row.version)
        .max_by_key(|s| s.registered_ms))
}

fn compatibility(previous: &ComponentManifestRow, current: &ComponentManifestRow) -> Compatibility {
    let before: BTreeMap<&str, &ActionDecl> = previous.actions.iter().map(|a| (a.name.as_str(), a)).collect();
    let after: BTreeMap<&str, &ActionDecl> = current.actions.iter().map(|a| (a.name.as_str(), a)).collect();
    let added_actions: Vec<String> = after.keys().filter(|k| !before.contains_key(*k)).map(|k| k.to_string()).collect();
    let removed_actions: Vec<String> =
        before.keys().filter(|k| !after.contains_key(*k)).map(|k| k.to_string()).collect();
    let mut changed_actions = Vec::new();
    let mut breaking_changes: Vec<String> =
        removed_actions.iter().map(|a| format!("action {a:?} was removed")).collect();
    for (name, action) in &after {
        let Some(old) = before.get(name) else { continue };
        if old.config_schema != action.config_schema {
            changed_actions.push(name.to_string());
            schema_breaks(name, old.config_schema.as_ref(), action.config_schema.as_ref(), &mut breaking_changes);
        }
    }
    Compatibility {
        previous_version: previous.version.clone(),
        compatible: breaking_changes.is_empty(),
        added_actions,
        removed_actions,
        changed_actions,
        breaking_changes,
    }
}

/// Top-level object-schema changes that reject configurations the old schema accepted.
fn schema_breaks(action: &str, old: Option<&Value>, new: Option<&Value>, breaks: &mut Vec<String>) {
    let properties = |schema: Option<&Value>| -> Map<String, Value> {
        schema.and_then(|s| s.get("properties")).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let required = |schema: Option<&Value>| -> BTreeSet<String> {
        schema
            .and_then(|s| s.get("required"))
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let (old_props, new_props) = (properties(old), properties(new));
    for name in required(new).difference(&required(old)) {
        breaks.push(format!("action {action:?}: config property {name:?} became required"));
    }
    for (name, schema) in &old_props {
        match new_props.get(name) {
            None => breaks.push(format!("action {action:?}: config property {name:?} was removed")),
            Some(new_schema) if schema.get("type") != new_schema.get("type") => {
                breaks.push(format!("action {action:?}: config property {name:?} changed type"))
            }
            Some(_) => {}
        }
    }
    if old.is_some() && new.is_some() && old.and_then(|s| s.get("type")) != new.and_then(|s| s.get("type")) {
        breaks.push(format!("action {action:?}: config schema changed type"));
    }
}

async fn list(State(state): State<SharedState>) -> Result<Json<Vec<ComponentManifestRow>>, ApiError> {
    Ok(Json(all_rows(state.ports.documents.as_ref()).await?))
}

/// `GET /api/v2/services/{service}`: the service's latest version of each component (404 when the service
/// never registered).
async fn service(State(state): State<SharedState>, Path(service): Path<String>) -> Result<Json<Value>, ApiError> {
    let rows = rows_where(state.ports.documents.as_ref(), "service", &service).await?;
    if rows.is_empty() {
        return Err(ApiError::not_found(format!("service {service:?} has not registered")));
    }
    let mut latest: BTreeMap<String, ComponentManifestRow> = BTreeMap::new();
    for row in rows {
        match latest.get(&row.component_id) {
            Some(current) if current.registered_ms >= row.registered_ms => {}
            _ => {
                latest.insert(row.component_id.clone(), row);
            }
        }
    }
    let last_seen = latest.values().map(|r| r.last_seen_at.clone()).max().unwrap_or_default();
    Ok(Json(json!({
        "service": service,
        "registered": true,
        "last_seen_at": last_seen,
        "components": latest.into_values().collect::<Vec<_>>(),
    })))
}

pub(crate) fn bad_gateway(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_GATEWAY, message)
}

/// Proxies a form query to the service that owns component `id`: only the declared parameters are forwarded,
/// the upstream body and `Content-Type` come back as they are; anything that fails is a 502 saying why.
async fn data_source(
    State(state): State<SharedState>,
    Path((id, source)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let rows = rows_where(state.ports.documents.as_ref(), "component_id", &id).await?;
    let row = rows
        .into_iter()
        .max_by_key(|r| r.registered_ms)
        .ok_or_else(|| bad_gateway(format!("unknown component {id:?}: no manifest registered")))?;
    let declared = row.data_sources.iter().find(|d| d.name == source).ok_or_else(|| {
        bad_gateway(format!("component {id:?} (version {}) declares no data source {source:?}", row.version))
    })?;
    if row.extra.get(RUNTIME_FIELD).and_then(Value::as_str) == Some(WASM_RUNTIME) {
        return crate::plugins::query_data_source(&state, &id, &source, query).await;
    }
    let endpoint = row
        .endpoint()
        .ok_or_else(|| bad_gateway(format!("component {id:?} has no transports.http.endpoint to query")))?;
    let url = format!("{}{}", endpoint.trim_end_matches('/'), declared.path);
    let forwarded: Vec<(String, String)> = query.into_iter().filter(|(k, _)| declared.params.contains(k)).collect();
    let response = state.http.get(&url).query(&forwarded).timeout(UPSTREAM_TIMEOUT).send().await.map_err(|e| {
        warn!(component = %id, source = %source, error = %e, "data-source upstream unreachable");
        bad_gateway(format!("data source {source:?} of component {id:?}: upstream unreachable"))
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(bad_gateway(format!(
            "data source {source:?} of component {id:?}: upstream answered {}",
            status.as_u16()
        )));
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let body = response
        .bytes()
        .await
        .map_err(|_| bad_gateway(format!("data source {source:?} of component {id:?}: upstream body failed")))?;
    let mut out = (StatusCode::OK, body).into_response();
    if let Some(content_type) = content_type {
        out.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(actions: Value) -> ComponentManifestRow {
        let actions: Vec<ActionDecl> = serde_json::from_value(actions).unwrap();
        ComponentManifestRow {
            service: "s".into(),
            component_id: "c".into(),
            version: "1.0.0".into(),
            actions,
            data_sources: vec![],
            service_sources: vec![],
            supports_nodes: vec![],
            transports: None,
            extra: Map::new(),
            content_hash: String::new(),
            first_registered_at: String::new(),
            last_seen_at: String::new(),
            registered_ms: 0,
            server_compatibility: None,
        }
    }

    #[test]
    fn compatibility_reports_breaking_changes() {
        let old = row(json!([
            {"name": "send", "config_schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}},
            {"name": "gone"}
        ]));
        let mut new = row(json!([
            {"name": "send", "config_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "string"}}, "required": ["c"]}},
            {"name": "fresh"}
        ]));
        new.version = "2.0.0".into();
        let report = compatibility(&old, &new);
        assert_eq!(report.previous_version, "1.0.0");
        assert_eq!(report.added_actions, vec!["fresh"]);
        assert_eq!(report.removed_actions, vec!["gone"]);
        assert_eq!(report.changed_actions, vec!["send"]);
        assert!(!report.compatible);
        assert_eq!(
            report.breaking_changes,
            vec![
                "action \"gone\" was removed",
                "action \"send\": config property \"c\" became required",
                "action \"send\": config property \"a\" changed type",
                "action \"send\": config property \"b\" was removed",
            ]
        );
        let same = compatibility(&old, &old);
        assert!(same.compatible && same.changed_actions.is_empty());
    }

    #[test]
    fn versions_order_semantically() {
        assert_eq!(compare_versions("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare_versions("b", "a"), Ordering::Greater);
    }
}
