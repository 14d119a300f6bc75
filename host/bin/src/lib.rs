//! Composition of the `flowhost` process: which backend serves each port (from the configuration), and the
//! roles running over them. `main.rs` is only the command line; tests start the same `serve` in process.

pub mod plugin_test;
pub mod scaffold;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::config::{Config, ConfigError, PluginsConfig, SectionEntry};
use flowhost_core::ports::{Cache, DocumentStore, Ports, Subjects, Topics, WorkQueue};
use flowhost_core::{Clock, SystemClock};
use flowhost_embedded::{EmbeddedStore, LocalCache, LocalSubjects};
use flowhost_role::{Check, ListenerSet, RoleContext, RoleEntry};
use flowhost_runtime::Capability;
use futures::FutureExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// mimalloc for every binary that links this crate (the `flowhost` binary, the tests and the benchmarks, so
/// they measure what ships). glibc's allocator took a fifth of the flow runtime's CPU (`_int_malloc`,
/// `_int_free`, `malloc_consolidate` in a profile of `runs-throughput`): runs allocate many short-lived
/// strings and maps on one thread and free them on another.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Fills every setting given only by its `*_SECRET_NAME` from Azure Key Vault (`KEY_VAULT_URL`, credentials
/// from `env` as Azure's SDKs read them), before any port connects. Does nothing when no secret is pending;
/// a failure is a `ConfigError` naming the setting (and never a value), so the start stops.
pub async fn resolve_secrets(config: &mut Config, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
    let pending = config.pending_secrets();
    if pending.is_empty() {
        return Ok(());
    }
    let Some(url) = config.key_vault_url.clone() else {
        let setting = pending[0].setting;
        return Err(ConfigError { setting: setting.to_owned(), message: "needs KEY_VAULT_URL".to_owned() }.into());
    };
    let vault = flowhost_keyvault::KeyVault::from_env(&url, env, Arc::new(SystemClock)).map_err(|error| {
        ConfigError { setting: error.setting().unwrap_or("KEY_VAULT_URL").to_owned(), message: error.to_string() }
    })?;
    let read = config.resolve_secrets(&vault).await?;
    // The values read may be what a role needs (a token, a key): checked again with them.
    check_roles(config)?;
    info!(secrets = read, credential = vault.credential().kind(), "settings read from Key Vault");
    Ok(())
}

/// Connects every port to the backend the configuration names (embedded when none is named). A remote backend
/// that does not answer yet does not stop it: its adapter connects later, with capped backoff, and its calls
/// fail with `Unavailable` meanwhile (readiness names it, see [`dependency_checks`]). Only bad settings fail.
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
            flowhost_mongo::MongoDocuments::open(uri, &config.mongodb.database)
                .await
                .context("connecting to MongoDB (FLOWHOST_MONGODB_URI)")?,
        ),
        (None, Some(store)) => store.documents(),
        (None, None) => unreachable!("embedded store opened when MongoDB is not configured"),
    };
    let topics: Arc<dyn Topics> = match (&config.kafka.brokers, &embedded) {
        (Some(brokers), _) => Arc::new(
            flowhost_kafka::KafkaTopics::new_in(brokers, &config.kafka.properties, config.kafka.namespace())
                .context("configuring Kafka (FLOWHOST_KAFKA_BROKERS)")?,
        ),
        (None, Some(store)) => store.topics(),
        (None, None) => unreachable!("embedded store opened when Kafka is not configured"),
    };
    let subjects: Arc<dyn Subjects> = match &config.nats.url {
        Some(url) => Arc::new(
            flowhost_nats::NatsSubjects::open_in(url, config.nats.namespace())
                .await
                .context("connecting to NATS (FLOWHOST_NATS_URL)")?,
        ),
        None => Arc::new(LocalSubjects::new()),
    };
    let redis_url = config.redis_url()?;
    let cache: Arc<dyn Cache> = match &redis_url {
        Some(url) => Arc::new(
            flowhost_redis::RedisCache::open_in(url, config.redis.namespace()).await.context("connecting to Redis")?,
        ),
        None => Arc::new(LocalCache::with_max_entries(clock.clone(), config.cache.max_entries)),
    };
    // The work queue follows Redis (Streams), chosen over JetStream by the figures in docs/operations.md,
    // "Durable queue"; without Redis it lives in the embedded store, opened here too when documents and topics
    // are remote.
    let queue: Arc<dyn WorkQueue> = match (&redis_url, &embedded) {
        (Some(url), _) => Arc::new(
            flowhost_redis::RedisQueue::open_in(url, config.redis.namespace())
                .await
                .context("connecting the work queue to Redis")?,
        ),
        (None, Some(store)) => store.queue(),
        (None, None) => EmbeddedStore::open(&config.data_dir, config.topics.partitions, clock.clone())
            .with_context(|| format!("opening the embedded store in {}", config.data_dir.display()))?
            .queue(),
    };
    let signing = flowhost_core::signing::ServiceSigning::new(config.service_signing_key.as_ref());
    Ok(Ports { documents, topics, subjects, cache, queue, clock, signing })
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

/// Where the local plugin commands (`plugin test`, `invoke`, `manifest`, `upload`) cache compiled components:
/// `plugins.compile_cache_dir` when set, else the user's cache directory (`$XDG_CACHE_HOME/flowhost/component-cache`
/// or `~/.cache/flowhost/component-cache`). A component with an interpreter inside (Python, JavaScript) compiles
/// for about 20 s; cached, the next run loads it in milliseconds. `None` when no directory is known.
pub fn local_compile_cache(plugins: &PluginsConfig) -> Option<std::path::PathBuf> {
    if let Some(dir) = &plugins.compile_cache_dir {
        return Some(dir.clone());
    }
    let base = std::env::var_os("XDG_CACHE_HOME").filter(|dir| !dir.is_empty()).map(std::path::PathBuf::from).or_else(
        || std::env::var_os("HOME").filter(|dir| !dir.is_empty()).map(|home| Path::new(&home).join(".cache")),
    )?;
    Some(base.join("flowhost/component-cache"))
}

/// Loads the component at `path` for a local command, offering it every capability (the runtime still refuses
/// one its manifest does not declare), compiled through [`local_compile_cache`].
pub async fn load_local(
    runtime: &flowhost_runtime::Runtime,
    plugins: &PluginsConfig,
    path: &Path,
) -> anyhow::Result<flowhost_runtime::Plugin> {
    let wasm = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let compiled = match local_compile_cache(plugins) {
        Some(dir) => runtime.compile_cached(&wasm, &dir),
        None => runtime.compile(&wasm),
    };
    let plugin = match compiled {
        Ok(compiled) => runtime.load_compiled(compiled, &Capability::ALL).await,
        Err(error) => Err(error),
    };
    plugin.with_context(|| format!("loading {}", path.display()))
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

/// The capabilities `names` name (checked when the configuration loaded).
fn capabilities(names: &[String]) -> Vec<Capability> {
    names.iter().filter_map(|name| Capability::from_name(name)).collect()
}

/// The plugin runtime and component store of this process: the bundled plugins installed (unless disabled),
/// the stored active versions loaded.
pub async fn start_components(
    config: &Config,
    ports: &Ports,
    registry: &prometheus::Registry,
) -> anyhow::Result<Arc<ComponentStore>> {
    let store = new_component_store(config, ports, registry)?;
    load_components(&store, config).await?;
    Ok(store)
}

/// The component store, empty: [`load_components`] fills it.
fn new_component_store(
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
        compile_cache: Some(config.compile_cache_dir()),
        grants: capabilities(&config.plugins.capabilities),
        plugin_grants: config.plugins.grants.iter().map(|(id, names)| (id.clone(), capabilities(names))).collect(),
        bundled: flowhost_runtime_fixtures::bundled()
            .iter()
            .map(|(_, wasm)| flowhost_core::digest::sha256_bytes_hex(wasm))
            .collect(),
        ..StoreConfig::default()
    };
    Ok(Arc::new(ComponentStore::new(ports.clone(), runtime, store_config)))
}

/// Installs the bundled plugins (unless disabled) and loads the stored active versions.
async fn load_components(store: &ComponentStore, config: &Config) -> Result<(), flowhost_components::ComponentError> {
    if config.plugins.bundled {
        store.install_bundled(&flowhost_runtime_fixtures::bundled()).await?;
    } else {
        store.sync().await?;
    }
    let active: Vec<String> =
        store.active_plugins().into_iter().map(|(id, plugin)| format!("{id}@{}", plugin.manifest().version)).collect();
    info!(plugins = ?active, "plugin runtime ready");
    Ok(())
}

/// The component store of a serving process, loaded now when the documents store answers. When it does not
/// (its backend is down at start), the process starts anyway: the load is retried in the background with
/// capped backoff, the readiness check `plugins` fails until it succeeds, and `loaded` tells the roles' tasks
/// when they may start (a consumer must not run flows before their plugins are there).
async fn serving_components(
    config: &Config,
    ports: &Ports,
    registry: &prometheus::Registry,
    shutdown: &CancellationToken,
) -> anyhow::Result<(Arc<ComponentStore>, Option<Loaded>)> {
    let store = new_component_store(config, ports, registry)?;
    match load_components(&store, config).await {
        Ok(()) => Ok((store, None)),
        Err(flowhost_components::ComponentError::Storage(error)) if error.is_transient() => {
            tracing::warn!(%error, "the plugins cannot be loaded yet (documents store); retrying in the background");
            let (done, loaded) = tokio::sync::watch::channel(false);
            let (retrying, config, shutdown) = (store.clone(), config.clone(), shutdown.clone());
            tokio::spawn(async move {
                let backoff = flowhost_core::backoff::Backoff::for_backend();
                if flowhost_core::backoff::until_done("loading the plugins", backoff, &shutdown, || {
                    load_components(&retrying, &config)
                })
                .await
                {
                    let _ = done.send(true);
                }
            });
            Ok((store, Some(Loaded(loaded))))
        }
        Err(error) => Err(anyhow::Error::new(error).context("loading the plugins")),
    }
}

/// Becomes true once the plugins a start could not load are loaded (see [`serving_components`]).
#[derive(Clone)]
struct Loaded(tokio::sync::watch::Receiver<bool>);

impl Loaded {
    /// Readiness `plugins`: failing until the plugins are loaded.
    fn check(&self) -> Check {
        let loaded = self.0.clone();
        Check::sync("plugins", move || match *loaded.borrow() {
            true => Ok(()),
            false => Err("the plugins are not loaded yet: the documents store does not answer".to_owned()),
        })
    }

    /// `task`, started once the plugins are loaded (or never, when the process stops first).
    fn gate(&self, task: flowhost_role::Task, shutdown: CancellationToken) -> flowhost_role::Task {
        let mut loaded = self.0.clone();
        Box::pin(async move {
            tokio::select! {
                result = loaded.wait_for(|loaded| *loaded) => if result.is_err() { return Ok(()) },
                _ = shutdown.cancelled() => return Ok(()),
            }
            task.await
        })
    }
}

/// Readiness of the remote backends of the process's ports, each named after its dependency (`mongodb`,
/// `kafka`, `nats`, `redis`): what `/ready` of the main listener reports while one does not answer. Embedded
/// backends need no check.
pub fn dependency_checks(ports: &Ports) -> Vec<Check> {
    let mut checks = Vec::new();
    if ports.documents.backend() == "mongodb" {
        let documents = ports.documents.clone();
        checks.push(Check::new("mongodb", move || {
            let documents = documents.clone();
            async move { documents.get("flowhost_probe", "probe").await.map(|_| ()).map_err(|e| e.to_string()) }
        }));
    }
    if ports.topics.backend() == "kafka" {
        let topics = ports.topics.clone();
        checks.push(Check::new("kafka", move || {
            let topics = topics.clone();
            async move { topics.exists("flowhost-probe").await.map(|_| ()).map_err(|e| e.to_string()) }
        }));
    }
    if ports.subjects.backend() == "nats" {
        let subjects = ports.subjects.clone();
        checks.push(Check::sync("nats", move || subjects.connected().map_err(|e| e.to_string())));
    }
    if ports.cache.backend() == "redis" {
        let cache = ports.cache.clone();
        checks.push(Check::new("redis", move || {
            let cache = cache.clone();
            async move { cache.get("flowhost-probe").await.map(|_| ()).map_err(|e| e.to_string()) }
        }));
    }
    checks
}

/// Every role this binary runs, by its `--roles` name: adding a role is one crate implementing [`Role`] (with
/// its section in its `config.rs`) and one line here.
///
/// [`Role`]: flowhost_role::Role
pub fn roles() -> Vec<RoleEntry> {
    vec![
        RoleEntry::of::<flowhost_api::AdminRole>(),
        RoleEntry::of::<flowhost_runs::EngineRole>(),
        RoleEntry::of::<flowhost_push_api::PushRole>(),
        RoleEntry::of::<flowhost_push_api::SenderRole>(),
        RoleEntry::of::<flowhost_gateway::GatewayRole>(),
        RoleEntry::of::<flowhost_gateway::GatewayEdgeRole>(),
        RoleEntry::of::<flowhost_gateway::GatewayIngestRole>(),
        RoleEntry::of::<flowhost_gateway::GatewayWorkerRole>(),
        RoleEntry::of::<flowhost_gateway::GatewayAdminRole>(),
        RoleEntry::of::<flowhost_presence::PresenceRole>(),
        RoleEntry::of::<flowhost_campaigns::CampaignsRole>(),
    ]
}

/// What `all` (and no `FLOWHOST_ROLES`) runs: the flow runtime and the notification service. The gateway's,
/// presence's and campaigns' roles are named explicitly: they need their own settings and own public ports.
pub const DEFAULT_ROLES: [&str; 4] = ["admin", "engine", "push-api", "sender"];

/// The sections of the roles this binary runs, each once (roles may share one), in the roles' order.
pub fn sections() -> Vec<SectionEntry> {
    let mut sections: Vec<SectionEntry> = Vec::new();
    for section in roles().into_iter().filter_map(|role| role.section) {
        if !sections.iter().any(|known| known.name == section.name) {
            sections.push(section);
        }
    }
    sections
}

/// The defaults, with the section of every role this binary runs at its defaults (what [`load_config`] starts
/// from, for configurations built in code).
pub fn default_config() -> Config {
    let mut config = Config::default();
    for section in sections() {
        config.sections.add_default(&section);
    }
    config
}

/// The configuration: defaults, the file, the environment, with every section this binary's roles read; each
/// setting validated, then what the configured roles need ([`check_roles`]).
pub fn load_config(
    file: Option<&std::path::Path>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let config = Config::load(file, env, &sections())?;
    check_roles(&config)?;
    Ok(config)
}

/// The configured roles' entries, in the configured order (`all` is [`DEFAULT_ROLES`]); a name this binary does
/// not know is an error naming `FLOWHOST_ROLES` and the known names.
pub fn select_roles(config: &Config) -> Result<Vec<RoleEntry>, ConfigError> {
    let known = roles();
    let mut selected: Vec<RoleEntry> = Vec::new();
    for name in &config.roles {
        let names: Vec<&str> = if name == "all" { DEFAULT_ROLES.to_vec() } else { vec![name.as_str()] };
        for name in names {
            let Some(entry) = known.iter().find(|entry| entry.name == name) else {
                let known: Vec<&str> = known.iter().map(|entry| entry.name).collect();
                return Err(ConfigError::new(
                    "FLOWHOST_ROLES",
                    format!("unknown role {name:?} (known: all, {})", known.join(", ")),
                ));
            };
            if !selected.iter().any(|chosen| chosen.name == entry.name) {
                selected.push(*entry);
            }
        }
    }
    if selected.is_empty() {
        return Err(ConfigError::new("FLOWHOST_ROLES", "no role given"));
    }
    Ok(selected)
}

/// Checks what each configured role needs of the configuration (see `flowhost_role::Role::check`).
pub fn check_roles(config: &Config) -> Result<(), ConfigError> {
    let selected = select_roles(config)?;
    let names: Vec<&str> = selected.iter().map(|entry| entry.name).collect();
    selected.iter().try_for_each(|entry| (entry.check)(config, &names))
}

/// The broker and the document store of the presence role: Kafka at `PRESENCE_BROKER_BOOTSTRAP_SERVERS` (the
/// value `embedded` is this process's embedded log, for local runs and tests), and MongoDB at `DOCDB_URI` (else
/// the embedded store), database `presence` either way.
async fn presence_services(
    config: &Config,
    ports: &Ports,
) -> anyhow::Result<(flowhost_presence::PresenceTopics, flowhost_presence::PresenceDocuments)> {
    let presence = config.section::<flowhost_presence::PresenceConfig>();
    let topics: Arc<dyn Topics> = if presence.bootstrap_servers == ["embedded"] {
        ports.topics.clone()
    } else {
        Arc::new(
            flowhost_kafka::KafkaTopics::new_in(
                &presence.bootstrap_servers.join(","),
                &config.kafka.properties,
                config.kafka.namespace(),
            )
            .context("configuring the presence broker (PRESENCE_BROKER_BOOTSTRAP_SERVERS)")?,
        )
    };
    let documents: Arc<dyn DocumentStore> = match &presence.docdb_uri {
        Some(uri) => Arc::new(
            flowhost_mongo::MongoDocuments::open(uri.expose(), &presence.database)
                .await
                .context("connecting the presence store (DOCDB_URI)")?,
        ),
        None => ports.documents.database(&presence.database).await.context("opening the presence database")?,
    };
    Ok((flowhost_presence::PresenceTopics(topics), flowhost_presence::PresenceDocuments(documents)))
}

/// The cache of the gateway's player validations and limits: Redis at `GATEWAY_EDGE_CACHE_URL` (its own
/// logical database, never the flow runtime's), else a cache inside this process.
async fn gateway_cache(config: &Config, clock: Arc<dyn Clock>) -> anyhow::Result<flowhost_gateway::GatewayCache> {
    let cache: Arc<dyn Cache> = match &config.section::<flowhost_gateway::GatewayConfig>().cache_url {
        Some(url) => Arc::new(
            flowhost_redis::RedisCache::open_in(url.expose(), config.redis.namespace())
                .await
                .context("connecting the gateway's cache (GATEWAY_EDGE_CACHE_URL)")?,
        ),
        None => Arc::new(LocalCache::with_max_entries(clock, config.cache.max_entries)),
    };
    Ok(flowhost_gateway::GatewayCache(cache))
}

/// Runs the configured roles until `shutdown` is cancelled. `main` is the main listener, bound by the caller to
/// `config.api_addr()` (tests pass port 0): listeners of roles configured to that address share it, and it
/// always answers `/health` and `/metrics`, and `/ready` unless no role has readiness (the gateway worker alone);
/// other addresses are bound here. A role whose task or listener ends stops the others.
pub async fn serve(config: Config, ports: Ports, main: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let registry = prometheus::Registry::new();
    let entries = select_roles(&config)?;
    let mut services = axum::http::Extensions::new();
    let mut tasks = tokio::task::JoinSet::new();
    let mut loading = None;
    if entries.iter().any(|entry| entry.uses_components) {
        let (store, loaded) = serving_components(&config, &ports, &registry, &shutdown).await?;
        let sync: flowhost_role::Task = Box::pin(store.clone().run_sync(shutdown.clone()).map(Ok));
        let sync = match &loaded {
            Some(loaded) => loaded.gate(sync, shutdown.clone()),
            None => sync,
        };
        tasks.spawn(named("plugin sync", sync));
        services.insert(store);
        loading = loaded;
    }
    if entries.iter().any(|entry| flowhost_gateway::GatewayParts::of(entry.name).is_some_and(|parts| parts.edge)) {
        services.insert(gateway_cache(&config, ports.clock.clone()).await?);
    }
    if entries.iter().any(|entry| entry.name == <flowhost_presence::PresenceRole as flowhost_role::Role>::NAME) {
        let (topics, documents) = presence_services(&config, &ports).await?;
        services.insert(topics);
        services.insert(documents);
    }
    let context = RoleContext {
        config: Arc::new(config.clone()),
        ports: ports.clone(),
        registry: registry.clone(),
        services,
        shutdown: shutdown.clone(),
    };
    let mut listeners = ListenerSet::default();
    listeners.require_metrics_token(config.metrics_token.as_ref());
    listeners.add_main_readiness(dependency_checks(&ports));
    if let Some(loaded) = &loading {
        listeners.add_role(Vec::new(), Vec::new(), vec![loaded.check()], Vec::new());
    }
    for entry in &entries {
        let parts = (entry.build)(&context).await.with_context(|| format!("starting the {} role", entry.name))?;
        listeners.add_role(parts.listeners, parts.liveness, parts.readiness, parts.warnings);
        for task in parts.tasks {
            let task = match (&loading, entry.uses_components) {
                (Some(loaded), true) => loaded.gate(task, shutdown.clone()),
                _ => task,
            };
            tasks.spawn(named(entry.name, task));
        }
    }
    let (bound, serving) =
        flowhost_role::serve_listeners(listeners, main, &config.api_addr(), registry, shutdown.clone()).await?;
    for task in serving {
        tasks.spawn(named("listener", task));
    }
    info!(
        roles = ?entries.iter().map(|entry| entry.name).collect::<Vec<_>>(),
        listeners = ?bound.iter().map(|l| format!("{} {:?}", l.addr, l.names)).collect::<Vec<_>>(),
        documents = ports.documents.backend(),
        topics = ports.topics.backend(),
        subjects = ports.subjects.backend(),
        cache = ports.cache.backend(),
        "flowhost started"
    );
    let mut outcome = Ok(());
    while let Some(result) = tasks.join_next().await {
        let (owner, result) = match result {
            Ok((owner, result)) => (owner, result),
            Err(panic) => ("a role", Err(anyhow::Error::new(panic).context("a task panicked"))),
        };
        if !shutdown.is_cancelled() {
            match &result {
                Ok(()) => tracing::error!(task = owner, "a task ended on its own; stopping the process"),
                Err(error) => {
                    tracing::error!(task = owner, error = format!("{error:#}"), "a task failed; stopping the process")
                }
            }
        }
        if let Err(error) = result {
            if outcome.is_ok() {
                outcome = Err(error);
            }
        }
        if !shutdown.is_cancelled() {
            // A role ended on its own (e.g. a listener failed): stop the others too.
            shutdown.cancel();
        }
    }
    outcome
}

/// `task`, its outcome labelled with what runs it (a role's name, `listener`, `plugin sync`) for the log.
async fn named(owner: &'static str, task: flowhost_role::Task) -> (&'static str, anyhow::Result<()>) {
    (owner, task.await)
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

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        load_config(None, |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    fn selected(config: &Config) -> Vec<&'static str> {
        select_roles(config).unwrap().iter().map(|entry| entry.name).collect()
    }

    #[test]
    fn role_names_come_from_the_role_table() {
        // `all` is the default roles, the sender among them; names are the table's.
        assert_eq!(selected(&load(&[]).unwrap()), DEFAULT_ROLES);
        assert_eq!(selected(&load(&[("FLOWHOST_ROLES", "sender")]).unwrap()), ["sender"]);
        assert_eq!(selected(&load(&[("FLOWHOST_ROLES", "admin, push-api,admin")]).unwrap()), ["admin", "push-api"]);
        let error = load(&[("FLOWHOST_ROLES", "admin,push")]).unwrap_err();
        assert_eq!(error.setting, "FLOWHOST_ROLES");
        assert!(error.message.contains("\"push\"") && error.message.contains("gateway-admin"), "{error}");
        // The documentation's default is the table's.
        let roles = flowhost_core::config::CORE_SETTINGS.iter().find(|s| s.env == "FLOWHOST_ROLES").unwrap();
        assert!(roles.shown_default.unwrap().contains(&DEFAULT_ROLES.join(",")));
        // Every section a role reads is known once, by the name of its file table.
        let names: Vec<&str> = sections().iter().map(|section| section.name).collect();
        assert_eq!(names, ["engine", "push", "gateway", "presence", "campaigns"]);
    }

    #[test]
    fn the_queue_admin_api_is_a_gateway_role_of_its_own() {
        let admin = flowhost_gateway::GatewayParts::of("gateway-admin").unwrap();
        assert!(admin.admin && !admin.edge && !admin.ingest && !admin.worker);
        assert!(!flowhost_gateway::GatewayParts::of("gateway-ingest").unwrap().admin);
        assert!(flowhost_gateway::GatewayParts::of("gateway").unwrap().admin, "gateway runs every part");
        for (roles, refused) in
            [("gateway-ingest,gateway-admin,gateway-worker", false), ("gateway,gateway-admin", true)]
        {
            let result = load(&[("FLOWHOST_ROLES", roles)]);
            assert_eq!(result.is_err(), refused, "{roles}: {result:?}");
            if let Err(error) = result {
                assert_eq!(error.setting, "FLOWHOST_ROLES");
            }
        }
        // What a role needs is checked only when it runs: the edge's key and origin map.
        assert_eq!(load(&[("FLOWHOST_ROLES", "gateway-edge")]).unwrap_err().setting, "GATEWAY_EDGE_CACHE_HMAC_KEY");
        assert_eq!(load(&[("FLOWHOST_ROLES", "presence")]).unwrap_err().setting, "PRESENCE_BROKER_BOOTSTRAP_SERVERS");
        assert!(load(&[("PRESENCE_RETRY_INITIAL_MS", "5")]).is_ok(), "presence's section without its role");
    }

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
