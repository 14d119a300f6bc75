//! One typed configuration for the whole process: defaults, an optional TOML file, then environment
//! variables (the spec's names), validated at start with errors that name the setting.
//!
//! A backend is chosen by configuring it: with `FLOWHOST_MONGODB_URI` documents live in MongoDB, with
//! `FLOWHOST_KAFKA_BROKERS` topics live in Kafka, with `FLOWHOST_NATS_URL` subjects go through NATS and with a
//! Redis URL (or host) the cache is Redis. Anything left unset uses the embedded default in `data_dir`.
//!
//! A setting listed in [`SECRET_SETTINGS`] may instead name a secret (`*_SECRET_NAME`, with `KEY_VAULT_URL`):
//! loading only checks that the store's address is there; [`Config::resolve_secrets`] reads the values at
//! start and fills the literals, so the rest of the process only ever sees literals.
//!
//! Every setting is declared once, in its section's table (`crate::settings`): [`CORE_SETTINGS`] here for the
//! process-wide ones, and one table beside each role's section (`engine.rs`, `push.rs`, `plugins.rs`,
//! `gateway.rs`, `presence.rs`, `campaigns.rs`). Loading, the bounds and docs/configuration.md come from them.
//!
//! tidy: over the line budget (its tests are half of it) until each role's section lives in the role's crate.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ports::SecretStore;
pub use crate::secret::Secret;

pub use crate::settings::ConfigError;
use crate::settings::{at_least, between, keyword, not_blank, rule, Setting};

mod campaigns;
mod engine;
mod gateway;
mod plugins;
mod presence;
mod push;
pub use campaigns::{CampaignsConfig, CAMPAIGNS_SETTINGS};
pub use engine::{EngineConfig, NodeKindsMode, NodePayloads, RetryPolicy, RunStorage, ENGINE_SETTINGS};
pub use gateway::{GatewayConfig, ScopeLimits, DEFAULT_INVALID_STATUSES, GATEWAY_SETTINGS, MIN_CACHE_HMAC_KEY_BYTES};
pub use plugins::{
    PluginsConfig, COMPILE_CACHE_DIR_ENV, PLUGINS_MAX_COMPONENT_BYTES, PLUGINS_MAX_MEMORY_BYTES, PLUGINS_SETTINGS,
    PLUGIN_CAPABILITIES,
};
pub use presence::{PresenceConfig, PRESENCE_DATABASE, PRESENCE_SETTINGS};
pub use push::{Channel, PushConfig, DEFAULT_VAPID_SUBJECT, MAX_PUSH_TTL_SECONDS, PUSH_SETTINGS};


/// The roles one process can run (see DESIGN: one binary, many roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The flow runtime's administration API (v1), `/health` and `/metrics`.
    Admin,
    /// The rule engine: consumes source topics and publishes rule outputs.
    Engine,
    /// The web-push notification service's API: push-platform routes, editor routes, browser and semantic
    /// events, retention sweep.
    #[serde(rename = "push-api")]
    PushApi,
    /// The web-push notification service's sender: delivers what the bundled `notifications` plugin asks for
    /// (the host side of the `notifications` capability, with the VAPID keys and the token secret).
    Sender,
    /// The edge analytics gateway in one process: edge, ingest, worker and queue admin (spec 002 part A).
    Gateway,
    /// The gateway's public listener alone (`/api/gateway/events`), posting to `GATEWAY_EDGE_INGEST_URL`.
    #[serde(rename = "gateway-edge")]
    GatewayEdge,
    /// The gateway's ingest process: the private ingest listener and its health listener.
    #[serde(rename = "gateway-ingest")]
    GatewayIngest,
    /// The gateway's queue administration API alone (`GET /admin/v1/queues`), a process of its own in the spec's
    /// topology; it reads the same durable queue as ingest and the worker.
    #[serde(rename = "gateway-admin")]
    GatewayAdmin,
    /// The gateway's worker: the durable queue to the broker.
    #[serde(rename = "gateway-worker")]
    GatewayWorker,
    /// The presence projector (spec 002 part B): presence events into one document per player.
    Presence,
    /// The campaign events read API (spec 002 part C): read models synchronized from Flowhost's stores.
    Campaigns,
}

impl Role {
    /// What `all` (and no `FLOWHOST_ROLES`) runs: the flow runtime and the notification service. The gateway
    /// roles are named explicitly: they need their own secrets and origin map, and own public ports.
    pub const ALL: [Role; 4] = [Role::Admin, Role::Engine, Role::PushApi, Role::Sender];

    /// Whether this is one of the gateway's roles, and which of its parts it runs.
    pub fn gateway_parts(self) -> Option<GatewayParts> {
        let (edge, ingest, worker, admin) = match self {
            Role::Gateway => (true, true, true, true),
            Role::GatewayEdge => (true, false, false, false),
            Role::GatewayIngest => (false, true, false, false),
            Role::GatewayWorker => (false, false, true, false),
            Role::GatewayAdmin => (false, false, false, true),
            _ => return None,
        };
        Some(GatewayParts { edge, ingest, worker, admin })
    }
}

/// The parts of the gateway one role runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayParts {
    pub edge: bool,
    pub ingest: bool,
    pub worker: bool,
    /// The queue administration API.
    pub admin: bool,
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "admin" => Ok(Role::Admin),
            "engine" => Ok(Role::Engine),
            "push-api" => Ok(Role::PushApi),
            "sender" => Ok(Role::Sender),
            "gateway" => Ok(Role::Gateway),
            "gateway-edge" => Ok(Role::GatewayEdge),
            "gateway-ingest" => Ok(Role::GatewayIngest),
            "gateway-worker" => Ok(Role::GatewayWorker),
            "gateway-admin" => Ok(Role::GatewayAdmin),
            "presence" => Ok(Role::Presence),
            "campaigns" => Ok(Role::Campaigns),
            other => Err(format!(
                "unknown role {other:?} (known: admin, engine, push-api, sender, gateway, gateway-edge, \
                 gateway-ingest, gateway-worker, gateway-admin, presence, campaigns)"
            )),
        }
    }
}

/// Parses a comma-separated role list; `all` means every role.
pub fn parse_roles(list: &str) -> Result<Vec<Role>, String> {
    if list.trim() == "all" {
        return Ok(Role::ALL.to_vec());
    }
    let roles: Vec<Role> =
        list.split(',').filter(|s| !s.trim().is_empty()).map(Role::from_str).collect::<Result<_, _>>()?;
    if roles.is_empty() {
        return Err("no role given".to_owned());
    }
    Ok(roles)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Roles this process runs (`FLOWHOST_ROLES`, comma-separated; default: all).
    pub roles: Vec<Role>,
    /// Directory of the embedded store (`FLOWHOST_DATA_DIR`; default `./flowhost-data`).
    pub data_dir: PathBuf,
    pub api: ApiConfig,
    pub topics: TopicsConfig,
    pub mongodb: MongoConfig,
    pub kafka: KafkaConfig,
    pub nats: NatsConfig,
    /// Outbound HTTP to addresses others name (`FLOWHOST_EGRESS_*`).
    pub egress: EgressConfig,
    pub redis: RedisConfig,
    pub cache: CacheConfig,
    pub engine: EngineConfig,
    pub log: LogConfig,
    pub push: PushConfig,
    pub plugins: PluginsConfig,
    pub gateway: GatewayConfig,
    pub presence: PresenceConfig,
    pub campaigns: CampaignsConfig,
    /// Secret store address (`KEY_VAULT_URL`, an Azure Key Vault `https://` URL); needed by every
    /// `*_SECRET_NAME` setting.
    pub key_vault_url: Option<String>,
    /// The key that signs and checks every message on the service transports (`FLOWHOST_SERVICE_SIGNING_KEY`,
    /// at least 32 bytes; unset: nothing is signed, see `crate::signing`).
    pub service_signing_key: Option<Secret>,
    /// Secret-store name of the signing key (`FLOWHOST_SERVICE_SIGNING_KEY_SECRET_NAME`); the literal wins.
    pub service_signing_key_secret_name: Option<String>,
    /// When set, `/metrics` on every listener requires `Authorization: Bearer <token>`
    /// (`FLOWHOST_METRICS_TOKEN`); unset, it answers anyone who reaches the listener.
    pub metrics_token: Option<Secret>,
    /// Secret-store name of the metrics token (`FLOWHOST_METRICS_TOKEN_SECRET_NAME`); the literal wins.
    pub metrics_token_secret_name: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            roles: Role::ALL.to_vec(),
            data_dir: PathBuf::from("flowhost-data"),
            api: ApiConfig::default(),
            topics: TopicsConfig::default(),
            mongodb: MongoConfig::default(),
            kafka: KafkaConfig::default(),
            nats: NatsConfig::default(),
            egress: EgressConfig::default(),
            cache: CacheConfig::default(),
            redis: RedisConfig::default(),
            engine: EngineConfig::default(),
            log: LogConfig::default(),
            push: PushConfig::default(),
            plugins: PluginsConfig::default(),
            gateway: GatewayConfig::default(),
            presence: PresenceConfig::default(),
            campaigns: CampaignsConfig::default(),
            key_vault_url: None,
            service_signing_key: None,
            service_signing_key_secret_name: None,
            metrics_token: None,
            metrics_token_secret_name: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Listen address (`FLOWHOST_API_HOST`; default `127.0.0.1`, set `0.0.0.0` to accept remote callers).
    pub host: String,
    /// Listen port (`API_PORT` or `api.port`; default 8787).
    pub port: u16,
    /// Largest accepted request body in bytes (`FLOWHOST_API_MAX_BODY_BYTES`; default 1 MiB); larger -> 413.
    pub max_body_bytes: usize,
    /// Bearer token every admin route requires (`FLOWHOST_ADMIN_TOKEN`); unset: the admin routes are open, and
    /// a non-loopback `host` is refused unless `allow_unauthenticated` is true.
    pub admin_token: Option<Secret>,
    /// Secret-store name of the admin token (`FLOWHOST_ADMIN_TOKEN_SECRET_NAME`); the literal wins.
    pub admin_token_secret_name: Option<String>,
    /// Accept an admin API without a token on a non-loopback address (`FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED`;
    /// default false).
    pub allow_unauthenticated: bool,
    /// Without an admin token, the admin routes answer only requests whose `Host` is a loopback name or address
    /// with the listener's port (a DNS-rebinding page names its own host), or one of these names (`host` or
    /// `host:port`; `FLOWHOST_ADMIN_ALLOWED_HOSTS`, comma-separated; default none).
    pub allowed_hosts: Vec<String>,
    /// How often the drift pass re-checks services' active manifests besides reacting to registration and
    /// activation signals (`FLOWHOST_DRIFT_INTERVAL_MS`; default 60000).
    pub drift_interval_ms: u64,
    /// The URL under which this API is reachable from services (`FLOWHOST_HTTP_PUBLIC_BASE_URL`; default
    /// `http://<api.host>:<api.port>`, loopback for a wildcard host): external services post their replies to
    /// `<it>/api/v2/runs/<run_id>/reply`.
    pub public_base_url: Option<String>,
    /// The address of the HTTP ingress (`FLOWHOST_HTTP_ADDR`: `host:port`, `:port`, or an `http://` or
    /// `https://` URL): spec 001 publishes a service's `/v2/<service>/inbound` (and the reply URL) under
    /// `FLOWHOST_HTTP_PUBLIC_BASE_URL` or, when that is unset, under this address; unset too, the API's address.
    pub http_addr: Option<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8787,
            max_body_bytes: 1024 * 1024,
            admin_token: None,
            admin_token_secret_name: None,
            allow_unauthenticated: false,
            allowed_hosts: Vec::new(),
            drift_interval_ms: 60_000,
            public_base_url: None,
            http_addr: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicsConfig {
    /// Partitions of the topics Flowhost creates when they are missing, on either backend: the embedded log's
    /// topics and the engine's source and output topics (`FLOWHOST_TOPIC_PARTITIONS`; default 4).
    pub partitions: i32,
    /// Embedded log only: records older than this many milliseconds are deleted by the periodic retention pass
    /// (`FLOWHOST_TOPICS_RETENTION_MS`; default 7 days; 0 keeps records regardless of age).
    pub retention_ms: i64,
    /// Embedded log only: the oldest records beyond this many bytes per partition are deleted
    /// (`FLOWHOST_TOPICS_RETENTION_BYTES`; default 1 GiB; 0 keeps records regardless of size).
    pub retention_bytes: i64,
}

impl Default for TopicsConfig {
    fn default() -> Self {
        Self { partitions: 4, retention_ms: 7 * 24 * 60 * 60 * 1000, retention_bytes: 1 << 30 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MongoConfig {
    /// MongoDB connection string (`FLOWHOST_MONGODB_URI`); when set, documents live in MongoDB.
    pub uri: Option<String>,
    /// Database name (`FLOWHOST_MONGODB_DATABASE`; default `flowhost`).
    pub database: String,
}

impl Default for MongoConfig {
    fn default() -> Self {
        Self { uri: None, database: "flowhost".into() }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Bootstrap servers, comma-separated (`FLOWHOST_KAFKA_BROKERS`); when set, topics live in Kafka.
    pub brokers: Option<String>,
    /// Extra librdkafka properties (file only), e.g. `"security.protocol" = "SSL"`.
    pub properties: std::collections::BTreeMap<String, String>,
    /// A name put, with a `.`, in front of every topic and consumer group this process uses on Kafka
    /// (`FLOWHOST_KAFKA_TOPIC_PREFIX`; default none: the names as configured and as the specification gives
    /// them). For deployments sharing a cluster (with prefixed ACLs); a departure from the spec's names.
    pub topic_prefix: Option<String>,
}

impl KafkaConfig {
    /// The deployment's namespace on Kafka.
    pub fn namespace(&self) -> crate::ports::Namespace {
        crate::ports::Namespace::from_setting(self.topic_prefix.as_deref(), '.')
    }
}

#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    /// NATS server URL (`FLOWHOST_NATS_URL`); when set, subjects go through NATS. `nats://user:password@host`
    /// (or `nats://token@host`) signs in to the deployment's account.
    pub url: Option<String>,
    /// A name put, with a `.`, in front of every subject, queue group and reply inbox
    /// (`FLOWHOST_NATS_SUBJECT_PREFIX`; default none: the specification's subjects). For deployments that
    /// share a NATS account; a departure from the spec's subject names.
    pub subject_prefix: Option<String>,
}

impl NatsConfig {
    /// The deployment's namespace on NATS.
    pub fn namespace(&self) -> crate::ports::Namespace {
        crate::ports::Namespace::from_setting(self.subject_prefix.as_deref(), '.')
    }
}

/// The URL may carry the account's password, so `Debug` shows only whether it is set.
impl std::fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .field("subject_prefix", &self.subject_prefix)
            .finish()
    }
}

/// Outbound HTTP to addresses that registrants and envelopes name (the data-source proxy, flow lookups, HTTP
/// segments): link-local and cloud metadata addresses are refused always.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EgressConfig {
    /// Networks, addresses and host names outbound calls may reach (`FLOWHOST_EGRESS_ALLOWED`,
    /// comma-separated; default empty: any but the refused ones).
    pub allowed: Vec<String>,
    /// The largest answer read from such a call (`FLOWHOST_EGRESS_MAX_BODY_BYTES`; default 1048576).
    pub max_body_bytes: usize,
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self { allowed: Vec::new(), max_body_bytes: 1 << 20 }
    }
}

/// Redis address, resolved as the spec orders it: `FLOWHOST_REDIS_URL`, then `FLOWHOST_REDIS_URL_SECRET_NAME`,
/// then host and password composition (`FLOWHOST_REDIS_HOST` / `_PASSWORD` win over their `_SECRET_NAME`
/// variants; `FLOWHOST_REDIS_DB` supplies the database when the host carries none).
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    pub url: Option<String>,
    pub url_secret_name: Option<String>,
    pub host: Option<String>,
    pub host_secret_name: Option<String>,
    pub password: Option<Secret>,
    pub password_secret_name: Option<String>,
    pub db: Option<u32>,
    /// A name put, with a `:`, in front of every key this process writes to Redis, the work queue's and the
    /// gateway cache's included (`FLOWHOST_REDIS_KEY_PREFIX`; default none). For deployments that share a
    /// logical database (a Redis Cluster has only one).
    pub key_prefix: Option<String>,
}

impl RedisConfig {
    /// The deployment's namespace on Redis.
    pub fn namespace(&self) -> crate::ports::Namespace {
        crate::ports::Namespace::from_setting(self.key_prefix.as_deref(), ':')
    }
}

/// A Redis URL may carry the password (`redis://:pw@host`), read from the secret store or not, so `Debug` shows
/// only whether it is set.
impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .field("url_secret_name", &self.url_secret_name)
            .field("host", &self.host)
            .field("host_secret_name", &self.host_secret_name)
            .field("password", &self.password)
            .field("password_secret_name", &self.password_secret_name)
            .field("db", &self.db)
            .field("key_prefix", &self.key_prefix)
            .finish()
    }
}

/// The embedded (in-process) cache, used when no Redis is configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Most entries the embedded cache holds; a full cache evicts expired entries first, then the least
    /// recently used (`FLOWHOST_CACHE_MAX_ENTRIES`; default 100000).
    pub max_entries: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self { max_entries: 100_000 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `tracing` filter (`FLOWHOST_LOG`; default `info`).
    pub filter: String,
    /// `text` or `json` (`FLOWHOST_LOG_FORMAT`).
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { filter: "info".into(), format: LogFormat::Text }
    }
}

/// The push settings whose value may come from the secret store, resolved (see [`Config::push_secrets`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushSecrets {
    pub callers_json: Option<Secret>,
    pub vapid_public_key: Option<String>,
    pub vapid_private_key: Option<Secret>,
    pub interaction_token_secret: Option<Secret>,
    pub editor_token: Option<Secret>,
}

/// Every process-wide setting (see `crate::settings`); each role's section has its own table beside it.
pub static CORE_SETTINGS: &[Setting<Config>] = crate::settings!(Config, "", [
    { "FLOWHOST_ROLES", roles, "roles this process runs, comma-separated (or `serve --roles`)", parse: parse_roles, default: "all (`admin,engine,push-api,sender`)" },
    { "FLOWHOST_DATA_DIR", data_dir, "embedded store directory" },
    { "FLOWHOST_API_HOST", api.host, "listen address (use `0.0.0.0` for remote callers)" },
    { "API_PORT", api.port, "listen port" },
    { "FLOWHOST_API_MAX_BODY_BYTES", api.max_body_bytes, "request body limit (413 above)", check: at_least(1) },
    { "FLOWHOST_ADMIN_TOKEN", api.admin_token, "bearer token every admin route requires (see [Roles and listeners](operations.md#roles-and-listeners))", default: "unset (admin routes open)" },
    { "FLOWHOST_ADMIN_TOKEN_SECRET_NAME", api.admin_token_secret_name, "secret-store name of the admin token" },
    { "FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED", api.allow_unauthenticated, "accept an admin API without a token on a non-loopback `api.host`" },
    { "FLOWHOST_ADMIN_ALLOWED_HOSTS", api.allowed_hosts, "without a token, `Host` names the admin API answers besides loopback ones with its port (`host` or `host:port`, comma-separated)" },
    { "FLOWHOST_DRIFT_INTERVAL_MS", api.drift_interval_ms, "how often released v2 flows are re-checked for manifest drift besides the change signals", check: at_least(1) },
    { "FLOWHOST_HTTP_PUBLIC_BASE_URL", api.public_base_url, "where services reach this API (the reply URL in inbound envelopes)", parse: |value: &str| Ok(Some(value.trim().trim_end_matches('/').to_owned())), check: rule(http_url, "an `http://` or `https://` URL"), default: "`http://<api.host>:<api.port>`" },
    { "FLOWHOST_HTTP_ADDR", api.http_addr, "the HTTP ingress address (`host:port`, `:port` or an `http(s)://` URL): `/v2/<service>/inbound` and the reply URL are published under it when `FLOWHOST_HTTP_PUBLIC_BASE_URL` is unset (a wildcard or empty host publishes loopback)", check: rule(|addr: &Option<String>| addr.as_deref().map_or(Ok(()), |addr| http_addr_base(addr).map(|_| ())), "") },
    { "FLOWHOST_SERVICE_SIGNING_KEY", service_signing_key, "signs and checks every message on the service transports (see [External services](flows.md#external-services))", check: rule(signing_key, "at least 32 bytes"), default: "unset (nothing signed)" },
    { "FLOWHOST_SERVICE_SIGNING_KEY_SECRET_NAME", service_signing_key_secret_name, "secret-store name of the signing key" },
    { "FLOWHOST_METRICS_TOKEN", metrics_token, "`/metrics` on every listener needs `Authorization: Bearer <token>`", default: "unset (metrics open)" },
    { "FLOWHOST_METRICS_TOKEN_SECRET_NAME", metrics_token_secret_name, "secret-store name of the metrics token" },
    { "FLOWHOST_EGRESS_ALLOWED", egress.allowed, "networks, addresses and host names outbound calls to registered endpoints may reach", default: "empty (any but link-local and metadata addresses)" },
    { "FLOWHOST_EGRESS_MAX_BODY_BYTES", egress.max_body_bytes, "the largest answer read from such a call", check: between(1024, 64 << 20) },
    { "FLOWHOST_TOPIC_PARTITIONS", topics.partitions, "partitions of topics Flowhost creates", check: between(1, 1024) },
    { "FLOWHOST_TOPICS_RETENTION_MS", topics.retention_ms, "embedded log: records older than this are deleted (checked every minute; `0` = no age limit)", check: at_least(0), default: "`604800000` (7 days)" },
    { "FLOWHOST_TOPICS_RETENTION_BYTES", topics.retention_bytes, "embedded log: oldest records beyond this size per partition are deleted (`0` = no size limit)", check: at_least(0), default: "`1073741824` (1 GiB)" },
    { "FLOWHOST_CACHE_MAX_ENTRIES", cache.max_entries, "embedded cache bound: a full cache evicts expired entries first, then the least recently used", check: at_least(1) },
    { "FLOWHOST_MONGODB_URI", mongodb.uri, "documents in MongoDB", check: rule(mongodb_uri, "`mongodb://` or `mongodb+srv://`"), default: "unset (embedded)" },
    { "FLOWHOST_MONGODB_DATABASE", mongodb.database, "the database of Flowhost's documents" },
    { "FLOWHOST_KAFKA_BROKERS", kafka.brokers, "topics in Kafka, bootstrap servers comma-separated", check: not_blank(), default: "unset (embedded)" },
    { "", kafka.properties, "extra librdkafka properties, e.g. `\"security.protocol\" = \"SSL\"`" },
    { "FLOWHOST_KAFKA_TOPIC_PREFIX", kafka.topic_prefix, "`P` puts every topic and consumer group on Kafka under `P.` (see [Sharing servers between deployments](#sharing-servers-between-deployments))", check: rule(kafka_prefix, ""), default: "unset (the names as given)" },
    { "FLOWHOST_NATS_URL", nats.url, "subjects over NATS; `nats://user:password@host:4222` (percent-encoded) or `nats://token@host:4222` signs in to the deployment's account", check: not_blank(), default: "unset (in process)" },
    { "FLOWHOST_NATS_SUBJECT_PREFIX", nats.subject_prefix, "`P` puts every subject, queue group and reply inbox under `P.`", check: rule(nats_prefix, ""), default: "unset (the specification's subjects)" },
    { "FLOWHOST_REDIS_URL", redis.url, "cache and work queue in Redis (`redis://` or `rediss://`); the address is resolved in the specification's order (see [Secrets](#secrets))", default: "unset (in process)" },
    { "FLOWHOST_REDIS_URL_SECRET_NAME", redis.url_secret_name, "secret-store name of the Redis URL" },
    { "FLOWHOST_REDIS_HOST", redis.host, "Redis `host:port`, when no URL is given" },
    { "FLOWHOST_REDIS_HOST_SECRET_NAME", redis.host_secret_name, "secret-store name of the Redis host" },
    { "FLOWHOST_REDIS_PASSWORD", redis.password, "the password put into the composed Redis URL" },
    { "FLOWHOST_REDIS_PASSWORD_SECRET_NAME", redis.password_secret_name, "secret-store name of the Redis password" },
    { "FLOWHOST_REDIS_DB", redis.db, "the logical database of the composed URL, when the host names none" },
    { "FLOWHOST_REDIS_KEY_PREFIX", redis.key_prefix, "`P` puts every Redis key under `P:` (the work queue's and the gateway cache's too)", check: rule(redis_prefix, "") },
    { "KEY_VAULT_URL", key_vault_url, "secret store for `*_SECRET_NAME` settings" },
    { "FLOWHOST_LOG", log.filter, "`tracing` filter" },
    { "FLOWHOST_LOG_FORMAT", log.format, "`text` or `json`", parse: keyword },
]);

fn http_url(url: &Option<String>) -> Result<(), String> {
    match url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            Err("must be an http:// or https:// URL".to_owned())
        }
        _ => Ok(()),
    }
}

fn signing_key(key: &Option<Secret>) -> Result<(), String> {
    match key {
        Some(key) if key.expose().len() < crate::signing::MIN_KEY_BYTES => {
            Err(format!("use at least {} bytes", crate::signing::MIN_KEY_BYTES))
        }
        _ => Ok(()),
    }
}

fn mongodb_uri(uri: &Option<String>) -> Result<(), String> {
    match uri.as_deref() {
        Some(uri) if uri.trim().is_empty() => Err("must not be empty when given".to_owned()),
        Some(uri) if !uri.starts_with("mongodb://") && !uri.starts_with("mongodb+srv://") => {
            Err("must start with mongodb:// or mongodb+srv://".to_owned())
        }
        _ => Ok(()),
    }
}

/// The namespace prefixes hold only what every name on their backend may hold, so a prefixed name is as
/// valid as the name itself. The embedded defaults ignore them (one process is one deployment).
fn prefix_word(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn nats_prefix(prefix: &Option<String>) -> Result<(), String> {
    match prefix {
        Some(prefix) if !prefix.split('.').all(prefix_word) => {
            Err("must be one or more dot-separated tokens of letters, digits, '_' and '-'".to_owned())
        }
        _ => Ok(()),
    }
}

fn kafka_prefix(prefix: &Option<String>) -> Result<(), String> {
    match prefix {
        Some(prefix) if prefix.len() > 100 || !prefix.split('.').all(prefix_word) => {
            Err("must be at most 100 characters: dot-separated letters, digits, '_' and '-'".to_owned())
        }
        _ => Ok(()),
    }
}

fn redis_prefix(prefix: &Option<String>) -> Result<(), String> {
    let bad = |prefix: &str| {
        prefix.is_empty()
            || prefix.len() > 100
            || prefix.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'{' || b == b'}')
    };
    match prefix {
        Some(prefix) if bad(prefix) => Err("must be 1 to 100 characters without whitespace or braces".to_owned()),
        _ => Ok(()),
    }
}

/// The documentation's configuration tables, one per section: its name, the page that holds it, and its rows
/// (see `crate::settings::markdown_rows`). A test compares each page with them.
pub fn documentation() -> Vec<(&'static str, &'static str, String)> {
    use crate::settings::markdown_rows;
    vec![
        ("core", "configuration.md", markdown_rows(CORE_SETTINGS)),
        ("plugins", "configuration.md", markdown_rows(PLUGINS_SETTINGS)),
        ("engine", "configuration.md", markdown_rows(ENGINE_SETTINGS)),
        ("push", "configuration.md", markdown_rows(PUSH_SETTINGS)),
        ("gateway", "gateway.md", markdown_rows(GATEWAY_SETTINGS)),
        ("presence", "presence.md", markdown_rows(PRESENCE_SETTINGS)),
        ("campaigns", "campaigns.md", markdown_rows(CAMPAIGNS_SETTINGS)),
    ]
}

impl Config {
    /// Defaults, then the TOML file (if any), then the environment; validated.
    pub fn load(file: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ConfigError::new(path.display().to_string(), e.to_string()))?;
                toml::from_str(&text).map_err(|e| ConfigError::new(path.display().to_string(), e.to_string()))?
            }
            None => Config::default(),
        };
        config.apply_env(env)?;
        config.validate()?;
        Ok(config)
    }

    /// Overrides settings from environment variables, through every section's table; an unparsable value
    /// names its variable.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        use crate::settings::apply_env;
        apply_env(self, CORE_SETTINGS, &env)?;
        apply_env(&mut self.plugins, PLUGINS_SETTINGS, &env)?;
        apply_env(&mut self.engine, ENGINE_SETTINGS, &env)?;
        apply_env(&mut self.push, PUSH_SETTINGS, &env)?;
        apply_env(&mut self.gateway, GATEWAY_SETTINGS, &env)?;
        apply_env(&mut self.presence, PRESENCE_SETTINGS, &env)?;
        apply_env(&mut self.campaigns, CAMPAIGNS_SETTINGS, &env)?;
        Ok(())
    }

    /// Every setting within its bounds (the tables), then the rules that tie settings together, then what the
    /// selected roles need.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::settings::check(self, CORE_SETTINGS)?;
        self.engine.validate()?;
        self.plugins.validate()?;
        self.push.validate()?;
        crate::settings::check(&self.gateway, GATEWAY_SETTINGS)?;
        crate::settings::check(&self.presence, PRESENCE_SETTINGS)?;
        crate::settings::check(&self.campaigns, CAMPAIGNS_SETTINGS)?;
        if self.roles.is_empty() {
            return Err(ConfigError::new("roles", "no role given"));
        }
        let gateway_parts: Vec<GatewayParts> = self.roles.iter().filter_map(|r| r.gateway_parts()).collect();
        if !gateway_parts.is_empty() {
            let count = |part: fn(&GatewayParts) -> bool| gateway_parts.iter().filter(|p| part(p)).count();
            if count(|p| p.edge) > 1 || count(|p| p.ingest) > 1 || count(|p| p.worker) > 1 || count(|p| p.admin) > 1 {
                return Err(ConfigError::new(
                    "FLOWHOST_ROLES",
                    "a gateway part is named twice (gateway already runs gateway-edge, gateway-ingest, gateway-worker \
                     and gateway-admin)",
                ));
            }
            self.gateway.validate(count(|p| p.edge) > 0)?;
        }
        if self.roles.contains(&Role::Presence) {
            self.presence.validate()?;
        }
        if self.roles.contains(&Role::Campaigns) {
            self.campaigns.validate()?;
        }
        let redis = &self.redis;
        let no_host = redis.url.is_none()
            && redis.url_secret_name.is_none()
            && redis.host.is_none()
            && redis.host_secret_name.is_none();
        if no_host && (redis.password.is_some() || redis.password_secret_name.is_some() || redis.db.is_some()) {
            return Err(ConfigError::new("FLOWHOST_REDIS_HOST", "a Redis password or db is set without a host"));
        }
        let pending = self.pending_secrets();
        if let Some((setting, _)) = pending.first() {
            // Values come at start (resolve_secrets, which validates again); only the store's address is
            // needed now.
            if self.key_vault_url.is_none() {
                return Err(ConfigError::new(setting.setting, "needs KEY_VAULT_URL"));
            }
        } else {
            self.redis_url()?;
            self.push_secrets()?;
        }
        Ok(())
    }

    /// The base URL services reach this API under: `api.public_base_url`, else `api.http_addr`, else the API's
    /// address (loopback when it listens on every interface).
    pub fn public_base_url(&self) -> String {
        if let Some(url) = &self.api.public_base_url {
            return url.clone();
        }
        if let Some(base) = self.api.http_addr.as_deref().and_then(|addr| http_addr_base(addr).ok()) {
            return base;
        }
        http_base(&self.api.host, self.api.port)
    }

    /// The reply dedup window (`engine.dedup_ttl_ms`), `None` when turned off.
    pub fn reply_dedup(&self) -> Option<std::time::Duration> {
        self.engine.reply_dedup()
    }

    /// Where compiled components are cached: `plugins.compile_cache_dir`, else `component-cache` in the data
    /// directory.
    pub fn compile_cache_dir(&self) -> PathBuf {
        self.plugins.compile_cache_dir.clone().unwrap_or_else(|| self.data_dir.join("component-cache"))
    }

    /// The main listener's address, `api.host:api.port` (the admin API's, and the push routes' by default).
    pub fn api_addr(&self) -> String {
        if self.api.host.contains(':') && !self.api.host.starts_with('[') {
            format!("[{}]:{}", self.api.host, self.api.port)
        } else {
            format!("{}:{}", self.api.host, self.api.port)
        }
    }

    /// The push settings that may come from the secret store. Each is its literal value: at start
    /// [`Config::resolve_secrets`] fills the literals left unset from the secrets their `*_SECRET_NAME` names,
    /// so a name still unresolved here is an error naming it.
    pub fn push_secrets(&self) -> Result<PushSecrets, ConfigError> {
        let push = &self.push;
        Ok(PushSecrets {
            callers_json: self.literal(
                push.callers_json.as_ref(),
                &push.callers_json_secret_name,
                "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME",
            )?,
            vapid_public_key: self.literal(
                push.vapid_public_key.as_ref(),
                &push.vapid_public_key_secret_name,
                "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME",
            )?,
            vapid_private_key: self.literal(
                push.vapid_private_key.as_ref(),
                &push.vapid_private_key_secret_name,
                "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME",
            )?,
            interaction_token_secret: self.literal(
                push.interaction_token_secret.as_ref(),
                &push.interaction_token_secret_secret_name,
                "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME",
            )?,
            editor_token: self.literal(
                push.editor_token.as_ref(),
                &push.editor_token_secret_name,
                "INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME",
            )?,
        })
    }

    /// The Redis URL to use, or `None` for the embedded cache, composed from the literals (see
    /// [`RedisConfig`] for the order; [`Config::resolve_secrets`] filled the ones named in the secret store).
    pub fn redis_url(&self) -> Result<Option<String>, ConfigError> {
        let redis = &self.redis;
        let url = self.literal(redis.url.as_ref(), &redis.url_secret_name, "FLOWHOST_REDIS_URL_SECRET_NAME")?;
        if let Some(url) = url {
            if !url.starts_with("redis://") && !url.starts_with("rediss://") {
                let message = match &redis.url_secret_name {
                    Some(_) => "must start with redis:// or rediss:// (so must the secret FLOWHOST_REDIS_URL_SECRET_NAME names)",
                    None => "must start with redis:// or rediss://",
                };
                return Err(ConfigError::new("FLOWHOST_REDIS_URL", message));
            }
            return Ok(Some(url));
        }
        let host = self.literal(redis.host.as_ref(), &redis.host_secret_name, "FLOWHOST_REDIS_HOST_SECRET_NAME")?;
        let Some(host) = host else {
            return Ok(None);
        };
        let password =
            self.literal(redis.password.as_ref(), &redis.password_secret_name, "FLOWHOST_REDIS_PASSWORD_SECRET_NAME")?;
        let host = host.trim_start_matches("redis://");
        let auth = password.map(|p| format!(":{}@", p.expose())).unwrap_or_default();
        let db = match redis.db {
            Some(db) if !host.contains('/') => format!("/{db}"),
            _ => String::new(),
        };
        Ok(Some(format!("redis://{auth}{host}{db}")))
    }

    /// A setting's literal value; an error naming `setting` when only its secret name is set (not resolved).
    fn literal<T: Clone>(
        &self,
        literal: Option<&T>,
        secret_name: &Option<String>,
        setting: &str,
    ) -> Result<Option<T>, ConfigError> {
        match (literal, secret_name) {
            (Some(value), _) => Ok(Some(value.clone())),
            (None, Some(_)) => Err(self.unresolved(setting)),
            (None, None) => Ok(None),
        }
    }

    fn unresolved(&self, setting: &str) -> ConfigError {
        match &self.key_vault_url {
            None => ConfigError::new(setting, "needs KEY_VAULT_URL"),
            Some(_) => ConfigError::new(setting, "is not resolved yet: the secret store is read at start"),
        }
    }

    /// The settings whose value is still to be read from the secret store, in the spec's order, with the
    /// secret name each one gives. A literal that is set wins, so its secret name is not listed; Redis host
    /// and password are not listed when a Redis URL (literal or named) is configured.
    pub fn pending_secrets(&self) -> Vec<(&'static SecretSetting, String)> {
        SECRET_SETTINGS
            .iter()
            .filter(|setting| (setting.needed)(self))
            .filter_map(|setting| (setting.secret_name)(self).map(|name| (setting, name)))
            .collect()
    }

    /// Reads every pending secret (see [`Config::pending_secrets`]) from `store`, in order, fills its
    /// literal, then validates again with the values. A failure names the `*_SECRET_NAME` setting and the
    /// secret's name, never a value. Returns how many secrets were read.
    pub async fn resolve_secrets(&mut self, store: &dyn SecretStore) -> Result<usize, ConfigError> {
        let mut resolved = 0;
        for setting in SECRET_SETTINGS {
            // Asked again per setting: a Redis URL read from the store makes host and password unneeded.
            if !(setting.needed)(self) {
                continue;
            }
            let Some(name) = (setting.secret_name)(self) else { continue };
            // The store's errors name the secret already (and never its value).
            let value = store.get(&name).await.map_err(|error| ConfigError::new(setting.setting, error.to_string()))?;
            (setting.fill)(self, value);
            resolved += 1;
        }
        self.validate()?;
        Ok(resolved)
    }
}

/// One setting whose value may instead be named in the secret store: the literal wins when set, else the
/// secret its `*_SECRET_NAME` names is read at start. [`SECRET_SETTINGS`] lists them all; a new one (e.g.
/// presence's `DOCDB_URI_SECRET_NAME`) is one entry there.
pub struct SecretSetting {
    /// The literal's environment variable (`FLOWHOST_REDIS_URL`).
    pub literal: &'static str,
    /// The secret-name environment variable (`FLOWHOST_REDIS_URL_SECRET_NAME`).
    pub setting: &'static str,
    secret_name: fn(&Config) -> Option<String>,
    /// Whether the value is still wanted: the literal is unset (and nothing earlier in the order made it moot).
    needed: fn(&Config) -> bool,
    fill: fn(&mut Config, Secret),
}

impl std::fmt::Debug for SecretSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSetting").field("literal", &self.literal).field("setting", &self.setting).finish()
    }
}

/// Every `*_SECRET_NAME` setting, in the spec's order (spec 001 item 8 for Redis: URL, then the URL's secret
/// name, then host and password composition; spec 000 for the push settings).
pub static SECRET_SETTINGS: &[SecretSetting] = &[
    SecretSetting {
        literal: "FLOWHOST_REDIS_URL",
        setting: "FLOWHOST_REDIS_URL_SECRET_NAME",
        secret_name: |c| c.redis.url_secret_name.clone(),
        needed: |c| c.redis.url.is_none(),
        fill: |c, v| c.redis.url = Some(v.expose().to_owned()),
    },
    SecretSetting {
        literal: "FLOWHOST_REDIS_HOST",
        setting: "FLOWHOST_REDIS_HOST_SECRET_NAME",
        secret_name: |c| c.redis.host_secret_name.clone(),
        needed: |c| c.redis.url.is_none() && c.redis.url_secret_name.is_none() && c.redis.host.is_none(),
        fill: |c, v| c.redis.host = Some(v.expose().to_owned()),
    },
    SecretSetting {
        literal: "FLOWHOST_REDIS_PASSWORD",
        setting: "FLOWHOST_REDIS_PASSWORD_SECRET_NAME",
        secret_name: |c| c.redis.password_secret_name.clone(),
        needed: |c| c.redis.url.is_none() && c.redis.url_secret_name.is_none() && c.redis.password.is_none(),
        fill: |c, v| c.redis.password = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON",
        setting: "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME",
        secret_name: |c| c.push.callers_json_secret_name.clone(),
        needed: |c| c.push.callers_json.is_none(),
        fill: |c, v| c.push.callers_json = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY",
        setting: "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME",
        secret_name: |c| c.push.vapid_public_key_secret_name.clone(),
        needed: |c| c.push.vapid_public_key.is_none(),
        fill: |c, v| c.push.vapid_public_key = Some(v.expose().to_owned()),
    },
    SecretSetting {
        literal: "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY",
        setting: "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME",
        secret_name: |c| c.push.vapid_private_key_secret_name.clone(),
        needed: |c| c.push.vapid_private_key.is_none(),
        fill: |c, v| c.push.vapid_private_key = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET",
        setting: "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME",
        secret_name: |c| c.push.interaction_token_secret_secret_name.clone(),
        needed: |c| c.push.interaction_token_secret.is_none(),
        fill: |c, v| c.push.interaction_token_secret = Some(v),
    },
    SecretSetting {
        literal: "INAPP_EDITOR_API_AUTH_TOKEN",
        setting: "INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME",
        secret_name: |c| c.push.editor_token_secret_name.clone(),
        needed: |c| c.push.editor_token.is_none(),
        fill: |c, v| c.push.editor_token = Some(v),
    },
    SecretSetting {
        literal: "DOCDB_URI",
        setting: "DOCDB_URI_SECRET_NAME",
        secret_name: |c| c.presence.docdb_uri_secret_name.clone(),
        needed: |c| c.presence.docdb_uri.is_none(),
        fill: |c, v| c.presence.docdb_uri = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_ADMIN_TOKEN",
        setting: "FLOWHOST_ADMIN_TOKEN_SECRET_NAME",
        secret_name: |c| c.api.admin_token_secret_name.clone(),
        needed: |c| c.api.admin_token.is_none(),
        fill: |c, v| c.api.admin_token = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_SERVICE_SIGNING_KEY",
        setting: "FLOWHOST_SERVICE_SIGNING_KEY_SECRET_NAME",
        secret_name: |c| c.service_signing_key_secret_name.clone(),
        needed: |c| c.service_signing_key.is_none(),
        fill: |c, v| c.service_signing_key = Some(v),
    },
    SecretSetting {
        literal: "FLOWHOST_METRICS_TOKEN",
        setting: "FLOWHOST_METRICS_TOKEN_SECRET_NAME",
        secret_name: |c| c.metrics_token_secret_name.clone(),
        needed: |c| c.metrics_token.is_none(),
        fill: |c, v| c.metrics_token = Some(v),
    },
];

/// `http://<host>:<port>`, loopback for a wildcard host, brackets around an IPv6 address.
fn http_base(host: &str, port: u16) -> String {
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "::" | "[::]" => "[::1]",
        other => other,
    };
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() };
    format!("http://{host}:{port}")
}

/// The base URL `FLOWHOST_HTTP_ADDR` publishes under: an `http://` or `https://` URL as given (without a
/// trailing `/`), or `host:port` / `:port` as `http://<host>:<port>` (loopback for an empty or wildcard host).
fn http_addr_base(addr: &str) -> Result<String, String> {
    let addr = addr.trim();
    if addr.starts_with("http://") || addr.starts_with("https://") {
        let url = addr.trim_end_matches('/');
        return match url.split_once("://") {
            Some((_, rest)) if !rest.is_empty() => Ok(url.to_owned()),
            _ => Err("names no host".to_owned()),
        };
    }
    if addr.contains("://") {
        return Err("must be host:port, :port, or an http:// or https:// URL".to_owned());
    }
    let (host, port) = addr.rsplit_once(':').ok_or("must be host:port, :port, or an http:// or https:// URL")?;
    let port: u16 = port.parse().map_err(|_| format!("port {port:?} is not a number from 1 to 65535"))?;
    if port == 0 {
        return Err("port 0 is not an address services can reach".to_owned());
    }
    if host.contains('/') || host.chars().any(char::is_whitespace) {
        return Err(format!("host {host:?} is not a host name or address"));
    }
    Ok(http_base(host.trim_start_matches('[').trim_end_matches(']'), port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(None, |name| vars.get(name).cloned())
    }

    #[test]
    fn defaults_are_embedded_on_8787() {
        let config = load(&[]).unwrap();
        assert_eq!(config.api.port, 8787);
        assert_eq!(config.mongodb.uri, None);
        assert_eq!(config.redis_url().unwrap(), None);
        assert_eq!(config.roles, Role::ALL.to_vec());
    }

    #[test]
    fn the_http_ingress_is_published_under_the_public_base_url_else_the_http_addr() {
        // Neither set: the API's own address.
        assert_eq!(load(&[]).unwrap().public_base_url(), "http://127.0.0.1:8787");
        let cases = [
            ("flowhost.internal:8080", "http://flowhost.internal:8080"),
            (":8080", "http://127.0.0.1:8080"),
            ("0.0.0.0:9000", "http://127.0.0.1:9000"),
            ("[::]:9000", "http://[::1]:9000"),
            ("https://ingress.example/", "https://ingress.example"),
        ];
        for (addr, base) in cases {
            let config = load(&[("FLOWHOST_HTTP_ADDR", addr)]).unwrap();
            assert_eq!(config.api.http_addr.as_deref(), Some(addr));
            assert_eq!(config.public_base_url(), base, "{addr}");
        }
        // The public base URL wins when both are set.
        let both = load(&[
            ("FLOWHOST_HTTP_ADDR", "flowhost.internal:8080"),
            ("FLOWHOST_HTTP_PUBLIC_BASE_URL", "https://flowhost.example/"),
        ])
        .unwrap();
        assert_eq!(both.public_base_url(), "https://flowhost.example");
        for bad in ["flowhost.internal", "host:http", "host:0", "ftp://host:21", "https://", "a b:80"] {
            let error = load(&[("FLOWHOST_HTTP_ADDR", bad)]).unwrap_err();
            assert_eq!(error.setting, "FLOWHOST_HTTP_ADDR", "{bad}: {error}");
        }
    }

    #[test]
    fn errors_name_the_setting() {
        let cases = [
            (vec![("API_PORT", "eighty")], "API_PORT"),
            (vec![("FLOWHOST_ROLES", "admin,bogus")], "FLOWHOST_ROLES"),
            (vec![("FLOWHOST_REDIS_URL_SECRET_NAME", "x")], "FLOWHOST_REDIS_URL_SECRET_NAME"),
            (vec![("FLOWHOST_MONGODB_URI", "http://x")], "FLOWHOST_MONGODB_URI"),
            (vec![("FLOWHOST_LOG_FORMAT", "xml")], "FLOWHOST_LOG_FORMAT"),
            (vec![("FLOWHOST_REDIS_PASSWORD", "p")], "FLOWHOST_REDIS_HOST"),
            (vec![("FLOWHOST_ENGINE_RUNS_RETENTION_MS", "1000")], "FLOWHOST_ENGINE_RUNS_RETENTION_MS"),
            (
                vec![("FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS", "86400000")],
                "FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS",
            ),
            (vec![("FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS", "0")], "FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS"),
            (vec![("FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS", "some")], "FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS"),
        ];
        for (vars, setting) in cases {
            let error = load(&vars).unwrap_err();
            assert_eq!(error.setting, setting, "{vars:?}: {error}");
            assert!(error.to_string().contains(setting));
        }
    }

    #[test]
    fn sender_settings_come_from_the_environment_and_are_bounded() {
        let defaults = load(&[]).unwrap().push;
        assert_eq!(defaults.vapid_subject, DEFAULT_VAPID_SUBJECT);
        assert_eq!((defaults.push_ttl_seconds, defaults.max_concurrent_pushes), (86_400, 256));
        assert_eq!((defaults.push_service_hosts, defaults.ssl_cert_file), (None, None));
        let push = load(&[
            ("FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS", " 127.0.0.1, push.example:8443 "),
            ("FLOWHOST_WEBPUSH_VAPID_SUBJECT", "https://casino.example/contact"),
            ("FLOWHOST_WEBPUSH_TTL_SECONDS", "600"),
            ("FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES", "32"),
            ("SSL_CERT_FILE", "/etc/ssl/extra.pem"),
        ])
        .unwrap()
        .push;
        assert_eq!(push.push_service_hosts.as_deref(), Some("127.0.0.1, push.example:8443"));
        assert_eq!(push.vapid_subject, "https://casino.example/contact");
        assert_eq!((push.push_ttl_seconds, push.max_concurrent_pushes), (600, 32));
        assert_eq!(push.ssl_cert_file.as_deref(), Some("/etc/ssl/extra.pem"));
        for (name, value) in [
            ("FLOWHOST_WEBPUSH_VAPID_SUBJECT", "ops@casino.example"),
            ("FLOWHOST_WEBPUSH_TTL_SECONDS", "0"),
            ("FLOWHOST_WEBPUSH_TTL_SECONDS", "2419201"),
            ("FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES", "0"),
            ("FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES", "many"),
        ] {
            assert_eq!(load(&[(name, value)]).unwrap_err().setting, name, "{name}={value}");
        }
        assert_eq!(parse_roles("sender").unwrap(), [Role::Sender]);
        assert!(Role::ALL.contains(&Role::Sender), "serve runs the sender by default");
    }

    #[test]
    fn plugin_settings_come_from_the_environment_and_are_bounded() {
        let config = load(&[("FLOWHOST_PLUGINS_TIMEOUT_MS", "250"), ("FLOWHOST_PLUGINS_BUNDLED", "false")]).unwrap();
        assert_eq!((config.plugins.timeout_ms, config.plugins.bundled), (250, false));
        assert_eq!(config.plugins.max_component_bytes, 8 << 20);
        assert_eq!(config.plugins.compile_cache_dir, None, "the default lives in the data directory");
        let shared = load(&[("FLOWHOST_PLUGINS_COMPILE_CACHE_DIR", "/var/cache/flowhost")]).unwrap();
        assert_eq!(shared.plugins.compile_cache_dir, Some(PathBuf::from("/var/cache/flowhost")));
        for (name, value) in [
            ("FLOWHOST_PLUGINS_MEMORY_BYTES", "1000000000"),
            ("FLOWHOST_PLUGINS_MAX_COMPONENT_BYTES", "20000000"),
            ("FLOWHOST_PLUGINS_TIMEOUT_MS", "0"),
        ] {
            let error = load(&[(name, value)]).unwrap_err();
            assert_eq!(error.setting, name, "{error}");
        }
        assert_eq!(load(&[("FLOWHOST_PLUGINS_FUEL", "lots")]).unwrap_err().setting, "FLOWHOST_PLUGINS_FUEL");
        assert_eq!(load(&[]).unwrap().plugins.capabilities, ["log", "clock", "documents", "notifications"]);
        let config = load(&[("FLOWHOST_PLUGINS_CAPABILITIES", "log, clock")]).unwrap();
        assert_eq!(config.plugins.capabilities, ["log", "clock"]);
        let error = load(&[("FLOWHOST_PLUGINS_CAPABILITIES", "log,network")]).unwrap_err();
        assert!(error.setting == "FLOWHOST_PLUGINS_CAPABILITIES" && error.message.contains("network"), "{error}");

        let config = load(&[("FLOWHOST_PLUGINS_GRANTS", "greeter=log, documents; visits=log;quiet=")]).unwrap();
        assert_eq!(config.plugins.grants["greeter"], ["log", "documents"]);
        assert_eq!(config.plugins.grants["visits"], ["log"]);
        assert!(config.plugins.grants["quiet"].is_empty());
        for bad in ["greeter", "=log", "a=log;a=clock"] {
            assert_eq!(
                load(&[("FLOWHOST_PLUGINS_GRANTS", bad)]).unwrap_err().setting,
                "FLOWHOST_PLUGINS_GRANTS",
                "{bad}"
            );
        }
        let error = load(&[("FLOWHOST_PLUGINS_CAPABILITIES", "log"), ("FLOWHOST_PLUGINS_GRANTS", "greeter=documents")])
            .unwrap_err();
        assert!(error.setting == "FLOWHOST_PLUGINS_GRANTS" && error.message.contains("documents"), "{error}");
    }

    #[test]
    fn redis_url_resolution_order() {
        let config = load(&[("FLOWHOST_REDIS_URL", "redis://a:1"), ("FLOWHOST_REDIS_HOST", "b:2")]).unwrap();
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://a:1"));
        let config = load(&[
            ("FLOWHOST_REDIS_HOST", "b:2"),
            ("FLOWHOST_REDIS_PASSWORD", "pw"),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "ignored"),
            ("FLOWHOST_REDIS_DB", "3"),
        ])
        .unwrap();
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://:pw@b:2/3"));
        let config = load(&[("FLOWHOST_REDIS_HOST", "b:2/5"), ("FLOWHOST_REDIS_DB", "3")]).unwrap();
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://b:2/5"));
    }

    #[test]
    fn the_queue_admin_api_is_a_gateway_role_of_its_own() {
        assert_eq!(parse_roles("gateway-admin").unwrap(), [Role::GatewayAdmin]);
        let admin = Role::GatewayAdmin.gateway_parts().unwrap();
        assert!(admin.admin && !admin.edge && !admin.ingest && !admin.worker);
        assert!(!Role::GatewayIngest.gateway_parts().unwrap().admin, "ingest no longer serves the queue admin");
        assert!(Role::Gateway.gateway_parts().unwrap().admin, "gateway runs every part");
        for (roles, refused) in
            [("gateway-ingest,gateway-admin,gateway-worker", false), ("gateway,gateway-admin", true)]
        {
            let result = load(&[("FLOWHOST_ROLES", roles)]);
            assert_eq!(result.is_err(), refused, "{roles}: {result:?}");
            if let Err(error) = result {
                assert_eq!(error.setting, "FLOWHOST_ROLES");
            }
        }
    }

    #[test]
    fn push_defaults() {
        let config = load(&[]).unwrap();
        assert!(config.roles.contains(&Role::PushApi));
        assert_eq!(config.push.retention_days, 30);
        assert_eq!(config.push.retention_sweep_interval_ms, 3_600_000);
        assert_eq!(config.push.channels_enabled, vec![Channel::WebPush, Channel::InApp]);
        assert!(!config.push.dry_run && !config.push.allow_auto_vapid);
        assert_eq!(config.push.listen, None);
        assert_eq!(config.push_secrets().unwrap(), PushSecrets::default());
        assert_eq!(parse_roles("admin,push-api").unwrap(), vec![Role::Admin, Role::PushApi]);
        assert_eq!(parse_roles("all").unwrap(), Role::ALL.to_vec());
    }

    #[test]
    fn push_settings_from_the_environment() {
        let config = load(&[
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", r#"{"callers":[]}"#),
            ("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY", "pub"),
            ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", "priv"),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", "s1"),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS", "s0"),
            ("FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS", " casino.example , *.cdn.example ,"),
            ("WEB_PUSH_DRY_RUN", "TRUE"),
            ("FLOWHOST_CHANNELS_ENABLED", "WEB_PUSH"),
            ("INAPP_EDITOR_API_AUTH_TOKEN", "editor"),
            ("FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID", "1"),
            ("FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS", "7"),
            ("FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS", "250"),
            ("FLOWHOST_PUSH_API_LISTEN", "127.0.0.1:8788"),
            ("FLOWHOST_WEBPUSH_TENANTS", "t1,t2"),
            ("FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS", "dashboard"),
            ("FLOWHOST_ROLES", "push-api"),
        ])
        .unwrap();
        let push = &config.push;
        assert_eq!(config.roles, vec![Role::PushApi]);
        assert_eq!(push.allowed_target_hosts, ["casino.example", "*.cdn.example"]);
        assert!(push.dry_run && push.allow_auto_vapid);
        assert_eq!(push.channels_enabled, vec![Channel::WebPush]);
        assert_eq!((push.retention_days, push.retention_sweep_interval_ms), (7, 250));
        assert_eq!(push.listen.as_deref(), Some("127.0.0.1:8788"));
        assert_eq!(push.tenants, ["t1", "t2"]);
        assert_eq!(push.smoke_test_callers, ["dashboard"]);
        assert_eq!(push.interaction_token_secret_previous.as_ref().map(Secret::expose), Some("s0"));
        let secrets = config.push_secrets().unwrap();
        assert_eq!(secrets.callers_json.as_ref().map(Secret::expose), Some(r#"{"callers":[]}"#));
        assert_eq!(secrets.vapid_public_key.as_deref(), Some("pub"));
        assert_eq!(secrets.vapid_private_key.as_ref().map(Secret::expose), Some("priv"));
        assert_eq!(secrets.interaction_token_secret.as_ref().map(Secret::expose), Some("s1"));
        assert_eq!(secrets.editor_token.as_ref().map(Secret::expose), Some("editor"));
    }

    #[test]
    fn push_errors_name_the_setting() {
        let cases = [
            (vec![("WEB_PUSH_DRY_RUN", "maybe")], "WEB_PUSH_DRY_RUN"),
            (vec![("FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID", "sometimes")], "FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID"),
            (vec![("FLOWHOST_CHANNELS_ENABLED", "WEB_PUSH,SMS")], "FLOWHOST_CHANNELS_ENABLED"),
            (vec![("FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS", "0")], "FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS"),
            (vec![("FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS", "-1")], "FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS"),
            (
                vec![("FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS", "1")],
                "FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS",
            ),
            (
                vec![("FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS", "https://x.example")],
                "FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS",
            ),
            (vec![("FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS", "x.example:443")], "FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS"),
            (vec![("FLOWHOST_PUSH_API_LISTEN", "localhost")], "FLOWHOST_PUSH_API_LISTEN"),
            (vec![("FLOWHOST_ROLES", "push")], "FLOWHOST_ROLES"),
            (
                vec![("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME", "callers")],
                "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME",
            ),
            (
                vec![("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME", "hmac")],
                "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME",
            ),
            (vec![("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "editor")], "INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME"),
            (
                vec![("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS", "old")],
                "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS",
            ),
        ];
        for (vars, setting) in cases {
            let error = load(&vars).unwrap_err();
            assert_eq!(error.setting, setting, "{vars:?}: {error}");
            assert!(error.to_string().contains(setting));
        }
        // The literal wins over the secret-store name, so no secret store is needed then.
        let config = load(&[("INAPP_EDITOR_API_AUTH_TOKEN", "t"), ("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "n")]);
        assert_eq!(config.unwrap().push_secrets().unwrap().editor_token, Some(Secret::new("t")));
    }

    /// A secret store answering from a map, recording the names asked for: enough to pin the resolution order
    /// (the real store is `flowhost-keyvault`, tested against a stand-in Key Vault in `tests/tests/secrets.rs`).
    #[derive(Default)]
    struct MapStore {
        secrets: HashMap<String, String>,
        asked: std::sync::Mutex<Vec<String>>,
    }

    impl MapStore {
        fn with(secrets: &[(&str, &str)]) -> Self {
            Self { secrets: secrets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..Self::default() }
        }
        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    #[async_trait::async_trait]
    impl SecretStore for MapStore {
        fn backend(&self) -> &'static str {
            "map"
        }
        async fn get(&self, name: &str) -> Result<Secret, crate::ports::SecretError> {
            self.asked.lock().unwrap().push(name.to_owned());
            self.secrets
                .get(name)
                .map(|v| Secret::new(v.clone()))
                .ok_or_else(|| crate::ports::SecretError::NotFound(name.to_owned()))
        }
    }

    const VAULT: (&str, &str) = ("KEY_VAULT_URL", "https://vault.example");

    #[tokio::test]
    async fn a_literal_wins_over_its_secret_name() {
        let mut config = load(&[
            VAULT,
            ("INAPP_EDITOR_API_AUTH_TOKEN", "literal"),
            ("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "editor"),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME", "hmac"),
        ])
        .unwrap();
        let pending: Vec<&str> = config.pending_secrets().iter().map(|(s, _)| s.setting).collect();
        assert_eq!(pending, ["FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME"]);
        let store = MapStore::with(&[("editor", "from-store"), ("hmac", "hmac-from-store")]);
        assert_eq!(config.resolve_secrets(&store).await.unwrap(), 1);
        assert_eq!(store.asked(), ["hmac"]);
        let secrets = config.push_secrets().unwrap();
        assert_eq!(secrets.editor_token, Some(Secret::new("literal")));
        assert_eq!(secrets.interaction_token_secret, Some(Secret::new("hmac-from-store")));
    }

    #[tokio::test]
    async fn every_push_secret_resolves_by_name() {
        let mut config = load(&[
            VAULT,
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME", "callers"),
            ("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME", "vapid-public"),
            ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME", "vapid-private"),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME", "hmac"),
            ("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "editor"),
        ])
        .unwrap();
        // Before resolution the values are not there, and saying so names the setting.
        assert_eq!(config.push_secrets().unwrap_err().setting, "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME");
        let store = MapStore::with(&[
            ("callers", r#"{"callers":[]}"#),
            ("vapid-public", "pub"),
            ("vapid-private", "priv"),
            ("hmac", "mac"),
            ("editor", "ed"),
        ]);
        assert_eq!(config.resolve_secrets(&store).await.unwrap(), 5);
        assert_eq!(store.asked(), ["callers", "vapid-public", "vapid-private", "hmac", "editor"]);
        let secrets = config.push_secrets().unwrap();
        assert_eq!(secrets.callers_json, Some(Secret::new(r#"{"callers":[]}"#)));
        assert_eq!(secrets.vapid_public_key.as_deref(), Some("pub"));
        assert_eq!(secrets.vapid_private_key, Some(Secret::new("priv")));
        assert_eq!(secrets.interaction_token_secret, Some(Secret::new("mac")));
        assert_eq!(secrets.editor_token, Some(Secret::new("ed")));
        assert!(config.pending_secrets().is_empty());
    }

    #[tokio::test]
    async fn redis_secret_names_follow_the_spec_order() {
        // A literal URL wins over everything.
        let config = load(&[
            VAULT,
            ("FLOWHOST_REDIS_URL", "redis://a:1"),
            ("FLOWHOST_REDIS_URL_SECRET_NAME", "url"),
            ("FLOWHOST_REDIS_HOST_SECRET_NAME", "host"),
        ])
        .unwrap();
        assert!(config.pending_secrets().is_empty());
        // The URL's secret name comes before host and password composition, which are then not read.
        let mut config = load(&[
            VAULT,
            ("FLOWHOST_REDIS_URL_SECRET_NAME", "url"),
            ("FLOWHOST_REDIS_HOST_SECRET_NAME", "host"),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "password"),
        ])
        .unwrap();
        let store = MapStore::with(&[("url", "redis://u:2"), ("host", "h:3"), ("password", "pw")]);
        config.resolve_secrets(&store).await.unwrap();
        assert_eq!(store.asked(), ["url"]);
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://u:2"));
        // A literal host wins over its name; the password comes from the store; the db is added.
        let mut config = load(&[
            VAULT,
            ("FLOWHOST_REDIS_HOST", "h:4"),
            ("FLOWHOST_REDIS_HOST_SECRET_NAME", "host"),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "password"),
            ("FLOWHOST_REDIS_DB", "2"),
        ])
        .unwrap();
        config.resolve_secrets(&store).await.unwrap();
        assert_eq!(store.asked(), ["url", "password"]);
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://:pw@h:4/2"));
        // Both from the store.
        let mut config = load(&[
            VAULT,
            ("FLOWHOST_REDIS_HOST_SECRET_NAME", "host"),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "password"),
        ])
        .unwrap();
        config.resolve_secrets(&store).await.unwrap();
        assert_eq!(config.redis_url().unwrap().as_deref(), Some("redis://:pw@h:3"));
    }

    #[tokio::test]
    async fn a_failed_lookup_names_the_setting_and_the_secret_never_its_value() {
        let mut config = load(&[VAULT, ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME", "vapid")]).unwrap();
        let error = config.resolve_secrets(&MapStore::default()).await.unwrap_err();
        assert_eq!(error.setting, "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME");
        assert!(error.message.contains("\"vapid\"") && error.message.contains("does not exist"), "{error}");
        // A value that fails validation after resolution: the error names the setting, not the value.
        let mut config = load(&[VAULT, ("FLOWHOST_REDIS_URL_SECRET_NAME", "url")]).unwrap();
        let store = MapStore::with(&[("url", "http://user:hunter2@cache")]);
        let error = config.resolve_secrets(&store).await.unwrap_err();
        assert_eq!(error.setting, "FLOWHOST_REDIS_URL");
        assert!(error.message.contains("FLOWHOST_REDIS_URL_SECRET_NAME"), "{error}");
        assert!(!format!("{error} {error:?}").contains("hunter2"));
        // Without KEY_VAULT_URL a secret name stops the load, as before.
        let error = load(&[("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "pw"), ("FLOWHOST_REDIS_HOST", "h")]).unwrap_err();
        assert_eq!(
            (error.setting.as_str(), error.message.as_str()),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", "needs KEY_VAULT_URL")
        );
    }

    #[test]
    fn a_redis_password_is_redacted() {
        let config = load(&[("FLOWHOST_REDIS_HOST", "h"), ("FLOWHOST_REDIS_PASSWORD", "hunter2")]).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
        let config = load(&[("FLOWHOST_REDIS_URL", "redis://:hunter2@h:6379")]).unwrap();
        let debug = format!("{config:?}");
        assert!(!debug.contains("hunter2") && debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn a_bad_caller_policy_does_not_stop_the_start() {
        // The policy's content is the push-api role's business (it answers 503 and /health 503), not a
        // configuration error.
        let config = load(&[("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", "{not json")]).unwrap();
        assert_eq!(
            config.push_secrets().unwrap().callers_json.map(|s| s.expose().to_owned()).as_deref(),
            Some("{not json")
        );
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let config = load(&[
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", "hmac-secret-value"),
            ("INAPP_EDITOR_API_AUTH_TOKEN", "editor-token-value"),
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", r#"{"callers":[{"token":"caller-token-value"}]}"#),
        ])
        .unwrap();
        let debug = format!("{config:?} {:?}", config.push_secrets().unwrap());
        for secret in ["hmac-secret-value", "editor-token-value", "caller-token-value"] {
            assert!(!debug.contains(secret), "{secret} leaked in Debug");
        }
        assert!(debug.contains("<redacted>"));
    }

    #[test]
    fn push_section_in_the_file() {
        let dir = std::env::temp_dir().join(format!("flowhost-config-push-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flowhost.toml");
        std::fs::write(
            &path,
            "roles = [\"admin\", \"push-api\"]\n[push]\nretention_days = 9\nchannels_enabled = [\"IN_APP\"]\n\
             editor_token = \"e\"\n",
        )
        .unwrap();
        let config = Config::load(Some(&path), |_| None).unwrap();
        assert_eq!(config.roles, vec![Role::Admin, Role::PushApi]);
        assert_eq!(config.push.retention_days, 9);
        assert_eq!(config.push.channels_enabled, vec![Channel::InApp]);
        assert_eq!(config.push.editor_token, Some(Secret::new("e")));
        std::fs::write(&path, "[push]\nretention = 9\n").unwrap();
        let error = Config::load(Some(&path), |_| None).unwrap_err();
        assert!(error.message.contains("retention"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn file_then_env() {
        let dir = std::env::temp_dir().join(format!("flowhost-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flowhost.toml");
        std::fs::write(&path, "[api]\nport = 9000\nhost = \"0.0.0.0\"\n[engine]\nreload_interval_ms = 250\n").unwrap();
        let config = Config::load(Some(&path), |name| (name == "API_PORT").then(|| "9100".to_owned())).unwrap();
        assert_eq!((config.api.port, config.api.host.as_str()), (9100, "0.0.0.0"));
        assert_eq!(config.engine.reload_interval_ms, 250);
        std::fs::write(&path, "[api]\nprot = 1\n").unwrap();
        let error = Config::load(Some(&path), |_| None).unwrap_err();
        assert!(error.message.contains("prot"), "{error}");
    }
}
