//! The rule engine: consumes every source topic that has rules, matches records by topic and `event_type`,
//! evaluates each rule's compiled expression, applies tenant overrides and output mappings, publishes to the
//! rule's output topic (or the source's default) and only then commits the consumed offsets.
//!
//! Delivery is at-least-once: a failed publish is retried with backoff and the batch's offsets are committed
//! only after every output is acknowledged, so a crash replays, never drops. Records that are not events go to
//! the invalid-events topic with headers naming their origin, counted and logged, without stopping the partition.

mod delivery;
mod metrics;
mod nodes;
mod process;
mod role;
mod rules;
mod status;

pub use metrics::EngineMetrics;
pub use nodes::WasmNodes;
pub use process::{
    dead_letter, process_batch, process_batch_with, BatchOutcome, Destinations, NativeNodes, NodeFailure, NodeInput,
    NodeKinds, RetryRecord,
};
pub use role::EngineRole;
pub use rules::{CompiledRule, ExpressionMemo, RuleSet};
pub use status::EngineStatus;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use delivery::Delivery;
use flowhost_core::backoff::Backoff;
use flowhost_core::collections::CONFIG_CHANGED_SUBJECT;
use flowhost_core::config::EngineConfig;
use flowhost_core::ports::{
    merge_positions, next_positions, ConsumerConfig, Ports, Position, StartFrom, TopicConsumer, Wakeups,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The engine role. `run` owns two tasks: the rule-cache reloader and the consume/publish loop.
pub struct Engine {
    ports: Ports,
    config: EngineConfig,
    topic_partitions: i32,
    metrics: Arc<EngineMetrics>,
    nodes: Arc<dyn NodeKinds>,
    status: Arc<EngineStatus>,
}

impl Engine {
    /// `topic_partitions`: partitions of source and output topics the engine creates when missing.
    pub fn new(ports: Ports, config: EngineConfig, topic_partitions: i32, metrics: Arc<EngineMetrics>) -> Engine {
        Engine { ports, config, topic_partitions, metrics, nodes: Arc::new(NativeNodes), status: Arc::default() }
    }

    /// What the engine's readiness checks read (rules loaded, source topics consumed).
    pub fn status(&self) -> Arc<EngineStatus> {
        self.status.clone()
    }

    /// Runs rule conditions and output mappings with `nodes` instead of natively.
    pub fn with_nodes(mut self, nodes: Arc<dyn NodeKinds>) -> Engine {
        self.nodes = nodes;
        self
    }

    /// Runs until `shutdown` is cancelled. Backend failures are retried with backoff, never fatal.
    pub async fn run(self, shutdown: CancellationToken) {
        let (rules_tx, rules_rx) = watch::channel(Arc::new(RuleSet::default()));
        let reloader = tokio::spawn(reload_loop(
            self.ports.clone(),
            Duration::from_millis(self.config.reload_interval_ms),
            self.metrics.clone(),
            self.status.clone(),
            rules_tx,
            shutdown.clone(),
        ));
        let delivery = Arc::new(Delivery::new(
            self.ports.topics.clone(),
            self.topic_partitions,
            self.nodes.clone(),
            self.metrics.clone(),
            &self.config,
            rules_rx.clone(),
        ));
        let context =
            LoopContext { ports: &self.ports, config: &self.config, metrics: &self.metrics, status: &self.status };
        consume_loop(context, &delivery, rules_rx, &shutdown).await;
        let _ = reloader.await;
        info!("engine stopped");
    }
}

/// Reloads the rule set on every tick and on every change signal; keeps the last good set on failure.
async fn reload_loop(
    ports: Ports,
    interval: Duration,
    metrics: Arc<EngineMetrics>,
    status: Arc<EngineStatus>,
    rules: watch::Sender<Arc<RuleSet>>,
    shutdown: CancellationToken,
) {
    let mut memo = ExpressionMemo::default();
    let mut wakeups = Wakeups::new(ports.subjects.as_ref(), CONFIG_CHANGED_SUBJECT, interval).await;
    while wakeups.next(&shutdown).await {
        match RuleSet::load(ports.documents.as_ref(), &mut memo).await {
            Ok(set) => {
                metrics.rule_cache_reloads.inc();
                metrics.rules_loaded.set(set.len() as i64);
                for (rule_id, problem) in set.problems() {
                    metrics.errors.with_label_values(&["rule_compile"]).inc();
                    warn!(rule_id, problem, "rule is inactive: its expression does not compile");
                }
                rules.send_replace(Arc::new(set));
                status.rules_loaded();
            }
            Err(error) => {
                metrics.errors.with_label_values(&["reload"]).inc();
                warn!(%error, "rule reload failed; keeping the previous rules");
            }
        }
    }
}

/// Batches whose outputs may be in flight at once. Processing the next batch overlaps the acknowledgement of
/// the previous ones; offsets are still committed strictly in order, each only after its batch and every
/// earlier one is acknowledged.
const PIPELINE_DEPTH: usize = 4;

/// How long a stopping engine waits to commit what was already acknowledged.
const SHUTDOWN_COMMIT_GRACE: Duration = Duration::from_secs(5);

/// A batch being delivered: the task publishing its outputs (true once acknowledged, false on shutdown) and
/// the offsets to commit after it.
struct InFlight {
    delivery: tokio::task::JoinHandle<bool>,
    positions: Vec<Position>,
}

/// What the consume loop reads besides its own state.
struct LoopContext<'a> {
    ports: &'a Ports,
    config: &'a EngineConfig,
    metrics: &'a Arc<EngineMetrics>,
    status: &'a EngineStatus,
}

async fn consume_loop(
    context: LoopContext<'_>,
    delivery: &Arc<Delivery>,
    mut rules: watch::Receiver<Arc<RuleSet>>,
    shutdown: &CancellationToken,
) {
    let LoopContext { ports, config, metrics, status } = context;
    let mut backoff = Backoff::for_backend();
    let mut consumer: Option<(BTreeSet<String>, Box<dyn TopicConsumer>)> = None;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    'main: loop {
        if shutdown.is_cancelled() {
            break;
        }
        let set = rules.borrow_and_update().clone();
        let topics = set.source_topics();
        if consumer.as_ref().is_some_and(|(current, _)| *current != topics) {
            // Commit what the current member delivered before it leaves the group.
            if let Some((_, active)) = consumer.as_mut() {
                if !settle(&mut in_flight, 0, active.as_mut(), metrics, shutdown).await {
                    break 'main;
                }
            }
            consumer = None;
        }
        if topics.is_empty() {
            tokio::select! {
                _ = shutdown.cancelled() => break 'main,
                _ = rules.changed() => continue,
            }
        }
        if consumer.is_none() {
            if let Err(error) = delivery.known.ensure(ports.topics.as_ref(), &topics).await {
                metrics.errors.with_label_values(&["create_topic"]).inc();
                warn!(%error, "cannot create the source topics; retrying");
                status.source_failed(&error);
                sleep_or_shutdown(backoff.next_delay(), shutdown).await;
                continue;
            }
            let request = ConsumerConfig {
                group: config.group_id.clone(),
                topics: topics.iter().cloned().collect(),
                start: StartFrom::Earliest,
            };
            match ports.topics.consumer(request).await {
                Ok(c) => {
                    info!(topics = ?topics, group = %config.group_id, "consuming source topics");
                    consumer = Some((topics, c));
                }
                Err(error) => {
                    metrics.errors.with_label_values(&["subscribe"]).inc();
                    warn!(%error, "cannot join the consumer group; retrying");
                    status.source_failed(&error);
                    sleep_or_shutdown(backoff.next_delay(), shutdown).await;
                    continue;
                }
            }
        }
        let Some((_, active)) = consumer.as_mut() else { continue };
        let batch = tokio::select! {
            _ = shutdown.cancelled() => break 'main,
            polled = active.poll(config.batch_size, Duration::from_millis(200)) => polled,
        };
        let mut batch = match batch {
            Ok(batch) => batch,
            Err(error) => {
                metrics.errors.with_label_values(&["poll"]).inc();
                warn!(%error, "poll failed; retrying");
                status.source_failed(&error);
                sleep_or_shutdown(backoff.next_delay(), shutdown).await;
                continue;
            }
        };
        backoff.reset();
        status.source_ok();
        if batch.is_empty() {
            // Idle: finish what is in flight so its offsets are committed now, not at the next batch.
            if !settle(&mut in_flight, 0, active.as_mut(), metrics, shutdown).await {
                break 'main;
            }
            continue;
        }
        // The freshest rules, not the ones seen before the poll: a change that landed while waiting applies.
        let outcome = loop {
            let set = rules.borrow().clone();
            let (returned, result) = delivery.process(set, batch, 1).await;
            batch = returned;
            match result {
                Ok(outcome) => break outcome,
                Err(failure) => {
                    metrics.errors.with_label_values(&["node_unavailable"]).inc();
                    warn!(?failure, "a node kind is unavailable; processing the batch again after a backoff");
                    if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                        break 'main;
                    }
                }
            }
        };
        let delivery = tokio::spawn(delivery.clone().deliver(outcome, shutdown.clone()));
        in_flight.push_back(InFlight { delivery, positions: next_positions(&batch) });
        if !settle(&mut in_flight, PIPELINE_DEPTH - 1, active.as_mut(), metrics, shutdown).await {
            break 'main;
        }
    }
    // Graceful stop: commit what was acknowledged, so a restart does not replay it. Bounded, because the
    // backend may be the reason for stopping.
    if let Some((_, active)) = consumer.as_mut() {
        let never = CancellationToken::new();
        let drain = settle(&mut in_flight, 0, active.as_mut(), metrics, &never);
        if tokio::time::timeout(SHUTDOWN_COMMIT_GRACE, drain).await.is_err() {
            warn!("could not commit the last acknowledged offsets in time; they will be replayed");
        }
    }
}

/// Waits for the oldest deliveries until at most `keep` remain in flight (and takes any later ones that are
/// already done), then commits the merged offsets once. Returns false when shut down before an
/// acknowledgement: nothing of that batch or later is committed, so all of it is replayed.
async fn settle(
    in_flight: &mut VecDeque<InFlight>,
    keep: usize,
    consumer: &mut dyn TopicConsumer,
    metrics: &EngineMetrics,
    shutdown: &CancellationToken,
) -> bool {
    let mut done: Vec<Position> = Vec::new();
    while let Some(front) = in_flight.front() {
        if in_flight.len() <= keep && !front.delivery.is_finished() {
            break;
        }
        let InFlight { delivery, positions } = in_flight.pop_front().expect("front exists");
        match delivery.await {
            Ok(true) => done.extend(positions),
            Ok(false) => {
                // Not acknowledged (shutdown): no later batch may be committed past it. What was acknowledged
                // before it is still committed below.
                in_flight.clear();
                commit(consumer, done, metrics, shutdown).await;
                return false;
            }
            Err(error) => {
                // A panicking delivery is a defect; its batch and later ones must not be committed.
                warn!(%error, "delivery task failed; stopping so the batch is replayed");
                in_flight.clear();
                shutdown.cancel();
                commit(consumer, done, metrics, shutdown).await;
                return false;
            }
        }
    }
    commit(consumer, done, metrics, shutdown).await
}

/// Commits the furthest of `done` per partition, retrying until it succeeds or `shutdown` fires.
async fn commit(
    consumer: &mut dyn TopicConsumer,
    done: Vec<Position>,
    metrics: &EngineMetrics,
    shutdown: &CancellationToken,
) -> bool {
    if done.is_empty() {
        return true;
    }
    let positions = merge_positions(done);
    let mut backoff = Backoff::for_backend();
    loop {
        match consumer.commit(&positions).await {
            Ok(()) => {
                debug!(?positions, "committed");
                return true;
            }
            Err(error) => {
                metrics.errors.with_label_values(&["commit"]).inc();
                warn!(%error, "commit failed; retrying (the batch may be redelivered)");
                if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                    return false;
                }
            }
        }
    }
}

/// Sleeps unless shut down first; returns whether the engine should go on.
pub(crate) async fn sleep_or_shutdown(delay: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}
