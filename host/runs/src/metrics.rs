//! The runs' Prometheus metrics. Labels carry only bounded values (a node kind, an outcome, a status, a
//! reason), never a flow, run, tenant or player id.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

#[derive(Debug, Clone)]
pub struct RunMetrics {
    pub started: IntCounter,
    pub finished: IntCounterVec,
    pub nodes: IntCounterVec,
    pub attempts: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub errors: IntCounterVec,
    pub sends: IntCounterVec,
    pub replies: IntCounterVec,
    pub plans_loaded: IntGauge,
    pub retarget_topics_missing: IntGauge,
}

impl RunMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<RunMetrics, prometheus::Error> {
        let metrics = RunMetrics {
            started: IntCounter::new("flowhost_flow_runs_started_total", "Runs started by source events")?,
            finished: IntCounterVec::new(
                Opts::new("flowhost_flow_runs_finished_total", "Runs that ended, by status (completed, dead_lettered)"),
                &["status"],
            )?,
            nodes: IntCounterVec::new(
                Opts::new("flowhost_flow_nodes_total", "Node visits by node kind and outcome"),
                &["kind", "outcome"],
            )?,
            attempts: IntCounterVec::new(
                Opts::new(
                    "flowhost_flow_attempts_total",
                    "Calls of actions, lookups and rate-limit counters by node kind and outcome class",
                ),
                &["kind", "outcome"],
            )?,
            dead_letters: IntCounterVec::new(
                Opts::new("flowhost_flow_dead_letters_total", "Steps dead-lettered, by reason (permanent, exhausted)"),
                &["reason"],
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "flowhost_flow_errors_total",
                    "Runner errors by kind (poll, publish, store, commit, reload, ...)",
                ),
                &["kind"],
            )?,
            sends: IntCounterVec::new(
                Opts::new(
                    "flowhost_flow_sends_total",
                    "Inbound envelopes sent to external services, by transport and outcome",
                ),
                &["transport", "outcome"],
            )?,
            replies: IntCounterVec::new(
                Opts::new(
                    "flowhost_flow_replies_total",
                    "External services' replies, by channel and what became of them (accepted, ignored, refused)",
                ),
                &["channel", "outcome"],
            )?,
            plans_loaded: IntGauge::new("flowhost_flow_plans_loaded", "Released flows the runner runs")?,
            retarget_topics_missing: IntGauge::new(
                "flowhost_flow_retarget_topics_missing",
                "Kafka retarget topics of released flows that do not exist (their sources are not consumed)",
            )?,
        };
        registry.register(Box::new(metrics.started.clone()))?;
        registry.register(Box::new(metrics.finished.clone()))?;
        registry.register(Box::new(metrics.nodes.clone()))?;
        registry.register(Box::new(metrics.attempts.clone()))?;
        registry.register(Box::new(metrics.dead_letters.clone()))?;
        registry.register(Box::new(metrics.errors.clone()))?;
        registry.register(Box::new(metrics.sends.clone()))?;
        registry.register(Box::new(metrics.replies.clone()))?;
        registry.register(Box::new(metrics.plans_loaded.clone()))?;
        registry.register(Box::new(metrics.retarget_topics_missing.clone()))?;
        Ok(metrics)
    }

    /// Metrics registered in a private registry: for benchmarks and tests.
    pub fn unregistered() -> RunMetrics {
        Self::register(&Registry::new()).expect("fresh registry")
    }
}
