//! The expiry sweep (spec 002 part B, rule 6): every `PRESENCE_PRESENCE_SWEEP_INTERVAL_SECONDS` it selects at most
//! `PRESENCE_PRESENCE_SWEEP_BATCH_SIZE` documents with an online site due (`state` online and `next_expiry` at or
//! before now, oldest first) and takes their due sites offline with 32 bounded workers, each a batch of the
//! documents through the projector and compare-and-replaces on the versions it read: a heartbeat that lands first wins, and of two
//! replicas sweeping the same document one writes and the other finds nothing due. Documents stay.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{Direction, DocumentStore, Filter, Query};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::PresenceMetrics;
use crate::project::{Projected, Projection, COLLECTION};

/// Batches of documents swept concurrently.
pub const WORKERS: usize = 32;
/// The most documents one worker reads and writes together.
const MAX_BATCH: usize = 500;

pub struct Sweep {
    pub documents: Arc<dyn DocumentStore>,
    pub projection: Projection,
    pub interval: Duration,
    pub batch_size: u64,
    pub metrics: PresenceMetrics,
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub candidates: u64,
    pub sites_offline: u64,
}

impl Sweep {
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticks.tick() => {}
            }
            match self.pass().await {
                Ok(swept) if swept.candidates > 0 => {
                    info!(candidates = swept.candidates, sites_offline = swept.sites_offline, "presence sweep")
                }
                Ok(_) => {}
                Err(error) => {
                    self.metrics.docdb_errors.with_label_values(&["sweep"]).inc();
                    warn!(%error, "the presence sweep failed; trying again next interval");
                }
            }
        }
    }

    /// One pass over the due documents.
    pub async fn pass(&self) -> anyhow::Result<Swept> {
        let started = Instant::now();
        let now = iso_utc(self.projection.clock.now_ms());
        let query = Query::new()
            .eq("state", json!("online"))
            .filter("next_expiry", Filter::Lte(json!(now)))
            .sort("next_expiry", Direction::Asc)
            .limit(self.batch_size);
        let due = tokio::time::timeout(self.projection.timeout, self.documents.query(COLLECTION, &query))
            .await
            .map_err(|_| anyhow::anyhow!("the sweep's query did not answer in time"))??
            .items;
        let ids: Vec<String> = due.iter().filter_map(document_id).collect();
        self.metrics.expiry_candidates.inc_by(ids.len() as u64);
        // The due documents in up to WORKERS batches, each read and written together.
        let per_worker = ids.len().div_ceil(WORKERS).clamp(1, MAX_BATCH);
        let results: Vec<_> = futures::stream::iter(ids.chunks(per_worker).map(<[String]>::to_vec))
            .map(|batch| self.projection.expire_many(batch))
            .buffer_unordered(WORKERS)
            .flat_map(futures::stream::iter)
            .collect()
            .await;
        let mut swept = Swept { candidates: ids.len() as u64, sites_offline: 0 };
        for result in results {
            match result {
                Ok(Projected::Written { went_offline }) => swept.sites_offline += went_offline as u64,
                Ok(_) => {}
                Err(error) => {
                    self.metrics.docdb_errors.with_label_values(&["sweep"]).inc();
                    warn!(%error, "sweeping a presence document failed; the next pass retries it");
                }
            }
        }
        self.metrics.expired_sites.inc_by(swept.sites_offline);
        self.metrics.sweep_duration.observe(started.elapsed().as_secs_f64());
        Ok(swept)
    }
}

/// A document's id (`<tenant_id>:<player_id>`) from its body.
pub fn document_id(body: &Value) -> Option<String> {
    Some(format!("{}:{}", body.get("tenant_id")?.as_str()?, body.get("player_id")?.as_str()?))
}
