//! [`Flows`]: the operations on v2 flows over the ports. Every write of a flow record is a compare-and-replace
//! on its stored version (retried a few times), so a release, a save and the drift pass never overwrite each
//! other's result.

use std::collections::BTreeSet;

use flowhost_core::collections::{
    CONFIG_CHANGED_SUBJECT, FLOWS, FLOW_EDIT_LOCKS, FLOW_RELEASE_ATTEMPTS, FLOW_SERVICE_REFS, FLOW_VERSIONS,
};
use flowhost_core::digest::{iso_utc, sha256_hex};
use flowhost_core::model::{is_slug, MAX_FLOW_ID_LEN, MAX_TENANT_ID_LEN};
use flowhost_core::ports::{Direction, IndexSpec, PortError, Ports, Query};
use flowhost_core::stored::{self, Collection, Document};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::broadcast::ServiceRef;
use crate::deps::Dependencies;
use crate::issues::{Issue, Report, Severity};
use crate::model::{
    CampaignMeta, EditLock, FlowBody, FlowRecord, FlowStatus, FlowSummary, FlowVersion, ReleaseAttempt, ReleaseOutcome,
    API_VERSION,
};
use crate::normalize::normalize;
use crate::validate::{referenced_services, retarget_topics, validate};
use crate::FlowError;

/// How long an edit lock lasts when the request does not say.
pub const LOCK_TTL_DEFAULT_SECONDS: u64 = 300;
/// The longest edit lock.
pub const LOCK_TTL_MAX_SECONDS: u64 = 3600;
/// Longest flow name and description.
const MAX_NAME_LEN: usize = 256;
const MAX_DESCRIPTION_LEN: usize = 4096;
/// Longest campaign offering.
const MAX_OFFERING_LEN: usize = 1024;
/// Compare-and-replace attempts before a write answers "changed concurrently".
const WRITE_ATTEMPTS: usize = 5;

/// The body of create and save requests: the flow's own fields and its graph.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlowInput {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Campaign metadata: replaces the flow's when given (absent keeps it).
    #[serde(default)]
    pub campaign: Option<CampaignMeta>,
    #[serde(flatten)]
    pub body: FlowBody,
}

/// The v2 flow operations (see the module documentation).
#[derive(Clone)]
pub struct Flows {
    ports: Ports,
}

impl std::fmt::Debug for Flows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flows").finish_non_exhaustive()
    }
}

fn body_hash(body: &FlowBody) -> String {
    sha256_hex(&[&serde_json::to_string(body).unwrap_or_default()])
}

fn version_id(flow_id: &str, version: u64) -> String {
    format!("{flow_id}/{version}")
}

impl Document for FlowRecord {
    const COLLECTION: &'static str = FLOWS;

    fn id(&self) -> String {
        self.id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![
            IndexSpec::ascending(&["api_version", "id"]),
            // What the campaign events API's sync reads: flows changed since its cursor.
            IndexSpec::ascending(&["api_version", "updated_at"]),
        ]
    }
}

impl Document for ServiceRef {
    const COLLECTION: &'static str = FLOW_SERVICE_REFS;

    fn id(&self) -> String {
        format!("{}/{}", self.service, self.flow_id)
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["service", "flow_id"]), IndexSpec::ascending(&["flow_id"])]
    }
}

impl Document for FlowVersion {
    const COLLECTION: &'static str = FLOW_VERSIONS;

    fn id(&self) -> String {
        version_id(&self.flow_id, self.version)
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["flow_id", "version"])]
    }
}

impl Document for ReleaseAttempt {
    const COLLECTION: &'static str = FLOW_RELEASE_ATTEMPTS;

    fn id(&self) -> String {
        self.id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["flow_id", "at_ms"])]
    }
}

fn check_input(input: &FlowInput) -> Result<(), FlowError> {
    let invalid =
        |field: &str, message: &str| FlowError::Invalid { field: field.to_owned(), message: message.to_owned() };
    if input.name.as_ref().is_some_and(|n| n.len() > MAX_NAME_LEN) {
        return Err(invalid("/name", "longer than 256 characters"));
    }
    if input.description.as_ref().is_some_and(|d| d.len() > MAX_DESCRIPTION_LEN) {
        return Err(invalid("/description", "longer than 4096 characters"));
    }
    if let Some(campaign) = &input.campaign {
        check_campaign(campaign)?;
    }
    if let Some(id) = &input.id {
        if !is_slug(id, MAX_FLOW_ID_LEN) {
            return Err(invalid("/id", "use 1 to 128 letters, digits, '-', '_' or '.'"));
        }
    }
    Ok(())
}

fn check_campaign(campaign: &CampaignMeta) -> Result<(), FlowError> {
    let invalid =
        |field: &str, message: &str| FlowError::Invalid { field: field.to_owned(), message: message.to_owned() };
    if !is_slug(&campaign.tenant_id, MAX_TENANT_ID_LEN) {
        return Err(invalid("/campaign/tenant_id", "use 1 to 64 letters, digits, '-', '_' or '.'"));
    }
    if campaign.offering.len() > MAX_OFFERING_LEN {
        return Err(invalid("/campaign/offering", "longer than 1024 characters"));
    }
    let instant = |field: &str, value: &Option<String>| match value {
        None => Ok(None),
        Some(text) => chrono::DateTime::parse_from_rfc3339(text)
            .map(|at| Some(at.timestamp_millis()))
            .map_err(|_| invalid(field, "not an RFC 3339 instant (2026-12-01T00:00:00Z)")),
    };
    let starts = instant("/campaign/starts_at", &campaign.starts_at)?;
    let ends = instant("/campaign/ends_at", &campaign.ends_at)?;
    if let (Some(starts), Some(ends)) = (starts, ends) {
        if ends < starts {
            return Err(invalid("/campaign/ends_at", "before starts_at"));
        }
    }
    Ok(())
}

impl Flows {
    pub fn new(ports: Ports) -> Flows {
        Flows { ports }
    }

    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The stored `T`s (flows, versions, service references, release attempts) of this store.
    fn typed<T: Document>(&self) -> Collection<T> {
        Collection::new(self.ports.documents.clone())
    }

    /// Creates the indexes the flow queries use (idempotent; the admin role's drift task calls it at start).
    pub async fn ensure_indexes(&self) -> Result<(), FlowError> {
        self.typed::<FlowRecord>().ensure_indexes().await?;
        self.typed::<ServiceRef>().ensure_indexes().await?;
        self.typed::<FlowVersion>().ensure_indexes().await?;
        self.typed::<ReleaseAttempt>().ensure_indexes().await?;
        Ok(())
    }

    fn now(&self) -> (i64, String) {
        let ms = self.ports.clock.now_ms();
        (ms, iso_utc(ms))
    }

    /// Fresh dependencies for validating `body` (its retarget topics looked up).
    pub async fn dependencies(&self, body: &FlowBody) -> Result<Dependencies, FlowError> {
        let mut deps = Dependencies::load(&self.ports).await?;
        deps.check_topics(self.ports.topics.as_ref(), retarget_topics(body)).await;
        Ok(deps)
    }

    /// Draft validation: `body` against dependencies loaded now.
    pub async fn validate_draft(&self, body: &FlowBody) -> Result<Report, FlowError> {
        let deps = self.dependencies(body).await?;
        Ok(Report::new(validate(body, &deps)))
    }

    async fn load(&self, id: &str) -> Result<(FlowRecord, u64), FlowError> {
        let stored =
            self.ports.documents.get_versioned(FLOWS, id).await?.ok_or_else(|| FlowError::NotFound(id.to_owned()))?;
        if stored.body.get("api_version").and_then(Value::as_u64) != Some(u64::from(API_VERSION)) {
            return Err(FlowError::NotV2(id.to_owned()));
        }
        Ok((stored::decode(FLOWS, stored.body)?, stored.version))
    }

    pub async fn get(&self, id: &str) -> Result<FlowRecord, FlowError> {
        Ok(self.load(id).await?.0)
    }

    /// Every v2 flow (optionally only those in `status`), by id.
    pub async fn list(&self, status: Option<FlowStatus>) -> Result<Vec<FlowSummary>, FlowError> {
        let mut query = Query::new().eq("api_version", json!(API_VERSION)).sort("id", Direction::Asc);
        if let Some(status) = status {
            query = query.eq("status", stored::encode(FLOWS, &status)?);
        }
        let flows = self.typed::<FlowRecord>().query(&query).await?.items;
        Ok(flows.iter().map(FlowSummary::from).collect())
    }

    /// Creates a draft flow (id generated when absent); validation of the body is returned, never refused.
    pub async fn create(&self, input: FlowInput, who: Option<&str>) -> Result<(FlowRecord, Report), FlowError> {
        check_input(&input)?;
        let id = input.id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let report = self.validate_draft(&input.body).await?;
        let (_, now) = self.now();
        let flow = FlowRecord {
            id: id.clone(),
            api_version: API_VERSION,
            name: input.name.unwrap_or_default(),
            description: input.description.unwrap_or_default(),
            campaign: input.campaign,
            status: FlowStatus::Draft,
            enabled: input.enabled.unwrap_or(true),
            draft: input.body,
            draft_issues: report.issues.clone(),
            broken_reasons: Vec::new(),
            released_version: None,
            released_at: None,
            released_draft_hash: None,
            draft_changed: true,
            created_at: now.clone(),
            updated_at: now,
            updated_by: who.map(str::to_owned),
        };
        match self.typed::<FlowRecord>().insert(&flow).await {
            Err(PortError::Conflict(_)) => Err(FlowError::Exists(id)),
            Err(e) => Err(e.into()),
            Ok(()) => Ok((flow, report)),
        }
    }

    /// Saves the draft (and name, description, enabled when given). Refused while another editor holds the
    /// edit lock; never changes what runs.
    pub async fn save(&self, id: &str, input: FlowInput, who: Option<&str>) -> Result<(FlowRecord, Report), FlowError> {
        check_input(&input)?;
        if let Some(lock) = self.current_lock(id).await? {
            if who != Some(lock.holder.as_str()) {
                return Err(FlowError::Locked(lock));
            }
        }
        let report = self.validate_draft(&input.body).await?;
        for _ in 0..WRITE_ATTEMPTS {
            let (mut flow, version) = self.load(id).await?;
            flow.draft = input.body.clone();
            flow.draft_issues = report.issues.clone();
            flow.draft_changed = flow.released_draft_hash.as_deref() != Some(body_hash(&flow.draft).as_str());
            if let Some(name) = &input.name {
                flow.name = name.clone();
            }
            if let Some(description) = &input.description {
                flow.description = description.clone();
            }
            if let Some(campaign) = &input.campaign {
                flow.campaign = Some(campaign.clone());
            }
            let toggled = input.enabled.is_some_and(|e| e != flow.enabled);
            if let Some(enabled) = input.enabled {
                flow.enabled = enabled;
            }
            flow.updated_at = self.now().1;
            flow.updated_by = who.map(str::to_owned);
            if self.typed::<FlowRecord>().replace_if_version(&flow, version).await?.is_some() {
                if toggled {
                    self.flow_changed(&flow).await;
                }
                return Ok((flow, report));
            }
        }
        Err(FlowError::Concurrent(id.to_owned()))
    }

    /// Turns a flow on or off (a released flow's services are told).
    pub async fn set_enabled(&self, id: &str, enabled: bool) -> Result<FlowRecord, FlowError> {
        for _ in 0..WRITE_ATTEMPTS {
            let (mut flow, version) = self.load(id).await?;
            flow.enabled = enabled;
            flow.updated_at = self.now().1;
            if self.typed::<FlowRecord>().replace_if_version(&flow, version).await?.is_some() {
                self.flow_changed(&flow).await;
                return Ok(flow);
            }
        }
        Err(FlowError::Concurrent(id.to_owned()))
    }

    /// Validates the released version with fresh dependencies (writes nothing).
    pub async fn validate_released(&self, id: &str) -> Result<Report, FlowError> {
        let flow = self.get(id).await?;
        let number = flow.released_version.ok_or_else(|| FlowError::NotReleased(id.to_owned()))?;
        let version = self.version(id, number).await?;
        let deps = self.dependencies(&version.body).await?;
        Ok(Report::new(validate(&version.body, &deps)))
    }

    /// Releases the draft: refused (and recorded) when validation finds blocking issues, and only then (spec
    /// 001, validation rule 4: warnings never block); otherwise stores the normalized body as the next immutable
    /// version with the warnings present, which of them `acknowledged` lists and which it does not, makes the
    /// flow `valid` and clears `broken_reasons`.
    pub async fn release(
        &self,
        id: &str,
        acknowledged: Vec<String>,
        who: &str,
    ) -> Result<(FlowRecord, FlowVersion, Report), FlowError> {
        for _ in 0..WRITE_ATTEMPTS {
            let (mut flow, stored_version) = self.load(id).await?;
            let deps = self.dependencies(&flow.draft).await?;
            let report = Report::new(validate(&flow.draft, &deps));
            let warning_codes: BTreeSet<String> =
                report.issues.iter().filter(|i| i.severity == Severity::Warning).map(|i| i.code.as_str()).collect();
            let (acknowledged_warnings, unacknowledged): (Vec<String>, Vec<String>) =
                warning_codes.into_iter().partition(|code| acknowledged.contains(code));
            let (at_ms, at) = self.now();
            let mut attempt = ReleaseAttempt {
                id: uuid::Uuid::new_v4().to_string(),
                flow_id: id.to_owned(),
                at: at.clone(),
                at_ms,
                by: who.to_owned(),
                outcome: ReleaseOutcome::Blocked,
                version: None,
                issues: report.issues.clone(),
                acknowledged: acknowledged.clone(),
                unacknowledged: unacknowledged.clone(),
            };
            if !report.valid {
                self.record_attempt(&attempt).await?;
                info!(flow = %id, by = %who, blocking = report.errors.len(), ?unacknowledged, "release blocked");
                return Err(FlowError::ReleaseBlocked { report, unacknowledged });
            }
            let body = normalize(&flow.draft, &deps);
            let number = flow.released_version.unwrap_or(0) + 1;
            let version = FlowVersion {
                flow_id: id.to_owned(),
                version: number,
                body_hash: body_hash(&body),
                services: referenced_services(&body),
                body,
                released_at: at.clone(),
                released_by: who.to_owned(),
                warnings: report.issues.iter().filter(|i| !i.is_blocking()).cloned().collect(),
                acknowledged_warnings,
                unacknowledged_warnings: unacknowledged,
            };
            match self.typed::<FlowVersion>().insert(&version).await {
                Err(PortError::Conflict(_)) => continue, // Released concurrently: read again.
                other => other?,
            }
            flow.status = FlowStatus::Valid;
            flow.broken_reasons = Vec::new();
            flow.released_version = Some(number);
            flow.released_at = Some(at.clone());
            flow.released_draft_hash = Some(body_hash(&flow.draft));
            flow.draft_changed = false;
            flow.updated_at = at;
            if self.typed::<FlowRecord>().replace_if_version(&flow, stored_version).await?.is_none() {
                // The draft changed under us: take the version back and validate what is there now.
                self.ports.documents.delete(FLOW_VERSIONS, &version_id(id, number)).await?;
                continue;
            }
            let services = self.sync_refs(id).await?;
            self.catch_up_with_drift(id, &deps, &version.services).await?;
            attempt.outcome = ReleaseOutcome::Released;
            attempt.version = Some(number);
            self.record_attempt(&attempt).await?;
            info!(flow = %id, version = number, by = %who, "flow released");
            self.broadcast_to(services).await;
            self.announce_change().await;
            return Ok((flow, version, report));
        }
        Err(FlowError::Concurrent(id.to_owned()))
    }

    /// A manifest that changed between this release's validation and its service references being written
    /// may have been passed over by a drift pass: re-validate the flow now if so.
    async fn catch_up_with_drift(&self, id: &str, used: &Dependencies, services: &[String]) -> Result<(), FlowError> {
        let mut fresh = Dependencies::load(&self.ports).await?;
        let hash = |deps: &Dependencies, s: &String| deps.services.get(s).map(|s| s.hash.clone());
        if services.iter().any(|s| hash(used, s) != hash(&fresh, s)) {
            crate::drift::revalidate(self, &mut fresh, &[id.to_owned()]).await?;
        }
        Ok(())
    }

    async fn record_attempt(&self, attempt: &ReleaseAttempt) -> Result<(), FlowError> {
        self.typed::<ReleaseAttempt>().insert(attempt).await?;
        Ok(())
    }

    /// Brings the flow's rows in `flow_service_refs` up to date with its record and released version: one row
    /// per referenced service, carrying what that service's broadcast says of the flow. Re-reads until the flow
    /// did not change meanwhile, so the last of concurrent writers leaves the rows current. Answers the services
    /// whose broadcast may have changed (referenced before or now).
    pub(crate) async fn sync_refs(&self, flow_id: &str) -> Result<BTreeSet<String>, FlowError> {
        let documents = self.ports.documents.as_ref();
        let mut touched = BTreeSet::new();
        for _ in 0..WRITE_ATTEMPTS {
            let stored = documents.get_versioned(FLOWS, flow_id).await?;
            let rows: Vec<ServiceRef> = match &stored {
                None => Vec::new(),
                Some(stored) => {
                    let flow: FlowRecord = stored::decode(FLOWS, stored.body.clone())?;
                    match flow.released_version {
                        None => Vec::new(),
                        Some(number) => {
                            let version = self.version(flow_id, number).await?;
                            ServiceRef::of(&flow, &version)
                        }
                    }
                }
            };
            let previous = documents.find(FLOW_SERVICE_REFS, "flow_id", &json!(flow_id)).await?;
            let current: BTreeSet<&str> = rows.iter().map(|r| r.service.as_str()).collect();
            for old in previous.iter().filter_map(|r| r.get("service").and_then(Value::as_str)) {
                touched.insert(old.to_owned());
                if !current.contains(old) {
                    documents.delete(FLOW_SERVICE_REFS, &format!("{old}/{flow_id}")).await?;
                }
            }
            for row in &rows {
                touched.insert(row.service.clone());
                self.typed::<ServiceRef>().upsert(row).await?;
            }
            let now = documents.get_versioned(FLOWS, flow_id).await?;
            if now.map(|n| n.version) == stored.map(|s| s.version) {
                return Ok(touched);
            }
        }
        Err(FlowError::Concurrent(flow_id.to_owned()))
    }

    /// The rows of the released flows referencing `service`, by flow id.
    pub async fn service_refs(&self, service: &str) -> Result<Vec<ServiceRef>, FlowError> {
        let query = Query::new().eq("service", json!(service)).sort("flow_id", Direction::Asc);
        Ok(self.typed::<ServiceRef>().query(&query).await?.items)
    }

    /// The released flows referencing `service`.
    pub async fn flows_referencing(&self, service: &str) -> Result<Vec<String>, FlowError> {
        Ok(self.service_refs(service).await?.into_iter().map(|r| r.flow_id).collect())
    }

    /// Released versions, newest first.
    pub async fn versions(&self, id: &str) -> Result<Vec<FlowVersion>, FlowError> {
        self.get(id).await?;
        let query = Query::new().eq("flow_id", json!(id)).sort("version", Direction::Desc);
        Ok(self.typed::<FlowVersion>().query(&query).await?.items)
    }

    pub async fn version(&self, id: &str, version: u64) -> Result<FlowVersion, FlowError> {
        self.typed::<FlowVersion>()
            .get(&version_id(id, version))
            .await?
            .ok_or_else(|| FlowError::VersionNotFound { flow_id: id.to_owned(), version })
    }

    /// Release attempts, newest first.
    pub async fn attempts(&self, id: &str) -> Result<Vec<ReleaseAttempt>, FlowError> {
        self.get(id).await?;
        let query = Query::new().eq("flow_id", json!(id)).sort("at_ms", Direction::Desc);
        Ok(self.typed::<ReleaseAttempt>().query(&query).await?.items)
    }

    /// The unexpired edit lock of a flow.
    pub async fn current_lock(&self, id: &str) -> Result<Option<EditLock>, FlowError> {
        let Some(doc) = self.ports.documents.get(FLOW_EDIT_LOCKS, id).await? else { return Ok(None) };
        let lock: EditLock = stored::decode(FLOW_EDIT_LOCKS, doc)?;
        Ok((lock.expires_at_ms > self.ports.clock.now_ms()).then_some(lock))
    }

    /// Takes or renews the edit lock for `holder` for `ttl_seconds`; refused while another holder's lock runs.
    pub async fn lock(&self, id: &str, holder: &str, ttl_seconds: u64) -> Result<EditLock, FlowError> {
        self.get(id).await?;
        let ttl = ttl_seconds.clamp(1, LOCK_TTL_MAX_SECONDS);
        let documents = self.ports.documents.as_ref();
        for _ in 0..WRITE_ATTEMPTS {
            let (now_ms, now) = self.now();
            let expires_at_ms = now_ms + i64::try_from(ttl * 1000).unwrap_or(i64::MAX);
            let stored = documents.get_versioned(FLOW_EDIT_LOCKS, id).await?;
            let held: Option<EditLock> =
                stored.as_ref().map(|s| stored::decode(FLOW_EDIT_LOCKS, s.body.clone())).transpose()?;
            let acquired_at = match &held {
                Some(lock) if lock.expires_at_ms > now_ms && lock.holder != holder => {
                    return Err(FlowError::Locked(lock.clone()))
                }
                Some(lock) if lock.expires_at_ms > now_ms => lock.acquired_at.clone(),
                _ => now,
            };
            let lock = EditLock {
                flow_id: id.to_owned(),
                holder: holder.to_owned(),
                acquired_at,
                expires_at: iso_utc(expires_at_ms),
                expires_at_ms,
            };
            let written = match stored {
                None => match documents.insert(FLOW_EDIT_LOCKS, id, stored::encode(FLOW_EDIT_LOCKS, &lock)?).await {
                    Err(PortError::Conflict(_)) => false,
                    other => other.map(|()| true)?,
                },
                Some(stored) => documents
                    .replace_if_version(FLOW_EDIT_LOCKS, id, stored.version, stored::encode(FLOW_EDIT_LOCKS, &lock)?)
                    .await?
                    .is_some(),
            };
            if written {
                return Ok(lock);
            }
        }
        Err(FlowError::Concurrent(id.to_owned()))
    }

    /// Gives the edit lock up; refused when another holder's lock runs. Nothing to do when none is held.
    pub async fn unlock(&self, id: &str, holder: &str) -> Result<(), FlowError> {
        self.get(id).await?;
        match self.current_lock(id).await? {
            Some(lock) if lock.holder != holder => Err(FlowError::Locked(lock)),
            _ => {
                self.ports.documents.delete(FLOW_EDIT_LOCKS, id).await?;
                Ok(())
            }
        }
    }

    /// Deletes a flow with everything it owns but its compiled rules (the caller's): versions, release
    /// attempts, edit lock and service references; the services it targeted are told.
    pub async fn forget(&self, id: &str) -> Result<(), FlowError> {
        let documents = self.ports.documents.as_ref();
        let services: Vec<String> = documents
            .find(FLOW_SERVICE_REFS, "flow_id", &json!(id))
            .await?
            .iter()
            .filter_map(|r| r.get("service").and_then(Value::as_str).map(str::to_owned))
            .collect();
        documents.delete_where(FLOW_VERSIONS, "flow_id", &json!(id)).await?;
        documents.delete_where(FLOW_RELEASE_ATTEMPTS, "flow_id", &json!(id)).await?;
        documents.delete_where(FLOW_SERVICE_REFS, "flow_id", &json!(id)).await?;
        documents.delete(FLOW_EDIT_LOCKS, id).await?;
        documents.delete(FLOWS, id).await?;
        self.broadcast_to(services).await;
        Ok(())
    }

    /// Tells the services of a released flow that it changed (enabled, status).
    pub(crate) async fn flow_changed(&self, flow: &FlowRecord) {
        if flow.released_version.is_none() {
            return;
        }
        match self.sync_refs(&flow.id).await {
            Ok(services) => self.broadcast_to(services).await,
            Err(error) => warn!(flow = %flow.id, %error, "could not update the flow's service references"),
        }
        self.announce_change().await;
    }

    /// Engines reload released flows at once instead of on their next tick. Best effort.
    async fn announce_change(&self) {
        if let Err(error) = self.ports.subjects.publish(CONFIG_CHANGED_SUBJECT, b"{}".to_vec()).await {
            warn!(%error, "could not signal a flow change; engines reload on their next tick");
        }
    }

    /// Publishes the flow broadcast of each service. Best effort: services also ask for it when they start.
    pub(crate) async fn broadcast_to(&self, services: impl IntoIterator<Item = String>) {
        for service in services {
            if let Err(error) = crate::broadcast::publish(self, &service).await {
                warn!(%service, %error, "could not publish a flow broadcast");
            }
        }
    }

    /// Writes a released flow's status and `broken_reasons` after a drift re-validation of `version`, answering
    /// the services whose broadcast changed; `None` when nothing changed or the flow moved on to another version
    /// (its own release validated it).
    pub(crate) async fn record_drift(
        &self,
        id: &str,
        version: u64,
        blocking: Vec<Issue>,
    ) -> Result<Option<BTreeSet<String>>, FlowError> {
        for _ in 0..WRITE_ATTEMPTS {
            let (mut flow, stored_version) = match self.load(id).await {
                Err(FlowError::NotFound(_)) => return Ok(None),
                other => other?,
            };
            if flow.released_version != Some(version) {
                return Ok(None);
            }
            let status = if blocking.is_empty() { FlowStatus::Valid } else { FlowStatus::Invalid };
            if flow.status == status && flow.broken_reasons == blocking {
                return Ok(None);
            }
            flow.status = status;
            flow.broken_reasons = blocking.clone();
            flow.updated_at = self.now().1;
            if self.typed::<FlowRecord>().replace_if_version(&flow, stored_version).await?.is_some() {
                info!(flow = %id, version, status = ?status, reasons = flow.broken_reasons.len(), "drift re-validation");
                return Ok(Some(self.sync_refs(id).await?));
            }
        }
        Err(FlowError::Concurrent(id.to_owned()))
    }
}
