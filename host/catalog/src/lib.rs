//! `flowhost-catalog`: the component catalog of spec 001 as a domain, without HTTP. Services register their
//! manifests (on boot and as a heartbeat every 5 minutes); uploaded WebAssembly components register theirs
//! through the component store. The admin API's routes (`host/api`) are thin handlers over [`Catalog`].
//!
//! A manifest names a `service` and its `components` (each an `id` and a `version`). Service-level `actions`,
//! `data_sources`, `service_sources`, `supports_nodes`, `node_kinds` and `transports` apply to every component that does not
//! declare its own. Each component version is stored as one row with id `{service}/{component_id}/{version}`
//! and a SHA-256 content hash: **the same identity with the same content is a heartbeat** (only `last_seen_at`
//! moves), with different content a conflict, and a conflict on one component registers none of the manifest.
//! A new version gets a `server_compatibility` report against the version registered before it, and is
//! announced on [`MANIFEST_CHANGED_SUBJECT`] ("service X has a new manifest hash"), which the drift
//! re-validation of released flows and the services' own caches subscribe to ([`subscribe`]).

mod compat;
mod model;

pub use compat::{compare_versions, compatibility};
pub use model::{
    problems_of, ActionDecl, Compatibility, ComponentEntry, ComponentManifestRow, DataSourceDecl, Declarations,
    NodeKindDecl, ServiceManifest, ANSWER_CONTINUE, ANSWER_STOP, FIELD_TYPES, NODE_KINDS, NODE_KIND_ANSWERS,
    SERVICE_SOURCES,
};

use flowhost_core::stored::{decode, decode_all, encode};
use std::collections::BTreeMap;
use std::sync::Arc;

use flowhost_core::collections::COMPONENTS;
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{DocumentStore, PortError, Ports, Subjects};
use flowhost_core::Clock;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::{info, warn};

/// Largest manifest body the register route accepts (spec 001: 1 MiB, whatever `api.max_body_bytes` is).
pub const MANIFEST_LIMIT_BYTES: usize = 1024 * 1024;

/// The component field marking a row registered by an uploaded WebAssembly component (`"runtime": "wasm"`):
/// its data sources are answered in process, not over HTTP.
pub const RUNTIME_FIELD: &str = "runtime";
/// The value of [`RUNTIME_FIELD`] for uploaded components.
pub const WASM_RUNTIME: &str = "wasm";

/// The subject a [`ManifestChanged`] is published on when a component version is registered for the first time.
pub const MANIFEST_CHANGED_SUBJECT: &str = "flowhost.catalog.manifest-changed";

/// Why the catalog refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The manifest is malformed; one message per problem.
    #[error("malformed manifest: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// A component version is registered with other content (versions are immutable).
    #[error("{0}")]
    Conflict(String),
    /// The documents port failed (or a stored row no longer parses).
    #[error(transparent)]
    Storage(#[from] PortError),
}

/// "Service X has a new manifest hash": a component version was registered for the first time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestChanged {
    pub service: String,
    pub component_id: String,
    pub version: String,
    pub content_hash: String,
}

/// What one registration did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registered {
    /// Component versions registered for the first time.
    pub new: Vec<ManifestChanged>,
    /// Component versions that were already registered with the same content (their `last_seen_at` moved).
    pub heartbeats: usize,
}

/// A service's current manifest: the latest registered version of each of its components.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceView {
    pub service: String,
    pub registered: bool,
    pub last_seen_at: String,
    pub components: Vec<ComponentManifestRow>,
}

/// The catalog over the documents port (rows), the subjects port (change events) and the clock.
#[derive(Clone)]
pub struct Catalog {
    documents: Arc<dyn DocumentStore>,
    subjects: Arc<dyn Subjects>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("documents", &self.documents.backend()).finish_non_exhaustive()
    }
}

impl Catalog {
    pub fn new(ports: &Ports) -> Catalog {
        Catalog { documents: ports.documents.clone(), subjects: ports.subjects.clone(), clock: ports.clock.clone() }
    }

    /// Checks a manifest as [`register`](Catalog::register) would, writing nothing: malformed, or a component
    /// version already registered with other content. The component store runs it before storing an upload's
    /// bytes, so a refused upload stores nothing.
    pub async fn check(&self, manifest: &ServiceManifest) -> Result<(), CatalogError> {
        let problems = problems_of(manifest);
        if !problems.is_empty() {
            return Err(CatalogError::Invalid(problems));
        }
        for row in model::rows_of(manifest.clone(), self.clock.now_ms()) {
            if let Some(stored) = self.row(&row.document_id()).await? {
                conflict_unless_same(&stored, &row)?;
            }
        }
        Ok(())
    }

    /// Registers a service manifest: checks it, refuses it whole when one component version is registered
    /// with other content, moves `last_seen_at` of known versions (a heartbeat) and stores new versions with
    /// their compatibility report, announcing each on [`MANIFEST_CHANGED_SUBJECT`].
    pub async fn register(&self, manifest: ServiceManifest) -> Result<Registered, CatalogError> {
        let problems = problems_of(&manifest);
        if !problems.is_empty() {
            return Err(CatalogError::Invalid(problems));
        }
        let documents = self.documents.as_ref();
        let now = self.clock.now_ms();
        let rows = model::rows_of(manifest, now);
        // Check every component first, so a conflict on one registers none of them.
        let mut new_rows = Vec::new();
        let mut heartbeats = Vec::new();
        for row in rows {
            match self.row(&row.document_id()).await? {
                None => new_rows.push(row),
                Some(stored) => {
                    conflict_unless_same(&stored, &row)?;
                    heartbeats.push(stored);
                }
            }
        }
        let mut registered = Registered { new: Vec::new(), heartbeats: heartbeats.len() };
        for mut stored in heartbeats {
            stored.last_seen_at = iso_utc(now);
            documents.upsert(COMPONENTS, &stored.document_id(), encode(COMPONENTS, &stored)?).await?;
        }
        for mut row in new_rows {
            row.server_compatibility =
                self.previous_version(&row).await?.map(|previous| compatibility(&previous, &row));
            match documents.insert(COMPONENTS, &row.document_id(), encode(COMPONENTS, &row)?).await {
                // Registered concurrently by another replica: identical content is a heartbeat, else a conflict.
                Err(PortError::Conflict(_)) => match self.row(&row.document_id()).await? {
                    Some(stored) if stored.content_hash == row.content_hash => registered.heartbeats += 1,
                    _ => {
                        return Err(CatalogError::Conflict(format!(
                            "component {:?} version {:?} was registered concurrently with different content",
                            row.component_id, row.version
                        )))
                    }
                },
                Err(e) => return Err(e.into()),
                Ok(()) => {
                    info!(service = %row.service, component = %row.component_id, version = %row.version,
                          "component version registered");
                    let changed = ManifestChanged {
                        service: row.service.clone(),
                        component_id: row.component_id.clone(),
                        version: row.version.clone(),
                        content_hash: row.content_hash.clone(),
                    };
                    self.announce(&changed).await;
                    registered.new.push(changed);
                }
            }
        }
        Ok(registered)
    }

    /// Every registered component version, sorted by service, component and version (semantic versions when
    /// both parse).
    pub async fn list(&self) -> Result<Vec<ComponentManifestRow>, CatalogError> {
        let mut rows: Vec<ComponentManifestRow> = decode_all(COMPONENTS, self.documents.list(COMPONENTS).await?)?;
        rows.sort_by(|a, b| {
            (a.service.as_str(), a.component_id.as_str())
                .cmp(&(b.service.as_str(), b.component_id.as_str()))
                .then_with(|| compare_versions(&a.version, &b.version))
        });
        Ok(rows)
    }

    /// The service's latest registered version of each component; `None` when the service never registered.
    pub async fn service(&self, service: &str) -> Result<Option<ServiceView>, CatalogError> {
        let rows = self.rows_where("service", service).await?;
        if rows.is_empty() {
            return Ok(None);
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
        let last_seen_at = latest.values().map(|r| r.last_seen_at.clone()).max().unwrap_or_default();
        Ok(Some(ServiceView {
            service: service.to_owned(),
            registered: true,
            last_seen_at,
            components: latest.into_values().collect(),
        }))
    }

    /// The most recently registered version of component `id` (of any service).
    pub async fn latest(&self, component_id: &str) -> Result<Option<ComponentManifestRow>, CatalogError> {
        Ok(self.rows_where("component_id", component_id).await?.into_iter().max_by_key(|r| r.registered_ms))
    }

    /// The most recently registered version of component `id` of `service`, or, without a service, of the one
    /// service that registered a component by that id: [`Owner::Ambiguous`] (naming the services) when several
    /// did, so no registrant can shadow another's component by reusing its id.
    pub async fn latest_of(&self, component_id: &str, service: Option<&str>) -> Result<Owner, CatalogError> {
        let mut rows = self.rows_where("component_id", component_id).await?;
        if let Some(service) = service {
            rows.retain(|row| row.service == service);
        }
        let mut services: Vec<String> = rows.iter().map(|row| row.service.clone()).collect();
        services.sort();
        services.dedup();
        if services.len() > 1 {
            return Ok(Owner::Ambiguous(services));
        }
        Ok(rows.into_iter().max_by_key(|r| r.registered_ms).map_or(Owner::None, |row| Owner::One(Box::new(row))))
    }

    async fn row(&self, document_id: &str) -> Result<Option<ComponentManifestRow>, CatalogError> {
        Ok(self.documents.get(COMPONENTS, document_id).await?.map(|doc| decode(COMPONENTS, doc)).transpose()?)
    }

    async fn rows_where(&self, field: &str, value: &str) -> Result<Vec<ComponentManifestRow>, CatalogError> {
        Ok(decode_all(COMPONENTS, self.documents.find(COMPONENTS, field, &json!(value)).await?)?)
    }

    /// The most recently registered earlier version of the same component.
    async fn previous_version(&self, row: &ComponentManifestRow) -> Result<Option<ComponentManifestRow>, CatalogError> {
        let siblings = self.rows_where("component_id", &row.component_id).await?;
        Ok(siblings
            .into_iter()
            .filter(|s| s.service == row.service && s.version != row.version)
            .max_by_key(|s| s.registered_ms))
    }

    /// Best effort: subscribers also re-read the catalog periodically, so a lost event only delays them.
    async fn announce(&self, changed: &ManifestChanged) {
        let payload = serde_json::to_vec(changed).unwrap_or_default();
        if let Err(error) = self.subjects.publish(MANIFEST_CHANGED_SUBJECT, payload).await {
            warn!(%error, service = %changed.service, "could not announce a new manifest");
        }
    }
}

/// Who owns a component id ([`Catalog::latest_of`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Owner {
    None,
    One(Box<ComponentManifestRow>),
    /// Several services registered a component by this id.
    Ambiguous(Vec<String>),
}

/// The catalog's [`ManifestChanged`] events from now on (messages that do not parse are skipped).
pub async fn subscribe(subjects: &dyn Subjects) -> Result<BoxStream<'static, ManifestChanged>, PortError> {
    let stream = subjects.subscribe(MANIFEST_CHANGED_SUBJECT).await?;
    Ok(stream.filter_map(|message| async move { serde_json::from_slice(&message.payload).ok() }).boxed())
}

fn conflict_unless_same(stored: &ComponentManifestRow, row: &ComponentManifestRow) -> Result<(), CatalogError> {
    if stored.content_hash == row.content_hash {
        return Ok(());
    }
    Err(CatalogError::Conflict(format!(
        "component {:?} version {:?} of service {:?} is already registered with different content; publish a new \
         version",
        row.component_id, row.version, row.service
    )))
}
