//! The presence projector's metrics (spec 002 part B, rule 7). Labels never carry a tenant, site, player,
//! event id, session, raw error or offset: only the registered event type, bounded outcomes and error codes,
//! operations, topics and partitions.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

#[derive(Clone)]
pub struct PresenceMetrics {
    /// `presence_records_total{event_type, outcome}`: outcome `written`, `duplicate`, `stale_close`,
    /// `stale_time`, `unchanged`, `dead_lettered`.
    pub records: IntCounterVec,
    pub projection_duration: HistogramVec,
    /// `presence_consumer_lag{topic, partition}`.
    pub consumer_lag: IntGaugeVec,
    pub duplicates: IntCounter,
    pub stale_closes: IntCounter,
    pub stale_times: IntCounter,
    /// `presence_invalid_records_total{error_code}`.
    pub invalid: IntCounterVec,
    pub dlq_publishes: IntCounter,
    pub dlq_failures: IntCounter,
    /// `presence_docdb_errors_total{operation}`: `projection`, `startup`, `sweep`, `readiness`.
    pub docdb_errors: IntCounterVec,
    pub retry_delay: Histogram,
    pub expiry_candidates: IntCounter,
    pub expired_sites: IntCounter,
    pub sweep_duration: Histogram,
    pub ready: IntGauge,
}

impl PresenceMetrics {
    pub fn register(registry: &Registry) -> anyhow::Result<PresenceMetrics> {
        fn counter(registry: &Registry, name: &str, help: &str) -> anyhow::Result<IntCounter> {
            let metric = IntCounter::new(name, help)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        }
        fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> anyhow::Result<IntCounterVec> {
            let metric = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        }
        fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> anyhow::Result<Histogram> {
            let metric = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        }
        let projection_duration = HistogramVec::new(
            HistogramOpts::new("presence_projection_duration_seconds", "Projection latency by event type")
                .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0]),
            &["event_type"],
        )?;
        registry.register(Box::new(projection_duration.clone()))?;
        let consumer_lag = IntGaugeVec::new(
            Opts::new("presence_consumer_lag", "Approximate lag of the consumer group by topic and partition"),
            &["topic", "partition"],
        )?;
        registry.register(Box::new(consumer_lag.clone()))?;
        let ready = IntGauge::new("presence_ready", "The last readiness result, 1 or 0")?;
        registry.register(Box::new(ready.clone()))?;
        Ok(PresenceMetrics {
            records: counter_vec(
                registry,
                "presence_records_total",
                "Records by event type and outcome",
                &["event_type", "outcome"],
            )?,
            projection_duration,
            consumer_lag,
            duplicates: counter(
                registry,
                "presence_duplicate_records_total",
                "Duplicate event id or transport position no-ops",
            )?,
            stale_closes: counter(
                registry,
                "presence_stale_closes_total",
                "Closes of a session that is not the current one",
            )?,
            stale_times: counter(
                registry,
                "presence_stale_times_total",
                "Records older than the trusted time already reflected",
            )?,
            invalid: counter_vec(
                registry,
                "presence_invalid_records_total",
                "Permanently invalid records by error code",
                &["error_code"],
            )?,
            dlq_publishes: counter(
                registry,
                "presence_dlq_publishes_total",
                "Dead letters acknowledged by the broker",
            )?,
            dlq_failures: counter(
                registry,
                "presence_dlq_failures_total",
                "Dead-letter publishes that failed and are retried",
            )?,
            docdb_errors: counter_vec(
                registry,
                "presence_docdb_errors_total",
                "Document store errors by operation",
                &["operation"],
            )?,
            retry_delay: histogram(
                registry,
                "presence_retry_delay_seconds",
                "Delays before retrying a blocked partition",
                vec![0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0],
            )?,
            expiry_candidates: counter(registry, "presence_expiry_candidates_total", "Documents the sweep selected")?,
            expired_sites: counter(registry, "presence_expired_sites_total", "Sites the sweep took offline")?,
            sweep_duration: histogram(
                registry,
                "presence_sweep_duration_seconds",
                "Duration of one sweep pass",
                vec![0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
            )?,
            ready,
        })
    }
}
