//! Manifest drift: when a service's active manifest hash changes (a new registration, an upload, an operator's
//! activation or rollback), every released flow referencing the service (or placing a node kind of one of its
//! components) is re-validated with fresh
//! dependencies against its normalized released body, and its `status` (`valid`/`invalid`) and
//! `broken_reasons` (the blocking issues) are persisted.
//!
//! A pass compares each service's active hash with the one stored at the last pass (`flow_drift_hashes`), so
//! it is cheap when nothing changed and catches up on every change it missed: [`run`] passes on the
//! catalog's `ManifestChanged` signal, on the component store's activation signal, and every
//! `interval` as the fallback for lost signals. Replicas may pass concurrently: every write is a
//! compare-and-replace that only records what validation says.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use flowhost_catalog::MANIFEST_CHANGED_SUBJECT;
use flowhost_core::collections::{COMPONENTS_CHANGED_SUBJECT, FLOW_DRIFT_HASHES};
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::Wakeups;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::deps::Dependencies;
use crate::validate::{retarget_topics, validate};
use crate::{FlowError, Flows};

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriftSummary {
    /// Services whose active manifest hash changed since the last pass.
    pub services: Vec<String>,
    /// Released flows re-validated.
    pub revalidated: usize,
    /// Of those, flows whose status or `broken_reasons` changed.
    pub changed: usize,
}

/// One drift pass over the services whose active manifest hash changed.
pub async fn pass(flows: &Flows) -> Result<DriftSummary, FlowError> {
    let documents = flows.ports().documents.clone();
    let mut deps = Dependencies::load(flows.ports()).await?;
    let stored: HashMap<String, String> = documents
        .list(FLOW_DRIFT_HASHES)
        .await?
        .into_iter()
        .filter_map(|doc| Some((doc.get("service")?.as_str()?.to_owned(), doc.get("hash")?.as_str()?.to_owned())))
        .collect();
    let changed: Vec<(String, String)> = deps
        .services
        .values()
        .filter(|s| stored.get(&s.name) != Some(&s.hash))
        .map(|s| (s.name.clone(), s.hash.clone()))
        .collect();
    let mut summary = DriftSummary { services: changed.iter().map(|(s, _)| s.clone()).collect(), ..Default::default() };
    let mut flow_ids = BTreeSet::new();
    for (service, _) in &changed {
        flow_ids.extend(flows.flows_referencing(service).await?);
        // Flows placing a node kind of one of the service's components reference the component by id.
        for component in deps.services.get(service).into_iter().flat_map(|s| &s.components) {
            if component.component_id != *service {
                flow_ids.extend(flows.flows_referencing(&component.component_id).await?);
            }
        }
    }
    let ids: Vec<String> = flow_ids.into_iter().collect();
    let (touched, notify) = revalidate(flows, &mut deps, &ids).await?;
    summary.revalidated = ids.len();
    summary.changed = touched.len();
    flows.broadcast_to(notify).await;
    let now = iso_utc(flows.ports().clock.now_ms());
    for (service, hash) in changed {
        documents
            .upsert(FLOW_DRIFT_HASHES, &service, json!({ "service": service, "hash": hash, "checked_at": now }))
            .await?;
    }
    Ok(summary)
}

/// Re-validates the released versions of `flow_ids` against `deps` and records the outcome; answers the flows
/// whose status or `broken_reasons` changed and the services whose broadcast changed with them.
pub async fn revalidate(
    flows: &Flows,
    deps: &mut Dependencies,
    flow_ids: &[String],
) -> Result<(Vec<String>, BTreeSet<String>), FlowError> {
    let mut touched = Vec::new();
    let mut services = BTreeSet::new();
    for flow_id in flow_ids {
        let flow = match flows.get(flow_id).await {
            Err(FlowError::NotFound(_) | FlowError::NotV2(_)) => continue,
            other => other?,
        };
        let Some(number) = flow.released_version else { continue };
        let version = flows.version(flow_id, number).await?;
        deps.check_topics(flows.ports().topics.as_ref(), retarget_topics(&version.body)).await;
        let blocking: Vec<_> = validate(&version.body, deps).into_iter().filter(|i| i.is_blocking()).collect();
        if let Some(changed) = flows.record_drift(flow_id, number, blocking).await? {
            touched.push(flow_id.clone());
            services.extend(changed);
        }
    }
    Ok((touched, services))
}

/// Runs drift passes until `shutdown`: on manifest and activation signals, and every `interval`.
pub async fn run(flows: Flows, interval: Duration, shutdown: CancellationToken) {
    if let Err(error) = flows.ensure_indexes().await {
        warn!(%error, "could not create the flow indexes; queries still work, more slowly");
    }
    let subjects = flows.ports().subjects.clone();
    let mut wakeups =
        Wakeups::on_any(subjects.as_ref(), &[MANIFEST_CHANGED_SUBJECT, COMPONENTS_CHANGED_SUBJECT], interval).await;
    while wakeups.next(&shutdown).await {
        let started = Instant::now();
        match pass(&flows).await {
            Ok(summary) if !summary.services.is_empty() => info!(
                services = ?summary.services, revalidated = summary.revalidated, changed = summary.changed,
                elapsed_ms = started.elapsed().as_millis() as u64, "drift pass"
            ),
            Ok(_) => {}
            Err(error) => warn!(%error, "drift pass failed; retrying on the next signal or tick"),
        }
    }
}
