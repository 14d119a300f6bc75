//! The `presence` role: the consumer, the sweep and the lag gauge as tasks, and the operational listener on
//! `PRESENCE_HTTP_ADDR` (plain-text `/health` and `/ready`, `/metrics`; other methods 405). The broker and the
//! document store of the role are services `serve` provides ([`PresenceTopics`], [`PresenceDocuments`]); the
//! projection is the active `presence` plugin of the component store, so a new version hot-swaps like any
//! plugin's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowhost_components::ComponentStore;
use flowhost_core::config::{Config, ConfigError, SectionEntry};
use flowhost_core::ports::{DocumentStore, Topics};
use flowhost_core::stored::Document;
use flowhost_role::{metrics_router, Check, HealthStyle, Listener, RoleContext, RoleParts};
use prometheus::IntGauge;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::config::PresenceConfig;
use crate::consumer::{Consumer, ConsumerSettings, ConsumerStatus};
use crate::metrics::PresenceMetrics;
use crate::project::{PresenceState, Projection, COLLECTION};
use crate::sweep::Sweep;

/// The plugin whose projection the role runs.
pub const PROJECTOR_PLUGIN: &str = "presence";

/// The broker of the role (`PRESENCE_BROKER_BOOTSTRAP_SERVERS`).
#[derive(Clone)]
pub struct PresenceTopics(pub Arc<dyn Topics>);

/// The document store of the role: MongoDB at `DOCDB_URI`, else the embedded store; database `presence`.
#[derive(Clone)]
pub struct PresenceDocuments(pub Arc<dyn DocumentStore>);

pub struct PresenceRole;

#[async_trait::async_trait]
impl flowhost_role::Role for PresenceRole {
    const NAME: &'static str = "presence";
    const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<PresenceConfig>());
    const USES_COMPONENTS: bool = true;

    fn check(config: &Config, _: &[&str]) -> Result<(), ConfigError> {
        config.section::<PresenceConfig>().check_role()
    }

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &*context.config.section::<PresenceConfig>();
        // The gateway's ingest probes hold port 8080 in a process that runs them.
        let beside_gateway_ingest =
            context.config.roles.iter().any(|role| matches!(role.as_str(), "gateway" | "gateway-ingest"));
        let topics = context.service::<PresenceTopics>().context("the presence broker was not provided")?.0;
        let documents = context.service::<PresenceDocuments>().context("the presence store was not provided")?.0;
        let components = context.service::<Arc<ComponentStore>>().context("the component store was not provided")?;
        let metrics = PresenceMetrics::register(&context.registry)?;
        let timeout = Duration::from_millis(config.docdb_timeout_ms);
        let projection = Projection {
            documents: documents.clone(),
            projector: Arc::new(move || components.active(PROJECTOR_PLUGIN)),
            clock: context.ports.clock.clone(),
            expiry_seconds: config.expiry_seconds,
            timeout,
        };
        let status = Arc::new(ConsumerStatus::default());
        let consumer = Consumer {
            topics: topics.clone(),
            projection: projection.clone(),
            settings: ConsumerSettings {
                group: config.group.clone(),
                input_topic: config.input_topic.clone(),
                retry_initial: Duration::from_millis(config.retry_initial_ms),
                retry_max: Duration::from_millis(config.retry_max_ms),
                dlq_partitions: config.dlq_partitions,
                dlq_replication_factor: config.dlq_replication_factor,
            },
            metrics: metrics.clone(),
            status: status.clone(),
        };
        let sweep = Sweep {
            documents: documents.clone(),
            projection,
            interval: Duration::from_secs(config.sweep_interval_seconds),
            batch_size: config.sweep_batch_size,
            metrics: metrics.clone(),
        };
        let shutdown = context.shutdown.clone();
        let gauge = ReadyGauge::new(metrics.ready.clone());
        let readiness = vec![
            consumer_check(status, gauge.clone()),
            docdb_check(documents.clone(), timeout, metrics.clone(), gauge),
        ];
        let listener = Listener::new(
            "presence",
            config.listen_addr(beside_gateway_ingest)?,
            "PRESENCE_HTTP_ADDR",
            metrics_router(context.registry.clone()),
        )
        .with_health(HealthStyle::Text)
        .with_readiness(readiness);
        let lag =
            lag_gauge(topics, config.group.clone(), config.input_topic.clone(), metrics.clone(), shutdown.clone());
        Ok(RoleParts::default()
            .listener(listener)
            .task(ensure_indexes(documents, metrics, shutdown.clone()))
            .task(consumer.run(shutdown.clone()))
            .task(sweep.run(shutdown))
            .task(lag))
    }
}

/// `presence_ready`, the last readiness result: 1 only when each of the two checks passed the last time it
/// ran. Each check records its own result, so a passing store ping never hides a failing consumer (the two run
/// side by side on every `/ready`).
#[derive(Clone)]
struct ReadyGauge {
    last: Arc<[AtomicBool; 2]>,
    gauge: IntGauge,
}

impl ReadyGauge {
    const CONSUMER: usize = 0;
    const DOCDB: usize = 1;

    fn new(gauge: IntGauge) -> ReadyGauge {
        gauge.set(0);
        ReadyGauge { last: Arc::new([AtomicBool::new(false), AtomicBool::new(false)]), gauge }
    }

    fn record(&self, check: usize, passed: bool) {
        self.last[check].store(passed, Ordering::SeqCst);
        let ready = self.last.iter().all(|passed| passed.load(Ordering::SeqCst));
        self.gauge.set(i64::from(ready));
    }
}

fn consumer_check(status: Arc<ConsumerStatus>, gauge: ReadyGauge) -> Check {
    Check::sync("presence_consumer", move || {
        let result = status.check();
        gauge.record(ReadyGauge::CONSUMER, result.is_ok());
        result
    })
}

/// The document store answers (a primary ping: a read of a document that does not exist).
fn docdb_check(
    documents: Arc<dyn DocumentStore>,
    timeout: Duration,
    metrics: PresenceMetrics,
    gauge: ReadyGauge,
) -> Check {
    Check::new("presence_docdb", move || {
        let (documents, metrics, gauge) = (documents.clone(), metrics.clone(), gauge.clone());
        async move {
            let result = match tokio::time::timeout(timeout, documents.get(COLLECTION, "ready-probe")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(format!("document store: {error}")),
                Err(_) => Err("document store: no answer in time".to_owned()),
            };
            if result.is_err() {
                metrics.docdb_errors.with_label_values(&["readiness"]).inc();
            }
            gauge.record(ReadyGauge::DOCDB, result.is_ok());
            result
        }
    })
}

/// Creates the indexes, retrying while the store is unavailable (the listener answers `/health` meanwhile).
async fn ensure_indexes(
    documents: Arc<dyn DocumentStore>,
    metrics: PresenceMetrics,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut backoff = flowhost_core::backoff::Backoff::for_backend();
    'indexes: for index in PresenceState::indexes() {
        loop {
            match documents.ensure_index(COLLECTION, &index).await {
                Ok(()) => continue 'indexes,
                Err(error) => {
                    metrics.docdb_errors.with_label_values(&["startup"]).inc();
                    let delay = backoff.next_delay();
                    warn!(%error, index = index.name(), retry_in_ms = delay.as_millis() as u64, "creating a presence index failed");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }
    shutdown.cancelled().await;
    Ok(())
}

/// Refreshes `presence_consumer_lag` every five seconds.
async fn lag_gauge(
    topics: Arc<dyn Topics>,
    group: String,
    topic: String,
    metrics: PresenceMetrics,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut ticks = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = ticks.tick() => {}
        }
        if let Ok(lags) = topics.lag(&group, &topic).await {
            for lag in lags {
                metrics.consumer_lag.with_label_values(&[&topic, &lag.partition.to_string()]).set(lag.lag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn presence_ready_is_the_last_readiness_result_of_both_checks() {
        let gauge = ReadyGauge::new(IntGauge::new("presence_ready", "test").unwrap());
        // The consumer is not in its group yet; the store answers: not ready, whichever check ran last.
        let consumer = consumer_check(Arc::new(ConsumerStatus::default()), gauge.clone());
        assert!(consumer.run().await.is_err());
        gauge.record(ReadyGauge::DOCDB, true);
        assert_eq!(gauge.gauge.get(), 0, "a passing store check must not overwrite a failing consumer check");
        gauge.record(ReadyGauge::CONSUMER, true);
        assert_eq!(gauge.gauge.get(), 1);
        gauge.record(ReadyGauge::DOCDB, false);
        assert_eq!(gauge.gauge.get(), 0);
    }
}
