//! The campaign list's cache: each recently listed tenant's rows held in memory with the orders asked for, so a
//! list request costs one read of the tenant's aggregate instead of a count and a sorted scan of its rows.
//!
//! **Invariant: a cached list is never older than the aggregate a request reads.** An entry is kept with the
//! aggregate's store version read *before* its rows were loaded, and with the [`rows_digest`] of the rows it
//! holds. A request reads the aggregate (with its version) and uses the entry when the version is unchanged or
//! the aggregate's digest equals the entry's (an engagement-only change rewrites the aggregate but not what a
//! row shows); otherwise it loads the rows again. The sync writes rows before their aggregate, so rows loaded
//! in between are newer than the version they are kept with, never older; until the aggregate catches up, a
//! page's counts are the held rows' own, so its total and status counts never disagree.
//!
//! A tenant with more rows than the budget ([`MAX_CACHED_ROWS`]) is listed from the store; tenants beyond the budget are
//! evicted least recently used first.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering as Atomic};
use std::sync::{Arc, Mutex};

use flowhost_core::ports::{Direction, PortError};

use crate::model::{CampaignDoc, Origin, UiStatus};
use crate::read_model::{rows_digest, Aggregate, CampaignFilter, ReadModels, SortKey};

/// The most rows held over all tenants.
pub const MAX_CACHED_ROWS: usize = 200_000;

/// Which rows, in which order.
type OrderKey = (Option<Origin>, Option<UiStatus>, SortKey, Direction);

struct TenantRows {
    version: u64,
    digest: String,
    rows: Vec<CampaignDoc>,
    /// The rows counted, when a sync landed between reading the aggregate and the rows (the rows are then newer
    /// than its counts): used while the aggregate's digest differs from `digest`, so that a page's total,
    /// summary and status counts always count the rows it lists.
    counted: Option<Aggregate>,
    /// Positions in `rows` per filter and order, computed when first asked for.
    orders: Mutex<HashMap<OrderKey, Arc<Vec<u32>>>>,
    last_used: AtomicU64,
}

impl TenantRows {
    fn order(&self, key: OrderKey) -> Arc<Vec<u32>> {
        let mut orders = self.orders.lock().unwrap_or_else(|p| p.into_inner());
        orders
            .entry(key)
            .or_insert_with(|| {
                let (origin, status, sort, direction) = key;
                let mut positions: Vec<u32> = (0..self.rows.len() as u32)
                    .filter(|&at| {
                        let row = &self.rows[at as usize];
                        origin.is_none_or(|o| o == row.campaign_origin) && status.is_none_or(|s| s == row.ui_status)
                    })
                    .collect();
                positions.sort_by(|&a, &b| compare(&self.rows[a as usize], &self.rows[b as usize], sort, direction));
                Arc::new(positions)
            })
            .clone()
    }
}

/// The store's order: the sort field (a missing value first ascending, last descending), then the id in the
/// same direction.
fn compare(a: &CampaignDoc, b: &CampaignDoc, sort: SortKey, direction: Direction) -> Ordering {
    let key = |row: &CampaignDoc| -> Option<String> {
        match sort {
            SortKey::UpdatedAt => Some(row.updated_at.clone()),
            SortKey::Name => Some(row.name.clone()),
            SortKey::StartsAt => row.starts_at.clone(),
            SortKey::EndsAt => row.ends_at.clone(),
        }
    };
    let order = key(a).cmp(&key(b)).then_with(|| a.campaign_id.cmp(&b.campaign_id));
    if direction == Direction::Desc {
        order.reverse()
    } else {
        order
    }
}

/// One page of a list, with the count of all that match and the aggregate read for it.
pub struct ListPage {
    pub rows: Vec<CampaignDoc>,
    pub total: u64,
    pub aggregate: Aggregate,
}

pub struct ListCache {
    /// The most rows held over all tenants ([`MAX_CACHED_ROWS`] unless built [`ListCache::with_budget`]).
    budget: usize,
    tenants: Mutex<HashMap<String, Arc<TenantRows>>>,
    /// One load at a time: requests arriving during a load wait for it instead of loading too.
    loading: tokio::sync::Mutex<()>,
    uses: AtomicU64,
}

impl Default for ListCache {
    fn default() -> ListCache {
        ListCache::with_budget(MAX_CACHED_ROWS)
    }
}

impl ListCache {
    /// A cache holding at most `rows` rows over all tenants; a tenant with more is listed from the store.
    pub fn with_budget(rows: usize) -> ListCache {
        ListCache {
            budget: rows,
            tenants: Mutex::default(),
            loading: tokio::sync::Mutex::default(),
            uses: AtomicU64::default(),
        }
    }

    /// The tenants whose rows are held now.
    pub fn held(&self) -> Vec<String> {
        let mut tenants: Vec<String> = self.tenants.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
        tenants.sort();
        tenants
    }

    pub async fn page(
        &self,
        read_models: &ReadModels,
        filter: &CampaignFilter,
        page: u64,
        page_size: u64,
    ) -> Result<ListPage, PortError> {
        let Some((version, aggregate)) = read_models.aggregate_versioned(&filter.tenant_id).await? else {
            return Ok(ListPage { rows: Vec::new(), total: 0, aggregate: Aggregate::default() });
        };
        let cached = match self.current(&filter.tenant_id, version, &aggregate) {
            Some(cached) => Some(cached),
            None => self.load(read_models, &filter.tenant_id, version, &aggregate).await?,
        };
        let Some(cached) = cached else {
            // Too many rows to hold: the store pages, the aggregate counts.
            let rows = read_models.page(filter, page, page_size).await?;
            let total = aggregate.counters(filter.campaign_origin, filter.ui_status).campaigns;
            return Ok(ListPage { rows, total, aggregate });
        };
        let aggregate = match &cached.counted {
            Some(counted) if cached.digest != aggregate.rows_digest => counted.clone(),
            _ => aggregate,
        };
        let order = cached.order((filter.campaign_origin, filter.ui_status, filter.sort, filter.direction));
        let start = usize::try_from((page - 1).saturating_mul(page_size)).unwrap_or(usize::MAX);
        let rows =
            order.iter().skip(start).take(page_size as usize).map(|&at| cached.rows[at as usize].clone()).collect();
        Ok(ListPage { rows, total: order.len() as u64, aggregate })
    }

    /// The tenant's entry when it is current for the aggregate at `version` (see the module documentation).
    fn current(&self, tenant: &str, version: u64, aggregate: &Aggregate) -> Option<Arc<TenantRows>> {
        let tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        let entry = tenants.get(tenant)?;
        if entry.version != version && entry.digest != aggregate.rows_digest {
            return None;
        }
        entry.last_used.store(self.uses.fetch_add(1, Atomic::Relaxed), Atomic::Relaxed);
        Some(entry.clone())
    }

    /// Loads the tenant's rows (once for all waiting requests); `None` when there are too many to hold.
    async fn load(
        &self,
        read_models: &ReadModels,
        tenant: &str,
        version: u64,
        aggregate: &Aggregate,
    ) -> Result<Option<Arc<TenantRows>>, PortError> {
        let _one_at_a_time = self.loading.lock().await;
        if let Some(loaded) = self.current(tenant, version, aggregate) {
            return Ok(Some(loaded));
        }
        let campaigns: u64 = aggregate.counters(None, None).campaigns;
        if campaigns as usize > self.budget {
            return Ok(None);
        }
        let rows = read_models.rows_of_tenant(tenant).await?;
        let digest = rows_digest(&rows);
        let counted = (digest != aggregate.rows_digest).then(|| Aggregate::of(tenant, &rows));
        let entry = Arc::new(TenantRows {
            version,
            digest,
            rows,
            counted,
            orders: Mutex::default(),
            last_used: AtomicU64::new(self.uses.fetch_add(1, Atomic::Relaxed)),
        });
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        tenants.insert(tenant.to_owned(), entry.clone());
        // Least recently used tenants go while the rows held exceed the budget.
        while tenants.values().map(|cached| cached.rows.len()).sum::<usize>() > self.budget {
            let Some(oldest) =
                tenants.iter().min_by_key(|(_, cached)| cached.last_used.load(Atomic::Relaxed)).map(|(t, _)| t.clone())
            else {
                break;
            };
            tenants.remove(&oldest);
        }
        Ok(Some(entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, name: &str, starts_at: Option<&str>) -> CampaignDoc {
        let starts_at = starts_at.map(str::to_owned);
        CampaignDoc {
            campaign_id: id.into(),
            name: name.into(),
            starts_at,
            ends_at: None,
            ..crate::model::sample_doc()
        }
    }

    #[test]
    fn orders_follow_the_stores_rules() {
        let rows = [row("b", "Same", Some("2026-01-02T00:00:00Z")), row("a", "Same", None), row("c", "Alpha", None)];
        let ids = |sort, direction| {
            let mut sorted: Vec<&CampaignDoc> = rows.iter().collect();
            sorted.sort_by(|x, y| compare(x, y, sort, direction));
            sorted.iter().map(|r| r.campaign_id.as_str()).collect::<Vec<_>>()
        };
        assert_eq!(ids(SortKey::Name, Direction::Asc), ["c", "a", "b"], "ties by id ascending when ascending");
        assert_eq!(ids(SortKey::Name, Direction::Desc), ["b", "a", "c"], "ties by id descending when descending");
        assert_eq!(ids(SortKey::StartsAt, Direction::Asc), ["a", "c", "b"], "missing first ascending");
        assert_eq!(ids(SortKey::StartsAt, Direction::Desc), ["b", "c", "a"], "missing last descending");
    }
}
