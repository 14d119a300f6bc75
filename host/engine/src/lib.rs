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

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use delivery::Delivery;
use flowhost_core::backoff::Backoff;
use flowhost_core::clock::sleep_or_shutdown;
use flowhost_core::collections::CONFIG_CHANGED_SUBJECT;
use flowhost_core::config::EngineConfig;
use flowhost_core::ports::{Ports, Record, Wakeups};
use flowhost_core::source::{replace_if_changed, SourceConsumer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

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
        let (topics_tx, topics_rx) = watch::channel(BTreeSet::new());
        let reloader = tokio::spawn(reload_loop(
            self.ports.clone(),
            Duration::from_millis(self.config.reload_interval_ms),
            self.metrics.clone(),
            self.status.clone(),
            (rules_tx, topics_tx),
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
        let metrics = self.metrics.clone();
        let source = SourceConsumer::new("rule engine", self.ports.topics.clone(), self.config.group_id.clone())
            .batch_size(self.config.batch_size)
            .window(PIPELINE_DEPTH)
            .creating_missing(delivery.known.clone())
            .counting_errors(Arc::new(move |kind| metrics.errors.with_label_values(&[kind]).inc()));
        self.status.watch_sources(source.health());
        let handler_shutdown = shutdown.clone();
        let handle = |batch| handle_batch(delivery.clone(), rules_rx.clone(), batch, handler_shutdown.clone());
        source.run(topics_rx, handle, &shutdown).await;
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
    (rules, topics): (watch::Sender<Arc<RuleSet>>, watch::Sender<BTreeSet<String>>),
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
                let sources = set.source_topics();
                rules.send_replace(Arc::new(set));
                topics.send_if_modified(|current| replace_if_changed(current, sources));
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
/// the previous ones; offsets are still committed strictly in order (see `flowhost_core::source`).
const PIPELINE_DEPTH: usize = 4;

/// The handler of one consumed batch: processes it with the freshest rules (again after a backoff while a node
/// kind is unavailable), then publishes its outputs; true once every record is acknowledged.
async fn handle_batch(
    delivery: Arc<Delivery>,
    rules: watch::Receiver<Arc<RuleSet>>,
    mut batch: Vec<Record>,
    shutdown: CancellationToken,
) -> bool {
    let mut backoff = Backoff::for_backend();
    let outcome = loop {
        // The freshest rules, not the ones seen before the poll: a change that landed while waiting applies.
        let set = rules.borrow().clone();
        let (returned, result) = delivery.process(set, batch, 1).await;
        batch = returned;
        match result {
            Ok(outcome) => break outcome,
            Err(failure) => {
                delivery.metrics.errors.with_label_values(&["node_unavailable"]).inc();
                warn!(?failure, "a node kind is unavailable; processing the batch again after a backoff");
                if !sleep_or_shutdown(backoff.next_delay(), &shutdown).await {
                    return false;
                }
            }
        }
    };
    delivery.deliver(outcome, shutdown).await
}
