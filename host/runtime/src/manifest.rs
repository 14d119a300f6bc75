//! The plugin's manifest as the host reads it from the component's `manifest` export.

use serde::{Deserialize, Serialize};

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
    /// The actions it offers.
    pub actions: Vec<ManifestAction>,
    /// Fields this version of the host does not interpret.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
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

impl Manifest {
    /// Whether the manifest declares `action`.
    pub fn has_action(&self, action: &str) -> bool {
        self.actions.iter().any(|a| a.name == action)
    }
}
