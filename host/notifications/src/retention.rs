//! The retention sweep: notification activity, interaction events and in-app messages are written with an expiry (creation plus
//! `FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`); this task deletes the expired ones every
//! `FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS`, with "now" from the injected clock. On MongoDB a TTL index
//! removes them too, on the server's own schedule; the sweep keeps both backends and tests exact.

use std::time::Duration;

use flowhost_core::collections::{INAPP_MESSAGES, WEBPUSH_ACTIVITY, WEBPUSH_EVENTS};
use flowhost_core::ports::Ports;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// One sweep of the three collections; returns how many records it removed.
pub async fn sweep_once(ports: &Ports) -> u64 {
    let now = ports.clock.now_ms();
    let mut removed = 0;
    for collection in [WEBPUSH_ACTIVITY, WEBPUSH_EVENTS, INAPP_MESSAGES] {
        match ports.documents.sweep_expired(collection, now).await {
            Ok(count) => removed += count,
            Err(error) => warn!(%error, collection, "retention sweep failed; retried on the next tick"),
        }
    }
    if removed > 0 {
        info!(removed, "retention sweep removed expired notification records");
    } else {
        debug!("retention sweep found nothing to remove");
    }
    removed
}

/// Sweeps at start and then every `interval` until `shutdown`.
pub async fn run_retention(ports: Ports, interval: Duration, shutdown: CancellationToken) {
    flowhost_core::clock::every(interval, &shutdown, || async {
        sweep_once(&ports).await;
    })
    .await;
}
