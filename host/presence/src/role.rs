//! The `presence` role: the consumer, the sweep and the lag gauge as tasks, and the operational listener on
//! `PRESENCE_HTTP_ADDR` (plain-text `/health` and `/ready`, `/metrics`; other methods 405). The broker and the
//! document store of the role are services `serve` provides ([`PresenceTopics`], [`PresenceDocuments`]); the
//! projection is the active `presence` plugin of the component store, so a new version hot-swaps like any
//! plugin's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowhost_components::ComponentStore;
use flowhost_core::ports::{Direction, DocumentStore, IndexSpec, Topics};
use flowhost_role::{metrics_router, Check, HealthStyle, Listener, RoleContext, RoleParts};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::consumer::{Consumer, ConsumerSettings, ConsumerStatus};
use crate::metrics::PresenceMetrics;
use crate::project::{Projection, COLLECTION};
use crate::sweep::Sweep;

/// The plugin whose projection the role runs.
pub const PROJECTOR_PLUGIN: &str = "presence";

/// The broker of the role (`PRESENCE_BROKER_BOOTSTRAP_SERVERS`).
#[derive(Clone)]
pub struct PresenceTopics(pub Arc<dyn Topics>);

/// The document store of the role: MongoDB at `DOCDB_URI`, else the embedded store; database `presence`.
#[derive(Clone)]
pub struct PresenceDocuments(pub Arc<dyn DocumentStore>);

/// The indexes of `presence_state`: the spec's two, and the one the sweep's query uses on every backend.
pub fn indexes() -> Vec<IndexSpec> {
    let index = |fields: &[&str], unique| IndexSpec {
        fields: fields.iter().map(|f| ((*f).to_owned(), Direction::Asc)).collect(),
        unique,
    };
    vec![
        index(&["tenant_id", "player_id"], true),
        index(&["sites.state", "sites.expires_at"], false),
        index(&["state", "next_expiry"], false),
    ]
}

pub struct PresenceRole;

#[async_trait::async_trait]
impl flowhost_role::Role for PresenceRole {
    const NAME: &'static str = "presence";
    const CONFIG_SECTION: &'static str = "presence";
    const USES_COMPONENTS: bool = true;

    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
        let config = &context.config.presence;
        let beside_gateway_ingest =
            context.config.roles.iter().any(|role| role.gateway_parts().is_some_and(|parts| parts.ingest));
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
        let readiness =
            vec![consumer_check(status, metrics.clone()), docdb_check(documents.clone(), timeout, metrics.clone())];
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

fn consumer_check(status: Arc<ConsumerStatus>, metrics: PresenceMetrics) -> Check {
    Check::sync("presence_consumer", move || {
        let result = status.check();
        if result.is_err() {
            metrics.ready.set(0);
        }
        result
    })
}

/// The document store answers (a primary ping: a read of a document that does not exist).
fn docdb_check(documents: Arc<dyn DocumentStore>, timeout: Duration, metrics: PresenceMetrics) -> Check {
    Check::new("presence_docdb", move || {
        let (documents, metrics) = (documents.clone(), metrics.clone());
        async move {
            let result = match tokio::time::timeout(timeout, documents.get(COLLECTION, "ready-probe")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(format!("document store: {error}")),
                Err(_) => Err("document store: no answer in time".to_owned()),
            };
            if result.is_err() {
                metrics.docdb_errors.with_label_values(&["readiness"]).inc();
            }
            metrics.ready.set(i64::from(result.is_ok()));
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
    let mut backoff = flowhost_core::backoff::Backoff::new(Duration::from_millis(500), 2.0, Duration::from_secs(10));
    'indexes: for index in indexes() {
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
