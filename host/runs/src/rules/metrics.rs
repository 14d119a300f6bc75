//! The engine's Prometheus metrics. Labels carry only bounded values (a reason or an error kind), never a
//! tenant, player or rule id.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

#[derive(Debug, Clone)]
pub struct EngineMetrics {
    pub consumed: IntCounter,
    pub matched: IntCounter,
    pub published: IntCounter,
    pub skipped: IntCounterVec,
    pub invalid: IntCounterVec,
    pub errors: IntCounterVec,
    pub dead_letters: IntCounterVec,
    pub retries: IntCounter,
    pub rule_cache_reloads: IntCounter,
    pub rules_loaded: IntGauge,
}

impl EngineMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<EngineMetrics, prometheus::Error> {
        let metrics = EngineMetrics {
            consumed: IntCounter::new("flowhost_engine_events_consumed_total", "Records read from source topics")?,
            matched: IntCounter::new(
                "flowhost_engine_events_matched_total",
                "Rule matches (an event matching two rules counts twice)",
            )?,
            published: IntCounter::new(
                "flowhost_engine_events_published_total",
                "Rule outputs acknowledged by the topics backend",
            )?,
            skipped: IntCounterVec::new(
                Opts::new("flowhost_engine_events_skipped_total", "Rule matches not published, by reason"),
                &["reason"],
            )?,
            invalid: IntCounterVec::new(
                Opts::new(
                    "flowhost_engine_events_invalid_total",
                    "Records that are not events, moved to the invalid-events topic",
                ),
                &["reason"],
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "flowhost_engine_errors_total",
                    "Engine errors by kind (eval, publish, commit, poll, reload, ...)",
                ),
                &["kind"],
            )?,
            dead_letters: IntCounterVec::new(
                Opts::new(
                    "flowhost_engine_dead_letters_total",
                    "Records moved to the dead-letter topic, by reason (permanent, exhausted)",
                ),
                &["reason"],
            )?,
            retries: IntCounter::new(
                "flowhost_engine_record_retries_total",
                "Attempts made again for one record after a retryable node failure",
            )?,
            rule_cache_reloads: IntCounter::new(
                "flowhost_engine_rule_cache_reloads_total",
                "Successful rule-cache reloads",
            )?,
            rules_loaded: IntGauge::new("flowhost_engine_rules_loaded", "Enabled rules in the current cache")?,
        };
        registry.register(Box::new(metrics.consumed.clone()))?;
        registry.register(Box::new(metrics.matched.clone()))?;
        registry.register(Box::new(metrics.published.clone()))?;
        registry.register(Box::new(metrics.skipped.clone()))?;
        registry.register(Box::new(metrics.invalid.clone()))?;
        registry.register(Box::new(metrics.errors.clone()))?;
        registry.register(Box::new(metrics.dead_letters.clone()))?;
        registry.register(Box::new(metrics.retries.clone()))?;
        registry.register(Box::new(metrics.rule_cache_reloads.clone()))?;
        registry.register(Box::new(metrics.rules_loaded.clone()))?;
        Ok(metrics)
    }

    /// Metrics registered in a private registry: for benchmarks and tests.
    pub fn unregistered() -> EngineMetrics {
        Self::register(&Registry::new()).expect("fresh registry")
    }
}
