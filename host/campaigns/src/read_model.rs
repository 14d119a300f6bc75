//! The read models (logical database `FLOWHOST_CAMPAIGNS_DATABASE`, default `campaigns`, so they never mix with
//! the stores they are read from):
//!
//! | Collection | Id | Holds |
//! |---|---|---|
//! | `campaign_rows` | `<tenant_id>:<campaign_id>` | one [`CampaignDoc`] per campaign |
//! | `campaign_tenants` | `<tenant_id>` | the tenant's [`Aggregate`]: counters per origin and bucket (the overview slice) |
//! | `sync_state` | `<slice>:<tenant_id>` | one [`SyncState`] per tenant and slice |
//! | `sync_cursors` | `<slice>` | where a slice's incremental read stands |

use std::collections::BTreeMap;
use std::sync::Arc;

use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, PortError, Query};
use flowhost_core::stored::{decode, encode, Collection, Document, TypedPage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::live_marks::{LiveMarks, Start};
use crate::live_model::{LiveCounts, LiveEvent};
use crate::model::{CampaignDoc, Origin, UiStatus};

pub const ROWS: &str = "campaign_rows";
pub const TENANTS: &str = "campaign_tenants";
pub const SYNC_STATE: &str = "sync_state";
pub const SYNC_CURSORS: &str = "sync_cursors";

/// The counters of a set of campaigns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub campaigns: u64,
    pub players_engaged: u64,
    pub deliveries: u64,
    pub interactions: u64,
}

impl Counters {
    fn add(&mut self, other: &Counters) {
        self.campaigns += other.campaigns;
        self.players_engaged += other.players_engaged;
        self.deliveries += other.deliveries;
        self.interactions += other.interactions;
    }

    /// The overview's names for them.
    pub fn summary(&self) -> Value {
        json!({
            "campaigns_total": self.campaigns,
            "players_engaged_total": self.players_engaged,
            "deliveries_total": self.deliveries,
            "interactions_total": self.interactions,
        })
    }
}

/// One cell of a tenant's aggregate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub campaign_origin: Origin,
    pub ui_status: UiStatus,
    #[serde(flatten)]
    pub counters: Counters,
}

/// A tenant's campaigns counted per origin and bucket: what the overview and a list's `summary` and
/// `status_counts` add up (collection `campaign_tenants`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    pub tenant_id: String,
    pub cells: Vec<Cell>,
    /// [`rows_digest`] of the tenant's rows when they were counted: a list cache holding rows of the same
    /// digest is current (engagement counters, which no list row shows, leave it unchanged).
    #[serde(default)]
    pub rows_digest: String,
}

/// A digest of what a tenant's list rows show ([`CampaignDoc::row`] of each, in id order).
pub fn rows_digest(rows: &[CampaignDoc]) -> String {
    use sha2::Digest;
    let mut ordered: Vec<&CampaignDoc> = rows.iter().collect();
    ordered.sort_by(|a, b| a.campaign_id.cmp(&b.campaign_id));
    let mut hasher = sha2::Sha256::new();
    for row in ordered {
        hasher.update(row.row().to_string().as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
}

impl Aggregate {
    /// Counts `rows` (all of one tenant's campaigns).
    pub fn of(tenant_id: &str, rows: &[CampaignDoc]) -> Aggregate {
        let mut cells: BTreeMap<(&str, &str), Cell> = BTreeMap::new();
        for row in rows {
            let cell = cells.entry((row.campaign_origin.as_str(), row.ui_status.as_str())).or_insert(Cell {
                campaign_origin: row.campaign_origin,
                ui_status: row.ui_status,
                counters: Counters::default(),
            });
            cell.counters.add(&Counters {
                campaigns: 1,
                players_engaged: row.players_engaged,
                deliveries: row.deliveries,
                interactions: row.interactions,
            });
        }
        Aggregate {
            tenant_id: tenant_id.to_owned(),
            cells: cells.into_values().collect(),
            rows_digest: rows_digest(rows),
        }
    }

    /// The counters of the campaigns matching the filters (`None`: any).
    pub fn counters(&self, origin: Option<Origin>, status: Option<UiStatus>) -> Counters {
        let mut total = Counters::default();
        for cell in &self.cells {
            if origin.is_none_or(|o| o == cell.campaign_origin) && status.is_none_or(|s| s == cell.ui_status) {
                total.add(&cell.counters);
            }
        }
        total
    }

    /// Campaigns per bucket, under the origin filter only (so every bucket's tab shows its count).
    pub fn status_counts(&self, origin: Option<Origin>) -> Value {
        let mut counts = serde_json::Map::new();
        for status in UiStatus::ALL {
            counts.insert(status.as_str().to_owned(), json!(self.counters(origin, Some(status)).campaigns));
        }
        Value::Object(counts)
    }
}

/// A slice's synchronization state for one tenant (collection `sync_state`). Times are milliseconds since the
/// epoch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncState {
    pub slice: String,
    pub tenant_id: String,
    pub last_success_ms: Option<i64>,
    pub last_attempt_ms: Option<i64>,
    /// Until when the last success counts as fresh.
    pub fresh_until_ms: Option<i64>,
    /// How far behind its source the slice was at its last success (0 when it had caught up).
    pub lag_seconds: f64,
    pub consecutive_failures: u64,
    /// Set when the slice has no source to read (an optional external source left unconfigured).
    #[serde(default)]
    pub not_configured: bool,
}

impl SyncState {
    pub fn id(slice: &str, tenant_id: &str) -> String {
        format!("{slice}:{tenant_id}")
    }

    /// What a response shows of it.
    pub fn freshness(&self, now_ms: i64) -> Value {
        let iso = |ms: Option<i64>| ms.map(flowhost_core::digest::iso_utc);
        let state = if self.not_configured {
            "not_configured"
        } else if self.last_success_ms.is_none() {
            "never_synced"
        } else if self.fresh_until_ms.is_some_and(|until| until >= now_ms) {
            "fresh"
        } else {
            "stale"
        };
        json!({
            "state": state,
            "last_success_at": iso(self.last_success_ms),
            "fresh_until": iso(self.fresh_until_ms),
            "lag_seconds": self.lag_seconds,
            "consecutive_failures": self.consecutive_failures,
        })
    }
}

/// A list request's filters, as the query string gave them.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignFilter {
    pub tenant_id: String,
    pub ui_status: Option<UiStatus>,
    pub campaign_origin: Option<Origin>,
    pub sort: SortKey,
    pub direction: Direction,
}

/// What a campaign list can be ordered by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SortKey {
    #[default]
    UpdatedAt,
    Name,
    StartsAt,
    EndsAt,
}

impl SortKey {
    pub const ALL: [SortKey; 4] = [SortKey::UpdatedAt, SortKey::Name, SortKey::StartsAt, SortKey::EndsAt];

    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::UpdatedAt => "updated_at",
            SortKey::Name => "name",
            SortKey::StartsAt => "starts_at",
            SortKey::EndsAt => "ends_at",
        }
    }

    pub fn parse(text: &str) -> Option<SortKey> {
        SortKey::ALL.into_iter().find(|key| key.as_str() == text)
    }
}

/// The read models over one document store.
#[derive(Clone)]
pub struct ReadModels {
    pub documents: Arc<dyn DocumentStore>,
}

impl Document for CampaignDoc {
    const COLLECTION: &'static str = ROWS;

    fn id(&self) -> String {
        CampaignDoc::id(self)
    }

    fn indexes() -> Vec<IndexSpec> {
        [
            &["tenant_id", "updated_at"][..],
            &["tenant_id", "ui_status", "updated_at"],
            &["tenant_id", "campaign_origin", "ui_status", "updated_at"],
            &["tenant_id", "name"],
            &["campaign_id"],
            &["ui_status", "ends_at"],
        ]
        .map(IndexSpec::ascending)
        .into()
    }
}

impl Document for SyncState {
    const COLLECTION: &'static str = SYNC_STATE;

    fn id(&self) -> String {
        SyncState::id(&self.slice, &self.tenant_id)
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["slice"])]
    }
}

impl ReadModels {
    fn rows(&self) -> Collection<CampaignDoc> {
        Collection::new(self.documents.clone())
    }

    fn states(&self) -> Collection<SyncState> {
        Collection::new(self.documents.clone())
    }

    /// The indexes the reads and the sync use (idempotent).
    pub async fn ensure_indexes(&self) -> Result<(), PortError> {
        self.rows().ensure_indexes().await?;
        self.states().ensure_indexes().await
    }

    /// One page of a tenant's campaigns, read from the store (the list cache's way for a tenant too large to
    /// hold); the total is the caller's (the aggregate's counts).
    pub async fn page(
        &self,
        filter: &CampaignFilter,
        page: u64,
        page_size: u64,
    ) -> Result<Vec<CampaignDoc>, PortError> {
        let mut query = Query::new().eq("tenant_id", json!(filter.tenant_id));
        if let Some(origin) = filter.campaign_origin {
            query = query.eq("campaign_origin", json!(origin));
        }
        if let Some(status) = filter.ui_status {
            query = query.eq("ui_status", json!(status));
        }
        let query = query
            .sort(filter.sort.as_str(), filter.direction)
            .limit(page_size)
            .offset((page - 1).saturating_mul(page_size))
            .without_total();
        Ok(self.rows().query(&query).await?.items)
    }

    /// A campaign by id, in `tenant_id` when given (a campaign id is one flow's id, so it is in one tenant).
    pub async fn campaign(&self, campaign_id: &str, tenant_id: Option<&str>) -> Result<Option<CampaignDoc>, PortError> {
        let mut query = Query::new().eq("campaign_id", json!(campaign_id)).limit(1);
        if let Some(tenant_id) = tenant_id {
            query = query.eq("tenant_id", json!(tenant_id));
        }
        let found = self.documents.query(ROWS, &query).await?.items.into_iter().next();
        found.map(|item| decode(ROWS, item)).transpose()
    }

    /// Every row of campaign `campaign_id` (normally one; more while a flow moves to another tenant).
    pub async fn rows_of_campaign(&self, campaign_id: &str) -> Result<Vec<CampaignDoc>, PortError> {
        let query = Query::new().eq("campaign_id", json!(campaign_id));
        Ok(self.rows().query(&query).await?.items)
    }

    /// Every campaign of a tenant.
    pub async fn rows_of_tenant(&self, tenant_id: &str) -> Result<Vec<CampaignDoc>, PortError> {
        let query = Query::new().eq("tenant_id", json!(tenant_id)).without_total();
        Ok(self.rows().query(&query).await?.items)
    }

    /// Campaigns not yet `ended` whose end is at or before `now` (the sync moves them).
    pub async fn due_to_end(&self, now_iso: &str, limit: u64) -> Result<Vec<CampaignDoc>, PortError> {
        let open: Vec<Value> =
            [UiStatus::Suggestions, UiStatus::Running, UiStatus::Paused].iter().map(|s| json!(s)).collect();
        let query = Query::new()
            .filter("ui_status", Filter::In(open))
            .filter("ends_at", Filter::Lte(json!(now_iso)))
            .limit(limit)
            .without_total();
        Ok(self.rows().query(&query).await?.items)
    }

    /// Every campaign row of `origin`, a page at a time (the reconcile pass).
    pub async fn all_rows(&self, origin: Origin, offset: u64, limit: u64) -> Result<Vec<CampaignDoc>, PortError> {
        let query = Query::new()
            .eq("campaign_origin", json!(origin))
            .sort("campaign_id", Direction::Asc)
            .limit(limit)
            .offset(offset)
            .without_total();
        Ok(self.rows().query(&query).await?.items)
    }

    pub async fn put_rows(&self, rows: &[CampaignDoc]) -> Result<(), PortError> {
        self.rows().upsert_many(rows).await
    }

    pub async fn delete_row(&self, row: &CampaignDoc) -> Result<(), PortError> {
        self.documents.delete(ROWS, &row.id()).await.map(|_| ())
    }

    pub async fn aggregate(&self, tenant_id: &str) -> Result<Option<Aggregate>, PortError> {
        self.documents.get(TENANTS, tenant_id).await?.map(|value| decode(TENANTS, value)).transpose()
    }

    /// The tenant's aggregate with its store version (every write counts it up).
    pub async fn aggregate_versioned(&self, tenant_id: &str) -> Result<Option<(u64, Aggregate)>, PortError> {
        let Some(found) = self.documents.get_versioned(TENANTS, tenant_id).await? else { return Ok(None) };
        Ok(Some((found.version, decode(TENANTS, found.body)?)))
    }

    pub async fn put_aggregate(&self, aggregate: &Aggregate) -> Result<(), PortError> {
        self.documents.upsert(TENANTS, &aggregate.tenant_id, encode(TENANTS, aggregate)?).await
    }

    /// The tenants that have an aggregate: every tenant the read models know.
    pub async fn tenants(&self) -> Result<Vec<String>, PortError> {
        let items = self.documents.list(TENANTS).await?;
        Ok(items.iter().filter_map(|item| item.get("tenant_id")?.as_str().map(str::to_owned)).collect())
    }

    pub async fn sync_state(&self, slice: &str, tenant_id: &str) -> Result<Option<SyncState>, PortError> {
        let found = self.documents.get(SYNC_STATE, &SyncState::id(slice, tenant_id)).await?;
        found.map(|value| decode(SYNC_STATE, value)).transpose()
    }

    /// Every state of every slice and tenant.
    pub async fn sync_states(&self) -> Result<Vec<SyncState>, PortError> {
        self.states().list().await
    }

    pub async fn put_sync_states(&self, states: &[SyncState]) -> Result<(), PortError> {
        self.states().upsert_many(states).await
    }

    /// One page of a tenant's live events, newest first, with the count of all that match: kept per tenant
    /// and kind (see [`crate::live`]), counted for one campaign. A deep page of a tenant's list (no campaign)
    /// starts at the nearest of the `marks` earlier pages showed (see [`crate::live_marks`]).
    pub async fn live_events(
        &self,
        marks: &LiveMarks,
        tenant_id: &str,
        kind: Option<&str>,
        campaign_id: Option<&str>,
        page: u64,
        page_size: u64,
    ) -> Result<(Vec<LiveEvent>, u64), PortError> {
        let mut query = Query::new().eq("tenant_id", json!(tenant_id));
        if let Some(kind) = kind {
            query = query.eq("kind", json!(kind));
        }
        let offset = (page - 1).saturating_mul(page_size);
        let counted = match campaign_id {
            Some(campaign_id) => {
                query = query.eq("campaign_id", json!(campaign_id));
                None
            }
            None => self.live_counts(tenant_id).await?,
        };
        let start = match &counted {
            Some((version, _)) => marks.start(tenant_id, kind, *version, offset),
            None => Start { at_or_before: None, offset },
        };
        if let Some(at_or_before) = start.at_or_before {
            query = query.filter("occurred_ms", Filter::Lte(json!(at_or_before)));
        }
        let mut query = query.sort("occurred_ms", Direction::Desc).limit(page_size).offset(start.offset);
        if counted.is_some() {
            query = query.without_total();
        }
        let TypedPage { items, total } = Collection::<LiveEvent>::new(self.documents.clone()).query(&query).await?;
        let Some((version, counts)) = counted else { return Ok((items, total)) };
        let occurred: Vec<i64> = items.iter().map(|event| event.occurred_ms).collect();
        marks.learn(tenant_id, kind, version, offset, &occurred);
        Ok((items, counts.total(kind)))
    }

    /// The tenant's kept live-event counts with their store version (`None` before the sync first counted them).
    async fn live_counts(&self, tenant_id: &str) -> Result<Option<(u64, LiveCounts)>, PortError> {
        let found = self.documents.get_versioned(crate::live_model::LIVE_EVENT_TOTALS, tenant_id).await?;
        found
            .map(|found| {
                Ok::<_, PortError>((
                    found.version,
                    decode::<LiveCounts>(crate::live_model::LIVE_EVENT_TOTALS, found.body)?,
                ))
            })
            .transpose()
    }

    /// How many live events the tenant has.
    pub async fn live_events_total(&self, tenant_id: &str) -> Result<u64, PortError> {
        if let Some((_, counts)) = self.live_counts(tenant_id).await? {
            return Ok(counts.total(None));
        }
        let query = Query::new().eq("tenant_id", json!(tenant_id)).limit(1);
        Ok(self.documents.query(crate::live_model::LIVE_EVENTS, &query).await?.total)
    }

    pub async fn cursor(&self, slice: &str) -> Result<Option<String>, PortError> {
        let found = self.documents.get(SYNC_CURSORS, slice).await?;
        Ok(found.and_then(|value| value.get("cursor")?.as_str().map(str::to_owned)))
    }

    pub async fn put_cursor(&self, slice: &str, cursor: &str) -> Result<(), PortError> {
        self.documents.upsert(SYNC_CURSORS, slice, json!({ "slice": slice, "cursor": cursor })).await
    }
}
