//! The gateway's roles. `gateway` runs every part in one process; `gateway-edge`, `gateway-ingest`,
//! `gateway-worker` and `gateway-admin` run one part each, for separate deployments (spec 002 part A's process
//! table). Listeners:
//!
//! | Part | Listener | Port setting (default) | Routes | `/ready` checks |
//! |---|---|---|---|---|
//! | edge | `gateway-edge` | `GATEWAY_EDGE_HTTP_PORT` (8083) | `POST`/`OPTIONS /api/gateway/events` | cache, internal ingest |
//! | ingest | `gateway-ingest` | `GATEWAY_INGEST_HTTP_PORT` (8080) | (`/health`, `/ready`) | durable queue |
//! | ingest | `gateway-ingest-private` | `GATEWAY_INGEST_PRIVATE_PORT` (8082) on `GATEWAY_INGEST_PRIVATE_HOST` | `POST /internal/v1/events` | durable queue |
//! | admin | `gateway-admin` | `GATEWAY_ADMIN_HTTP_PORT` (8081) | `GET /admin/v1/queues` | durable queue |
//! | every part | `gateway-metrics` | `GATEWAY_METRICS_PORT` (9090) | `/metrics`, `/health` | no `/ready`: the worker has no HTTP readiness |
//!
//! The cache the edge uses is a service `serve` provides ([`GatewayCache`]: Redis at `GATEWAY_EDGE_CACHE_URL`,
//! else an embedded cache of this process); the queue and the broker are the process's ports.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowhost_core::config::{Config, ConfigError, SectionEntry};
use flowhost_core::ports::{Cache, WorkQueue};
use flowhost_role::{metrics_router, Check, Listener, RoleContext, RoleParts};
use tokio::sync::Semaphore;

use crate::client_ip::TrustedProxies;
use crate::config::{GatewayConfig, GatewayParts};
use crate::edge::Edge;
use crate::forward::{Forwarder, MAX_FORWARD_BATCH};
use crate::ingest::{admin_router, Ingest};
use crate::keys::CacheKeys;
use crate::limits::{Limited, Limiter};
use crate::metrics::{EdgeMetrics, IngestMetrics, WorkerMetrics};
use crate::origins::OriginMap;
use crate::pipeline::{IngestBatcher, Worker, WorkerSettings, QUEUE};
use crate::player::{PlayerSettings, PlayerValidator};

/// The cache of player validations and limits, chosen by `serve` from `GATEWAY_EDGE_CACHE_URL`.
#[derive(Clone)]
pub struct GatewayCache(pub Arc<dyn Cache>);

macro_rules! gateway_role {
    ($(#[$doc:meta])* $name:ident, $role:literal, $parts:expr) => {
        $(#[$doc])*
        pub struct $name;

        #[async_trait::async_trait]
        impl flowhost_role::Role for $name {
            const NAME: &'static str = $role;
            const SECTION: Option<SectionEntry> = Some(SectionEntry::of::<GatewayConfig>());

            fn check(config: &Config, roles: &[&str]) -> Result<(), ConfigError> {
                crate::config::check_roles(config, roles)
            }

            async fn build(context: &RoleContext) -> anyhow::Result<RoleParts> {
                build(context, $parts).await
            }
        }
    };
}

gateway_role!(
    /// Every part of the gateway in one process.
    GatewayRole, "gateway", GatewayParts { edge: true, ingest: true, worker: true, admin: true }
);
gateway_role!(
    /// The public listener alone.
    GatewayEdgeRole, "gateway-edge", GatewayParts { edge: true, ingest: false, worker: false, admin: false }
);
gateway_role!(
    /// Internal ingest and its health listener.
    GatewayIngestRole, "gateway-ingest", GatewayParts { edge: false, ingest: true, worker: false, admin: false }
);
gateway_role!(
    /// The worker: durable queue to broker.
    GatewayWorkerRole, "gateway-worker", GatewayParts { edge: false, ingest: false, worker: true, admin: false }
);
gateway_role!(
    /// The queue administration API alone.
    GatewayAdminRole, "gateway-admin", GatewayParts { edge: false, ingest: false, worker: false, admin: true }
);

async fn build(context: &RoleContext, parts: GatewayParts) -> anyhow::Result<RoleParts> {
    let config = &*context.config.section::<GatewayConfig>();
    // The metrics listener is the worker's only one, and the worker has no HTTP readiness (spec 002): it serves
    // `/metrics` and liveness, never `/ready` (an orchestrator must not take a worker that answers for ready).
    let mut role = RoleParts::default().listener(
        Listener::new(
            "gateway-metrics",
            config.addr(config.metrics_port),
            "GATEWAY_BIND_HOST / GATEWAY_METRICS_PORT",
            metrics_router(context.registry.clone()),
        )
        .without_readiness(),
    );
    if parts.edge {
        role = role.listener(edge(context, config)?);
    }
    if parts.ingest {
        for listener in ingest(context, config)? {
            role = role.listener(listener);
        }
    }
    if parts.admin {
        role = role.listener(
            Listener::new(
                "gateway-admin",
                config.addr(config.admin_port),
                "GATEWAY_BIND_HOST / GATEWAY_ADMIN_HTTP_PORT",
                admin_router(context.ports.queue.clone()),
            )
            .with_readiness(vec![queue_check(context.ports.queue.clone())]),
        );
    }
    if parts.worker {
        let worker = Worker {
            queue: context.ports.queue.clone(),
            topics: context.ports.topics.clone(),
            clock: context.ports.clock.clone(),
            settings: WorkerSettings {
                analytics_topic: config.analytics_topic.clone(),
                partitions: context.config.topics.partitions,
                batch_size: config.worker_batch_size,
                lease: Duration::from_millis(config.worker_lease_ms),
                consumer: format!("gateway-worker-{}", std::process::id()),
            },
            metrics: WorkerMetrics::register(&context.registry)?,
        };
        role = role.task(worker.run(context.shutdown.clone()));
    }
    Ok(role)
}

/// The edge's listener (the edge has no task: it is stateless).
fn edge(context: &RoleContext, config: &GatewayConfig) -> anyhow::Result<Listener> {
    let origins = OriginMap::load(config.origins_file.as_deref(), config.origins_json.as_deref())
        .context("GATEWAY_EDGE_ORIGINS_FILE: the origin map")?;
    let proxies = TrustedProxies::parse(&config.trusted_proxy_cidrs)
        .map_err(|message| anyhow::anyhow!("GATEWAY_EDGE_TRUSTED_PROXY_CIDRS: {message}"))?;
    let key = config.cache_hmac_key.as_ref().context("GATEWAY_EDGE_CACHE_HMAC_KEY is required")?;
    let cache = context.service::<GatewayCache>().context("the gateway's cache was not provided")?.0;
    let keys = CacheKeys::new(key.expose().as_bytes());
    let metrics = EdgeMetrics::register(&context.registry, config.rollout_checksum.as_deref())?;
    let cache_timeout = Duration::from_millis(config.cache_timeout_ms);
    let limiter = |what, limits| Limiter::new(cache.clone(), what, limits, cache_timeout);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the gateway's HTTP client")?;
    let validator = PlayerValidator::new(
        cache.clone(),
        keys.clone(),
        limiter(Limited::Validations, config.validations_per_minute),
        http.clone(),
        PlayerSettings {
            cache_ttl: Duration::from_secs(config.player_cache_ttl_seconds),
            negative_ttl: Duration::from_secs(config.player_negative_ttl_seconds),
            invalid_statuses: config.player_invalid_statuses.clone(),
            cache_timeout,
            player_timeout: Duration::from_millis(config.player_timeout_ms),
        },
        metrics.player.clone(),
    );
    tracing::info!(
        origins = origins.origins.len(),
        trusted_proxies = config.trusted_proxy_cidrs.len(),
        cache = cache.backend(),
        rollout_checksum = config.rollout_checksum.as_deref().unwrap_or("-"),
        "gateway edge configured"
    );
    let ingest_timeout = Duration::from_millis(config.ingest_timeout_ms);
    let edge = Arc::new(Edge {
        proxies,
        origins: origins.origins.into_iter().map(|entry| (entry.origin.clone(), entry)).collect::<HashMap<_, _>>(),
        keys,
        request_limits: limiter(Limited::Requests, config.requests_per_minute),
        validator,
        inflight: Arc::new(Semaphore::new(config.max_inflight)),
        ingest: Forwarder::start(http.clone(), config.ingest_url.clone(), ingest_timeout),
        ingest_timeout,
        analytics_topic: config.analytics_topic.clone(),
        max_body_bytes: config.max_body_bytes,
        clock: context.ports.clock.clone(),
        metrics,
    });
    let ready_url = ready_url_of(&config.ingest_url)?;
    let readiness = vec![
        cache_check(cache, cache_timeout),
        Check::new("gateway_ingest", move || {
            let (http, url) = (http.clone(), ready_url.clone());
            async move {
                match http.get(&url).timeout(ingest_timeout).send().await {
                    Ok(response) if response.status().is_success() => Ok(()),
                    Ok(response) => Err(format!("internal ingest is not ready ({})", response.status().as_u16())),
                    Err(error) => Err(format!("internal ingest: {}", error.without_url())),
                }
            }
        }),
    ];
    let listener = Listener::new(
        "gateway-edge",
        config.addr(config.edge_port),
        "GATEWAY_BIND_HOST / GATEWAY_EDGE_HTTP_PORT",
        edge.router(),
    )
    .with_readiness(readiness);
    Ok(listener)
}

/// `/ready` of the ingest listener the edge posts to (same scheme, host and port).
fn ready_url_of(ingest_url: &str) -> anyhow::Result<String> {
    let mut url = url::Url::parse(ingest_url).context("GATEWAY_EDGE_INGEST_URL")?;
    url.set_path("/ready");
    url.set_query(None);
    Ok(url.to_string())
}

fn cache_check(cache: Arc<dyn Cache>, timeout: Duration) -> Check {
    Check::new("gateway_cache", move || {
        let cache = cache.clone();
        async move {
            match tokio::time::timeout(timeout, cache.get("gw:ready")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(format!("cache: {error}")),
                Err(_) => Err("cache: no answer in time".to_owned()),
            }
        }
    })
}

fn queue_check(queue: Arc<dyn WorkQueue>) -> Check {
    Check::new("gateway_queue", move || {
        let queue = queue.clone();
        async move { queue.stats(QUEUE).await.map(|_| ()).map_err(|error| format!("durable queue: {error}")) }
    })
}

fn ingest(context: &RoleContext, config: &GatewayConfig) -> anyhow::Result<Vec<Listener>> {
    let metrics = IngestMetrics::register(&context.registry)?;
    let queue = context.ports.queue.clone();
    let ingest = Arc::new(Ingest {
        batcher: IngestBatcher::start(queue.clone(), metrics.clone()),
        analytics_topic: config.analytics_topic.clone(),
        metrics,
    });
    let ready = vec![queue_check(queue)];
    Ok(vec![
        Listener::new(
            "gateway-ingest",
            config.addr(config.ingest_port),
            "GATEWAY_BIND_HOST / GATEWAY_INGEST_HTTP_PORT",
            flowhost_role::ApiRouter::new(),
        )
        .with_readiness(ready.clone()),
        Listener::new(
            "gateway-ingest-private",
            config.ingest_private_addr(),
            "GATEWAY_INGEST_PRIVATE_HOST / GATEWAY_INGEST_PRIVATE_PORT",
            ingest.router(config.max_body_bytes * MAX_FORWARD_BATCH),
        )
        .with_readiness(ready),
    ])
}
