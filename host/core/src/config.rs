//! One typed configuration for the whole process: defaults, an optional TOML file, then environment
//! variables (the spec's names), validated at start with errors that name the setting.
//!
//! A backend is chosen by configuring it: with `FLOWHOST_MONGODB_URI` documents live in MongoDB, with
//! `FLOWHOST_KAFKA_BROKERS` topics live in Kafka, with `FLOWHOST_NATS_URL` subjects go through NATS and with a
//! Redis URL (or host) the cache is Redis. Anything left unset uses the embedded default in `data_dir`.
//!
//! A setting listed in [`REDIS_SECRETS`], [`PROCESS_SECRETS`] or a section's `secrets` may instead name a secret (`*_SECRET_NAME`, with `KEY_VAULT_URL`):
//! loading only checks that the store's address is there; [`Config::resolve_secrets`] reads the values at
//! start and fills the literals, so the rest of the process only ever sees literals.
//!
//! Every setting is declared once, in its section's table (`crate::settings`): [`CORE_SETTINGS`] here for the
//! process-wide ones, [`PLUGINS_SETTINGS`] for the plugin runtime every role shares, and one table beside each
//! role's own section in the role's crate (`host/<role>/src/config.rs`, a [`Section`]). The process holds the
//! sections of the roles its binary knows in [`Config::sections`]; loading, the bounds and the documentation's
//! settings tables come from the tables.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ports::SecretStore;
pub use crate::secret::Secret;

use crate::settings::{at_least, between, keyword, not_blank, rule, SecretSetting, Setting};
pub use crate::settings::{ConfigError, PendingSecret, Section, SectionEntry, Sections};

mod api;
mod plugins;
mod redis;
pub use api::ApiConfig;
pub use plugins::{
    PluginsConfig, COMPILE_CACHE_DIR_ENV, PLUGINS_MAX_COMPONENT_BYTES, PLUGINS_MAX_MEMORY_BYTES, PLUGINS_SETTINGS,
    PLUGIN_CAPABILITIES,
};
pub use redis::{RedisConfig, REDIS_SECRETS};

/// Splits a comma-separated role list into names (`all` is one name: the binary's default roles). Which
/// names exist is the binary's role table's business (`flowhost_bin::select_roles`).
pub fn parse_roles(list: &str) -> Result<Vec<String>, String> {
    let roles = crate::settings::split_list(list);
    if roles.is_empty() {
        return Err("no role given".to_owned());
    }
    Ok(roles)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Roles this process runs, by name (`FLOWHOST_ROLES`, comma-separated; default `all`, the binary's
    /// default roles).
    pub roles: Vec<String>,
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
    pub log: LogConfig,
    pub plugins: PluginsConfig,
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
    /// The roles' own sections (`[engine]`, `[push]`, ...), each defined by its role's crate: read them with
    /// [`Config::section`]. Loading adds every section the binary knows, from the file's table of that name.
    #[serde(skip)]
    pub sections: Sections,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            roles: vec!["all".to_owned()],
            data_dir: PathBuf::from("flowhost-data"),
            api: ApiConfig::default(),
            topics: TopicsConfig::default(),
            mongodb: MongoConfig::default(),
            kafka: KafkaConfig::default(),
            nats: NatsConfig::default(),
            egress: EgressConfig::default(),
            cache: CacheConfig::default(),
            redis: RedisConfig::default(),
            log: LogConfig::default(),
            plugins: PluginsConfig::default(),
            key_vault_url: None,
            service_signing_key: None,
            service_signing_key_secret_name: None,
            metrics_token: None,
            metrics_token_secret_name: None,
            sections: Sections::default(),
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
    { "FLOWHOST_HTTP_ADDR", api.http_addr, "the HTTP ingress address (`host:port`, `:port` or an `http(s)://` URL): `/v2/<service>/inbound` and the reply URL are published under it when `FLOWHOST_HTTP_PUBLIC_BASE_URL` is unset (a wildcard or empty host publishes loopback)", check: rule(|addr: &Option<String>| addr.as_deref().map_or(Ok(()), |addr| api::http_addr_base(addr).map(|_| ())), "") },
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
    { "FLOWHOST_REDIS_KEY_PREFIX", redis.key_prefix, "`P` puts every Redis key under `P:` (the work queue's and the gateway cache's too)", check: rule(redis::key_prefix, "") },
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

/// The documentation's settings tables of the process-wide sections: a name, the page in `docs/` that holds
/// it, and its rows (see `crate::settings::markdown_rows`). The roles' sections give theirs through their
/// [`SectionEntry`]; the binary's test compares every page with them.
pub fn documentation() -> Vec<(&'static str, &'static str, String)> {
    use crate::settings::markdown_rows;
    vec![
        ("core", "configuration.md", markdown_rows(CORE_SETTINGS)),
        ("plugins", "configuration.md", markdown_rows(PLUGINS_SETTINGS)),
    ]
}

impl Config {
    /// Defaults, then the TOML file (if any), then the environment; validated. `sections` are the roles'
    /// sections the binary knows: each is read from the file's table of its name; any other table is an error.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
        sections: &[SectionEntry],
    ) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let setting = || path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| ConfigError::new(setting(), e.to_string()))?;
                let mut table: toml::Table =
                    toml::from_str(&text).map_err(|e| ConfigError::new(setting(), e.to_string()))?;
                let mut known = Sections::default();
                for entry in sections {
                    known.add(entry, table.remove(entry.name))?;
                }
                let mut config: Config = toml::Value::Table(table)
                    .try_into()
                    .map_err(|e: toml::de::Error| ConfigError::new(setting(), e.to_string()))?;
                config.sections = known;
                config
            }
            None => Config::default(),
        };
        for entry in sections {
            config.sections.add_default(entry);
        }
        config.apply_env(env)?;
        config.validate()?;
        Ok(config)
    }

    /// Section `T`: as configured, or its defaults when this configuration does not have it.
    pub fn section<T: Section>(&self) -> Cow<'_, T> {
        self.sections.get::<T>().map_or_else(|| Cow::Owned(T::default()), Cow::Borrowed)
    }

    /// Section `T` to change (added with its defaults when missing).
    pub fn section_mut<T: Section>(&mut self) -> &mut T {
        self.sections.get_mut::<T>()
    }

    /// Overrides settings from environment variables, through every section's table; an unparsable value
    /// names its variable.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        use crate::settings::apply_env;
        apply_env(self, CORE_SETTINGS, &env)?;
        apply_env(&mut self.plugins, PLUGINS_SETTINGS, &env)?;
        self.sections.apply_env(&env)
    }

    /// Every setting within its bounds (the tables), then the rules that tie settings together. What a selected
    /// role needs besides is the role's to check (`flowhost_role::Role::check`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::settings::check(self, CORE_SETTINGS)?;
        self.plugins.validate()?;
        self.sections.validate()?;
        let redis = &self.redis;
        let no_host = redis.url.is_none()
            && redis.url_secret_name.is_none()
            && redis.host.is_none()
            && redis.host_secret_name.is_none();
        if no_host && (redis.password.is_some() || redis.password_secret_name.is_some() || redis.db.is_some()) {
            return Err(ConfigError::new("FLOWHOST_REDIS_HOST", "a Redis password or db is set without a host"));
        }
        let pending = self.pending_secrets();
        if let Some(first) = pending.first() {
            // Values come at start (resolve_secrets, which validates again); only the store's address is
            // needed now.
            if self.key_vault_url.is_none() {
                return Err(ConfigError::new(first.setting, "needs KEY_VAULT_URL"));
            }
        } else {
            self.redis_url()?;
        }
        Ok(())
    }

    /// Where compiled components are cached: `plugins.compile_cache_dir`, else `component-cache` in the data
    /// directory.
    pub fn compile_cache_dir(&self) -> PathBuf {
        self.plugins.compile_cache_dir.clone().unwrap_or_else(|| self.data_dir.join("component-cache"))
    }

    /// A setting's literal value; an error naming `setting` when only its secret name is set (not resolved).
    pub fn literal<T: Clone>(
        &self,
        literal: Option<&T>,
        secret_name: &Option<String>,
        setting: &str,
    ) -> Result<Option<T>, ConfigError> {
        match (literal, secret_name) {
            (Some(value), _) => Ok(Some(value.clone())),
            (None, Some(_)) => Err(match &self.key_vault_url {
                None => ConfigError::new(setting, "needs KEY_VAULT_URL"),
                Some(_) => ConfigError::new(setting, "is not resolved yet: the secret store is read at start"),
            }),
            (None, None) => Ok(None),
        }
    }

    /// The settings whose value is still to be read from the secret store, in the spec's order (Redis, then
    /// the roles' sections, then the admin token, the signing key and the metrics token), with the secret name
    /// each one gives. A literal that is set wins, so its secret name is not listed; Redis host and password are
    /// not listed when a Redis URL (literal or named) is configured.
    pub fn pending_secrets(&self) -> Vec<PendingSecret> {
        let mut pending = crate::settings::pending(self, REDIS_SECRETS);
        pending.extend(self.sections.pending());
        pending.extend(crate::settings::pending(self, PROCESS_SECRETS));
        pending
    }

    /// Reads every pending secret (see [`Config::pending_secrets`]) from `store`, in order, fills its
    /// literal, then validates again with the values. A failure names the `*_SECRET_NAME` setting and the
    /// secret's name, never a value. Returns how many secrets were read.
    pub async fn resolve_secrets(&mut self, store: &dyn SecretStore) -> Result<usize, ConfigError> {
        let mut resolved = 0;
        for setting in REDIS_SECRETS {
            // Asked again per setting: a Redis URL read from the store makes host and password unneeded.
            if !(setting.needed)(self) {
                continue;
            }
            let Some(name) = (setting.secret_name)(self) else { continue };
            (setting.fill)(self, read_secret(store, setting.setting, &name).await?);
            resolved += 1;
        }
        let rest = self.sections.pending().into_iter().chain(crate::settings::pending(self, PROCESS_SECRETS));
        for pending in rest.collect::<Vec<_>>() {
            let value = read_secret(store, pending.setting, &pending.name).await?;
            match PROCESS_SECRETS.iter().find(|setting| setting.setting == pending.setting) {
                Some(setting) => (setting.fill)(self, value),
                None => self.sections.fill(pending.setting, value),
            }
            resolved += 1;
        }
        self.validate()?;
        Ok(resolved)
    }
}

/// The secret `name` from `store`; the store's errors name the secret already (and never its value).
async fn read_secret(store: &dyn SecretStore, setting: &str, name: &str) -> Result<Secret, ConfigError> {
    store.get(name).await.map_err(|error| ConfigError::new(setting, error.to_string()))
}

/// The other process-wide `*_SECRET_NAME` settings; read after the roles' sections'.
pub static PROCESS_SECRETS: &[SecretSetting<Config>] = &[
    crate::secret_setting!(Config, "FLOWHOST_ADMIN_TOKEN", api.admin_token, api.admin_token_secret_name),
    crate::secret_setting!(
        Config,
        "FLOWHOST_SERVICE_SIGNING_KEY",
        service_signing_key,
        service_signing_key_secret_name
    ),
    crate::secret_setting!(Config, "FLOWHOST_METRICS_TOKEN", metrics_token, metrics_token_secret_name),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A role's section as a role's crate declares one: a setting with bounds, a secret that may be named in
    /// the store, and a rule tying two settings together.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Example {
        interval_ms: u64,
        limit_ms: u64,
        token: Option<Secret>,
        token_secret_name: Option<String>,
    }

    impl Default for Example {
        fn default() -> Self {
            Self { interval_ms: 100, limit_ms: 1000, token: None, token_secret_name: None }
        }
    }

    static EXAMPLE_SETTINGS: &[Setting<Example>] = crate::settings!(Example, "example.", [
        { "EXAMPLE_INTERVAL_MS", interval_ms, "an interval", check: at_least(10) },
        { "EXAMPLE_LIMIT_MS", limit_ms, "a limit (at least the interval)" },
        { "EXAMPLE_TOKEN", token, "a token" },
        { "EXAMPLE_TOKEN_SECRET_NAME", token_secret_name, "secret-store name of the token" },
    ]);

    impl Section for Example {
        const NAME: &'static str = "example";
        const PAGE: &'static str = "example.md";
        fn settings() -> &'static [Setting<Self>] {
            EXAMPLE_SETTINGS
        }
        fn secrets() -> &'static [SecretSetting<Self>] {
            &[SecretSetting {
                literal: "EXAMPLE_TOKEN",
                setting: "EXAMPLE_TOKEN_SECRET_NAME",
                secret_name: |example| example.token_secret_name.clone(),
                needed: |example| example.token.is_none(),
                fill: |example, value| example.token = Some(value),
            }]
        }
        fn validate(&self) -> Result<(), ConfigError> {
            if self.limit_ms < self.interval_ms {
                return Err(ConfigError::new("EXAMPLE_LIMIT_MS", "must be at least EXAMPLE_INTERVAL_MS"));
            }
            Ok(())
        }
    }

    const SECTIONS: [SectionEntry; 1] = [SectionEntry::of::<Example>()];

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(None, |name| vars.get(name).cloned(), &SECTIONS)
    }

    #[test]
    fn a_roles_section_loads_from_the_file_and_the_environment_through_its_table() {
        let config = load(&[("EXAMPLE_INTERVAL_MS", "250")]).unwrap();
        assert_eq!(config.section::<Example>().interval_ms, 250);
        assert_eq!(load(&[("EXAMPLE_INTERVAL_MS", "5")]).unwrap_err().setting, "EXAMPLE_INTERVAL_MS");
        assert_eq!(load(&[("EXAMPLE_LIMIT_MS", "50")]).unwrap_err().setting, "EXAMPLE_LIMIT_MS");
        // A configuration built in code has every section at its defaults until changed.
        let mut config = Config::default();
        assert_eq!(*config.section::<Example>(), Example::default());
        config.section_mut::<Example>().limit_ms = 5000;
        assert_eq!(config.section::<Example>().limit_ms, 5000);
        assert_ne!(config, Config::default(), "sections take part in equality");
    }

    #[test]
    fn defaults_are_embedded_on_8787() {
        let config = load(&[]).unwrap();
        assert_eq!(config.api.port, 8787);
        assert_eq!(config.mongodb.uri, None);
        assert_eq!(config.redis_url().unwrap(), None);
        assert_eq!(config.roles, ["all"], "the binary's default roles");
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
            (vec![("FLOWHOST_ROLES", " , ")], "FLOWHOST_ROLES"),
            (vec![("FLOWHOST_REDIS_URL_SECRET_NAME", "x")], "FLOWHOST_REDIS_URL_SECRET_NAME"),
            (vec![("FLOWHOST_MONGODB_URI", "http://x")], "FLOWHOST_MONGODB_URI"),
            (vec![("FLOWHOST_LOG_FORMAT", "xml")], "FLOWHOST_LOG_FORMAT"),
            (vec![("FLOWHOST_REDIS_PASSWORD", "p")], "FLOWHOST_REDIS_HOST"),
        ];
        for (vars, setting) in cases {
            let error = load(&vars).unwrap_err();
            assert_eq!(error.setting, setting, "{vars:?}: {error}");
            assert!(error.to_string().contains(setting));
        }
    }

    #[test]
    fn plugin_settings_come_from_the_environment_and_are_bounded() {
        let config = load(&[("FLOWHOST_PLUGINS_TIMEOUT_MS", "250"), ("FLOWHOST_PLUGINS_BUNDLED", "false")]).unwrap();
        assert_eq!((config.plugins.timeout_ms, config.plugins.bundled), (250, false));
        assert_eq!(config.plugins.max_component_bytes, 20 << 20);
        assert_eq!(config.plugins.compile_cache_dir, None, "the default lives in the data directory");
        let shared = load(&[("FLOWHOST_PLUGINS_COMPILE_CACHE_DIR", "/var/cache/flowhost")]).unwrap();
        assert_eq!(shared.plugins.compile_cache_dir, Some(PathBuf::from("/var/cache/flowhost")));
        for (name, value) in [
            ("FLOWHOST_PLUGINS_MEMORY_BYTES", "1000000000"),
            ("FLOWHOST_PLUGINS_MAX_COMPONENT_BYTES", "70000000"),
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
            ("FLOWHOST_ADMIN_TOKEN", "literal"),
            ("FLOWHOST_ADMIN_TOKEN_SECRET_NAME", "admin"),
            ("EXAMPLE_TOKEN_SECRET_NAME", "example"),
        ])
        .unwrap();
        let pending: Vec<&str> = config.pending_secrets().iter().map(|pending| pending.setting).collect();
        assert_eq!(pending, ["EXAMPLE_TOKEN_SECRET_NAME"]);
        let store = MapStore::with(&[("admin", "from-store"), ("example", "example-from-store")]);
        assert_eq!(config.resolve_secrets(&store).await.unwrap(), 1);
        assert_eq!(store.asked(), ["example"]);
        assert_eq!(config.api.admin_token, Some(Secret::new("literal")));
        assert_eq!(config.section::<Example>().token, Some(Secret::new("example-from-store")));
    }

    #[tokio::test]
    async fn secrets_are_read_redis_first_then_the_sections_then_the_process_tokens() {
        let mut config = load(&[
            VAULT,
            ("FLOWHOST_METRICS_TOKEN_SECRET_NAME", "metrics"),
            ("EXAMPLE_TOKEN_SECRET_NAME", "example"),
            ("FLOWHOST_REDIS_URL_SECRET_NAME", "url"),
            ("FLOWHOST_SERVICE_SIGNING_KEY_SECRET_NAME", "signing"),
        ])
        .unwrap();
        let store = MapStore::with(&[
            ("metrics", "m"),
            ("example", "e"),
            ("url", "redis://r:1"),
            ("signing", "0123456789abcdef0123456789abcdef"),
        ]);
        assert_eq!(config.resolve_secrets(&store).await.unwrap(), 4);
        assert_eq!(store.asked(), ["url", "example", "signing", "metrics"]);
        assert_eq!(config.metrics_token, Some(Secret::new("m")));
        assert!(config.pending_secrets().is_empty());
        // A value that breaks a bound once read stops the start too, naming its setting.
        let mut config = load(&[VAULT, ("FLOWHOST_SERVICE_SIGNING_KEY_SECRET_NAME", "signing")]).unwrap();
        let error = config.resolve_secrets(&MapStore::with(&[("signing", "short")])).await.unwrap_err();
        assert_eq!(error.setting, "FLOWHOST_SERVICE_SIGNING_KEY");
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
        let mut config = load(&[VAULT, ("EXAMPLE_TOKEN_SECRET_NAME", "example")]).unwrap();
        let error = config.resolve_secrets(&MapStore::default()).await.unwrap_err();
        assert_eq!(error.setting, "EXAMPLE_TOKEN_SECRET_NAME");
        assert!(error.message.contains("\"example\"") && error.message.contains("does not exist"), "{error}");
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
    fn secrets_are_redacted_in_debug() {
        let config = load(&[
            ("FLOWHOST_ADMIN_TOKEN", "admin-token-value"),
            ("FLOWHOST_METRICS_TOKEN", "metrics-token-value"),
            ("EXAMPLE_TOKEN", "example-token-value"),
        ])
        .unwrap();
        let debug = format!("{config:?}");
        for secret in ["admin-token-value", "metrics-token-value", "example-token-value"] {
            assert!(!debug.contains(secret), "{secret} leaked in Debug");
        }
        assert!(debug.contains("<redacted>"));
    }

    #[test]
    fn file_then_env() {
        let dir = std::env::temp_dir().join(format!("flowhost-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flowhost.toml");
        std::fs::write(
            &path,
            "roles = [\"admin\"]\n[api]\nport = 9000\nhost = \"0.0.0.0\"\n[example]\ninterval_ms = 250\n",
        )
        .unwrap();
        let env = |name: &str| (name == "API_PORT" || name == "EXAMPLE_LIMIT_MS").then(|| "9100".to_owned());
        let config = Config::load(Some(&path), env, &SECTIONS).unwrap();
        assert_eq!(
            (config.api.port, config.api.host.as_str(), config.roles.as_slice()),
            (9100, "0.0.0.0", &["admin".to_owned()][..])
        );
        assert_eq!((config.section::<Example>().interval_ms, config.section::<Example>().limit_ms), (250, 9100));
        for (text, unknown) in [
            ("[api]\nprot = 1\n", "prot"),
            ("[example]\nintervall = 1\n", "intervall"),
            ("[engine]\nx = 1\n", "engine"),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = Config::load(Some(&path), |_| None, &SECTIONS).unwrap_err();
            assert!(error.message.contains(unknown), "{error}");
        }
    }
}
