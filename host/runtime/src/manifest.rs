//! The plugin's manifest as the host reads it from the component's `manifest` export.

use serde::{Deserialize, Serialize};

use crate::invoke::check_output;
use crate::{Capability, Limits, LoadError};

/// What a component declares about itself (JSON, see `wit/README.md`). Unknown fields are kept in `extra` for
/// the component catalog's later fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Component id.
    pub id: String,
    /// Component version; `(id, version)` is immutable once registered.
    pub version: String,
    /// One-line description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Host capabilities the plugin uses (`log`, `clock`).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// The actions it offers (an action plugin must offer at least one; a projector offers none).
    #[serde(default)]
    pub actions: Vec<ManifestAction>,
    /// The service the component belongs to in the component catalog (default: its `id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Node kinds it implements, each evaluated by the batch contract (or as an action of the same name by a
    /// `flowhost:plugin@0.1.0` component): a bare name is a kind the host itself uses (the bundled `condition`
    /// and `mapping`), a declaration (`name`, `config_schema`, `answers`, `adds_fields`) a kind flows place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_kinds: Vec<NodeKindEntry>,
    /// The node kinds a flow may place inside the service's segment (`supports_nodes` in the component catalog:
    /// `condition`, `lookup`, `mapping`, ...); absent: the kinds it implements (`node_kinds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_nodes: Option<Vec<String>>,
    /// The transports over which the service also takes work from flows besides in process (`service_sources`
    /// in the component catalog: `nats`, `kafka`, `http`); a host running the plugin's service serves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_sources: Vec<String>,
    /// Data sources it answers in process (a `service-plugin` exporting `data-source`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_sources: Vec<ManifestDataSource>,
    /// Limits the plugin asks for; they can only tighten the runtime's configured limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ManifestLimits>,
    /// Whether the plugin's actions may run in an instance kept from an earlier call of the same tenant instead
    /// of a fresh one (the plugin keeps nothing between calls that the next must not see; see `crate::reuse`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reuse_instances: bool,
    /// Fields this version of the host does not interpret.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One entry of a manifest's `node_kinds`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeKindEntry {
    /// A kind the host evaluates through the component itself (`condition`, `mapping`).
    Name(String),
    /// A kind flows may place (`{"kind": "node-kind", "config": {"plugin", "kind", ...}}`); the component catalog
    /// checks the declaration's fields (`flowhost_catalog::NodeKindDecl`).
    Declared {
        name: String,
        #[serde(flatten)]
        declaration: serde_json::Map<String, serde_json::Value>,
    },
}

impl NodeKindEntry {
    pub fn name(&self) -> &str {
        match self {
            NodeKindEntry::Name(name) | NodeKindEntry::Declared { name, .. } => name,
        }
    }
}

/// One action of a manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestAction {
    /// Name passed to `invoke`.
    pub name: String,
    /// One-line description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the action's configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema: Option<serde_json::Value>,
    /// Fields this version of the host does not interpret.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A data source a service plugin answers: Studio's forms query it through the component catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestDataSource {
    /// Name in `GET /api/v1/components/:id/data/:name`.
    pub name: String,
    /// Query parameters passed on to the plugin; others are dropped.
    #[serde(default)]
    pub params: Vec<String>,
    /// Fields this version of the host does not interpret.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Per-invocation limits a manifest asks for (every field optional). A plugin that knows it needs little (a
/// condition node: a few milliseconds, a few MiB) declares it, so a bug in it fails fast instead of holding a
/// slot for the runtime's full default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    /// Wall-clock deadline of one call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Fuel per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Linear memory cap, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<usize>,
    /// Largest output, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<usize>,
}

impl Manifest {
    /// Reads the text a component's `manifest` export returned, as loading a component does: within `limits`'
    /// output size, JSON of this shape, declaring every capability in `imported`. Returns the manifest with
    /// `limits` tightened by the ones it asks for. Pure: the fuzz targets (`tests/fuzz`) call it directly.
    pub fn read(text: &str, imported: &[Capability], limits: &Limits) -> Result<(Manifest, Limits), LoadError> {
        check_output(text, limits).map_err(LoadError::Manifest)?;
        let manifest: Manifest =
            serde_json::from_str(text).map_err(|error| LoadError::InvalidManifest(error.to_string()))?;
        for capability in imported {
            if !manifest.capabilities.iter().any(|declared| declared == capability.name()) {
                return Err(LoadError::Undeclared { capability: capability.name().to_string() });
            }
        }
        let limits = match &manifest.limits {
            Some(asked) => limits.tightened_by(asked),
            None => limits.clone(),
        };
        Ok((manifest, limits))
    }

    /// Whether the manifest declares `action`.
    pub fn has_action(&self, action: &str) -> bool {
        self.actions.iter().any(|a| a.name == action)
    }

    /// Whether the manifest lists node kind `kind` (bare or declared).
    pub fn has_node_kind(&self, kind: &str) -> bool {
        self.node_kinds.iter().any(|entry| entry.name() == kind)
    }

    /// The bare names of `node_kinds`: the kinds the host itself evaluates through the component.
    pub fn host_node_kinds(&self) -> Vec<String> {
        let bare = self.node_kinds.iter().filter_map(|entry| match entry {
            NodeKindEntry::Name(name) => Some(name.clone()),
            NodeKindEntry::Declared { .. } => None,
        });
        bare.collect()
    }

    /// The declarations of `node_kinds`: the kinds flows place, as declared.
    pub fn declared_node_kinds(&self) -> Vec<serde_json::Value> {
        let declared = self.node_kinds.iter().filter_map(|entry| match entry {
            NodeKindEntry::Name(_) => None,
            NodeKindEntry::Declared { name, declaration } => {
                let mut object = declaration.clone();
                object.insert("name".to_owned(), serde_json::Value::String(name.clone()));
                Some(serde_json::Value::Object(object))
            }
        });
        declared.collect()
    }
}
