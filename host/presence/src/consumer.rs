//! The consumer (spec 002 part B, rules 1-5): group `presence.player-state.v1` on the input topic, starting at
//! the latest offset when the group has none committed, auto-commit off. Records are processed in order per
//! partition; each is marked only after its projection is written (or was a no-op) or its dead letter is
//! acknowledged; marks are committed synchronously every [`COMMIT_EVERY`] records, every [`COMMIT_INTERVAL`]
//! and when a partition is revoked or the consumer closes. A crash replays the uncommitted suffix, and a replayed
//! record already reflected is a no-op (the projector's duplicate guards).
//!
//! A document-store failure blocks only its partition: the partition is paused, its head record is retried with
//! capped exponential backoff and jitter, and the other partitions keep flowing; `/ready` answers 503 while any
//! partition is blocked. A failed dead-letter publish blocks the same way and is never committed past, and so
//! does any failure of the projector that is not a validator's rejection (a trap, fuel or memory exhaustion, a
//! stored document the projector refuses): only invalid records are permanent, so a bad plugin version stalls
//! its partitions until a good one is active instead of dead-lettering valid events.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowhost_core::ports::{ConsumerConfig, OutRecord, Position, Record, StartFrom, TopicConsumer, Topics};
use rand::Rng;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::dead_letter::{dead_letter, dead_letter_topic};
use crate::metrics::PresenceMetrics;
use crate::project::{Projected, Projection, Transient};

/// Commit after this many marked records.
pub const COMMIT_EVERY: usize = 100;
/// Records of one partition projected together (one read, one batch of writes).
pub const BATCH: usize = 500;
/// Commit at least this often while records are marked.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
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

/// What `/ready` reads: whether the consumer is in its group, whether the group assigned it, and which
/// partitions are blocked.
#[derive(Debug, Default)]
pub struct ConsumerStatus {
    active: AtomicBool,
    assigned: AtomicBool,
    blocked: Mutex<BTreeMap<i32, String>>,
}

impl ConsumerStatus {
    /// `Ok` when the consumer is active, assigned by its group and no partition is blocked; else why not
    /// (spec 002: `/ready` needs an active, unblocked consumer group).
    pub fn check(&self) -> Result<(), String> {
        if !self.active.load(Ordering::Relaxed) {
            return Err("the consumer is not in its group".to_owned());
        }
        if !self.assigned.load(Ordering::Relaxed) {
            return Err("the consumer group has not assigned this member yet".to_owned());
        }
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        match blocked.iter().next() {
            None => Ok(()),
            Some((partition, reason)) => Err(format!("partition {partition} is blocked: {reason}")),
        }
    }
}

/// What draining a lane did: the positions done, and a pause (`true`) or resume (`false`) of its partition.
struct Drained {
    done: Vec<Position>,
    flow: Option<(String, i32, bool)>,
}

/// One partition's records waiting to be marked, and when its head may be tried again. A record is settled once
/// its projection is written (or was a no-op) or its dead letter acknowledged; records are marked in order, so a
/// settled record waits behind an unsettled one of another player (it is never processed twice).
#[derive(Default)]
struct Lane {
    records: VecDeque<(Record, bool)>,
    retry_at: Option<Instant>,
    delay: Option<Duration>,
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
        let mut consumer = loop {
            match self.start(&dlq).await {
                Ok(consumer) => break consumer,
                Err(error) => {
                    warn!(%error, "the presence consumer cannot start yet; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(self.settings.retry_initial.max(Duration::from_secs(1))) => {}
                    }
                }
            }
        };
        self.status.active.store(true, Ordering::Relaxed);
        info!(group = %self.settings.group, topic = %self.settings.input_topic, "presence consumer running");
        let result = self.consume(consumer.as_mut(), &shutdown).await;
        self.status.active.store(false, Ordering::Relaxed);
        self.status.assigned.store(false, Ordering::Relaxed);
        // Commits what was marked and leaves the group, so the next owner resumes right after it.
        if let Err(error) = consumer.close().await {
            warn!(%error, "closing the presence consumer failed");
        }
        result
    }

    /// Creates the dead-letter topic when it is missing (the input topic belongs to the gateway) and joins the
    /// group.
    async fn start(&self, dlq: &str) -> anyhow::Result<Box<dyn TopicConsumer>> {
        if !self.topics.exists(dlq).await? {
            let replication = Some(self.settings.dlq_replication_factor);
            match self.topics.create_topic_replicated(dlq, self.settings.dlq_partitions, replication).await {
                Ok(()) | Err(flowhost_core::PortError::Conflict(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let config = ConsumerConfig {
            group: self.settings.group.clone(),
            topics: vec![self.settings.input_topic.clone()],
            start: StartFrom::Latest,
        };
        Ok(self.topics.consumer(config).await?)
    }

    /// Polls, processes each partition's lane, commits; what is marked but not committed at the end is
    /// committed by `close`.
    async fn consume(&self, consumer: &mut dyn TopicConsumer, shutdown: &CancellationToken) -> anyhow::Result<()> {
        let mut lanes: HashMap<i32, Lane> = HashMap::new();
        let mut marked: Vec<Position> = Vec::new();
        let mut since_commit = 0usize;
        let mut last_commit = Instant::now();
        while !shutdown.is_cancelled() {
            // Wait no longer than the next retry of a blocked partition.
            let now = Instant::now();
            let next_retry = lanes.values().filter_map(|lane| lane.retry_at).min();
            let wait = next_retry
                .map_or(Duration::from_millis(200), |at| at.saturating_duration_since(now))
                .min(Duration::from_millis(200));
            let polled = tokio::select! {
                _ = shutdown.cancelled() => break,
                polled = consumer.poll(500, wait) => polled,
            };
            // A rebalance happens inside a poll: what `/ready` reads is fresh after each one.
            self.status.assigned.store(consumer.assigned(), Ordering::Relaxed);
            match polled {
                Ok(records) => {
                    for record in records {
                        lanes.entry(record.partition).or_default().records.push_back((record, false));
                    }
                }
                Err(error) => {
                    warn!(%error, "polling the presence topic failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            // Partitions are independent (a player's records share one): their lanes run concurrently.
            let drained =
                futures::future::join_all(lanes.iter_mut().map(|(partition, lane)| self.drain_lane(*partition, lane)))
                    .await;
            for drained in drained {
                // Marked at once, so a revoke of the partition commits them even before the next commit.
                consumer.mark(&drained.done);
                since_commit += drained.done.len();
                marked.extend(drained.done);
                if let Some((topic, partition, pause)) = drained.flow {
                    let result = if pause {
                        consumer.pause(&topic, partition).await
                    } else {
                        consumer.resume(&topic, partition).await
                    };
                    if let Err(error) = result {
                        warn!(%error, partition, pause, "pausing or resuming a presence partition failed");
                    }
                }
            }
            lanes.retain(|_, lane| !lane.records.is_empty());
            if !marked.is_empty() && (since_commit >= COMMIT_EVERY || last_commit.elapsed() >= COMMIT_INTERVAL) {
                let positions = flowhost_core::ports::merge_positions(std::mem::take(&mut marked));
                if let Err(error) = consumer.commit(&positions).await {
                    // The marks stay: they are committed on the next success, on revoke or on close.
                    warn!(%error, "committing presence offsets failed; retrying with the next commit");
                }
                since_commit = 0;
                last_commit = Instant::now();
            }
        }
        Ok(())
    }

    /// Processes one partition's records in batches until one cannot be processed now: the positions done, and
    /// whether the partition is to be paused (it just blocked) or resumed (it just recovered).
    async fn drain_lane(&self, partition: i32, lane: &mut Lane) -> Drained {
        let mut drained = Drained { done: Vec::new(), flow: None };
        if lane.retry_at.is_some_and(|at| Instant::now() < at) {
            return drained;
        }
        loop {
            let batch: Vec<usize> =
                (0..lane.records.len().min(BATCH)).filter(|index| !lane.records[*index].1).collect();
            let failure = match batch.is_empty() {
                true => None,
                false => self.process(lane, &batch).await,
            };
            while lane.records.front().is_some_and(|(_, settled)| *settled) {
                let (record, _) = lane.records.pop_front().expect("a settled head");
                drained.done.push(Position { topic: record.topic, partition, next_offset: record.offset + 1 });
            }
            if let Some(reason) = failure {
                let topic = lane.records.front().map_or_else(String::new, |(record, _)| record.topic.clone());
                let delay = self.next_delay(lane.delay);
                lane.delay = Some(delay);
                if lane.retry_at.replace(Instant::now() + delay).is_none() {
                    drained.flow = Some((topic, partition, true));
                }
                self.metrics.retry_delay.observe(delay.as_secs_f64());
                warn!(partition, %reason, retry_in_ms = delay.as_millis() as u64, "presence partition blocked");
                self.block(partition, reason);
                return drained;
            }
            if lane.retry_at.take().is_some() {
                lane.delay = None;
                self.unblock(partition);
                let topic = drained.done.last().map_or_else(String::new, |position| position.topic.clone());
                drained.flow = Some((topic, partition, false));
                info!(partition, "presence partition unblocked");
            }
            if lane.records.is_empty() {
                return drained;
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
        let status = ConsumerStatus::default();
        assert!(status.check().unwrap_err().contains("not in its group"));
        status.active.store(true, Ordering::Relaxed);
        assert!(status.check().unwrap_err().contains("not assigned"), "joined but still waiting for partitions");
        status.assigned.store(true, Ordering::Relaxed);
        assert_eq!(status.check(), Ok(()));
        status.blocked.lock().unwrap().insert(3, "projector: trap: unreachable".to_owned());
        assert!(status.check().unwrap_err().contains("partition 3 is blocked"));
        status.blocked.lock().unwrap().remove(&3);
        assert_eq!(status.check(), Ok(()));
    }
}
