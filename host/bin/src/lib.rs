//! Composition of the `flowhost` process: which backend serves each port (from the configuration), and the
//! roles running over them. `main.rs` is only the command line; tests start the same `serve` in process.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::config::{Config, NodeKindsMode, PluginsConfig, Role};
use flowhost_core::ports::{Cache, DocumentStore, Ports, Subjects, Topics};
use flowhost_core::{Clock, SystemClock};
use flowhost_embedded::{EmbeddedStore, LocalCache, LocalSubjects};
use flowhost_engine::{Engine, EngineMetrics, WasmNodes};
use flowhost_runtime::Capability;
use futures::FutureExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Connects every port to the backend the configuration names (embedded when none is named).
pub async fn connect(config: &Config) -> anyhow::Result<Ports> {
    connect_with_clock(config, Arc::new(SystemClock)).await
}

/// [`connect`] with another clock (tests pass a `ManualClock` to move time for expiry and retention).
pub async fn connect_with_clock(config: &Config, clock: Arc<dyn Clock>) -> anyhow::Result<Ports> {
    let embedded = if config.mongodb.uri.is_none() || config.kafka.brokers.is_none() {
        Some(
            EmbeddedStore::open(&config.data_dir, config.topics.partitions, clock.clone())
                .with_context(|| format!("opening the embedded store in {}", config.data_dir.display()))?,
        )
    } else {
        None
    };
    if let (None, Some(store)) = (&config.kafka.brokers, &embedded) {
        spawn_topic_retention(store.clone(), &config.topics);
    }
    let documents: Arc<dyn DocumentStore> = match (&config.mongodb.uri, &embedded) {
        (Some(uri), _) => Arc::new(
            flowhost_mongo::MongoDocuments::connect(uri, &config.mongodb.database)
                .await
                .context("connecting to MongoDB (FLOWHOST_MONGODB_URI)")?,
        ),
        (None, Some(store)) => store.documents(),
        (None, None) => unreachable!("embedded store opened when MongoDB is not configured"),
    };
    let topics: Arc<dyn Topics> = match (&config.kafka.brokers, &embedded) {
        (Some(brokers), _) => Arc::new(
            flowhost_kafka::KafkaTopics::new(brokers, &config.kafka.properties)
                .context("configuring Kafka (FLOWHOST_KAFKA_BROKERS)")?,
        ),
        (None, Some(store)) => store.topics(),
        (None, None) => unreachable!("embedded store opened when Kafka is not configured"),
    };
    let subjects: Arc<dyn Subjects> = match &config.nats.url {
        Some(url) => {
            Arc::new(flowhost_nats::NatsSubjects::connect(url).await.context("connecting to NATS (FLOWHOST_NATS_URL)")?)
        }
        None => Arc::new(LocalSubjects::new()),
    };
    let cache: Arc<dyn Cache> = match config.redis_url()? {
        Some(url) => Arc::new(flowhost_redis::RedisCache::connect(&url).await.context("connecting to Redis")?),
        None => Arc::new(LocalCache::with_max_entries(clock.clone(), config.cache.max_entries)),
    };
    Ok(Ports { documents, topics, subjects, cache, clock })
}

/// How often the embedded log applies its retention.
const RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// Applies the embedded log's retention (`[topics] retention_ms`/`retention_bytes`, 0 = no limit) every
/// minute for as long as the runtime lives; a failure is logged and retried on the next tick.
fn spawn_topic_retention(store: EmbeddedStore, topics: &flowhost_core::config::TopicsConfig) {
    let retention = flowhost_embedded::Retention {
        max_age_ms: (topics.retention_ms > 0).then_some(topics.retention_ms),
        max_bytes: (topics.retention_bytes > 0).then_some(topics.retention_bytes),
    };
    if retention.max_age_ms.is_none() && retention.max_bytes.is_none() {
        return;
    }
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(RETENTION_INTERVAL);
        loop {
            ticks.tick().await;
            match store.apply_topic_retention(retention).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "embedded log retention deleted records"),
                Err(error) => tracing::warn!(%error, "embedded log retention failed; retrying next minute"),
            }
        }
    });
}

/// The plugin runtime's settings from the `[plugins]` configuration.
pub fn runtime_config(plugins: &PluginsConfig) -> flowhost_runtime::RuntimeConfig {
    let defaults = flowhost_runtime::RuntimeConfig::default();
    flowhost_runtime::RuntimeConfig {
        limits: flowhost_runtime::Limits {
            timeout: Duration::from_millis(plugins.timeout_ms),
            fuel: (plugins.fuel > 0).then_some(plugins.fuel),
            memory_bytes: plugins.memory_bytes,
            max_output_bytes: plugins.max_output_bytes,
        },
        pool: flowhost_runtime::PoolConfig { max_instances: plugins.max_instances, ..defaults.pool },
        ..defaults
    }
}

/// The plugin runtime and component store of this process: the bundled plugins installed (unless disabled),
/// the stored active versions loaded.
pub async fn start_components(
    config: &Config,
    ports: &Ports,
    registry: &prometheus::Registry,
) -> anyhow::Result<Arc<ComponentStore>> {
    let runtime = flowhost_runtime::Runtime::with_host(
        runtime_config(&config.plugins),
        ports.clock.clone(),
        Some(ports.documents.clone()),
        Some(flowhost_runtime::RuntimeMetrics::register(registry)?),
    )?;
    let store_config = StoreConfig {
        max_component_bytes: config.plugins.max_component_bytes,
        sync_interval: Duration::from_millis(config.plugins.sync_interval_ms),
        compile_cache: Some(config.data_dir.join("component-cache")),
        // Names were checked when the configuration loaded.
        grants: config.plugins.capabilities.iter().filter_map(|name| Capability::from_name(name)).collect(),
    };
    let store = Arc::new(ComponentStore::new(ports.clone(), runtime, store_config));
    if config.plugins.bundled {
        let installed = store
            .install_bundled(&flowhost_runtime_fixtures::bundled())
            .await
            .context("installing the bundled plugins")?;
        for (plugin, content_hash) in installed {
            flowhost_api::register_in_catalog(ports, &plugin, &content_hash)
                .await
                .map_err(|error| anyhow::anyhow!("registering {:?} in the catalog: {error:?}", plugin.manifest().id))?;
        }
    } else {
        store.sync().await.context("loading the active plugins")?;
    }
    let active: Vec<String> =
        store.active_plugins().into_iter().map(|(id, plugin)| format!("{id}@{}", plugin.manifest().version)).collect();
    info!(plugins = ?active, "plugin runtime ready");
    Ok(store)
}

/// Runs the configured roles until `shutdown` is cancelled. The admin role serves on `listener` (bound by the
/// caller, so tests can pass port 0); the push-api role's routes join it, or get their own listener on
/// `push.listen` (`FLOWHOST_PUSH_API_LISTEN`). Either way every `/health` of the process answers 503 while the
/// push caller policy is broken.
pub async fn serve(
    config: Config,
    ports: Ports,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let registry = prometheus::Registry::new();
    let engine_metrics = Arc::new(EngineMetrics::register(&registry)?);
    let mut tasks = tokio::task::JoinSet::new();
    let components = if config.roles.contains(&Role::Admin) || config.roles.contains(&Role::Engine) {
        let store = start_components(&config, &ports, &registry).await?;
        tasks.spawn(store.clone().run_sync(shutdown.clone()).map(Ok));
        Some(store)
    } else {
        None
    };
    if config.roles.contains(&Role::Engine) {
        let mut engine = Engine::new(ports.clone(), config.engine.clone(), config.topics.partitions, engine_metrics);
        if let (NodeKindsMode::Wasm, Some(store)) = (config.engine.node_kinds, &components) {
            info!("the engine runs conditions and mappings through the condition and mapping components");
            engine = engine.with_nodes(Arc::new(WasmNodes::new(store.clone(), tokio::runtime::Handle::current())));
        }
        let token = shutdown.clone();
        tasks.spawn(async move {
            engine.run(token).await;
            Ok::<(), anyhow::Error>(())
        });
    }
    let push = if config.roles.contains(&Role::PushApi) {
        let state = Arc::new(flowhost_push::PushState::from_config(&config, ports.clone())?);
        let token = shutdown.clone();
        tasks.spawn(flowhost_push::run_retention(state.clone(), token).map(Ok));
        Some(state)
    } else {
        None
    };
    if let (Some(state), Some(addr)) = (&push, &config.push.listen) {
        let push_listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (FLOWHOST_PUSH_API_LISTEN)"))?;
        info!(addr = %push_listener.local_addr()?, "push API listening");
        tasks.spawn(serve_app(push_listener, flowhost_push::standalone_router(state.clone()), shutdown.clone()));
    }
    let push_on_main = push.as_ref().filter(|_| config.push.listen.is_none());
    let main_app = if config.roles.contains(&Role::Admin) {
        let mut health_checks: Vec<flowhost_api::HealthCheck> = Vec::new();
        if let Some(state) = push.clone() {
            health_checks.push(Arc::new(move || state.failing_checks().first().map_or(Ok(()), |check| Err(*check))));
        }
        let mut state = flowhost_api::AppState::new(ports.clone(), registry, health_checks);
        if let Some(store) = &components {
            state = state.with_components(store.clone());
        }
        let app = flowhost_api::app(state, config.api.max_body_bytes);
        info!(addr = %listener.local_addr()?, push = push_on_main.is_some(), "administration API listening");
        Some(match push_on_main {
            Some(push) => app.merge(flowhost_push::router(push.clone())),
            None => app,
        })
    } else if let Some(push) = push_on_main {
        info!(addr = %listener.local_addr()?, "push API listening");
        Some(flowhost_push::standalone_router(push.clone()))
    } else {
        None
    };
    if let Some(app) = main_app {
        tasks.spawn(serve_app(listener, app, shutdown.clone()));
    }
    info!(
        roles = ?config.roles,
        documents = ports.documents.backend(),
        topics = ports.topics.backend(),
        subjects = ports.subjects.backend(),
        cache = ports.cache.backend(),
        "flowhost started"
    );
    while let Some(result) = tasks.join_next().await {
        result.context("a role task panicked")??;
        if !shutdown.is_cancelled() {
            // A role ended on its own (e.g. the listener failed): stop the others too.
            shutdown.cancel();
        }
    }
    Ok(())
}

async fn serve_app(listener: TcpListener, app: axum::Router, shutdown: CancellationToken) -> anyhow::Result<()> {
    axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await?;
    Ok(())
}

/// Retries `connect` with backoff until it succeeds or `shutdown` fires, logging each failure: a backend
/// that is still starting delays the process instead of failing it.
pub async fn connect_with_retry(config: &Config, shutdown: &CancellationToken) -> anyhow::Result<Ports> {
    let mut backoff = flowhost_core::backoff::Backoff::new(Duration::from_millis(500), 2.0, Duration::from_secs(10));
    loop {
        match connect(config).await {
            Ok(ports) => return Ok(ports),
            Err(error) if is_configuration_error(&error) => return Err(error),
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(
                    error = format!("{error:#}"),
                    retry_in_ms = delay.as_millis() as u64,
                    "backends not ready"
                );
                tokio::select! {
                    _ = shutdown.cancelled() => anyhow::bail!("shut down while waiting for backends"),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

fn is_configuration_error(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<flowhost_core::config::ConfigError>().is_some()
            || matches!(cause.downcast_ref::<flowhost_core::PortError>(), Some(flowhost_core::PortError::Invalid(_)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration (flowhost-core) and the runtime name the capabilities in two places; they must agree,
    /// or a configured grant would be dropped silently.
    #[test]
    fn configured_capability_names_are_the_runtimes() {
        let configured: Vec<&str> = flowhost_core::config::PLUGIN_CAPABILITIES.to_vec();
        let offered: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(configured, offered);
        assert!(configured.iter().all(|name| Capability::from_name(name).is_some()));
    }
}
