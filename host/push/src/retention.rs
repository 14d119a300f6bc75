//! The retention sweep: notification activity and interaction events are written with an expiry (creation plus
//! `FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`); this task deletes the expired ones every
//! `FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS`, with "now" from the injected clock. On MongoDB a TTL index
//! removes them too, on the server's own schedule; the sweep keeps both backends and tests exact.

use std::sync::Arc;

use flowhost_core::collections::{WEBPUSH_ACTIVITY, WEBPUSH_EVENTS};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::PushState;

/// One sweep of both collections; returns how many records it removed.
pub async fn sweep_once(state: &PushState) -> u64 {
    let now = state.ports.clock.now_ms();
    let mut removed = 0;
    for collection in [WEBPUSH_ACTIVITY, WEBPUSH_EVENTS] {
        match state.ports.documents.sweep_expired(collection, now).await {
            Ok(count) => removed += count,
            Err(error) => warn!(%error, collection, "retention sweep failed; retried on the next tick"),
        }
    }
    if removed > 0 {
        info!(removed, "retention sweep removed expired web-push records");
    } else {
        debug!("retention sweep found nothing to remove");
    }
    removed
}

/// Sweeps at start and then every sweep interval until `shutdown`.
pub async fn run_retention(state: Arc<PushState>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(state.settings.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {
                sweep_once(&state).await;
            }
        }
    }
}
