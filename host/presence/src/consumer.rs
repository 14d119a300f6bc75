//! The consumer (spec 002 part B, rules 1-5): group `presence.player-state.v1` on the input topic, starting at
//! the latest offset when the group has none committed, auto-commit off, on the one consume/commit loop
//! (`flowhost_core::source`) in its per-partition mode. Records are processed in order per partition; a
//! partition's offsets are committed only past records whose projection is written (or was a no-op) or whose
//! dead letter is acknowledged, and committed (and marked, for a revoke) as soon as a partition's batch is
//! done, on an idle poll, and when the consumer closes. A crash replays the uncommitted suffix, and a replayed
//! record already reflected is a no-op (the projector's duplicate guards).
//!
//! A document-store failure blocks only its partition: its head record is retried with capped exponential
//! backoff and jitter while the other partitions keep flowing (the source consumer pauses the partition once its
//! window of batches is full); `/ready` answers 503 while any partition is blocked. A failed dead-letter
//! publish blocks the same way and is never committed past, and so does any failure of the projector that is
//! not a validator's rejection (a trap, fuel or memory exhaustion, a stored document the projector refuses):
//! only invalid records are permanent, so a bad plugin version stalls its partitions until a good one is active
//! instead of dead-lettering valid events.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use flowhost_core::backoff::{until_done, Backoff};
use flowhost_core::clock::sleep_or_shutdown;
use flowhost_core::ports::{OutRecord, Record, StartFrom, Topics};
use flowhost_core::source::{SourceConsumer, SourceHealth};
use rand::Rng;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::dead_letter::{dead_letter, dead_letter_topic};
use crate::metrics::PresenceMetrics;
use crate::project::{Projected, Projection, Transient};

/// Records of one partition projected together (one read, one batch of writes), and records per poll.
pub const BATCH: usize = 500;
/// Batches of one partition in flight before the partition is paused.
const PARTITION_WINDOW: usize = 2;
/// The event type the metrics name (the only registered one).
const EVENT_TYPE: &str = "player.casino-presence.v1";

#[derive(Debug, Clone)]
pub struct ConsumerSettings {
    pub group: String,
    pub input_topic: String,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub dlq_partitions: i32,
    pub dlq_replication_factor: i16,
}

/// What `/ready` reads: whether the consumer is in its group, whether the group assigned it (the source
/// consumer's health), and which partitions are blocked.
#[derive(Debug, Default)]
pub struct ConsumerStatus {
    source: OnceLock<Arc<SourceHealth>>,
    blocked: Mutex<BTreeMap<i32, String>>,
}

impl ConsumerStatus {
    /// `Ok` when the consumer is active, assigned by its group and no partition is blocked; else why not
    /// (spec 002: `/ready` needs an active, unblocked consumer group).
    pub fn check(&self) -> Result<(), String> {
        let (joined, assigned) =
            self.source.get().map_or((false, false), |health| (health.joined(), health.assigned()));
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        verdict(joined, assigned, &blocked)
    }
}

fn verdict(joined: bool, assigned: bool, blocked: &BTreeMap<i32, String>) -> Result<(), String> {
    if !joined {
        return Err("the consumer is not in its group".to_owned());
    }
    if !assigned {
        return Err("the consumer group has not assigned this member yet".to_owned());
    }
    match blocked.iter().next() {
        None => Ok(()),
        Some((partition, reason)) => Err(format!("partition {partition} is blocked: {reason}")),
    }
}

/// One partition's batch: each record and whether it is settled (written or a no-op, or dead-lettered). A
/// settled record after an unsettled one of another player is not processed again when the head is retried.
struct Lane {
    records: Vec<(Record, bool)>,
}

pub struct Consumer {
    pub topics: Arc<dyn Topics>,
    pub projection: Projection,
    pub settings: ConsumerSettings,
    pub metrics: PresenceMetrics,
    pub status: Arc<ConsumerStatus>,
}

impl Consumer {
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let dlq = dead_letter_topic(&self.settings.input_topic);
        let every = self.settings.retry_initial.max(Duration::from_secs(1));
        let backoff = Backoff::new(every, 1.0, every);
        if !until_done("creating the presence dead-letter topic", backoff, &shutdown, || {
            self.create_dead_letter_topic(&dlq)
        })
        .await
        {
            return Ok(());
        }
        let source = SourceConsumer::new("presence", self.topics.clone(), self.settings.group.clone())
            .start_from(StartFrom::Latest)
            .batch_size(BATCH)
            .window(PARTITION_WINDOW)
            .per_partition();
        let _ = self.status.source.set(source.health());
        info!(group = %self.settings.group, topic = %self.settings.input_topic, "presence consumer running");
        let (_keep, topics) = watch::channel(BTreeSet::from([self.settings.input_topic.clone()]));
        let consumer = Arc::new(self);
        let handle = |records| consumer.clone().project_partition(records, shutdown.clone());
        source.run(topics, handle, &shutdown).await;
        Ok(())
    }

    /// Creates the dead-letter topic when it is missing (the input topic belongs to the gateway).
    async fn create_dead_letter_topic(&self, dlq: &str) -> anyhow::Result<()> {
        if !self.topics.exists(dlq).await? {
            let replication = Some(self.settings.dlq_replication_factor);
            match self.topics.create_topic_replicated(dlq, self.settings.dlq_partitions, replication).await {
                Ok(()) | Err(flowhost_core::PortError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Projects one partition's records in order, in batches, retrying from the first that cannot be processed
    /// now (the partition blocked) until all are settled; false when shut down first.
    async fn project_partition(self: Arc<Self>, records: Vec<Record>, shutdown: CancellationToken) -> bool {
        let Some(partition) = records.first().map(|record| record.partition) else { return true };
        let mut lane = Lane { records: records.into_iter().map(|record| (record, false)).collect() };
        let mut delay = None;
        loop {
            let mut failure = None;
            let unsettled: Vec<usize> = (0..lane.records.len()).filter(|index| !lane.records[*index].1).collect();
            for batch in unsettled.chunks(BATCH) {
                failure = self.process(&mut lane, batch).await;
                if failure.is_some() {
                    break;
                }
            }
            let Some(reason) = failure else {
                if delay.is_some() {
                    self.unblock(partition);
                    info!(partition, "presence partition unblocked");
                }
                return true;
            };
            let next = self.next_delay(delay);
            delay = Some(next);
            self.metrics.retry_delay.observe(next.as_secs_f64());
            warn!(partition, %reason, retry_in_ms = next.as_millis() as u64, "presence partition blocked");
            self.block(partition, reason);
            if !sleep_or_shutdown(next, &shutdown).await {
                return false;
            }
        }
    }

    /// Capped exponential backoff with full jitter on the upper half (never below half the nominal delay).
    fn next_delay(&self, previous: Option<Duration>) -> Duration {
        let nominal = previous.map_or(self.settings.retry_initial, |d| (d * 2).min(self.settings.retry_max));
        let half = nominal / 2;
        half + half.mul_f64(rand::rng().random::<f64>())
    }

    fn block(&self, partition: i32, reason: String) {
        self.status.blocked.lock().unwrap_or_else(|p| p.into_inner()).insert(partition, reason);
    }

    fn unblock(&self, partition: i32) {
        self.status.blocked.lock().unwrap_or_else(|p| p.into_inner()).remove(&partition);
    }

    /// Projects the lane's records at `batch` (unsettled, in order) and settles those that are done: written,
    /// a no-op, or dead-lettered. Returns why the first of the others could not be processed now.
    async fn process(&self, lane: &mut Lane, batch: &[usize]) -> Option<String> {
        let started = Instant::now();
        let records: Vec<&Record> = batch.iter().map(|index| &lane.records[*index].0).collect();
        let projected = self.projection.records(&records).await;
        // The batch's time, shared by its records.
        let each = started.elapsed().as_secs_f64() / batch.len() as f64;
        let duration = self.metrics.projection_duration.with_label_values(&[EVENT_TYPE]);
        for _ in batch {
            duration.observe(each);
        }
        // The batch's dead letters go out together; the records they belong to settle once the log took them.
        let letters: Vec<OutRecord> = records
            .iter()
            .zip(&projected)
            .filter_map(|(record, projected)| match projected {
                Ok(Projected::Rejected { code, detail }) => {
                    Some(dead_letter(record, code, detail, self.projection.clock.now_ms()))
                }
                _ => None,
            })
            .collect();
        let dead_letters = match letters.is_empty() {
            true => Ok(()),
            false => self.topics.publish(&letters).await.map(|_| ()),
        };
        match &dead_letters {
            Ok(()) => self.metrics.dlq_publishes.inc_by(letters.len() as u64),
            Err(_) => self.metrics.dlq_failures.inc_by(letters.len() as u64),
        }
        let mut failure = None;
        for (index, projected) in batch.iter().zip(projected) {
            let outcome = match projected {
                Ok(Projected::Written { .. }) => "written".to_owned(),
                Ok(Projected::NoOp(outcome)) => {
                    match outcome.as_str() {
                        "duplicate" => self.metrics.duplicates.inc(),
                        "stale_close" => self.metrics.stale_closes.inc(),
                        "stale_time" => self.metrics.stale_times.inc(),
                        _ => {}
                    }
                    outcome
                }
                Ok(Projected::Rejected { code, .. }) => match &dead_letters {
                    Ok(()) => {
                        self.metrics.invalid.with_label_values(&[&code]).inc();
                        "dead_lettered".to_owned()
                    }
                    Err(error) => {
                        failure.get_or_insert_with(|| format!("dead-letter publish: {error}"));
                        continue;
                    }
                },
                Err(Transient::Documents(error)) => {
                    if failure.is_none() {
                        // Once per batch: a store failure fails all of the batch's writes at once.
                        self.metrics.docdb_errors.with_label_values(&["projection"]).inc();
                    }
                    failure.get_or_insert_with(|| format!("document store: {error}"));
                    continue;
                }
                Err(Transient::Projector(error)) => {
                    failure.get_or_insert_with(|| format!("projector: {error}"));
                    continue;
                }
            };
            self.metrics.records.with_label_values(&[EVENT_TYPE, &outcome]).inc();
            lane.records[*index].1 = true;
        }
        failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_an_active_assigned_unblocked_consumer() {
        let mut blocked = BTreeMap::new();
        assert!(verdict(false, false, &blocked).unwrap_err().contains("not in its group"));
        assert!(verdict(true, false, &blocked).unwrap_err().contains("not assigned"), "joined, waiting for partitions");
        assert_eq!(verdict(true, true, &blocked), Ok(()));
        blocked.insert(3, "projector: trap: unreachable".to_owned());
        assert!(verdict(true, true, &blocked).unwrap_err().contains("partition 3 is blocked"));
        assert!(ConsumerStatus::default().check().unwrap_err().contains("not in its group"), "before it starts");
    }
}
