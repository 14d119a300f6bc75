//! Run storage that can run for months: the sweep that removes flow runs and dead letters past their retention
//! (`[engine.runs]`), with "now" from the injected clock. What goes, per sweep:
//!
//! | What | When |
//! |---|---|
//! | a run that is `waiting` or `completed` | not changed for `retention_ms` |
//! | any run, one holding an open dead letter included | not changed for `dead_letter_retention_ms` |
//! | a replayed dead letter | written `retention_ms` ago (its run resumed or a new run started) |
//! | any dead letter | written `dead_letter_retention_ms` ago |
//!
//! A run with an open dead letter stays as long as the letter, so a replay to the run's own version finds it.
//! Each removal is one filtered delete per rule over indexed fields, so a sweep costs the same however many
//! runs it removes; on the embedded store the freed pages go back to the file system a bounded slice at a time
//! (incremental vacuum), and on MongoDB the server reuses them.

use std::time::Duration;

use crate::config::RunStorage;
use flowhost_core::collections::{FLOW_DEAD_LETTERS, FLOW_RUNS};
use flowhost_core::ports::{Filter, PortError, Ports, Query};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::model::{DeadLetterStatus, RunStatus};

/// What one sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub runs: u64,
    pub dead_letters: u64,
}

/// One sweep at `now_ms`.
pub async fn sweep_once(ports: &Ports, storage: &RunStorage, now_ms: i64) -> Result<Swept, PortError> {
    let documents = ports.documents.as_ref();
    let before = |age_ms: u64| json!(now_ms.saturating_sub(i64::try_from(age_ms).unwrap_or(i64::MAX)));
    let without_open_letters = Query::new()
        .filter("status", Filter::In(vec![json!(RunStatus::Waiting.as_str()), json!(RunStatus::Completed.as_str())]))
        .filter("updated_ms", Filter::Lte(before(storage.retention_ms)));
    let any_run = Query::new().filter("updated_ms", Filter::Lte(before(storage.dead_letter_retention_ms)));
    let replayed = Query::new()
        .eq("status", json!(DeadLetterStatus::Replayed.as_str()))
        .filter("at_ms", Filter::Lte(before(storage.retention_ms)));
    let any_letter = Query::new().filter("at_ms", Filter::Lte(before(storage.dead_letter_retention_ms)));
    let mut swept = Swept::default();
    for query in [without_open_letters, any_run] {
        swept.runs += documents.delete_matching(FLOW_RUNS, &query).await?;
    }
    for query in [replayed, any_letter] {
        swept.dead_letters += documents.delete_matching(FLOW_DEAD_LETTERS, &query).await?;
    }
    Ok(swept)
}

/// Sweeps every `storage.sweep_interval_ms` until `shutdown`; a failed sweep is logged and tried again at the
/// next tick.
pub async fn run_sweep(ports: Ports, storage: RunStorage, shutdown: CancellationToken) {
    let interval = Duration::from_millis(storage.sweep_interval_ms);
    flowhost_core::clock::every(interval, &shutdown, || async {
        match sweep_once(&ports, &storage, ports.clock.now_ms()).await {
            Ok(swept) if swept != Swept::default() => {
                info!(runs = swept.runs, dead_letters = swept.dead_letters, "run retention sweep removed expired runs")
            }
            Ok(_) => debug!("run retention sweep found nothing to remove"),
            Err(error) => warn!(%error, "run retention sweep failed; retried on the next tick"),
        }
    })
    .await;
}
