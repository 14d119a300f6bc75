//! The [`ComponentStore`]: durable versions, the active version per plugin, and the local loaded plugins.

use flowhost_core::stored;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use flowhost_catalog::{Catalog, CatalogError, ServiceManifest, RUNTIME_FIELD, WASM_RUNTIME};
use flowhost_core::collections::{COMPONENTS_CHANGED_SUBJECT, COMPONENT_ACTIVE, COMPONENT_VERSIONS};
use flowhost_core::digest::{iso_utc, sha256_bytes_hex};
use flowhost_core::ports::{PortError, Ports, Wakeups};
use flowhost_runtime::{Capability, LoadError, Manifest, Plugin, Runtime};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// How the store behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Largest component accepted, in bytes.
    pub max_component_bytes: usize,
    /// How often every node reconciles its loaded plugins with the stored active versions, besides reacting
    /// to change signals at once.
    pub sync_interval: Duration,
    /// Where compiled native code is cached on this node (`None`: compile on every load).
    pub compile_cache: Option<std::path::PathBuf>,
    /// The host capabilities this host offers components; one importing another is refused.
    pub grants: Vec<Capability>,
    /// Per plugin id, the capabilities that plugin may import (within `grants`); a plugin not listed gets
    /// [`DEFAULT_GRANTS`] only, the bundled plugins (by their exact bytes) all of `grants`.
    pub plugin_grants: HashMap<String, Vec<Capability>>,
    /// SHA-256 of the components shipped in the binary: the bundle grants them what they need.
    pub bundled: std::collections::HashSet<String>,
    /// Versions a node keeps loaded besides the active ones (uploaded without activation, invoked by version,
    /// the one an activation replaced); the least recently used goes first.
    pub max_loaded_versions: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            max_component_bytes: 20 << 20,
            sync_interval: Duration::from_secs(5),
            compile_cache: None,
            grants: Capability::ALL.to_vec(),
            plugin_grants: HashMap::new(),
            bundled: std::collections::HashSet::new(),
            max_loaded_versions: 32,
        }
    }
}

/// What a plugin an operator did not list in its grants may import: a log and a clock. The documents store and
/// notifications (web push and in-app to any player of a tenant) need an explicit grant.
pub const DEFAULT_GRANTS: [Capability; 2] = [Capability::Log, Capability::Clock];

/// Why an upload or an activation was refused.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    /// The component is bigger than [`StoreConfig::max_component_bytes`].
    #[error("the component has {size} bytes; the limit is {limit}")]
    TooLarge { size: usize, limit: usize },
    /// A plugin id or version that cannot name a component.
    #[error("{0}")]
    InvalidName(String),
    /// The bytes are not a loadable component (not wasm, ungranted or undeclared imports, bad manifest, ...).
    #[error("{0}")]
    Invalid(#[from] LoadError),
    /// The component's manifest names another plugin or version than the upload.
    #[error("the component's manifest declares {declared}, but it was uploaded as {uploaded}")]
    Mismatch { declared: String, uploaded: String },
    /// The version exists with other bytes: versions are immutable.
    #[error(
        "plugin {id:?} version {version:?} is already stored with other content (sha256 {stored}); \
         versions are immutable: publish a new version"
    )]
    Conflict { id: String, version: String, stored: String },
    /// No such plugin or version.
    #[error("{0}")]
    NotFound(String),
    /// The component catalog refused the component's manifest (malformed for the catalog, or the same
    /// `(service, component id, version)` registered with other content).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The documents port failed.
    #[error(transparent)]
    Storage(#[from] PortError),
}

/// A checked upload, not stored yet (see [`ComponentStore::commit`]).
#[derive(Debug)]
pub struct Prepared {
    pub id: String,
    pub version: String,
    /// SHA-256 of the bytes, hex.
    pub content_hash: String,
    /// The loaded component; its manifest is what the catalog registers.
    pub plugin: Plugin,
    /// `true` when this exact version with these exact bytes is already stored (the upload is a no-op).
    pub unchanged: bool,
    wasm: Vec<u8>,
}

/// What [`ComponentStore::commit`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Uploaded {
    pub id: String,
    pub version: String,
    pub content_hash: String,
    pub size_bytes: usize,
    /// `false` when the version was already stored with the same bytes.
    pub created: bool,
    /// Whether this version is now the active one.
    pub active: bool,
}

/// What [`ComponentStore::activate`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Activation {
    pub id: String,
    pub version: String,
    /// The version active before, if any.
    pub previous_version: Option<String>,
    pub activated_at: String,
}

/// One stored version, as listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionSummary {
    pub version: String,
    pub content_hash: String,
    pub size_bytes: usize,
    pub uploaded_at: String,
    /// The manifest read from the component when it was uploaded.
    pub manifest: Value,
    pub active: bool,
}

/// One plugin with its stored versions (oldest upload first), as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentSummary {
    pub id: String,
    pub active_version: Option<String>,
    pub activated_at: Option<String>,
    pub versions: Vec<VersionSummary>,
}

/// A `component_versions` row.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct VersionRow {
    id: String,
    version: String,
    content_hash: String,
    size_bytes: usize,
    uploaded_at: String,
    uploaded_ms: i64,
    manifest: Value,
}

/// A `component_active` row.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ActiveRow {
    id: String,
    version: String,
    content_hash: String,
    activated_at: String,
    /// Activated by installing the components shipped with the binary, not by an operator: a newer binary's
    /// bundled version then replaces it. Rows written before this field existed read as an operator's choice.
    #[serde(default)]
    by_bundle: bool,
}

/// The plugins this node has loaded.
#[derive(Default)]
struct Loaded {
    /// Versions loaded, by `(id, version)`: the active ones and at most `max_loaded_versions` others.
    versions: HashMap<(String, String), LoadedVersion>,
    /// The active version of each plugin.
    active: HashMap<String, Plugin>,
    /// A counter stamping each use of a loaded version, for least-recently-used eviction.
    uses: AtomicU64,
}

struct LoadedVersion {
    content_hash: String,
    plugin: Plugin,
    /// The stamp of its last use (`Loaded::uses`).
    used: AtomicU64,
}

impl Loaded {
    fn get(&self, id: &str, version: &str) -> Option<&LoadedVersion> {
        let loaded = self.versions.get(&(id.to_owned(), version.to_owned()))?;
        loaded.used.store(self.uses.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        Some(loaded)
    }

    /// Keeps `plugin` loaded as `(id, version)`, then drops the least recently used versions that are not
    /// active until at most `max_inactive` others are left (their calls in flight keep them alive until they
    /// end; they load again on demand, from the compile cache).
    fn insert(&mut self, id: &str, version: &str, content_hash: String, plugin: Plugin, max_inactive: usize) {
        let used = AtomicU64::new(self.uses.fetch_add(1, Ordering::Relaxed));
        self.versions.insert((id.to_owned(), version.to_owned()), LoadedVersion { content_hash, plugin, used });
        self.evict(max_inactive);
    }

    fn is_active(&self, (id, version): &(String, String)) -> bool {
        self.active.get(id).is_some_and(|plugin| plugin.manifest().version == *version)
    }

    fn evict(&mut self, max_inactive: usize) {
        loop {
            let inactive = self.versions.iter().filter(|(key, _)| !self.is_active(key));
            if inactive.clone().count() <= max_inactive {
                return;
            }
            let Some(oldest) =
                inactive.min_by_key(|(_, loaded)| loaded.used.load(Ordering::Relaxed)).map(|(k, _)| k.clone())
            else {
                return;
            };
            self.versions.remove(&oldest);
        }
    }
}

/// Stores, activates and hands out plugin components (see the crate documentation).
pub struct ComponentStore {
    ports: Ports,
    runtime: Runtime,
    config: StoreConfig,
    loaded: RwLock<Loaded>,
    /// Serializes reconciliations and activations, so a reconcile that read an older active row never swaps it
    /// back in after an activation.
    sync_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for ComponentStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentStore").field("config", &self.config).finish_non_exhaustive()
    }
}

impl ComponentStore {
    /// A store over `ports` (documents, subjects, clock) loading components into `runtime`.
    pub fn new(ports: Ports, runtime: Runtime, config: StoreConfig) -> ComponentStore {
        ComponentStore {
            ports,
            runtime,
            config,
            loaded: RwLock::new(Loaded::default()),
            sync_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The largest component [`ComponentStore::prepare`] accepts, in bytes.
    pub fn max_component_bytes(&self) -> usize {
        self.config.max_component_bytes
    }

    /// The runtime components are loaded into.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The active version of plugin `id` on this node. Cheap (a read lock and a clone); the clone keeps its
    /// version alive until dropped, whatever is activated meanwhile.
    pub fn active(&self, id: &str) -> Option<Plugin> {
        self.read_loaded().active.get(id).cloned()
    }

    /// How many versions this node has loaded, the active ones included (at most one per plugin more than
    /// `max_loaded_versions`).
    pub fn loaded_versions(&self) -> usize {
        self.read_loaded().versions.len()
    }

    /// Every active plugin on this node, by id.
    pub fn active_plugins(&self) -> BTreeMap<String, Plugin> {
        self.read_loaded().active.iter().map(|(id, plugin)| (id.clone(), plugin.clone())).collect()
    }

    /// The first active plugin (by id) of `service` (its manifest's `service`, else its id) that `accepts`.
    pub fn active_of_service(&self, service: &str, accepts: impl Fn(&Plugin) -> bool) -> Option<Plugin> {
        let loaded = self.read_loaded();
        loaded
            .active
            .values()
            .find(|plugin| {
                let manifest = plugin.manifest();
                manifest.service.as_deref().unwrap_or(&manifest.id) == service && accepts(plugin)
            })
            .cloned()
    }

    /// Checks an upload of `wasm` as plugin `id` version `version` without storing anything: size, names,
    /// immutability, and that the runtime loads it with a manifest naming the same id and version.
    pub async fn prepare(&self, id: &str, version: &str, wasm: Vec<u8>) -> Result<Prepared, ComponentError> {
        check_name("plugin id", id)?;
        check_name("version", version)?;
        if wasm.len() > self.config.max_component_bytes {
            return Err(ComponentError::TooLarge { size: wasm.len(), limit: self.config.max_component_bytes });
        }
        let content_hash = sha256_bytes_hex(&wasm);
        let unchanged = self.already_stored(id, version, &content_hash).await?;
        let (wasm, plugin) = self.compile_and_load(wasm).await?;
        let manifest = plugin.manifest();
        if manifest.id != id || manifest.version != version {
            return Err(ComponentError::Mismatch {
                declared: format!("{}@{}", manifest.id, manifest.version),
                uploaded: format!("{id}@{version}"),
            });
        }
        // The catalog would refuse it (its identity registered with other content): refuse before storing.
        Catalog::new(&self.ports).check(&catalog_manifest(&plugin, &content_hash)?).await?;
        Ok(Prepared { id: id.to_owned(), version: version.to_owned(), content_hash, plugin, unchanged, wasm })
    }

    /// Whether `id@version` is stored with exactly these bytes; [`ComponentError::Conflict`] when it is stored
    /// with others (versions are immutable).
    async fn already_stored(&self, id: &str, version: &str, content_hash: &str) -> Result<bool, ComponentError> {
        let stored: Option<VersionRow> = self.load_row(COMPONENT_VERSIONS, &version_key(id, version)).await?;
        match stored {
            None => Ok(false),
            Some(stored) if stored.content_hash == content_hash => Ok(true),
            Some(stored) => Err(ComponentError::Conflict {
                id: id.to_owned(),
                version: version.to_owned(),
                stored: stored.content_hash,
            }),
        }
    }

    /// Stores a prepared upload (bytes first, then the version row, then its component-catalog row) and, when
    /// `activate`, makes it the active version on every node.
    pub async fn commit(&self, prepared: Prepared, activate: bool) -> Result<Uploaded, ComponentError> {
        let Prepared { id, version, content_hash, plugin, unchanged, wasm } = prepared;
        let documents = &self.ports.documents;
        let mut created = false;
        if !unchanged {
            crate::blobs::write(documents.as_ref(), &content_hash, &wasm).await?;
            let now = self.ports.clock.now_ms();
            let row = VersionRow {
                id: id.clone(),
                version: version.clone(),
                content_hash: content_hash.clone(),
                size_bytes: wasm.len(),
                uploaded_at: iso_utc(now),
                uploaded_ms: now,
                manifest: stored::encode(COMPONENT_VERSIONS, plugin.manifest())?,
            };
            match documents
                .insert(COMPONENT_VERSIONS, &version_key(&id, &version), stored::encode(COMPONENT_VERSIONS, &row)?)
                .await
            {
                Ok(()) => {
                    created = true;
                    info!(plugin = %id, %version, sha256 = %content_hash, size_bytes = wasm.len(),
                          "component version stored");
                }
                // Uploaded concurrently (another node or request): the same bytes are fine, others a conflict.
                Err(PortError::Conflict(_)) => {
                    self.already_stored(&id, &version, &content_hash).await?;
                }
                Err(error) => return Err(error.into()),
            }
        }
        // After the bytes and the version row: a failure here leaves no catalog row without its component, and
        // a retried upload (the same bytes) registers it then. Registering again is a heartbeat.
        Catalog::new(&self.ports).register(catalog_manifest(&plugin, &content_hash)?).await?;
        let max_inactive = self.config.max_loaded_versions;
        self.write_loaded().insert(&id, &version, content_hash.clone(), plugin, max_inactive);
        if activate {
            self.activate(&id, &version).await?;
        }
        let active = self.active(&id).is_some_and(|plugin| plugin.manifest().version == version);
        Ok(Uploaded { id, version, content_hash, size_bytes: wasm.len(), created, active })
    }

    /// Makes `version` the active version of plugin `id` (a rollback when it is an older one): loads it if
    /// needed, records it, swaps it in on this node and tells the other nodes.
    pub async fn activate(&self, id: &str, version: &str) -> Result<Activation, ComponentError> {
        self.activate_as(id, version, false).await
    }

    /// [`ComponentStore::activate`], recording whether the binary's bundled components chose the version.
    async fn activate_as(&self, id: &str, version: &str, by_bundle: bool) -> Result<Activation, ComponentError> {
        let plugin = self.version(id, version).await?;
        // Not while a reconcile runs: it may have read the previous active row and would swap it back in.
        let _guard = self.sync_lock.lock().await;
        let previous: Option<ActiveRow> = self.load_row(COMPONENT_ACTIVE, id).await?;
        let row = ActiveRow {
            id: id.to_owned(),
            version: version.to_owned(),
            content_hash: self.content_hash_of(id, version).unwrap_or_default(),
            activated_at: iso_utc(self.ports.clock.now_ms()),
            by_bundle,
        };
        self.ports.documents.upsert(COMPONENT_ACTIVE, id, stored::encode(COMPONENT_ACTIVE, &row)?).await?;
        self.swap_in(id, plugin);
        let previous_version = previous.map(|previous| previous.version);
        info!(plugin = %id, %version, previous = ?previous_version, "component version activated");
        let signal = serde_json::to_vec(&json!({ "id": id, "version": version })).unwrap_or_default();
        if let Err(error) = self.ports.subjects.publish(COMPONENTS_CHANGED_SUBJECT, signal).await {
            warn!(%error, "could not announce the activation; other nodes pick it up on their next reconcile");
        }
        Ok(Activation {
            id: id.to_owned(),
            version: version.to_owned(),
            previous_version,
            activated_at: row.activated_at,
        })
    }

    /// Plugin `id` at `version`, loaded on first use from storage (active or not: "test this node" may call an
    /// inactive version).
    pub async fn version(&self, id: &str, version: &str) -> Result<Plugin, ComponentError> {
        if let Some(loaded) = self.read_loaded().get(id, version) {
            return Ok(loaded.plugin.clone());
        }
        let row: VersionRow = self
            .load_row(COMPONENT_VERSIONS, &version_key(id, version))
            .await?
            .ok_or_else(|| ComponentError::NotFound(format!("plugin {id:?} has no version {version:?}")))?;
        let wasm = crate::blobs::read(self.ports.documents.as_ref(), &row.content_hash).await?.ok_or_else(|| {
            PortError::Backend(format!("the bytes of {id}@{version} (sha256 {}) are missing", row.content_hash))
        })?;
        let (_, plugin) = self.compile_and_load(wasm).await?;
        let max_inactive = self.config.max_loaded_versions;
        self.write_loaded().insert(id, version, row.content_hash, plugin.clone(), max_inactive);
        Ok(plugin)
    }

    /// Every stored plugin with its versions, sorted by id; versions by upload time.
    pub async fn list(&self) -> Result<Vec<ComponentSummary>, ComponentError> {
        let documents = &self.ports.documents;
        let active = stored::decode_valid::<ActiveRow>(COMPONENT_ACTIVE, documents.list(COMPONENT_ACTIVE).await?);
        let versions = stored::decode_valid(COMPONENT_VERSIONS, documents.list(COMPONENT_VERSIONS).await?);
        Ok(summaries(versions, active))
    }

    /// One plugin's summary.
    pub async fn get(&self, id: &str) -> Result<ComponentSummary, ComponentError> {
        let active: Option<ActiveRow> = self.load_row(COMPONENT_ACTIVE, id).await?;
        let found = self.ports.documents.find(COMPONENT_VERSIONS, "id", &json!(id)).await?;
        summaries(stored::decode_valid(COMPONENT_VERSIONS, found), active.into_iter().collect())
            .pop()
            .ok_or_else(|| ComponentError::NotFound(format!("no plugin {id:?}")))
    }

    /// Makes this node's active plugins match the stored active versions: loads and swaps in what changed.
    /// A version that fails to load keeps the previous one active here (logged); the next pass tries again.
    pub async fn sync(&self) -> Result<(), ComponentError> {
        let _guard = self.sync_lock.lock().await;
        let rows: Vec<ActiveRow> =
            stored::decode_valid(COMPONENT_ACTIVE, self.ports.documents.list(COMPONENT_ACTIVE).await?);
        for row in rows {
            let current = self.active(&row.id).map(|plugin| plugin.manifest().version.clone());
            if current.as_deref() == Some(row.version.as_str()) {
                continue;
            }
            match self.version(&row.id, &row.version).await {
                Ok(plugin) => {
                    self.swap_in(&row.id, plugin);
                    info!(plugin = %row.id, version = %row.version, previous = ?current, "component version swapped in");
                }
                Err(error) => warn!(plugin = %row.id, version = %row.version, %error,
                                    "cannot load the active version; keeping the one loaded here"),
            }
        }
        Ok(())
    }

    /// Keeps this node in step with the stored active versions until `shutdown`: at once on a change signal,
    /// and every [`StoreConfig::sync_interval`] as the fallback.
    pub async fn run_sync(self: Arc<Self>, shutdown: CancellationToken) {
        let subjects = self.ports.subjects.as_ref();
        let mut wakeups = Wakeups::new(subjects, COMPONENTS_CHANGED_SUBJECT, self.config.sync_interval).await;
        while wakeups.next(&shutdown).await {
            if let Err(error) = self.sync().await {
                warn!(%error, "component reconcile failed; keeping the loaded versions");
            }
        }
    }

    /// Installs the components shipped with the binary: each is stored (when its version is new) and becomes
    /// active unless an operator chose the active version of its plugin (kept across restarts and upgrades); a
    /// version that an earlier binary's bundle activated is replaced by this binary's.
    /// Each is registered in the component catalog like an upload. Returns each installed component with its
    /// content hash.
    pub async fn install_bundled(&self, components: &[(&str, &[u8])]) -> Result<Vec<(Plugin, String)>, ComponentError> {
        let mut installed = Vec::new();
        for (name, wasm) in components {
            // Loaded once: its manifest names the version to install.
            let content_hash = sha256_bytes_hex(wasm);
            let (wasm, plugin) = self.compile_and_load(wasm.to_vec()).await?;
            let Manifest { id, version, .. } = plugin.manifest().clone();
            let unchanged = self.already_stored(&id, &version, &content_hash).await.inspect_err(|error| {
                warn!(component = name, %error, "bundled component refused");
            })?;
            let prepared = Prepared { id, version, content_hash, plugin, unchanged, wasm };
            let activate = match self.load_row::<ActiveRow>(COMPONENT_ACTIVE, &prepared.id).await? {
                None => true,
                Some(active) => active.by_bundle && active.version != prepared.version,
            };
            installed.push((prepared.plugin.clone(), prepared.content_hash.clone()));
            let uploaded = self.commit(prepared, false).await?;
            if activate {
                self.activate_as(&uploaded.id, &uploaded.version, true).await?;
            }
            debug!(component = name, plugin = %uploaded.id, version = %uploaded.version, created = uploaded.created,
                   "bundled component installed");
        }
        self.sync().await?;
        Ok(installed)
    }

    /// Compiles on a blocking thread (tens of milliseconds to seconds of CPU; cached per node when configured),
    /// then links and reads the manifest. The configured grants are offered; the runtime links only those the
    /// component imports and its manifest declares.
    async fn compile_and_load(&self, wasm: Vec<u8>) -> Result<(Vec<u8>, Plugin), ComponentError> {
        let runtime = self.runtime.clone();
        let cache = self.config.compile_cache.clone();
        let (wasm, compiled) = tokio::task::spawn_blocking(move || {
            let compiled = match &cache {
                Some(dir) => runtime.compile_cached(&wasm, dir),
                None => runtime.compile(&wasm),
            };
            (wasm, compiled)
        })
        .await
        .map_err(|error| PortError::Backend(format!("compiling a component failed: {error}")))?;
        let plugin = self.runtime.load_compiled(compiled?, &self.config.grants).await?;
        let granted = self.granted(&plugin.manifest().id, &sha256_bytes_hex(&wasm));
        if let Some(capability) = plugin.capabilities().iter().find(|capability| !granted.contains(capability)) {
            return Err(LoadError::NotGranted { capability: capability.name().to_owned() }.into());
        }
        Ok((wasm, plugin))
    }

    /// What plugin `id` with these bytes may import: everything offered for the bundle's own components, the
    /// operator's grant for a listed plugin, [`DEFAULT_GRANTS`] otherwise (always within what the host offers).
    fn granted(&self, id: &str, content_hash: &str) -> Vec<Capability> {
        let offered = &self.config.grants;
        if self.config.bundled.contains(content_hash) {
            return offered.clone();
        }
        match self.config.plugin_grants.get(id) {
            Some(listed) => listed.iter().filter(|capability| offered.contains(capability)).copied().collect(),
            None => DEFAULT_GRANTS.iter().filter(|capability| offered.contains(capability)).copied().collect(),
        }
    }

    /// Makes `plugin` the active version of `id` on this node. Of the other loaded versions of `id` only the one
    /// it replaces stays loaded (a rollback is then instant); older ones are dropped once their calls in flight
    /// end, and load again on demand (from the compile cache, in about a millisecond).
    fn swap_in(&self, id: &str, plugin: Plugin) {
        let mut loaded = self.write_loaded();
        let keep =
            [Some(plugin.manifest().version.clone()), loaded.active.get(id).map(|p| p.manifest().version.clone())];
        loaded.versions.retain(|(plugin_id, version), _| plugin_id != id || keep.contains(&Some(version.clone())));
        loaded.active.insert(id.to_owned(), plugin);
    }

    fn content_hash_of(&self, id: &str, version: &str) -> Option<String> {
        self.read_loaded().get(id, version).map(|loaded| loaded.content_hash.clone())
    }

    async fn load_row<T: serde::de::DeserializeOwned>(
        &self,
        collection: &str,
        key: &str,
    ) -> Result<Option<T>, ComponentError> {
        match self.ports.documents.get(collection, key).await? {
            None => Ok(None),
            Some(doc) => serde_json::from_value(doc).map(Some).map_err(|error| {
                ComponentError::Storage(PortError::Backend(format!("{collection}/{key} does not decode: {error}")))
            }),
        }
    }

    fn read_loaded(&self) -> std::sync::RwLockReadGuard<'_, Loaded> {
        self.loaded.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write_loaded(&self) -> std::sync::RwLockWriteGuard<'_, Loaded> {
        self.loaded.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Groups version rows into one summary per plugin (sorted by id; versions by upload time), marking the active
/// version of each from `active`.
fn summaries(mut rows: Vec<VersionRow>, active: Vec<ActiveRow>) -> Vec<ComponentSummary> {
    let active: HashMap<String, ActiveRow> = active.into_iter().map(|row| (row.id.clone(), row)).collect();
    rows.sort_by(|a, b| (&a.id, a.uploaded_ms, &a.version).cmp(&(&b.id, b.uploaded_ms, &b.version)));
    let mut summaries: Vec<ComponentSummary> = Vec::new();
    for row in rows {
        let active_row = active.get(&row.id);
        if summaries.last().is_none_or(|last| last.id != row.id) {
            summaries.push(ComponentSummary {
                id: row.id.clone(),
                active_version: active_row.map(|a| a.version.clone()),
                activated_at: active_row.map(|a| a.activated_at.clone()),
                versions: Vec::new(),
            });
        }
        let is_active = active_row.is_some_and(|a| a.version == row.version);
        if let Some(summary) = summaries.last_mut() {
            summary.versions.push(VersionSummary {
                version: row.version,
                content_hash: row.content_hash,
                size_bytes: row.size_bytes,
                uploaded_at: row.uploaded_at,
                manifest: row.manifest,
                active: is_active,
            });
        }
    }
    summaries
}

fn version_key(id: &str, version: &str) -> String {
    format!("{id}/{version}")
}

/// The catalog manifest of a component: a row of its service (the manifest's `service`, or its id) with the
/// same identity as the stored version, marked `runtime: "wasm"` with the component's SHA-256, so the catalog's
/// immutability check covers the bytes too.
pub fn catalog_manifest(plugin: &Plugin, content_hash: &str) -> Result<ServiceManifest, CatalogError> {
    catalog_manifest_of(plugin.manifest(), content_hash)
}

/// [`catalog_manifest`] from the component's manifest alone (what an upload checks before storing anything).
pub fn catalog_manifest_of(manifest: &Manifest, content_hash: &str) -> Result<ServiceManifest, CatalogError> {
    let data_sources: Vec<Value> = manifest
        .data_sources
        .iter()
        .map(|source| json!({ "name": source.name, "path": format!("/{}", source.name), "params": source.params }))
        .collect();
    let service = json!({
        "service": manifest.service.clone().unwrap_or_else(|| manifest.id.clone()),
        "components": [{
            "id": manifest.id,
            "version": manifest.version,
            "description": manifest.description,
            "actions": manifest.actions,
            "data_sources": data_sources,
            "supports_nodes": manifest.supports_nodes.clone().unwrap_or_else(|| manifest.host_node_kinds()),
            "node_kinds": manifest.declared_node_kinds(),
            "service_sources": manifest.service_sources,
            RUNTIME_FIELD: WASM_RUNTIME,
            "content_sha256": content_hash,
        }],
    });
    serde_json::from_value(service).map_err(|error| {
        CatalogError::Invalid(vec![format!("the component's manifest does not fit the catalog: {error}")])
    })
}

/// Plugin ids and versions appear in paths, document ids and log lines: 1 to 128 characters of letters,
/// digits, `.`, `_`, `-` and `+`, starting with a letter or digit.
fn check_name(what: &str, name: &str) -> Result<(), ComponentError> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'));
    if valid {
        Ok(())
    } else {
        Err(ComponentError::InvalidName(format!(
            "{what} {name:?} is invalid: use 1 to 128 letters, digits, '.', '_', '-' or '+', starting with a \
             letter or digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_and_document_safe() {
        for good in ["noop", "send_webpush", "first-action", "1.2.3", "1.0.0-rc.1+build.5"] {
            assert!(check_name("id", good).is_ok(), "{good}");
        }
        for bad in ["", "a/b", "../x", ".hidden", "a b", "é", &"x".repeat(129)] {
            assert!(check_name("id", bad).is_err(), "{bad}");
        }
    }
}
