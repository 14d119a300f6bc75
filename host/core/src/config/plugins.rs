//! The plugin runtime's and the component store's settings (`[plugins]`, `FLOWHOST_PLUGINS_*`): limits of every
//! invocation, the capabilities offered and granted, the compile cache.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::settings::{between, rule, Setting};

/// The plugin runtime and the component store (`[plugins]`). Limits apply to every invocation; a manifest can
/// only lower them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PluginsConfig {
    /// Wall-clock limit of one invocation in milliseconds (`FLOWHOST_PLUGINS_TIMEOUT_MS`; default 1000).
    pub timeout_ms: u64,
    /// Fuel per invocation, 0 for unmetered (`FLOWHOST_PLUGINS_FUEL`; default 1,000,000,000).
    pub fuel: u64,
    /// Linear memory cap per instance in bytes (`FLOWHOST_PLUGINS_MEMORY_BYTES`; default 64 MiB, at most
    /// 256 MiB).
    pub memory_bytes: usize,
    /// Largest output of one invocation in bytes (`FLOWHOST_PLUGINS_MAX_OUTPUT_BYTES`; default 1 MiB).
    pub max_output_bytes: usize,
    /// Invocations running at once (`FLOWHOST_PLUGINS_MAX_INSTANCES`; default 100).
    pub max_instances: u32,
    /// Largest component accepted by an upload in bytes (`FLOWHOST_PLUGINS_MAX_COMPONENT_BYTES`; default
    /// 20 MiB, which a Python component from componentize-py (about 18 MB, its interpreter included) needs; at
    /// most 64 MiB).
    pub max_component_bytes: usize,
    /// How often a node reconciles its active plugin versions with the store, in milliseconds, besides
    /// reacting to change signals at once (`FLOWHOST_PLUGINS_SYNC_INTERVAL_MS`; default 5000).
    pub sync_interval_ms: u64,
    /// Install the plugins shipped with the binary (`noop`, `condition`, `mapping`) at start
    /// (`FLOWHOST_PLUGINS_BUNDLED`; default true).
    pub bundled: bool,
    /// Host capabilities this host offers components at all (`FLOWHOST_PLUGINS_CAPABILITIES`, comma-separated;
    /// default all four). A component importing another one is refused at upload.
    pub capabilities: Vec<String>,
    /// Per-plugin grants (`FLOWHOST_PLUGINS_GRANTS`, `id=cap,cap;id=cap`; TOML `[plugins.grants]`, `id = ["cap"]`):
    /// a plugin listed here may use only its listed capabilities (each also in `capabilities`); a plugin not
    /// listed gets `log` and `clock` only, the bundled plugins what the bundle grants. An empty list grants
    /// nothing.
    pub grants: std::collections::BTreeMap<String, Vec<String>>,
    /// Where compiled components are cached, keyed by their hash and the engine's settings
    /// (`FLOWHOST_PLUGINS_COMPILE_CACHE_DIR`; default `<data_dir>/component-cache`). Nodes of one machine may
    /// share one directory: entries are checksummed and written whole.
    pub compile_cache_dir: Option<PathBuf>,
}

/// The environment name of `plugins.compile_cache_dir` (the test harness points every host it starts at one).
pub const COMPILE_CACHE_DIR_ENV: &str = "FLOWHOST_PLUGINS_COMPILE_CACHE_DIR";

/// The host capabilities this version offers to plugins.
pub const PLUGIN_CAPABILITIES: [&str; 4] = ["log", "clock", "documents", "notifications"];

impl Default for PluginsConfig {
    fn default() -> Self {
        Self {
            timeout_ms: 1000,
            fuel: 1_000_000_000,
            memory_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
            max_instances: 100,
            max_component_bytes: 20 << 20,
            sync_interval_ms: 5000,
            bundled: true,
            capabilities: PLUGIN_CAPABILITIES.iter().map(|c| c.to_string()).collect(),
            grants: std::collections::BTreeMap::new(),
            compile_cache_dir: None,
        }
    }
}

/// Largest `plugins.memory_bytes`: the pool reserves this much address space per instance slot.
pub const PLUGINS_MAX_MEMORY_BYTES: usize = 256 << 20;
/// Largest `plugins.max_component_bytes`: a component is stored in chunks of 8 MiB (each under MongoDB's
/// 16 MiB document limit), and compiling one this big takes a minute of CPU.
pub const PLUGINS_MAX_COMPONENT_BYTES: usize = 64 << 20;
/// Every `[plugins]` setting (see `crate::settings`).
pub static PLUGINS_SETTINGS: &[Setting<PluginsConfig>] = crate::settings!(PluginsConfig, "plugins.", [
    { "FLOWHOST_PLUGINS_TIMEOUT_MS", timeout_ms, "wall-clock limit of one plugin invocation", check: between(1, 600_000) },
    { "FLOWHOST_PLUGINS_FUEL", fuel, "fuel per invocation (about 50 ms of busy guest code); `0` unmetered" },
    { "FLOWHOST_PLUGINS_MEMORY_BYTES", memory_bytes, "linear memory cap per instance", check: between(1 << 20, PLUGINS_MAX_MEMORY_BYTES) },
    { "FLOWHOST_PLUGINS_MAX_OUTPUT_BYTES", max_output_bytes, "largest output of one invocation", check: between(1, 64 << 20) },
    { "FLOWHOST_PLUGINS_MAX_INSTANCES", max_instances, "invocations running at once (more are `busy`, retryable)", check: between(1, 10_000) },
    { "FLOWHOST_PLUGINS_MAX_COMPONENT_BYTES", max_component_bytes, "largest uploaded component", check: between(1, PLUGINS_MAX_COMPONENT_BYTES) },
    { "FLOWHOST_PLUGINS_SYNC_INTERVAL_MS", sync_interval_ms, "how often a node reconciles its active plugin versions", check: between(10, 3_600_000) },
    { "FLOWHOST_PLUGINS_BUNDLED", bundled, "install the plugins shipped in the binary at start" },
    { "FLOWHOST_PLUGINS_CAPABILITIES", capabilities, "host capabilities this host offers at all; a component importing another one is refused (400)", check: rule(known_capabilities, "of `log`, `clock`, `documents`, `notifications`") },
    { "FLOWHOST_PLUGINS_GRANTS", grants, "per-plugin grants within `plugins.capabilities`: `greeter=log,documents;visits=log` (file: `[plugins.grants]` with `greeter = [\"log\", \"documents\"]`); a listed plugin importing anything else is refused (400); an unlisted one gets `log` and `clock` only; the bundled plugins what the bundle grants", parse: parse_grants },
    { "FLOWHOST_PLUGINS_COMPILE_CACHE_DIR", compile_cache_dir, "where compiled components are cached (by hash and engine settings); processes of one machine may share it", default: "`<data_dir>/component-cache`" },
]);

impl PluginsConfig {
    /// The rules that tie settings together (each setting's bounds are in [`PLUGINS_SETTINGS`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::settings::check(self, PLUGINS_SETTINGS)?;
        for (plugin, granted) in &self.grants {
            if let Some(beyond) = granted.iter().find(|c| !self.capabilities.contains(c)) {
                return Err(ConfigError::new(
                    "FLOWHOST_PLUGINS_GRANTS",
                    format!(
                        "plugin {plugin:?} is granted {beyond:?}, which plugins.capabilities does not offer ({})",
                        self.capabilities.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn known_capabilities(capabilities: &[String]) -> Result<(), String> {
    match capabilities.iter().find(|c| !PLUGIN_CAPABILITIES.contains(&c.as_str())) {
        Some(unknown) => Err(format!("unknown capability {unknown:?} (known: {})", PLUGIN_CAPABILITIES.join(", "))),
        None => Ok(()),
    }
}

/// `FLOWHOST_PLUGINS_GRANTS`: `id=cap,cap;id=cap` (an id with nothing after `=` is granted nothing).
fn parse_grants(text: &str) -> Result<std::collections::BTreeMap<String, Vec<String>>, String> {
    let mut grants = std::collections::BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|entry| !entry.is_empty()) {
        let Some((plugin, capabilities)) = entry.split_once('=') else {
            return Err(format!("{entry:?}: use id=cap,cap;id=cap"));
        };
        let plugin = plugin.trim();
        if plugin.is_empty() || grants.insert(plugin.to_owned(), crate::settings::split_list(capabilities)).is_some() {
            return Err(format!("{entry:?}: a plugin id, once"));
        }
    }
    Ok(grants)
}
