//! What validation checks a flow against, loaded fresh for every draft request and once per drift pass: the
//! event schemas, the source topics' default output topics, every service's **active manifest**, and whether
//! the Kafka topics a flow retargets to exist.
//!
//! A service's active manifest is, for each of its components, the version the component store activated
//! (uploaded WebAssembly components, `component_active`), else the most recently registered version (a
//! service registering over HTTP runs what it registered last). Its hash (SHA-256 over the components' content
//! hashes) is what the drift pass compares.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use flowhost_catalog::{
    ActionDecl, Catalog, ComponentManifestRow, DataSourceDecl, NodeKindDecl, RUNTIME_FIELD, WASM_RUNTIME,
};
use flowhost_core::collections::{COMPONENT_ACTIVE, EVENT_SOURCES, SCHEMAS};
use flowhost_core::digest::sha256_hex;
use flowhost_core::model::{EventSchema, EventSource};
use flowhost_core::ports::{PortError, Ports, Topics};
use serde::Deserialize;
use serde_json::Value;
use tracing::warn;

use crate::FlowError;

/// The transport of a segment whose service is an in-process WebAssembly component.
pub const IN_PROCESS: &str = "in-process";

/// A service as validation sees it: its active component rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveService {
    pub name: String,
    pub components: Vec<ComponentManifestRow>,
    /// SHA-256 over the active components' content hashes (sorted by component id).
    pub hash: String,
}

impl ActiveService {
    fn new(name: String, mut components: Vec<ComponentManifestRow>) -> ActiveService {
        components.sort_by(|a, b| a.component_id.cmp(&b.component_id));
        let parts: Vec<&str> = components.iter().map(|c| c.content_hash.as_str()).collect();
        ActiveService { hash: sha256_hex(&parts), name, components }
    }

    pub fn action(&self, name: &str) -> Option<&ActionDecl> {
        self.components.iter().flat_map(|c| c.actions.iter()).find(|a| a.name == name)
    }

    pub fn actions(&self) -> Vec<&str> {
        self.components.iter().flat_map(|c| c.actions.iter()).map(|a| a.name.as_str()).collect()
    }

    pub fn data_source(&self, name: &str) -> Option<&DataSourceDecl> {
        self.components.iter().flat_map(|c| c.data_sources.iter()).find(|d| d.name == name)
    }

    /// Whether a component runs in this process (an uploaded WebAssembly component).
    pub fn in_process(&self) -> bool {
        self.components.iter().any(|c| c.extra.get(RUNTIME_FIELD).and_then(Value::as_str) == Some(WASM_RUNTIME))
    }

    /// The transports a segment of this service may use: `in-process` first for an uploaded component (the
    /// default of a segment that names none: no broker hop for a service running here), then the manifest's
    /// `service_sources` in order.
    pub fn transports(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if self.in_process() {
            out.push(IN_PROCESS.to_owned());
        }
        for source in self.components.iter().flat_map(|c| c.service_sources.iter()) {
            if !out.contains(source) {
                out.push(source.clone());
            }
        }
        out
    }

    pub fn supports(&self, node_kind: &str) -> bool {
        self.components.iter().any(|c| c.supports_nodes.iter().any(|k| k == node_kind))
    }
}

/// Everything a validation reads besides the flow itself.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    pub schemas: HashMap<String, EventSchema>,
    /// Source topic -> its default output topic.
    pub output_defaults: HashMap<String, String>,
    pub services: BTreeMap<String, ActiveService>,
    /// Topics whose existence was looked up (see [`Dependencies::check_topics`]); a topic not here counts as
    /// missing, so a retarget fails closed.
    pub topics: HashMap<String, bool>,
    validators: ValidatorCache,
}

/// Why a flow cannot place a plugin's node kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKindMissing {
    /// Whether the plugin has an active version (then the kind is what is missing).
    pub plugin_known: bool,
    pub message: String,
}

/// A node kind a flow can place, as `GET /api/v2/node-kinds` lists it: the declaring component's active version
/// and the declaration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlaceableNodeKind {
    pub plugin: String,
    pub service: String,
    pub version: String,
    #[serde(flatten)]
    pub declaration: NodeKindDecl,
}

/// Every node kind the active component versions declare, by plugin then name.
pub async fn placeable_node_kinds(ports: &Ports) -> Result<Vec<PlaceableNodeKind>, FlowError> {
    Ok(Dependencies::load(ports).await?.placeable_node_kinds())
}

impl Dependencies {
    /// Every node kind the active component versions declare, by plugin then name.
    pub fn placeable_node_kinds(&self) -> Vec<PlaceableNodeKind> {
        let mut kinds: Vec<PlaceableNodeKind> = self
            .services
            .values()
            .flat_map(|service| &service.components)
            .flat_map(|component| {
                component.node_kinds.iter().map(|declaration| PlaceableNodeKind {
                    plugin: component.component_id.clone(),
                    service: component.service.clone(),
                    version: component.version.clone(),
                    declaration: declaration.clone(),
                })
            })
            .collect();
        kinds.sort_by(|a, b| (&a.plugin, &a.declaration.name).cmp(&(&b.plugin, &b.declaration.name)));
        kinds
    }

    /// The active version of component `plugin` (the service it belongs to) and its declaration of node kind
    /// `kind`.
    pub fn node_kind(&self, plugin: &str, kind: &str) -> Result<(&ActiveService, &NodeKindDecl), NodeKindMissing> {
        let active = self
            .services
            .values()
            .find_map(|service| service.components.iter().find(|c| c.component_id == plugin).map(|c| (service, c)));
        let Some((service, component)) = active else {
            return Err(NodeKindMissing {
                plugin_known: false,
                message: format!("plugin {plugin:?} has no registered version"),
            });
        };
        match component.node_kind(kind) {
            Some(declaration) => Ok((service, declaration)),
            None => {
                let declared: Vec<&str> = component.node_kinds.iter().map(|k| k.name.as_str()).collect();
                let offered = match declared.as_slice() {
                    [] => "it declares no node kinds".to_owned(),
                    names => format!("it declares {}", names.join(", ")),
                };
                Err(NodeKindMissing {
                    plugin_known: true,
                    message: format!(
                        "node kind {kind:?} is not declared by the active manifest of plugin {plugin:?} (version {}); \
                         {offered}",
                        component.version
                    ),
                })
            }
        }
    }
}

/// A compiled `config_schema`, shared by every action node with the same service hash and action.
pub(crate) type SchemaValidator = Arc<jsonschema::Validator>;

/// Compiled `config_schema`s by (service hash, action): a drift pass over many flows compiles each once.
#[derive(Clone, Default)]
struct ValidatorCache(Arc<Mutex<HashMap<ValidatorKey, Option<SchemaValidator>>>>);

/// A service version's hash and an action name.
type ValidatorKey = (String, String);

impl std::fmt::Debug for ValidatorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ValidatorCache")
    }
}

#[derive(Deserialize)]
struct ActiveVersion {
    id: String,
    version: String,
}

/// The active manifest of `service` (see the module documentation), as validation sees it; `None` when the
/// service never registered.
pub async fn active_service(ports: &Ports, service: &str) -> Result<Option<ActiveService>, FlowError> {
    Ok(Dependencies::load(ports).await?.services.remove(service))
}

impl Dependencies {
    /// Loads schemas, event-source defaults and every service's active manifest from the documents port.
    pub async fn load(ports: &Ports) -> Result<Dependencies, FlowError> {
        let documents = ports.documents.as_ref();
        let (schemas, sources, active, rows) = futures::try_join!(
            documents.list(SCHEMAS),
            documents.list(EVENT_SOURCES),
            documents.list(COMPONENT_ACTIVE),
            async { Catalog::new(ports).list().await.map_err(|e| PortError::Backend(e.to_string())) },
        )?;
        let schemas = schemas
            .into_iter()
            .filter_map(|doc| serde_json::from_value::<EventSchema>(doc).ok())
            .map(|schema| (schema.event_type.clone(), schema))
            .collect();
        let output_defaults = sources
            .into_iter()
            .filter_map(|doc| serde_json::from_value::<EventSource>(doc).ok())
            .map(|source| (source.source_topic, source.default_output_topic))
            .collect();
        let active: HashMap<String, String> = active
            .into_iter()
            .filter_map(|doc| serde_json::from_value::<ActiveVersion>(doc).ok())
            .map(|row| (row.id, row.version))
            .collect();
        Ok(Dependencies {
            schemas,
            output_defaults,
            services: active_services(rows, &active),
            topics: HashMap::new(),
            validators: ValidatorCache::default(),
        })
    }

    /// The compiled `config_schema` of `action` in the service version with `hash` (`None` when it does not
    /// compile: registration refuses such schemas, so this only guards against stored rows from elsewhere).
    pub(crate) fn validator(&self, hash: &str, action: &str, schema: &Value) -> Option<SchemaValidator> {
        let key = (hash.to_owned(), action.to_owned());
        let mut cache = self.validators.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.entry(key).or_insert_with(|| jsonschema::validator_for(schema).ok().map(Arc::new)).clone()
    }

    /// Looks up whether each of `topics` exists (once per topic), for the Kafka retarget check.
    pub async fn check_topics(&mut self, topics: &dyn Topics, names: impl IntoIterator<Item = String>) {
        for name in names {
            if self.topics.contains_key(&name) {
                continue;
            }
            let exists = match topics.exists(&name).await {
                Ok(exists) => exists,
                Err(error) => {
                    // Fails closed: an unanswered lookup is reported as a missing topic, never as present.
                    warn!(%error, topic = %name, "could not look up a retarget topic; treating it as missing");
                    false
                }
            };
            self.topics.insert(name, exists);
        }
    }
}

/// Per service, the active version of each component: the activated one where the component store has one
/// (and it is registered), else the latest registration.
fn active_services(
    rows: Vec<ComponentManifestRow>,
    active: &HashMap<String, String>,
) -> BTreeMap<String, ActiveService> {
    let mut chosen: BTreeMap<(String, String), ComponentManifestRow> = BTreeMap::new();
    let activated: BTreeSet<(String, String)> = rows
        .iter()
        .filter(|r| active.get(&r.component_id) == Some(&r.version))
        .map(|r| (r.service.clone(), r.component_id.clone()))
        .collect();
    for row in rows {
        let key = (row.service.clone(), row.component_id.clone());
        let is_active = active.get(&row.component_id) == Some(&row.version);
        let replace = match chosen.get(&key) {
            None => !activated.contains(&key) || is_active,
            Some(current) => !activated.contains(&key) && row.registered_ms > current.registered_ms,
        };
        if replace {
            chosen.insert(key, row);
        }
    }
    let mut by_service: BTreeMap<String, Vec<ComponentManifestRow>> = BTreeMap::new();
    for ((service, _), row) in chosen {
        by_service.entry(service).or_default().push(row);
    }
    by_service.into_iter().map(|(name, rows)| (name.clone(), ActiveService::new(name, rows))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(service: &str, id: &str, version: &str, registered_ms: i64) -> ComponentManifestRow {
        ComponentManifestRow {
            service: service.into(),
            component_id: id.into(),
            version: version.into(),
            actions: vec![ActionDecl { name: format!("act_{version}"), description: None, config_schema: None }],
            data_sources: vec![],
            service_sources: vec![],
            supports_nodes: vec![],
            node_kinds: vec![],
            transports: None,
            extra: Default::default(),
            content_hash: format!("h{version}"),
            first_registered_at: String::new(),
            last_seen_at: String::new(),
            registered_ms,
            server_compatibility: None,
        }
    }

    #[test]
    fn the_activated_version_wins_over_a_later_registration() {
        let rows = vec![row("s", "c", "1", 1), row("s", "c", "2", 2), row("t", "d", "1", 1), row("t", "d", "3", 3)];
        let active = HashMap::from([("c".to_owned(), "1".to_owned())]);
        let services = active_services(rows, &active);
        assert_eq!(services["s"].actions(), vec!["act_1"], "rolled back to version 1");
        assert_eq!(services["t"].actions(), vec!["act_3"], "no activation: the latest registration");
        assert_ne!(services["s"].hash, services["t"].hash);
    }
}
