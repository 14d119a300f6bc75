//! The presence role's section (spec 002 part B): every `PRESENCE_*`, `DOCDB_*` name of the spec.

use flowhost_core::config::{ConfigError, Secret};
use flowhost_core::settings::{at_least, rule, topic_name, SecretSetting, Section, Setting};
use serde::{Deserialize, Serialize};

/// The only database name the projector accepts (`PRESENCE_DOCDB_DATABASE`).
pub const PRESENCE_DATABASE: &str = "presence";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PresenceConfig {
    /// `PRESENCE_BROKER_BOOTSTRAP_SERVERS` (required by the role, comma-separated).
    pub bootstrap_servers: Vec<String>,
    /// `PRESENCE_HTTP_ADDR`: `[host]:port` of the operational listener (`:8080` is every interface).
    pub http_addr: String,
    /// `PRESENCE_LOG_LEVEL`: `debug`, `info`, `warn` or `error` for the projector's own log lines.
    pub log_level: String,
    /// `PRESENCE_DOCDB_DATABASE`: `presence`; any other value is refused at start.
    pub database: String,
    /// `DOCDB_URI`: the MongoDB of the projection (takes precedence over the secret name); unset is the
    /// embedded store.
    pub docdb_uri: Option<Secret>,
    /// `DOCDB_URI_SECRET_NAME`: the secret holding `DOCDB_URI` (needs `KEY_VAULT_URL`).
    pub docdb_uri_secret_name: Option<String>,
    /// `PRESENCE_DOCDB_TIMEOUT_MS` (5000): every document-store operation.
    pub docdb_timeout_ms: u64,
    /// `PRESENCE_PRESENCE_EXPIRY_SECONDS` (120).
    pub expiry_seconds: u64,
    /// `PRESENCE_PRESENCE_SWEEP_INTERVAL_SECONDS` (30).
    pub sweep_interval_seconds: u64,
    /// `PRESENCE_PRESENCE_SWEEP_BATCH_SIZE` (10000).
    pub sweep_batch_size: u64,
    /// `PRESENCE_RETRY_INITIAL_MS` (250) and `PRESENCE_RETRY_MAX_MS` (30000).
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// `PRESENCE_BROKER_DLQ_PARTITIONS` (6) and `PRESENCE_BROKER_DLQ_REPLICATION_FACTOR` (3): only when the
    /// dead-letter topic is created.
    pub dlq_partitions: i32,
    pub dlq_replication_factor: i16,
    /// `PRESENCE_INPUT_TOPIC` (`gateway.player-casino-presence.v1`) and `PRESENCE_CONSUMER_GROUP`
    /// (`presence.player-state.v1`): keep them unless an offset migration is planned.
    pub input_topic: String,
    pub group: String,
}

impl Default for PresenceConfig {
    fn default() -> Self {
        Self {
            bootstrap_servers: Vec::new(),
            http_addr: ":8080".to_owned(),
            log_level: "info".to_owned(),
            database: PRESENCE_DATABASE.to_owned(),
            docdb_uri: None,
            docdb_uri_secret_name: None,
            docdb_timeout_ms: 5000,
            expiry_seconds: 120,
            sweep_interval_seconds: 30,
            sweep_batch_size: 10_000,
            retry_initial_ms: 250,
            retry_max_ms: 30_000,
            dlq_partitions: 6,
            dlq_replication_factor: 3,
            input_topic: "gateway.player-casino-presence.v1".to_owned(),
            group: "presence.player-state.v1".to_owned(),
        }
    }
}

/// Every `[presence]` setting (see `crate::settings`).
pub static PRESENCE_SETTINGS: &[Setting<PresenceConfig>] = flowhost_core::settings!(PresenceConfig, "presence.", [
    { "PRESENCE_BROKER_BOOTSTRAP_SERVERS", bootstrap_servers, "the broker's bootstrap servers, comma-separated; `embedded` is the process's embedded log", default: "(required by the role)" },
    { "PRESENCE_HTTP_ADDR", http_addr, "the operational listener, `[host]:port` (`:8080` is every interface; beside the gateway's ingest in one process the default moves to `:8084`)" },
    { "PRESENCE_LOG_LEVEL", log_level, "the projector's own log lines", check: rule(log_level, "`debug`, `info`, `warn` or `error`") },
    { "PRESENCE_DOCDB_DATABASE", database, "the projection's database; any other value is refused at start", check: rule(database, "`presence` only") },
    { "DOCDB_URI", docdb_uri, "the MongoDB of the projection (wins over its secret name)", parse: |value: &str| Ok(Some(Secret::new(value.trim()))), default: "unset (the embedded store)" },
    { "DOCDB_URI_SECRET_NAME", docdb_uri_secret_name, "secret-store name of `DOCDB_URI`" },
    { "PRESENCE_DOCDB_TIMEOUT_MS", docdb_timeout_ms, "every document-store operation", check: at_least(1) },
    { "PRESENCE_PRESENCE_EXPIRY_SECONDS", expiry_seconds, "a site's expiry after its last heartbeat", check: at_least(1) },
    { "PRESENCE_PRESENCE_SWEEP_INTERVAL_SECONDS", sweep_interval_seconds, "how often the expiry sweep runs", check: at_least(1) },
    { "PRESENCE_PRESENCE_SWEEP_BATCH_SIZE", sweep_batch_size, "sites one sweep pass expires at most", check: at_least(1) },
    { "PRESENCE_RETRY_INITIAL_MS", retry_initial_ms, "first delay of a blocked partition's backoff", check: at_least(1) },
    { "PRESENCE_RETRY_MAX_MS", retry_max_ms, "longest delay of a blocked partition's backoff (at least the first)" },
    { "PRESENCE_BROKER_DLQ_PARTITIONS", dlq_partitions, "partitions of the dead-letter topic, when it is created", check: at_least(1) },
    { "PRESENCE_BROKER_DLQ_REPLICATION_FACTOR", dlq_replication_factor, "replication factor of the dead-letter topic, when it is created", check: at_least(1) },
    { "PRESENCE_INPUT_TOPIC", input_topic, "the consumed topic (keep it unless an offset migration is planned)", check: topic_name() },
    { "PRESENCE_CONSUMER_GROUP", group, "the consumer group (keep it unless an offset migration is planned)" },
]);

fn log_level(level: &str) -> Result<(), String> {
    if ["debug", "info", "warn", "error"].contains(&level) {
        Ok(())
    } else {
        Err("use debug, info, warn or error".to_owned())
    }
}

fn database(database: &str) -> Result<(), String> {
    if database == PRESENCE_DATABASE {
        Ok(())
    } else {
        Err(format!("{database:?} is not supported: the projection lives in database {PRESENCE_DATABASE:?}"))
    }
}

impl Section for PresenceConfig {
    const NAME: &'static str = "presence";
    const PAGE: &'static str = "presence.md";

    fn settings() -> &'static [Setting<Self>] {
        PRESENCE_SETTINGS
    }

    fn secrets() -> &'static [SecretSetting<Self>] {
        &[flowhost_core::secret_setting!(PresenceConfig, "DOCDB_URI", docdb_uri, docdb_uri_secret_name)]
    }

    /// Retries that grow.
    fn validate(&self) -> Result<(), ConfigError> {
        if self.retry_max_ms < self.retry_initial_ms {
            return Err(ConfigError::new("PRESENCE_RETRY_MAX_MS", "must be at least PRESENCE_RETRY_INITIAL_MS"));
        }
        Ok(())
    }
}

impl PresenceConfig {
    /// What the presence role needs besides: a broker and a listener address.
    pub fn check_role(&self) -> Result<(), ConfigError> {
        if self.bootstrap_servers.is_empty() {
            return Err(ConfigError::new("PRESENCE_BROKER_BOOTSTRAP_SERVERS", "is required by the presence role"));
        }
        self.listen_addr(false)?;
        Ok(())
    }

    /// The operational listener's address: `:8080` is every interface. `beside_gateway_ingest`: the gateway's
    /// ingest probes hold 8080 in this process, so the default moves to `:8084` (an explicit
    /// `PRESENCE_HTTP_ADDR` is always honoured).
    pub fn listen_addr(&self, beside_gateway_ingest: bool) -> Result<String, ConfigError> {
        let default = PresenceConfig::default().http_addr;
        let http_addr = if beside_gateway_ingest && self.http_addr == default { ":8084" } else { &self.http_addr };
        let addr = match http_addr.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => http_addr.to_owned(),
        };
        addr.parse::<std::net::SocketAddr>().map_err(|e| {
            ConfigError::new("PRESENCE_HTTP_ADDR", format!("{:?}: {e} (write [host]:port)", self.http_addr))
        })?;
        Ok(addr)
    }
}
