//! The slices' synchronization. Every `FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS` one pass runs each slice:
//!
//! - **campaigns**: the v2 flows changed since the slice's cursor (`updated_at`, re-read with a few seconds of
//!   overlap so a write that committed late is not missed, until that window closes (see [`crate::overlap`]);
//!   rewriting a row is idempotent) become campaign rows;
//!   a flow whose campaign metadata is gone or moved to another tenant loses its old row; campaigns whose end
//!   passed move to `ended`. Every [`RECONCILE_EVERY`] passes all flow rows are checked against their flows,
//!   which also removes the rows of deleted flows (a delete leaves no change to read). With an external campaign
//!   source configured (see [`crate::external`]), its changes since its own cursor are applied the same way;
//!   its failure fails the slice (the flows' changes of the pass are kept).
//! - **live_events**: run completions, deliveries and interactions (see [`crate::live`]), and the engagement
//!   counters of the campaigns they belong to.
//! - **overview**: the per-tenant aggregates of the tenants the other slices touched.
//! - **support**: the support-case source, per tenant (see [`crate::support`]); with none configured its state
//!   says `not_configured`.
//!
//! Each slice's outcome is kept per tenant (last success, fresh until, lag, consecutive failures): a failed
//! pass leaves the read models as they were, serving stale data whose freshness shows it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowhost_core::collections::FLOWS;
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{Direction, DocumentStore, Filter, PortError, Query};
use flowhost_core::Clock;
use flowhost_flows::model::API_VERSION;
use flowhost_flows::FlowRecord;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::external::ExternalSource;
use crate::live::{LiveSync, Settled};
use crate::live_model::LIVE_EVENTS;
use crate::model::{instant_ms, CampaignDoc, Origin, UiStatus};
use crate::overlap::Overlaps;
use crate::read_model::{Aggregate, ReadModels, SyncState};
use crate::support::SupportSource;

pub const CAMPAIGNS: &str = "campaigns";
pub const OVERVIEW: &str = "overview";
pub const SUPPORT: &str = "support";
/// The slices a pass runs, in order.
pub const SLICES: [&str; 4] = [CAMPAIGNS, LIVE_EVENTS, OVERVIEW, SUPPORT];

/// Pages of changed flows one pass reads at most (the rest waits for the next pass; the lag shows it).
const MAX_PAGES_PER_PASS: usize = 50;
/// The cursor of the external campaign source.
const EXTERNAL_CURSOR: &str = "campaigns.external";
/// Every this many passes, all rows are checked against their flows.
pub const RECONCILE_EVERY: u64 = 12;

/// Which slices have completed a pass since the process started: what `/ready` asks.
#[derive(Debug, Default)]
pub struct SyncStatus {
    synced: Mutex<BTreeSet<&'static str>>,
}

impl SyncStatus {
    fn succeeded(&self, slice: &'static str) {
        self.synced.lock().unwrap_or_else(|p| p.into_inner()).insert(slice);
    }

    /// `Ok` once the campaigns, live-events and overview slices each synced once.
    pub fn check(&self) -> Result<(), String> {
        let synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        match [CAMPAIGNS, LIVE_EVENTS, OVERVIEW].into_iter().find(|slice| !synced.contains(slice)) {
            None => Ok(()),
            Some(slice) => Err(format!("the {slice} slice has not synced yet")),
        }
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PassReport {
    /// Per slice: `None` on success, else why it failed.
    pub failures: BTreeMap<&'static str, String>,
    pub tenants_touched: usize,
    pub rows_written: usize,
    pub lag_seconds: f64,
}

pub struct Sync {
    pub read_models: ReadModels,
    /// The store the flows live in.
    pub source: Arc<dyn DocumentStore>,
    pub clock: Arc<dyn Clock>,
    pub interval: Duration,
    pub fresh_for: Duration,
    pub batch: u64,
    pub status: Arc<SyncStatus>,
    /// The external support-case source, when configured.
    pub support: Option<SupportSource>,
    /// The external campaign source, when configured.
    pub external: Option<ExternalSource>,
    pub settled_live_events: Settled,
    /// The window before each incremental read's cursor (see [`crate::overlap`]).
    pub overlaps: Overlaps,
}

/// What the campaigns slice changed.
#[derive(Debug, Default)]
struct Changes {
    touched: BTreeSet<String>,
    rows_written: usize,
    lag_seconds: f64,
}

impl Sync {
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut passes = 0u64;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticks.tick() => {}
            }
            let report = self.pass(passes.is_multiple_of(RECONCILE_EVERY)).await;
            passes += 1;
            for (slice, error) in &report.failures {
                warn!(slice, %error, "a campaign read-model slice failed to sync; serving what it has");
            }
            if report.rows_written > 0 {
                info!(rows = report.rows_written, tenants = report.tenants_touched, "campaign read models synced");
            }
        }
    }

    /// One pass over every slice; `reconcile` also checks every row against its flow.
    pub async fn pass(&self, reconcile: bool) -> PassReport {
        let now_ms = self.clock.now_ms();
        let started = Instant::now();
        let mut report = PassReport::default();
        let mut states = match self.read_models.sync_states().await {
            Ok(states) => states.into_iter().map(|s| ((s.slice.clone(), s.tenant_id.clone()), s)).collect(),
            Err(error) => {
                for slice in SLICES {
                    report.failures.insert(slice, format!("reading the sync states: {error}"));
                }
                return report;
            }
        };
        let known = self.read_models.tenants().await.unwrap_or_default();

        let changes = match self.sync_campaigns(now_ms, started, reconcile).await {
            Ok(mut changes) => match self.sync_external(now_ms, &mut changes).await {
                Ok(()) => Ok(changes),
                Err(error) => {
                    report.failures.insert(CAMPAIGNS, error);
                    Err(changes)
                }
            },
            Err(error) => {
                report.failures.insert(CAMPAIGNS, error.to_string());
                Err(Changes::default())
            }
        };
        let (Ok(applied) | Err(applied)) = &changes;
        let mut touched = applied.touched.clone();
        report.rows_written = applied.rows_written;
        let mut tenants: BTreeSet<String> = known.into_iter().collect();
        tenants.extend(touched.iter().cloned());
        match changes {
            Ok(changes) => {
                report.lag_seconds = changes.lag_seconds;
                self.record(&mut states, CAMPAIGNS, &tenants, now_ms, Ok(changes.lag_seconds));
            }
            Err(_) => self.record(&mut states, CAMPAIGNS, &tenants, now_ms, Err(())),
        }
        let live = LiveSync {
            read_models: &self.read_models,
            source: self.source.as_ref(),
            batch: self.batch,
            settled: &self.settled_live_events,
            overlaps: &self.overlaps,
        };
        let live_pass = async {
            let changes = live.pass(now_ms, started).await?;
            live.count_missing_totals(&tenants).await?;
            Ok::<_, PortError>(changes)
        };
        match live_pass.await {
            Ok(changes) => {
                tenants.extend(changes.tenants.iter().cloned());
                touched.extend(changes.tenants);
                touched.extend(changes.campaigns.into_iter().map(|(tenant, _)| tenant));
                report.rows_written += changes.events_written;
                self.record(&mut states, LIVE_EVENTS, &tenants, now_ms, Ok(changes.lag_seconds));
            }
            Err(error) => {
                self.record(&mut states, LIVE_EVENTS, &tenants, now_ms, Err(()));
                report.failures.insert(LIVE_EVENTS, error.to_string());
            }
        }
        report.tenants_touched = touched.len();

        match self.sync_overview(&touched).await {
            Ok(()) => self.record(&mut states, OVERVIEW, &tenants, now_ms, Ok(0.0)),
            Err(error) => {
                self.record(&mut states, OVERVIEW, &tenants, now_ms, Err(()));
                report.failures.insert(OVERVIEW, error.to_string());
            }
        }
        self.sync_support(&mut states, &tenants, now_ms, &mut report).await;
        let states: Vec<SyncState> = states.into_values().collect();
        if let Err(error) = self.read_models.put_sync_states(&states).await {
            report.failures.insert(OVERVIEW, format!("writing the sync states: {error}"));
        }
        report
    }

    /// The support slice: each tenant on its own (one tenant's failure is its own).
    async fn sync_support(
        &self,
        states: &mut HashMap<(String, String), SyncState>,
        tenants: &BTreeSet<String>,
        now_ms: i64,
        report: &mut PassReport,
    ) {
        let Some(source) = &self.support else {
            for tenant in tenants {
                let state = states.entry((SUPPORT.to_owned(), tenant.clone())).or_insert_with(|| SyncState {
                    slice: SUPPORT.to_owned(),
                    tenant_id: tenant.clone(),
                    ..SyncState::default()
                });
                state.not_configured = true;
                state.last_attempt_ms = Some(now_ms);
            }
            return;
        };
        for tenant in tenants {
            let one = BTreeSet::from([tenant.clone()]);
            match source.sync_tenant(&self.read_models, tenant).await {
                Ok(_) => self.record(states, SUPPORT, &one, now_ms, Ok(0.0)),
                Err(error) => {
                    self.record(states, SUPPORT, &one, now_ms, Err(()));
                    report.failures.insert(SUPPORT, format!("tenant {tenant}: {error}"));
                }
            }
            if let Some(state) = states.get_mut(&(SUPPORT.to_owned(), tenant.clone())) {
                state.not_configured = false;
            }
        }
    }

    /// Applies one slice's outcome to the states of `tenants`.
    fn record(
        &self,
        states: &mut HashMap<(String, String), SyncState>,
        slice: &'static str,
        tenants: &BTreeSet<String>,
        now_ms: i64,
        outcome: Result<f64, ()>,
    ) {
        if outcome.is_ok() {
            self.status.succeeded(slice);
        }
        for tenant in tenants {
            let state = states.entry((slice.to_owned(), tenant.clone())).or_insert_with(|| SyncState {
                slice: slice.to_owned(),
                tenant_id: tenant.clone(),
                ..SyncState::default()
            });
            state.last_attempt_ms = Some(now_ms);
            match outcome {
                Ok(lag_seconds) => {
                    state.last_success_ms = Some(now_ms);
                    state.fresh_until_ms = Some(now_ms + self.fresh_for.as_millis() as i64);
                    state.lag_seconds = lag_seconds;
                    state.consecutive_failures = 0;
                }
                Err(()) => state.consecutive_failures += 1,
            }
        }
    }

    /// The campaigns slice (see the module documentation).
    async fn sync_campaigns(&self, now_ms: i64, started: Instant, reconcile: bool) -> Result<Changes, PortError> {
        let mut changes = Changes::default();
        let cursor = self.read_models.cursor(CAMPAIGNS).await?;
        let cursor_ms = cursor.as_deref().and_then(instant_ms);
        let since = cursor_ms.map(|ms| iso_utc(self.overlaps.since(CAMPAIGNS, ms, started)));
        let mut newest = cursor.clone();
        let mut offset = 0u64;
        let mut caught_up = false;
        for _ in 0..MAX_PAGES_PER_PASS {
            let mut query = Query::new()
                .eq("api_version", json!(API_VERSION))
                .sort("updated_at", Direction::Asc)
                .limit(self.batch)
                .offset(offset)
                .without_total();
            if let Some(since) = &since {
                query = query.filter("updated_at", Filter::Gte(json!(since)));
            }
            let items = self.source.query(FLOWS, &query).await?.items;
            let count = items.len() as u64;
            let flows: Vec<FlowRecord> = items.into_iter().filter_map(decode_flow).collect();
            if let Some(last) = flows.iter().map(|flow| &flow.updated_at).max() {
                if newest.as_ref().is_none_or(|newest| last > newest) {
                    newest = Some(last.clone());
                }
            }
            let rows = flows.iter().map(|flow| (flow.id.clone(), CampaignDoc::from_flow(flow, now_ms))).collect();
            self.apply(rows, &mut changes).await?;
            offset += count;
            if count < self.batch {
                caught_up = true;
                break;
            }
        }
        if let Some(newest) = &newest {
            self.read_models.put_cursor(CAMPAIGNS, newest).await?;
        }
        changes.lag_seconds = match (caught_up, newest.as_deref().and_then(instant_ms)) {
            (false, Some(newest)) => ((now_ms - newest).max(0) as f64) / 1000.0,
            _ => 0.0,
        };
        // Campaigns whose end passed since they were written.
        let ended: Vec<CampaignDoc> = self
            .read_models
            .due_to_end(&iso_utc(now_ms), 10_000)
            .await?
            .into_iter()
            .map(|row| CampaignDoc { ui_status: UiStatus::Ended, ..row })
            .collect();
        if !ended.is_empty() {
            self.read_models.put_rows(&ended).await?;
            changes.rows_written += ended.len();
            changes.touched.extend(ended.iter().map(|row| row.tenant_id.clone()));
        }
        if reconcile {
            self.reconcile(now_ms, &mut changes).await?;
        }
        if let (Some(cursor_ms), true) = (cursor_ms, caught_up) {
            self.overlaps.completed(CAMPAIGNS, cursor_ms, started);
        }
        Ok(changes)
    }

    /// The external source's changes since its cursor (see [`crate::external`]); nothing when none is
    /// configured. Its error is for the log.
    async fn sync_external(&self, now_ms: i64, changes: &mut Changes) -> Result<(), String> {
        let Some(source) = &self.external else { return Ok(()) };
        let store = |error: PortError| format!("read models: {error}");
        let cursor = self.read_models.cursor(EXTERNAL_CURSOR).await.map_err(store)?;
        let cursor = cursor.and_then(|text| text.parse::<i64>().ok());
        let external =
            source.changes(cursor, now_ms).await.map_err(|error| format!("external campaign source: {error}"))?;
        self.apply(external.campaigns, changes).await.map_err(store)?;
        if let Some(newest) = external.newest_ms.filter(|newest| cursor.is_none_or(|cursor| *newest > cursor)) {
            self.read_models.put_cursor(EXTERNAL_CURSOR, &newest.to_string()).await.map_err(store)?;
        }
        Ok(())
    }

    /// Writes each campaign's new row (keeping its engagement counters; `None`: it is no campaign any more) and
    /// removes the rows it no longer has (another tenant's).
    async fn apply(
        &self,
        campaigns: Vec<(String, Option<CampaignDoc>)>,
        changes: &mut Changes,
    ) -> Result<(), PortError> {
        if campaigns.is_empty() {
            return Ok(());
        }
        let ids: Vec<Value> = campaigns.iter().map(|(id, _)| json!(id)).collect();
        let existing = self.existing_rows(ids).await?;
        let mut rows = Vec::new();
        for (campaign_id, row) in campaigns {
            let olds = existing.get(&campaign_id).map(Vec::as_slice).unwrap_or_default();
            for old in olds {
                if row.as_ref().is_none_or(|row| row.tenant_id != old.tenant_id) {
                    self.read_models.delete_row(old).await?;
                    changes.touched.insert(old.tenant_id.clone());
                }
            }
            let Some(mut row) = row else { continue };
            if let Some(old) = olds.iter().find(|old| old.tenant_id == row.tenant_id) {
                (row.players_engaged, row.deliveries, row.interactions) =
                    (old.players_engaged, old.deliveries, old.interactions);
                if &row == old {
                    continue;
                }
            }
            changes.touched.insert(row.tenant_id.clone());
            rows.push(row);
        }
        changes.rows_written += rows.len();
        self.read_models.put_rows(&rows).await
    }

    /// The rows of the campaigns `ids`, by campaign id.
    async fn existing_rows(&self, ids: Vec<Value>) -> Result<HashMap<String, Vec<CampaignDoc>>, PortError> {
        let query = Query::new().filter("campaign_id", Filter::In(ids)).without_total();
        let items = self.read_models.documents.query(crate::read_model::ROWS, &query).await?.items;
        let mut rows: HashMap<String, Vec<CampaignDoc>> = HashMap::new();
        for item in items {
            if let Ok(row) = serde_json::from_value::<CampaignDoc>(item) {
                rows.entry(row.campaign_id.clone()).or_default().push(row);
            }
        }
        Ok(rows)
    }

    /// Checks every flow row against its flow: rows of deleted flows, of flows no longer campaigns and of flows
    /// moved to another tenant go. External campaigns are the external source's to remove.
    async fn reconcile(&self, now_ms: i64, changes: &mut Changes) -> Result<(), PortError> {
        let mut offset = 0u64;
        loop {
            let rows = self.read_models.all_rows(Origin::Flow, offset, self.batch).await?;
            let count = rows.len() as u64;
            let ids: Vec<String> = rows.iter().map(|row| row.campaign_id.clone()).collect();
            let flows = self.source.get_many(FLOWS, &ids).await?;
            let mut removed = 0;
            for row in &rows {
                let current = flows.get(&row.campaign_id).cloned().and_then(decode_flow);
                let kept = current.and_then(|flow| CampaignDoc::from_flow(&flow, now_ms));
                if kept.is_none_or(|kept| kept.tenant_id != row.tenant_id) {
                    self.read_models.delete_row(row).await?;
                    changes.touched.insert(row.tenant_id.clone());
                    removed += 1;
                }
            }
            offset += count - removed;
            if count < self.batch {
                return Ok(());
            }
        }
    }

    /// The overview slice: the aggregates of the touched tenants, counted again from their rows.
    async fn sync_overview(&self, touched: &BTreeSet<String>) -> Result<(), PortError> {
        for tenant in touched {
            let rows = self.read_models.rows_of_tenant(tenant).await?;
            self.read_models.put_aggregate(&Aggregate::of(tenant, &rows)).await?;
        }
        Ok(())
    }
}

/// A v2 flow from its stored document; `None` (and a warning) for a document that does not parse.
fn decode_flow(item: Value) -> Option<FlowRecord> {
    match serde_json::from_value::<FlowRecord>(item) {
        Ok(flow) => Some(flow),
        Err(error) => {
            warn!(%error, "a stored v2 flow does not parse; the campaign sync skips it");
            None
        }
    }
}
