//! [`Runner`]: the executor. It runs v1 rules and released v2 flows, both compiled to flow plans, from one
//! consumer. Its tasks share its state until shutdown:
//!
//! - the reloaders: every runnable flow (released, enabled, `valid`) compiled, and every enabled rule compiled
//!   ([`RuleSet`]), on the admin API's change signal (`flowhost.config.changed`) and every
//!   `engine.reload_interval_ms`;
//! - the source loop: one [`SourceConsumer`] in the consumer group `engine.group_id` over the source topics of
//!   the rules and the flows (nothing is consumed until both are loaded once). Each batch goes through the
//!   rules' plans, recorded in no run (their outputs published, as v1 always did: `crate::rules`) and starts,
//!   for each record and each flow its topic and event type start, a run (its id derived from the flow and the
//!   record, so a redelivered record finds its run and starts nothing again), advanced as far as it goes in
//!   memory, then made durable (outputs, completion events, dead letters, the run). The batch's offsets are
//!   committed once both are durable;
//! - the scheduler: runs whose pending steps are due (retries after their backoff, replays), each claimed for
//!   a lease so no two nodes advance it at once, advanced and made durable the same way;
//! - the service replies, on a subject and a topic.
//!
//! A missing Kafka retarget topic of a flow stops the consumption of that flow's source topic, for rules too (it
//! fails closed: nothing is consumed, so nothing is lost); `/ready` names the topic and
//! `flowhost_flow_retarget_topics_missing` counts it until it exists.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::EngineConfig;
use flowhost_core::backoff::{until_done, Backoff};
use flowhost_core::clock::sleep_or_shutdown;
use flowhost_core::collections::{CONFIG_CHANGED_SUBJECT, FLOW_RUNS};
use flowhost_core::digest::iso_utc;
use flowhost_core::envelope::Event;
use flowhost_core::ports::{KnownTopics, Ports, Query, Record, Wakeups};
use flowhost_core::source::{replace_if_changed, SourceConsumer, SourceHealth};
use flowhost_flows::{Dependencies, Flows};
use futures::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::effects::Durability;
use crate::execute::{
    run_completion, start, take_due, Effects, Executor, Outbound, ServiceCalls, REPLY_SUBJECT, REPLY_TOPIC,
};
use crate::ids;
use crate::model::{Run, RunStatus, SourceRef};
use crate::nodes::{NativeNodes, NodeKinds};
use crate::plan::{FlowPlan, Plans};
use crate::reply::{accept, DUE_SUBJECT};
use crate::rules::delivery::Delivery;
use crate::rules::{EngineMetrics, ExpressionMemo, RuleSet};
use crate::store::Runs;
use crate::RunMetrics;

/// Runs advanced at once by one task (their actions run concurrently).
const CONCURRENCY: usize = 16;
/// Batches whose rule outputs and runs may be in flight at once: processing the next batch overlaps the
/// durability of the previous ones; offsets are still committed in order, each only after its batch and every
/// earlier one is durable (see `flowhost_core::source`).
const PIPELINE_DEPTH: usize = 4;
/// How long a node holds a run it advances from its pending steps.
const LEASE: Duration = Duration::from_secs(60);
/// Runs the scheduler takes per round.
const DUE_PER_ROUND: u64 = 64;

/// What readiness reads: rules and plans loaded, which retarget topics are missing, whether consuming fails.
#[derive(Debug, Default)]
pub struct RunnerStatus {
    loaded: std::sync::atomic::AtomicBool,
    rules_loaded: std::sync::atomic::AtomicBool,
    missing: Mutex<Vec<(String, String)>>,
    sources: std::sync::OnceLock<Arc<SourceHealth>>,
    /// Why the flows' former offsets are not adopted yet (see [`crate::group`]).
    adopting: Mutex<Option<String>>,
}

impl RunnerStatus {
    /// `Err` until the first rule set loaded.
    pub fn check_rules(&self) -> Result<(), String> {
        match self.rules_loaded.load(std::sync::atomic::Ordering::Acquire) {
            true => Ok(()),
            false => Err("no rule set loaded yet".to_owned()),
        }
    }

    /// `Err` while the last attempt to consume the source topics failed.
    pub fn check_sources(&self) -> Result<(), String> {
        if let Some(error) = self.adopting.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(error);
        }
        match self.sources.get().and_then(|health| health.error()) {
            None => Ok(()),
            Some(error) => Err(format!("consuming the source topics fails: {error}")),
        }
    }

    /// `Err` until the first plan load, while a retarget topic is missing, or while the source fails.
    pub fn check(&self) -> Result<(), String> {
        if !self.loaded.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("released flows not loaded yet".to_owned());
        }
        let missing = self.missing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((flow, topic)) = missing.first() {
            return Err(format!(
                "flow {flow:?}: Kafka retarget topic {topic:?} does not exist; its source topic is not consumed"
            ));
        }
        Ok(())
    }
}

/// Settings of the runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub engine: EngineConfig,
    /// Partitions of topics the runner creates (outputs, completion events).
    pub topic_partitions: i32,
    /// How often the scheduler looks for due steps (a reply wakes it at once).
    pub poll_interval: Duration,
    /// The API's public base URL, where external services post replies.
    pub reply_url_base: String,
    /// How long a reply taken once is remembered in the cache (`engine.dedup_ttl_ms`; `None`: off).
    pub reply_dedup: Option<Duration>,
    /// The admin API's token, sent to this deployment's own service routes (`/v2/<service>/inbound`).
    pub admin_token: Option<flowhost_core::config::Secret>,
    /// Where HTTP segments may go (`FLOWHOST_EGRESS_*`).
    pub egress: flowhost_egress::EgressPolicy,
}

/// Runs rules and released flows (see the module documentation).
pub struct Runner {
    ports: Ports,
    config: RunnerConfig,
    services: Arc<dyn ServiceCalls>,
    nodes: Arc<dyn NodeKinds>,
    metrics: Arc<RunMetrics>,
    rule_metrics: Arc<EngineMetrics>,
    status: Arc<RunnerStatus>,
}

impl Runner {
    /// `metrics`: the flows' (`flowhost_flow_*`); `rule_metrics`: the rules' (`flowhost_engine_*`).
    pub fn new(
        ports: Ports,
        config: RunnerConfig,
        services: Arc<dyn ServiceCalls>,
        metrics: Arc<RunMetrics>,
        rule_metrics: Arc<EngineMetrics>,
    ) -> Runner {
        let nodes = Arc::new(NativeNodes);
        Runner { ports, config, services, nodes, metrics, rule_metrics, status: Arc::default() }
    }

    /// A runner of its own: no component store, no reply endpoint, default egress, unregistered metrics (see
    /// [`Runner::rule_metrics`]); what benchmarks and tests embed.
    pub fn standalone(ports: Ports, engine: EngineConfig, topic_partitions: i32) -> Runner {
        let egress = flowhost_egress::EgressPolicy::default();
        let services =
            Arc::new(crate::Services::new(None, ports.subjects.clone(), egress.clone(), ports.signing.clone()));
        let config = RunnerConfig {
            poll_interval: Duration::from_millis(engine.flows_poll_interval_ms),
            engine,
            topic_partitions,
            reply_url_base: "http://127.0.0.1:0".to_owned(),
            reply_dedup: None,
            admin_token: None,
            egress,
        };
        let metrics = Arc::new(RunMetrics::unregistered());
        Runner::new(ports, config, services, metrics, Arc::new(EngineMetrics::unregistered()))
    }

    /// The rules' metrics (`flowhost_engine_*`).
    pub fn rule_metrics(&self) -> Arc<EngineMetrics> {
        self.rule_metrics.clone()
    }

    /// Evaluates the nodes of rules and flows with `nodes` instead of natively (the role's choice by
    /// `engine.node_kinds`; plugin node kinds need a component store).
    pub fn with_nodes(mut self, nodes: Arc<dyn NodeKinds>) -> Runner {
        self.nodes = nodes;
        self
    }

    pub fn status(&self) -> Arc<RunnerStatus> {
        self.status.clone()
    }

    /// Runs the tasks until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let runs = Runs::new(&self.ports).keeping(self.config.engine.runs.node_payloads);
        if let Err(error) = runs.ensure_indexes().await {
            warn!(%error, "could not create the run indexes; queries still work, more slowly");
        }
        let legacy_ids_until_ms = legacy_ids_until(&self.ports).await;
        let (plans_tx, plans_rx) = watch::channel(Arc::new(Plans::default()));
        let (rules_tx, rules_rx) = watch::channel(Arc::new(RuleSet::default()));
        let known = Arc::new(KnownTopics::new(self.config.topic_partitions));
        let delivery = Arc::new(Delivery::new(
            self.ports.topics.clone(),
            known.clone(),
            self.nodes.clone(),
            self.rule_metrics.clone(),
            &self.config.engine,
            rules_rx,
        ));
        let shared = Arc::new(Shared {
            delivery,
            durability: Durability {
                ports: self.ports.clone(),
                runs: runs.clone(),
                known,
                completions_topic: self.config.engine.completions_topic.clone(),
                metrics: self.metrics.clone(),
                egress: flowhost_egress::Egress::new(self.config.egress.clone(), Duration::from_secs(10)),
                own: reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .unwrap_or_else(|_| reqwest::Client::new()),
                own_base_url: self.config.reply_url_base.trim_end_matches('/').to_owned(),
                admin_token: self.config.admin_token.clone(),
            },
            outbound: Outbound {
                reply_timeout: Duration::from_millis(self.config.engine.reply_timeout_ms),
                reply_url_base: self.config.reply_url_base.clone(),
            },
            ports: self.ports,
            config: self.config,
            services: self.services,
            nodes: self.nodes,
            metrics: self.metrics,
            rule_metrics: self.rule_metrics,
            status: self.status,
            runs,
            older: Mutex::new(HashMap::new()),
            legacy_ids_until_ms,
        });
        let (topics_tx, topics_rx) = watch::channel(BTreeSet::new());
        let sources = Arc::new(SourceTopics { all: topics_tx, parts: Mutex::default() });
        let reloader = tokio::spawn(shared.clone().reload_loop(plans_tx, sources.clone(), shutdown.clone()));
        let rule_reloader = tokio::spawn(shared.clone().reload_rules(rules_tx, sources, shutdown.clone()));
        let scheduler = tokio::spawn(shared.clone().schedule_loop(plans_rx.clone(), shutdown.clone()));
        let nats_replies = tokio::spawn(shared.clone().subject_replies(shutdown.clone()));
        let kafka_replies = tokio::spawn(shared.clone().topic_replies(shutdown.clone()));
        shared.source_loop(plans_rx, topics_rx, &shutdown).await;
        let _ = reloader.await;
        let _ = rule_reloader.await;
        let _ = scheduler.await;
        let _ = nats_replies.await;
        let _ = kafka_replies.await;
        info!("executor stopped");
    }
}

/// How long after a start records are checked for runs under their earlier ids: the uncommitted records of an
/// upgrade (including one node after another) are consumed again well within it.
const LEGACY_ID_WINDOW_MS: i64 = 60 * 60 * 1000;

/// Until when (record timestamps) the redelivery check also looks for earlier-build run ids: an hour past now
/// when the store holds runs, none for an empty store (a fresh deployment has no earlier runs), and an hour past
/// now when the store cannot be asked (erring towards the check, which costs only lookups).
async fn legacy_ids_until(ports: &Ports) -> i64 {
    let one = Query::new().limit(1);
    match ports.documents.query(FLOW_RUNS, &one).await {
        Ok(page) if page.items.is_empty() => i64::MIN,
        _ => ports.clock.now_ms().saturating_add(LEGACY_ID_WINDOW_MS),
    }
}

/// The source topics of the rules and of the flows, and their union to consume: published once both are loaded,
/// without the topics a flow blocks (a missing retarget topic).
struct SourceTopics {
    all: watch::Sender<BTreeSet<String>>,
    parts: Mutex<SourceParts>,
}

#[derive(Default)]
struct SourceParts {
    rules: Option<BTreeSet<String>>,
    flows: Option<(BTreeSet<String>, BTreeSet<String>)>,
}

impl SourceTopics {
    fn rules(&self, topics: BTreeSet<String>) {
        let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.rules = Some(topics);
        self.publish(&parts);
    }

    /// `topics`: what the flows read; `blocked`: what no one may read.
    fn flows(&self, topics: BTreeSet<String>, blocked: BTreeSet<String>) {
        let mut parts = self.parts.lock().unwrap_or_else(|p| p.into_inner());
        parts.flows = Some((topics, blocked));
        self.publish(&parts);
    }

    fn publish(&self, parts: &SourceParts) {
        let (Some(rules), Some((flows, blocked))) = (&parts.rules, &parts.flows) else { return };
        let union: BTreeSet<String> = rules.union(flows).filter(|topic| !blocked.contains(*topic)).cloned().collect();
        self.all.send_if_modified(|current| replace_if_changed(current, union));
    }
}

struct Shared {
    ports: Ports,
    config: RunnerConfig,
    services: Arc<dyn ServiceCalls>,
    nodes: Arc<dyn NodeKinds>,
    metrics: Arc<RunMetrics>,
    rule_metrics: Arc<EngineMetrics>,
    /// The rules' half of a batch: processing and publishing.
    delivery: Arc<Delivery>,
    status: Arc<RunnerStatus>,
    runs: Runs,
    durability: Durability,
    outbound: Outbound,
    /// Plans of versions other than the loaded ones (runs that started before a re-release), by flow and version.
    older: Mutex<HashMap<(String, u64), Arc<FlowPlan>>>,
    /// Records stamped before this time may have started runs under the ids of builds before time-ordered run
    /// ids ([`ids::legacy_run_id`]); the redelivery check looks for those too (see [`legacy_ids_until`]).
    legacy_ids_until_ms: i64,
}

impl Shared {
    fn executor(&self) -> Executor<'_> {
        Executor {
            ports: &self.ports,
            services: self.services.as_ref(),
            nodes: self.nodes.as_ref(),
            retry: &self.config.engine.retry,
            metrics: &self.metrics,
            outbound: &self.outbound,
        }
    }

    async fn reload_loop(
        self: Arc<Self>,
        plans: watch::Sender<Arc<Plans>>,
        topics: Arc<SourceTopics>,
        shutdown: CancellationToken,
    ) {
        let interval = Duration::from_millis(self.config.engine.reload_interval_ms);
        let mut wakeups = Wakeups::new(self.ports.subjects.as_ref(), CONFIG_CHANGED_SUBJECT, interval).await;
        while wakeups.next(&shutdown).await {
            match Plans::load(&self.ports).await {
                Ok(loaded) => {
                    let before = self.status.missing.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    if loaded.missing_topics != before {
                        for (flow, topic) in &loaded.missing_topics {
                            warn!(%flow, %topic, "a Kafka retarget topic is missing; the flow's source topic is not consumed");
                        }
                        if loaded.missing_topics.is_empty() {
                            info!("every Kafka retarget topic exists; the flows' sources are consumed");
                        }
                    }
                    let missing = loaded.missing_topics.clone();
                    self.metrics.plans_loaded.set(loaded.len() as i64);
                    self.older.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    let (sources, blocked) = (loaded.source_topics(), loaded.blocked_topics());
                    plans.send_replace(Arc::new(loaded));
                    // The consumer's topic set changes before readiness and the gauge say so: a record polled
                    // after `/ready` reports a missing topic is then never read under the old set (the source
                    // consumer drops a batch read while its set changed).
                    topics.flows(sources, blocked);
                    self.metrics.retarget_topics_missing.set(missing.len() as i64);
                    *self.status.missing.lock().unwrap_or_else(|p| p.into_inner()) = missing;
                    self.status.loaded.store(true, std::sync::atomic::Ordering::Release);
                }
                Err(error) => {
                    self.metrics.errors.with_label_values(&["reload"]).inc();
                    warn!(%error, "loading released flows failed; keeping the previous ones");
                }
            }
        }
    }

    /// Reloads the rule set on every tick and on every change signal; keeps the last good set on failure.
    async fn reload_rules(
        self: Arc<Self>,
        rules: watch::Sender<Arc<RuleSet>>,
        topics: Arc<SourceTopics>,
        shutdown: CancellationToken,
    ) {
        let metrics = &self.rule_metrics;
        let interval = Duration::from_millis(self.config.engine.reload_interval_ms);
        let mut memo = ExpressionMemo::default();
        let mut wakeups = Wakeups::new(self.ports.subjects.as_ref(), CONFIG_CHANGED_SUBJECT, interval).await;
        while wakeups.next(&shutdown).await {
            match RuleSet::load(self.ports.documents.as_ref(), &mut memo).await {
                Ok(set) => {
                    metrics.rule_cache_reloads.inc();
                    let loaded = set.len() as i64;
                    for (rule_id, problem) in set.problems() {
                        metrics.errors.with_label_values(&["rule_compile"]).inc();
                        warn!(rule_id, problem, "rule is inactive: its expression does not compile");
                    }
                    let sources = set.source_topics();
                    rules.send_replace(Arc::new(set));
                    // Set once the rules are live: a reader of the gauge can rely on them.
                    metrics.rules_loaded.set(loaded);
                    topics.rules(sources);
                    self.status.rules_loaded.store(true, std::sync::atomic::Ordering::Release);
                }
                Err(error) => {
                    metrics.errors.with_label_values(&["reload"]).inc();
                    warn!(%error, "rule reload failed; keeping the previous rules");
                }
            }
        }
    }

    /// The plan a run of `flow_id` at `version` follows.
    async fn plan_of(&self, plans: &Plans, flow_id: &str, version: u64) -> Option<Arc<FlowPlan>> {
        if let Some(plan) = plans.flow(flow_id).filter(|p| p.version == version) {
            return Some(plan.clone());
        }
        let key = (flow_id.to_owned(), version);
        if let Some(plan) = self.older.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Some(plan.clone());
        }
        let flows = Flows::new(self.ports.clone());
        let compiled = async {
            let released = flows.version(flow_id, version).await.map_err(|e| e.to_string())?;
            let deps = Dependencies::load(&self.ports).await.map_err(|e| e.to_string())?;
            FlowPlan::compile(flow_id, &released, &deps)
        };
        match compiled.await {
            Ok(plan) => {
                let plan = Arc::new(plan);
                self.older.lock().unwrap_or_else(|p| p.into_inner()).insert(key, plan.clone());
                Some(plan)
            }
            Err(problem) => {
                warn!(flow = flow_id, version, %problem, "cannot load the version a run follows");
                None
            }
        }
    }

    /// Consumes the source topics of the rules and the flows in `engine.group_id` (see `flowhost_core::source`);
    /// each batch goes through the rules ([`Delivery::handle`]) and starts its runs ([`Shared::start_batch`]) at
    /// once, and is durable when both are.
    async fn source_loop(
        self: &Arc<Self>,
        plans: watch::Receiver<Arc<Plans>>,
        topics: watch::Receiver<BTreeSet<String>>,
        shutdown: &CancellationToken,
    ) {
        let metrics = self.rule_metrics.clone();
        let source = SourceConsumer::new("executor", self.ports.topics.clone(), self.config.engine.group_id.clone())
            .batch_size(self.config.engine.batch_size)
            .window(PIPELINE_DEPTH)
            .creating_missing(self.durability.known.clone())
            .counting_errors(Arc::new(move |kind| metrics.errors.with_label_values(&[kind]).inc()));
        let _ = self.status.sources.set(source.health());
        if !self.adopt_flow_offsets(&plans, shutdown).await {
            return;
        }
        let handle = |batch: Vec<Record>| {
            let (shared, plans, shutdown) = (self.clone(), plans.borrow().clone(), shutdown.clone());
            async move {
                let batch = Arc::new(batch);
                let rules = shared.delivery.clone().handle(&batch, shutdown.clone());
                let runs = shared.clone().start_batch(plans, batch.clone(), shutdown.clone());
                let (rules, runs) = tokio::join!(rules, runs);
                rules && runs
            }
        };
        source.run(topics, handle, shutdown).await;
    }

    /// Once rules and flows are loaded, and before the first join: the flows' former offsets adopted (see
    /// [`crate::group`]); false when shut down first.
    async fn adopt_flow_offsets(&self, plans: &watch::Receiver<Arc<Plans>>, shutdown: &CancellationToken) -> bool {
        let loaded = |status: &RunnerStatus| {
            status.loaded.load(std::sync::atomic::Ordering::Acquire)
                && status.rules_loaded.load(std::sync::atomic::Ordering::Acquire)
        };
        while !loaded(&self.status) {
            if !sleep_or_shutdown(Duration::from_millis(20), shutdown).await {
                return false;
            }
        }
        let topics = plans.borrow().flow_topics();
        let report = |error: Option<String>| *self.status.adopting.lock().unwrap_or_else(|p| p.into_inner()) = error;
        crate::group::adopt_flow_offsets(&self.ports, &self.config.engine.group_id, &topics, &report, shutdown).await
    }

    /// Starts and advances the runs of a batch and makes them durable; false when shut down first. The runs
    /// are advanced on as many tasks as the runtime has workers.
    async fn start_batch(
        self: Arc<Self>,
        plans: Arc<Plans>,
        batch: Arc<Vec<Record>>,
        shutdown: CancellationToken,
    ) -> bool {
        let mut starts: Vec<(usize, Event, Arc<FlowPlan>, String)> = Vec::new();
        // Records on topics only rules read are not the flows'.
        for (index, record) in batch.iter().enumerate().filter(|(_, record)| plans.reads(&record.topic)) {
            let Ok(event) = Event::parse(&record.value) else {
                debug!(topic = %record.topic, offset = record.offset, "a record that is not an event starts no run");
                continue;
            };
            // Each flow's run gets the event; the last one takes it without a copy (most records start one).
            let Some((last, others)) = plans.matching(&record.topic, &event.event_type).split_last() else {
                continue;
            };
            for plan in others {
                starts.push((index, event.clone(), plan.clone(), ids::run_id(&plan.flow_id, record)));
            }
            starts.push((index, event, last.clone(), ids::run_id(&last.flow_id, record)));
        }
        if starts.is_empty() {
            return true;
        }
        let mut ids: Vec<String> = starts.iter().map(|(_, _, _, id)| id.clone()).collect();
        // A record an earlier build may have started runs for: its runs under their earlier ids count too.
        let legacy: Vec<Option<String>> = starts
            .iter()
            .map(|(index, _, plan, _)| {
                let record = &batch[*index];
                (record.timestamp_ms < self.legacy_ids_until_ms).then(|| ids::legacy_run_id(&plan.flow_id, record))
            })
            .collect();
        ids.extend(legacy.iter().flatten().cloned());
        let existing = loop {
            match self.runs.existing(&ids).await {
                Ok(existing) => break existing,
                Err(error) => {
                    self.metrics.errors.with_label_values(&["store"]).inc();
                    warn!(%error, "cannot tell which runs exist; retrying");
                    if !sleep_or_shutdown(Duration::from_millis(500), &shutdown).await {
                        return false;
                    }
                }
            }
        };
        let mut legacy = legacy.into_iter();
        starts.retain(|(_, _, _, id)| {
            let earlier = legacy.next().flatten();
            !existing.contains(id) && !earlier.is_some_and(|earlier| existing.contains(&earlier))
        });
        let workers = tokio::runtime::Handle::current().metrics().num_workers().max(1);
        let per_task = starts.len().div_ceil(workers).max(1);
        let mut tasks = Vec::new();
        while !starts.is_empty() {
            let chunk: Vec<_> = starts.drain(..per_task.min(starts.len())).collect();
            let (shared, batch) = (self.clone(), batch.clone());
            tasks.push(tokio::spawn(async move { shared.start_runs(&batch, chunk).await }));
        }
        let mut runs = Vec::new();
        let mut effects = Effects::default();
        for task in tasks {
            match task.await {
                Ok((chunk_runs, chunk_effects)) => {
                    runs.extend(chunk_runs);
                    effects.extend(chunk_effects);
                }
                Err(error) => {
                    warn!(%error, "advancing runs failed; the batch is consumed again");
                    shutdown.cancel();
                    return false;
                }
            }
        }
        self.durability.make_durable(&runs, effects, &shutdown).await
    }

    /// Starts and advances the runs of `chunk` (records of `batch` by index); answers them with their effects,
    /// each run's completion event included.
    async fn start_runs(
        &self,
        batch: &[Record],
        chunk: Vec<(usize, Event, Arc<FlowPlan>, String)>,
    ) -> (Vec<Run>, Effects) {
        let executor = self.executor();
        // Futures made in a loop, not in a stream closure: a closure borrowing `executor` would make the
        // future's lifetimes higher-ranked, which the spawned task cannot prove `Send`.
        let mut pending = Vec::with_capacity(chunk.len());
        for (index, event, plan, run_id) in chunk {
            pending.push(self.start_run(&executor, &batch[index], event, plan, run_id));
        }
        let advanced: Vec<(Run, Effects)> =
            futures::stream::iter(pending).buffer_unordered(CONCURRENCY).collect().await;
        let mut runs = Vec::with_capacity(advanced.len());
        let mut effects = Effects::default();
        for (run, run_effects) in advanced {
            self.finished(&run, None);
            effects.completions.push(run_completion(&run));
            effects.extend(run_effects);
            runs.push(run);
        }
        (runs, effects)
    }

    /// Starts the run of `plan` for `record` and advances it as far as it goes.
    async fn start_run(
        &self,
        executor: &Executor<'_>,
        record: &Record,
        event: Event,
        plan: Arc<FlowPlan>,
        run_id: String,
    ) -> (Run, Effects) {
        let now = self.ports.clock.now_ms();
        let trace_id = ids::trace_id(record);
        let span = info_span!("run", %trace_id, %run_id, flow = %plan.flow_id);
        let mut run = Run {
            run_id,
            flow_id: plan.flow_id.clone(),
            version: plan.version,
            status: RunStatus::Waiting,
            trace_id,
            tenant_id: event.tenant_id.clone(),
            source: SourceRef { topic: record.topic.clone(), partition: record.partition, offset: record.offset },
            payloads: vec![event.fields],
            started_at: iso_utc(now),
            started_ms: now,
            updated_ms: now,
            finished_at: None,
            nodes: Vec::new(),
            pending: Vec::new(),
            next_due_ms: None,
            lease_until_ms: 0,
            dead_letters: Vec::new(),
            replay_of: None,
            node_payloads_dropped: false,
        };
        let mut effects = Effects::default();
        executor.advance(&plan, &mut run, start(&plan), &mut effects).instrument(span).await;
        self.metrics.started.inc();
        (run, effects)
    }

    /// Counts a run that ended (and was not ended before).
    fn finished(&self, run: &Run, before: Option<RunStatus>) {
        if run.status != RunStatus::Waiting && before != Some(run.status) {
            self.metrics.finished.with_label_values(&[run.status.as_str()]).inc();
        }
    }

    async fn schedule_loop(self: Arc<Self>, plans: watch::Receiver<Arc<Plans>>, shutdown: CancellationToken) {
        let mut wakeups = Wakeups::new(self.ports.subjects.as_ref(), DUE_SUBJECT, self.config.poll_interval).await;
        while wakeups.next(&shutdown).await {
            let current = plans.borrow().clone();
            loop {
                match self.schedule_round(&current, &shutdown).await {
                    Ok(0) => break,
                    Ok(_) if shutdown.is_cancelled() => return,
                    Ok(_) => continue, // More may be due.
                    Err(error) => {
                        self.metrics.errors.with_label_values(&["schedule"]).inc();
                        warn!(%error, "advancing due runs failed; retrying on the next tick");
                        break;
                    }
                }
            }
        }
    }

    /// Advances the runs whose steps are due; answers how many it advanced.
    async fn schedule_round(&self, plans: &Plans, shutdown: &CancellationToken) -> Result<usize, crate::RunsError> {
        let now = self.ports.clock.now_ms();
        let due = self.runs.due(now, DUE_PER_ROUND).await?;
        let mut advanced = 0;
        for candidate in due {
            let lease_until = now + i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX);
            let Some((mut run, version)) = self.runs.claim(&candidate.run_id, now, lease_until).await? else {
                continue; // Another node has it, or it changed.
            };
            let before = run.status;
            let claimed_letters = run.dead_letters.clone();
            let Some(plan) = self.plan_of(plans, &run.flow_id, run.version).await else {
                continue; // Its lease runs out and another round tries again.
            };
            let steps = take_due(&mut run, self.ports.clock.now_ms());
            let span = info_span!("run", trace_id = %run.trace_id, run_id = %run.run_id, flow = %run.flow_id);
            let mut effects = Effects::default();
            self.executor().advance(&plan, &mut run, steps, &mut effects).instrument(span).await;
            run.lease_until_ms = 0;
            if run.status != before {
                effects.completions.push(run_completion(&run));
            }
            let sends = std::mem::take(&mut effects.sends);
            if !self.durability.make_durable(&[], effects, shutdown).await {
                return Ok(advanced);
            }
            if self.runs.replace(&run, version).await?.is_none() {
                // Changed while held (a replay, a reply): the lease kept steps from running twice; store our
                // advance on top of the fresh document.
                self.merge(&run, &claimed_letters).await?;
            }
            self.durability.send(sends).await;
            self.finished(&run, Some(before));
            advanced += 1;
        }
        Ok(advanced)
    }

    /// Stores an advanced run over a fresher stored one: our node records win, the dead letters we added are
    /// added, pending steps are ours plus any the other writer added for nodes we did not touch.
    async fn merge(&self, ours: &Run, claimed_letters: &[String]) -> Result<(), crate::RunsError> {
        for _ in 0..5 {
            let (mut fresh, version) = self.runs.get_versioned(&ours.run_id).await?;
            let touched: BTreeSet<&str> = ours.nodes.iter().map(|n| n.node_id.as_str()).collect();
            for record in &ours.nodes {
                match fresh.nodes.iter_mut().find(|n| n.node_id == record.node_id) {
                    Some(existing) => *existing = record.clone(),
                    None => fresh.nodes.push(record.clone()),
                }
            }
            fresh.pending.retain(|p| !touched.contains(p.node_id.as_str()));
            fresh.pending.extend(ours.pending.iter().cloned());
            for letter in ours.dead_letters.iter().filter(|l| !claimed_letters.contains(l)) {
                if !fresh.dead_letters.contains(letter) {
                    fresh.dead_letters.push(letter.clone());
                }
            }
            fresh.lease_until_ms = 0;
            fresh.settle(self.ports.clock.now_ms());
            if self.runs.replace(&fresh, version).await?.is_some() {
                return Ok(());
            }
        }
        Err(crate::RunsError::Conflict(format!("run {:?} changed on every attempt to store it", ours.run_id)))
    }
}

impl Shared {
    /// Accepts replies published on `triggers.v2.replies` (queue group `<engine.group_id>.replies`: one node of
    /// the deployment takes each), answering a
    /// request with `{"status": "accepted" | "ignored"}` or `{"error"}`.
    async fn subject_replies(self: Arc<Self>, shutdown: CancellationToken) {
        let mut backoff = Backoff::for_backend();
        loop {
            // One queue group per deployment (named after its consumer group): each deployment sharing the NATS
            // server gets every reply once and ignores those of runs it does not have.
            let group = format!("{}.replies", self.config.engine.group_id);
            let mut messages = match self.ports.subjects.queue_subscribe(REPLY_SUBJECT, &group).await {
                Ok(stream) => stream,
                Err(error) => {
                    self.metrics.errors.with_label_values(&["replies"]).inc();
                    warn!(%error, "cannot subscribe to service replies; retrying");
                    if !sleep_or_shutdown(backoff.next_delay(), &shutdown).await {
                        return;
                    }
                    continue;
                }
            };
            backoff.reset();
            loop {
                let message = tokio::select! {
                    () = shutdown.cancelled() => return,
                    message = messages.next() => message,
                };
                let Some(message) = message else { break };
                let signature = message.header(flowhost_core::signing::SIGNATURE_HEADER);
                // A core NATS message is not redelivered: a reply the store could not take is answered with
                // the error, and a request-reply caller sends it again.
                let answer = self
                    .take_signed_reply("nats", signature, &message.payload)
                    .await
                    .unwrap_or_else(|error| serde_json::json!({ "error": error.to_string() }));
                if let Some(reply_to) = message.reply {
                    let answer = answer.to_string().into_bytes();
                    let signed = self.ports.signing.headers(&answer);
                    let _ = self.ports.subjects.respond_with_headers(&reply_to, signed, answer).await;
                }
            }
            warn!("the service reply subscription ended; subscribing again");
        }
    }

    /// Accepts replies on the topic `triggers_v2_replies` (consumer group `<engine.group_id>.replies`),
    /// committing each batch once its replies are recorded: a reply the store cannot take right now is tried
    /// again with backoff (the batch is not committed past it), never dropped.
    async fn topic_replies(self: Arc<Self>, shutdown: CancellationToken) {
        let metrics = self.metrics.clone();
        let source = SourceConsumer::new(
            "service replies",
            self.ports.topics.clone(),
            format!("{}.replies", self.config.engine.group_id),
        )
        .batch_size(100)
        .window(1)
        .creating_missing(self.durability.known.clone())
        .counting_errors(Arc::new(move |_| metrics.errors.with_label_values(&["replies"]).inc()));
        let (_keep, topics) = watch::channel(BTreeSet::from([REPLY_TOPIC.to_owned()]));
        let handle = |batch: Vec<Record>| {
            let (shared, shutdown) = (self.clone(), shutdown.clone());
            async move {
                for record in &batch {
                    let signature = record
                        .header(flowhost_core::signing::SIGNATURE_HEADER)
                        .and_then(|value| std::str::from_utf8(value).ok());
                    let taken = until_done("recording a service reply", Backoff::for_backend(), &shutdown, || async {
                        shared.take_signed_reply("kafka", signature, &record.value).await.map(drop)
                    })
                    .await;
                    if !taken {
                        return false;
                    }
                }
                true
            }
        };
        source.run(topics, handle, &shutdown).await;
    }

    /// [`Shared::take_reply`] once the reply's `signature` verifies (see `flowhost_core::signing`); a reply
    /// without a valid one is refused (counted, logged) and changes nothing.
    async fn take_signed_reply(
        &self,
        channel: &str,
        signature: Option<&str>,
        payload: &[u8],
    ) -> Result<serde_json::Value, crate::RunsError> {
        if let Err(error) = self.ports.signing.verify(signature, payload) {
            self.metrics.replies.with_label_values(&[channel, "refused"]).inc();
            warn!(channel, %error, "a service reply was refused");
            return Ok(serde_json::json!({ "error": error.to_string() }));
        }
        self.take_reply(channel, payload).await
    }

    /// Parses and accepts one reply: what a request-reply caller is told, or the store's failure (the reply may
    /// be taken later; refusals are answers, not errors).
    async fn take_reply(&self, channel: &str, payload: &[u8]) -> Result<serde_json::Value, crate::RunsError> {
        let reply: crate::ReplyEnvelope = match serde_json::from_slice(payload) {
            Ok(reply) => reply,
            Err(error) => {
                self.metrics.replies.with_label_values(&[channel, "refused"]).inc();
                warn!(channel, %error, "a service reply does not parse");
                return Ok(serde_json::json!({ "error": format!("invalid reply: {error}") }));
            }
        };
        match accept(&self.ports, reply, self.config.reply_dedup).await {
            Ok(accepted) => {
                self.metrics.replies.with_label_values(&[channel, accepted.as_str()]).inc();
                Ok(serde_json::json!({ "status": accepted.as_str() }))
            }
            Err(error @ crate::RunsError::Storage(_)) => {
                self.metrics.errors.with_label_values(&["replies"]).inc();
                Err(error)
            }
            Err(error) => {
                self.metrics.replies.with_label_values(&[channel, "refused"]).inc();
                warn!(channel, %error, "a service reply was refused");
                Ok(serde_json::json!({ "error": error.to_string() }))
            }
        }
    }
}
