//! [`SourceConsumer`]: the one consume/commit loop behind every consumer that turns records into durable effects
//! (the executor's source topics, the service-reply topic, a service's inbound topics). It owns the
//! at-least-once invariant, so a handler only has to say when a batch's effects are durable:
//!
//! - **Subscription from a watch of topic sets.** The group is joined for the current set (missing topics
//!   created first when [`SourceConsumer::creating_missing`] is set); when the set changes, what is durable is
//!   committed, the member leaves (`close`) and a new one joins. An empty set consumes nothing. A batch read
//!   while the set changed is left uncommitted, so the next member reads it again under the new set.
//! - **An in-flight window.** Each polled batch is handed to the handler at once and its future spawned, so
//!   processing of later batches overlaps the durability of earlier ones; at most `window` are in flight.
//! - **Ordered commit.** Offsets are committed strictly in poll order: a batch's offsets only after its future
//!   and every earlier one answered durable. A batch that answers not durable (shutdown) or panics commits
//!   nothing from it on, so all of it is read again; a panic also stops the process (it is a defect). An idle
//!   poll commits everything finished, so offsets do not wait for the next record.
//! - **A bounded drain.** On shutdown what is already durable is committed within [`DRAIN_GRACE`], and the
//!   member leaves the group so the next owner resumes right after it.
//!
//! Backend failures (create, join, poll, commit) are retried with [`Backoff::for_backend`], reported to
//! [`SourceHealth`] (what readiness reads) and counted through the `on_error` callback; none is fatal.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{FutureExt, Shared};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::clock::sleep_or_shutdown;
use crate::ports::{
    merge_positions, next_positions, ConsumerConfig, KnownTopics, Position, Record, StartFrom, TopicConsumer, Topics,
};

/// How long a stopping consumer waits for in-flight batches to become durable and be committed.
pub const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long a poll waits for records while a partition is paused. A paused partition is resumed only by the
/// settle that follows a poll, so a poll that waited its whole timeout left finished partitions idle: the
/// presence drain ran in bursts with 130-150 ms gaps between them.
const PAUSED_POLL: Duration = Duration::from_millis(2);

/// What readiness reads of a [`SourceConsumer`]: the last backend failure (cleared by the next good poll) and
/// whether the group has assigned the member.
#[derive(Debug, Default)]
pub struct SourceHealth {
    error: Mutex<Option<String>>,
    joined: AtomicBool,
    assigned: AtomicBool,
}

impl SourceHealth {
    /// The last failure to consume, while it lasts.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a member is in the group (false before the first join, between members and after stopping).
    pub fn joined(&self) -> bool {
        self.joined.load(Ordering::Relaxed)
    }

    /// Whether the group has assigned the member its partitions (see [`TopicConsumer::assigned`]).
    pub fn assigned(&self) -> bool {
        self.joined() && self.assigned.load(Ordering::Relaxed)
    }

    fn failed(&self, error: String) {
        *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
    }

    fn ok(&self) {
        let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if error.is_some() {
            *error = None;
        }
    }
}

/// Counts a failure by kind (`create_topic`, `subscribe`, `poll`, `commit`), e.g. into a role's error metric.
pub type ErrorCounter = Arc<dyn Fn(&'static str) + Send + Sync>;

/// The consume/commit loop (see the module documentation).
pub struct SourceConsumer {
    name: &'static str,
    topics: Arc<dyn Topics>,
    group: String,
    start: StartFrom,
    batch_size: usize,
    poll_timeout: Duration,
    window: usize,
    per_partition: bool,
    create_missing: Option<Arc<KnownTopics>>,
    health: Arc<SourceHealth>,
    on_error: ErrorCounter,
}

impl std::fmt::Debug for SourceConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceConsumer")
            .field("name", &self.name)
            .field("group", &self.group)
            .field("batch_size", &self.batch_size)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// A batch being made durable, and the offsets to commit after it.
struct InFlight {
    task: JoinHandle<bool>,
    positions: Vec<Position>,
    /// Resolves once the batch is durable (fails if it is not): what the partition's next batch waits for.
    durable: Shared<oneshot::Receiver<()>>,
}

/// The batches in flight: one lane in poll order, or with [`SourceConsumer::per_partition`] one lane per
/// partition (keyed by topic and partition) whose records may be held back.
#[derive(Default)]
struct Lanes {
    lanes: BTreeMap<Option<(String, i32)>, Lane>,
}

#[derive(Default)]
struct Lane {
    in_flight: VecDeque<InFlight>,
    paused: bool,
}

impl Lanes {
    /// How long the next poll may wait for records: `idle`, or [`PAUSED_POLL`] while a partition is paused.
    fn poll_timeout(&self, idle: Duration) -> Duration {
        match self.lanes.values().any(|lane| lane.paused) {
            true => idle.min(PAUSED_POLL),
            false => idle,
        }
    }
}

/// How long [`SourceConsumer::settle`] waits for batches in flight.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Until the window has room (one lane); per partition not at all.
    Window,
    /// Until all are durable (one lane), so an idle member commits everything; per partition not at all.
    Idle,
    /// Until all are durable: before the member leaves.
    All,
}

impl SourceConsumer {
    /// A consumer in `group` named `name` in its logs; from the earliest offset when the group has none, 500
    /// records per poll, 4 batches in flight.
    pub fn new(name: &'static str, topics: Arc<dyn Topics>, group: impl Into<String>) -> SourceConsumer {
        SourceConsumer {
            name,
            topics,
            group: group.into(),
            start: StartFrom::Earliest,
            batch_size: 500,
            poll_timeout: Duration::from_millis(200),
            window: 4,
            per_partition: false,
            create_missing: None,
            health: Arc::default(),
            on_error: Arc::new(|_| {}),
        }
    }

    /// Where a group without committed offsets starts.
    pub fn start_from(mut self, start: StartFrom) -> SourceConsumer {
        self.start = start;
        self
    }

    /// Records per poll (at least 1).
    pub fn batch_size(mut self, records: usize) -> SourceConsumer {
        self.batch_size = records.max(1);
        self
    }

    /// How long a poll waits for records when none are there (200 ms by default; at least 1 ms). While a
    /// partition is paused a poll waits at most 2 ms, so that a partition whose batch ended is read again at once.
    pub fn poll_timeout(mut self, timeout: Duration) -> SourceConsumer {
        self.poll_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Batches in flight at once (at least 1: then each batch is durable before the next poll).
    pub fn window(mut self, batches: usize) -> SourceConsumer {
        self.window = batches.max(1);
        self
    }

    /// Hands the handler one partition's records at a time, in order: a partition's next batch starts only once
    /// its previous one answered, and a partition with `window` batches in flight is paused (its records held
    /// back by the member) until its oldest answers, while the other partitions keep flowing. Offsets are
    /// committed in order per partition. For handlers that may retry one partition's record for a long time
    /// (a failing store) without stopping the others.
    pub fn per_partition(mut self) -> SourceConsumer {
        self.per_partition = true;
        self
    }

    /// Creates missing topics of a set (through `known`) before joining; without it a missing topic is simply
    /// not consumed until it exists.
    pub fn creating_missing(mut self, known: Arc<KnownTopics>) -> SourceConsumer {
        self.create_missing = Some(known);
        self
    }

    /// Counts failures by kind.
    pub fn counting_errors(mut self, on_error: ErrorCounter) -> SourceConsumer {
        self.on_error = on_error;
        self
    }

    /// What readiness reads.
    pub fn health(&self) -> Arc<SourceHealth> {
        self.health.clone()
    }

    /// Consumes the topic sets `sources` names until `shutdown`. `handle` is called with each batch in poll
    /// order, on this task; the future it answers is spawned and resolves `true` once the batch's effects are
    /// durable, `false` when shut down before.
    pub async fn run<H, F>(
        self,
        mut sources: watch::Receiver<BTreeSet<String>>,
        mut handle: H,
        shutdown: &CancellationToken,
    ) where
        H: FnMut(Vec<Record>) -> F,
        F: Future<Output = bool> + Send + 'static,
    {
        let mut backoff = Backoff::for_backend();
        let mut member: Option<(BTreeSet<String>, Box<dyn TopicConsumer>)> = None;
        let mut in_flight = Lanes::default();
        let mut sources_open = true;
        while !shutdown.is_cancelled() {
            let wanted = sources.borrow_and_update().clone();
            if member.as_ref().is_some_and(|(subscribed, _)| *subscribed != wanted) {
                let (_, mut old) = member.take().expect("a member");
                // Commit what the member made durable before it leaves the group.
                let settled = self.settle(&mut in_flight, Wait::All, old.as_mut(), shutdown).await;
                self.leave(old.as_mut()).await;
                in_flight = Lanes::default();
                if !settled {
                    break;
                }
            }
            if wanted.is_empty() {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    changed = sources.changed(), if sources_open => sources_open = changed.is_ok(),
                }
                if !sources_open {
                    shutdown.cancelled().await;
                }
                continue;
            }
            if member.is_none() {
                match self.join(&wanted).await {
                    Ok(joined) => {
                        info!(source = self.name, topics = ?wanted, group = %self.group, "consuming");
                        self.health.joined.store(true, Ordering::Relaxed);
                        member = Some((wanted, joined));
                    }
                    Err((kind, error)) => {
                        self.failed(kind, error);
                        if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                            break;
                        }
                        continue;
                    }
                }
            }
            let Some((subscribed, active)) = member.as_mut() else { continue };
            let polled = tokio::select! {
                () = shutdown.cancelled() => break,
                polled = active.poll(self.batch_size, in_flight.poll_timeout(self.poll_timeout)) => polled,
            };
            self.health.assigned.store(active.assigned(), Ordering::Relaxed);
            let batch = match polled {
                Ok(batch) => batch,
                Err(error) => {
                    self.failed("poll", error.to_string());
                    if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                        break;
                    }
                    continue;
                }
            };
            backoff.reset();
            self.health.ok();
            if batch.is_empty() {
                // Idle: commit what finished now, not at the next record.
                if !self.settle(&mut in_flight, Wait::Idle, active.as_mut(), shutdown).await {
                    break;
                }
                continue;
            }
            if *sources.borrow() != *subscribed {
                // The set changed while this batch was read: left uncommitted, the next member reads it again
                // under the new set instead of passing over it.
                continue;
            }
            debug!(source = self.name, records = batch.len(), "polled");
            self.spawn(&mut in_flight, batch, &mut handle, active.as_mut()).await;
            if !self.settle(&mut in_flight, Wait::Window, active.as_mut(), shutdown).await {
                break; // A batch was not made durable: it and the later ones are read again.
            }
        }
        if let Some((_, mut active)) = member {
            // Bounded: the backend may be why the process stops. What is not committed is read again.
            let never = CancellationToken::new();
            let drain = self.settle(&mut in_flight, Wait::All, active.as_mut(), &never);
            if tokio::time::timeout(DRAIN_GRACE, drain).await.is_err() {
                warn!(source = self.name, "could not commit the last durable batches in time; they will be read again");
            }
            self.leave(active.as_mut()).await;
        }
        info!(source = self.name, "stopped consuming");
    }

    /// Creates what is missing (when asked to) and joins the group for `topics`.
    async fn join(&self, topics: &BTreeSet<String>) -> Result<Box<dyn TopicConsumer>, (&'static str, String)> {
        if let Some(known) = &self.create_missing {
            known.ensure(self.topics.as_ref(), topics).await.map_err(|e| ("create_topic", e.to_string()))?;
        }
        let config =
            ConsumerConfig { group: self.group.clone(), topics: topics.iter().cloned().collect(), start: self.start };
        self.topics.consumer(config).await.map_err(|e| ("subscribe", e.to_string()))
    }

    async fn leave(&self, member: &mut dyn TopicConsumer) {
        self.health.joined.store(false, Ordering::Relaxed);
        if let Err(error) = member.close().await {
            debug!(source = self.name, %error, "leaving the group failed");
        }
    }

    fn failed(&self, kind: &'static str, error: String) {
        (self.on_error)(kind);
        warn!(source = self.name, kind, %error, "consuming failed; retrying");
        self.health.failed(error);
    }

    /// Hands `batch` to the handler: whole, or per partition behind that partition's previous batch (pausing a
    /// partition whose lane is full).
    async fn spawn<H, F>(&self, lanes: &mut Lanes, batch: Vec<Record>, handle: &mut H, member: &mut dyn TopicConsumer)
    where
        H: FnMut(Vec<Record>) -> F,
        F: Future<Output = bool> + Send + 'static,
    {
        if !self.per_partition {
            let lane = lanes.lanes.entry(None).or_default();
            lane.in_flight.push_back(launch(batch, None, handle));
            return;
        }
        let mut parts: BTreeMap<(String, i32), Vec<Record>> = BTreeMap::new();
        for record in batch {
            parts.entry((record.topic.clone(), record.partition)).or_default().push(record);
        }
        for (key, part) in parts {
            let lane = lanes.lanes.entry(Some(key.clone())).or_default();
            let after = lane.in_flight.back().map(|previous| previous.durable.clone());
            lane.in_flight.push_back(launch(part, after, handle));
            if lane.in_flight.len() >= self.window && !lane.paused {
                match member.pause(&key.0, key.1).await {
                    Ok(()) => lane.paused = true,
                    Err(error) => warn!(source = self.name, %error, partition = key.1, "pausing a partition failed"),
                }
            }
        }
    }

    /// Takes the durable batches at the front of each lane, waiting for them as `wait` says (per partition only
    /// before the member leaves: a busy partition must not hold back the others), commits their offsets at
    /// once, and resumes the partitions whose lanes have room again. False when a batch was not made durable:
    /// nothing from it on is committed.
    async fn settle(
        &self,
        lanes: &mut Lanes,
        wait: Wait,
        member: &mut dyn TopicConsumer,
        shutdown: &CancellationToken,
    ) -> bool {
        let mut done = Vec::new();
        let mut durable = true;
        for (key, lane) in &mut lanes.lanes {
            while let Some(front) = lane.in_flight.front() {
                let waits = match wait {
                    Wait::All => true,
                    Wait::Idle => !self.per_partition,
                    Wait::Window => !self.per_partition && lane.in_flight.len() >= self.window,
                };
                if !waits && !front.task.is_finished() {
                    break;
                }
                let InFlight { task, positions, .. } = lane.in_flight.pop_front().expect("a front");
                match task.await {
                    Ok(true) => done.extend(positions),
                    Ok(false) => {
                        durable = false;
                        break;
                    }
                    Err(error) => {
                        warn!(source = self.name, %error, "a batch task failed; stopping so the batch is read again");
                        shutdown.cancel();
                        durable = false;
                        break;
                    }
                }
            }
            if !durable {
                break;
            }
            if let (Some((topic, partition)), true) = (key, lane.paused && lane.in_flight.len() < self.window) {
                match member.resume(topic, *partition).await {
                    Ok(()) => lane.paused = false,
                    Err(error) => warn!(source = self.name, %error, partition, "resuming a partition failed"),
                }
            }
        }
        if !durable {
            // Nothing after a batch that is not durable may be committed past it.
            lanes.lanes.clear();
        }
        if done.is_empty() {
            return durable;
        }
        let positions = merge_positions(done);
        // Marked too: a member that loses the partitions before the commit succeeds commits them itself.
        member.mark(&positions);
        let mut backoff = Backoff::for_backend();
        loop {
            match member.commit(&positions).await {
                Ok(()) => {
                    debug!(source = self.name, ?positions, "committed");
                    return durable;
                }
                Err(error) => {
                    self.failed("commit", error.to_string());
                    if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                        return false;
                    }
                }
            }
        }
    }
}

/// Spawns the handler's future for `records`, started only once `after` (the previous batch of its partition)
/// is durable.
fn launch<H, F>(records: Vec<Record>, after: Option<Shared<oneshot::Receiver<()>>>, handle: &mut H) -> InFlight
where
    H: FnMut(Vec<Record>) -> F,
    F: Future<Output = bool> + Send + 'static,
{
    let positions = next_positions(&records);
    let (durable_tx, durable_rx) = oneshot::channel();
    let work = handle(records);
    let task = tokio::spawn(async move {
        if let Some(previous) = after {
            if previous.await.is_err() {
                return false; // The previous batch was not made durable: this one must not run before it.
            }
        }
        let durable = work.await;
        if durable {
            let _ = durable_tx.send(());
        }
        durable
    });
    InFlight { task, positions, durable: durable_rx.shared() }
}

/// For [`watch::Sender::send_if_modified`]: replaces `current` by `next` when they differ; answers whether it
/// did, so receivers wake only on a change.
pub fn replace_if_changed<T: PartialEq>(current: &mut T, next: T) -> bool {
    if *current == next {
        return false;
    }
    *current = next;
    true
}
