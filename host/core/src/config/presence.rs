//! The presence projector's settings (spec 002 part B): every `PRESENCE_*`, `DOCDB_*` name of the spec.

use serde::{Deserialize, Serialize};

use super::{parse, split_list, ConfigError, Secret};

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

impl PresenceConfig {
    pub(super) fn apply_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get("PRESENCE_BROKER_BOOTSTRAP_SERVERS") {
            self.bootstrap_servers = split_list(&v);
        }
        for (name, slot) in [
            ("PRESENCE_HTTP_ADDR", &mut self.http_addr),
            ("PRESENCE_LOG_LEVEL", &mut self.log_level),
            ("PRESENCE_DOCDB_DATABASE", &mut self.database),
            ("PRESENCE_INPUT_TOPIC", &mut self.input_topic),
            ("PRESENCE_CONSUMER_GROUP", &mut self.group),
        ] {
            if let Some(v) = get(name) {
                *slot = v.trim().to_owned();
            }
        }
        if let Some(v) = get("DOCDB_URI") {
            self.docdb_uri = Some(Secret::new(v.trim()));
        }
        if let Some(v) = get("DOCDB_URI_SECRET_NAME") {
            self.docdb_uri_secret_name = Some(v.trim().to_owned());
        }
        for (name, slot) in [
            ("PRESENCE_DOCDB_TIMEOUT_MS", &mut self.docdb_timeout_ms),
            ("PRESENCE_PRESENCE_EXPIRY_SECONDS", &mut self.expiry_seconds),
            ("PRESENCE_PRESENCE_SWEEP_INTERVAL_SECONDS", &mut self.sweep_interval_seconds),
            ("PRESENCE_PRESENCE_SWEEP_BATCH_SIZE", &mut self.sweep_batch_size),
            ("PRESENCE_RETRY_INITIAL_MS", &mut self.retry_initial_ms),
            ("PRESENCE_RETRY_MAX_MS", &mut self.retry_max_ms),
        ] {
            if let Some(v) = get(name) {
                *slot = parse(name, v)?;
            }
        }
        if let Some(v) = get("PRESENCE_BROKER_DLQ_PARTITIONS") {
            self.dlq_partitions = parse("PRESENCE_BROKER_DLQ_PARTITIONS", v)?;
        }
        if let Some(v) = get("PRESENCE_BROKER_DLQ_REPLICATION_FACTOR") {
            self.dlq_replication_factor = parse("PRESENCE_BROKER_DLQ_REPLICATION_FACTOR", v)?;
        }
        Ok(())
    }

    /// Checks what the presence role needs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.bootstrap_servers.is_empty() {
            return Err(ConfigError::new("PRESENCE_BROKER_BOOTSTRAP_SERVERS", "is required by the presence role"));
        }
        if self.database != PRESENCE_DATABASE {
            return Err(ConfigError::new(
                "PRESENCE_DOCDB_DATABASE",
                format!("{:?} is not supported: the projection lives in database {PRESENCE_DATABASE:?}", self.database),
            ));
        }
        if !["debug", "info", "warn", "error"].contains(&self.log_level.as_str()) {
            return Err(ConfigError::new("PRESENCE_LOG_LEVEL", "use debug, info, warn or error"));
        }
        self.listen_addr(false)?;
        for (name, value) in [
            ("PRESENCE_DOCDB_TIMEOUT_MS", self.docdb_timeout_ms),
            ("PRESENCE_PRESENCE_EXPIRY_SECONDS", self.expiry_seconds),
            ("PRESENCE_PRESENCE_SWEEP_INTERVAL_SECONDS", self.sweep_interval_seconds),
            ("PRESENCE_PRESENCE_SWEEP_BATCH_SIZE", self.sweep_batch_size),
            ("PRESENCE_RETRY_INITIAL_MS", self.retry_initial_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::new(name, "must be positive"));
            }
        }
        if self.retry_max_ms < self.retry_initial_ms {
            return Err(ConfigError::new("PRESENCE_RETRY_MAX_MS", "must be at least PRESENCE_RETRY_INITIAL_MS"));
        }
        if self.dlq_partitions < 1 {
            return Err(ConfigError::new("PRESENCE_BROKER_DLQ_PARTITIONS", "must be positive"));
        }
        if self.dlq_replication_factor < 1 {
            return Err(ConfigError::new("PRESENCE_BROKER_DLQ_REPLICATION_FACTOR", "must be positive"));
        }
        super::flowhost_topic_name("PRESENCE_INPUT_TOPIC", &self.input_topic)?;
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
