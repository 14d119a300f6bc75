//! One typed configuration for the whole process: defaults, an optional TOML file, then environment
//! variables (the spec's names), validated at start with errors that name the setting.
//!
//! A backend is chosen by configuring it: with `FLOWHOST_MONGODB_URI` documents live in MongoDB, with
//! `FLOWHOST_KAFKA_BROKERS` topics live in Kafka, with `FLOWHOST_NATS_URL` subjects go through NATS and with a
//! Redis URL (or host) the cache is Redis. Anything left unset uses the embedded default in `data_dir`.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A setting that could not be used; the message names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration: {setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

impl ConfigError {
    fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        Self { setting: setting.into(), message: message.into() }
    }
}

/// The roles one process can run (see DESIGN: one binary, many roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The flow runtime's administration API (v1), `/health` and `/metrics`.
    Admin,
    /// The rule engine: consumes source topics and publishes rule outputs.
    Engine,
}

impl Role {
    pub const ALL: [Role; 2] = [Role::Admin, Role::Engine];
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "admin" => Ok(Role::Admin),
            "engine" => Ok(Role::Engine),
            other => Err(format!("unknown role {other:?} (known: admin, engine)")),
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
    pub redis: RedisConfig,
    pub engine: EngineConfig,
    pub log: LogConfig,
    /// Secret store address (`KEY_VAULT_URL`); needed by every `*_SECRET_NAME` setting.
    pub key_vault_url: Option<String>,
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
            redis: RedisConfig::default(),
            engine: EngineConfig::default(),
            log: LogConfig::default(),
            key_vault_url: None,
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
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self { host: "127.0.0.1".into(), port: 8787, max_body_bytes: 1024 * 1024 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicsConfig {
    /// Partitions of the topics Flowhost creates when they are missing, on either backend: the embedded log's
    /// topics and the engine's source and output topics (`FLOWHOST_TOPIC_PARTITIONS`; default 4).
    pub partitions: i32,
}

impl Default for TopicsConfig {
    fn default() -> Self {
        Self { partitions: 4 }
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
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    /// NATS server URL (`FLOWHOST_NATS_URL`); when set, subjects go through NATS.
    pub url: Option<String>,
}

/// Redis address, resolved as the spec orders it: `FLOWHOST_REDIS_URL`, then `FLOWHOST_REDIS_URL_SECRET_NAME`,
/// then host and password composition (`FLOWHOST_REDIS_HOST` / `_PASSWORD` win over their `_SECRET_NAME`
/// variants; `FLOWHOST_REDIS_DB` supplies the database when the host carries none).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    pub url: Option<String>,
    pub url_secret_name: Option<String>,
    pub host: Option<String>,
    pub host_secret_name: Option<String>,
    pub password: Option<String>,
    pub password_secret_name: Option<String>,
    pub db: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Consumer group of the rule engine (`FLOWHOST_ENGINE_GROUP_ID`; default `flowhost-engine`).
    pub group_id: String,
    /// Periodic rule-cache reload in milliseconds (`FLOWHOST_ENGINE_RELOAD_INTERVAL_MS`; default 5000).
    /// A change signal on the subjects port reloads at once; the tick is the fallback.
    pub reload_interval_ms: u64,
    /// Records per poll (`FLOWHOST_ENGINE_BATCH_SIZE`; default 500).
    pub batch_size: usize,
    /// Where records that are not events go, with headers saying where they came from
    /// (`FLOWHOST_ENGINE_INVALID_EVENTS_TOPIC`; default `flowhost.invalid-events`).
    pub invalid_events_topic: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            group_id: "flowhost-engine".into(),
            reload_interval_ms: 5000,
            batch_size: 500,
            invalid_events_topic: "flowhost.invalid-events".into(),
        }
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

    /// Overrides settings from environment variables; an unparsable value names its variable.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        fn parse<T: FromStr>(name: &str, value: String) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value.trim().parse().map_err(|e: T::Err| ConfigError::new(name, format!("{value:?}: {e}")))
        }
        if let Some(v) = get("FLOWHOST_ROLES") {
            self.roles = parse_roles(&v).map_err(|e| ConfigError::new("FLOWHOST_ROLES", e))?;
        }
        if let Some(v) = get("FLOWHOST_DATA_DIR") {
            self.data_dir = PathBuf::from(v);
        }
        if let Some(v) = get("FLOWHOST_API_HOST") {
            self.api.host = v;
        }
        if let Some(v) = get("API_PORT") {
            self.api.port = parse("API_PORT", v)?;
        }
        if let Some(v) = get("FLOWHOST_API_MAX_BODY_BYTES") {
            self.api.max_body_bytes = parse("FLOWHOST_API_MAX_BODY_BYTES", v)?;
        }
        if let Some(v) = get("FLOWHOST_TOPIC_PARTITIONS") {
            self.topics.partitions = parse("FLOWHOST_TOPIC_PARTITIONS", v)?;
        }
        if let Some(v) = get("FLOWHOST_MONGODB_URI") {
            self.mongodb.uri = Some(v);
        }
        if let Some(v) = get("FLOWHOST_MONGODB_DATABASE") {
            self.mongodb.database = v;
        }
        if let Some(v) = get("FLOWHOST_KAFKA_BROKERS") {
            self.kafka.brokers = Some(v);
        }
        if let Some(v) = get("FLOWHOST_NATS_URL") {
            self.nats.url = Some(v);
        }
        let redis = &mut self.redis;
        for (name, slot) in [
            ("FLOWHOST_REDIS_URL", &mut redis.url),
            ("FLOWHOST_REDIS_URL_SECRET_NAME", &mut redis.url_secret_name),
            ("FLOWHOST_REDIS_HOST", &mut redis.host),
            ("FLOWHOST_REDIS_HOST_SECRET_NAME", &mut redis.host_secret_name),
            ("FLOWHOST_REDIS_PASSWORD", &mut redis.password),
            ("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", &mut redis.password_secret_name),
        ] {
            if let Some(v) = get(name) {
                *slot = Some(v);
            }
        }
        if let Some(v) = get("FLOWHOST_REDIS_DB") {
            self.redis.db = Some(parse("FLOWHOST_REDIS_DB", v)?);
        }
        if let Some(v) = get("KEY_VAULT_URL") {
            self.key_vault_url = Some(v);
        }
        if let Some(v) = get("FLOWHOST_ENGINE_GROUP_ID") {
            self.engine.group_id = v;
        }
        if let Some(v) = get("FLOWHOST_ENGINE_RELOAD_INTERVAL_MS") {
            self.engine.reload_interval_ms = parse("FLOWHOST_ENGINE_RELOAD_INTERVAL_MS", v)?;
        }
        if let Some(v) = get("FLOWHOST_ENGINE_BATCH_SIZE") {
            self.engine.batch_size = parse("FLOWHOST_ENGINE_BATCH_SIZE", v)?;
        }
        if let Some(v) = get("FLOWHOST_ENGINE_INVALID_EVENTS_TOPIC") {
            self.engine.invalid_events_topic = v;
        }
        if let Some(v) = get("FLOWHOST_LOG") {
            self.log.filter = v;
        }
        if let Some(v) = get("FLOWHOST_LOG_FORMAT") {
            self.log.format = match v.trim() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => return Err(ConfigError::new("FLOWHOST_LOG_FORMAT", format!("{other:?}: use text or json"))),
            };
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.roles.is_empty() {
            return Err(ConfigError::new("roles", "no role given"));
        }
        if self.api.max_body_bytes == 0 {
            return Err(ConfigError::new("api.max_body_bytes", "must be positive"));
        }
        if !(1..=1024).contains(&self.topics.partitions) {
            return Err(ConfigError::new("topics.partitions", "must be between 1 and 1024"));
        }
        if self.engine.reload_interval_ms < 10 {
            return Err(ConfigError::new("engine.reload_interval_ms", "must be at least 10"));
        }
        if self.engine.batch_size == 0 {
            return Err(ConfigError::new("engine.batch_size", "must be positive"));
        }
        if self.engine.group_id.trim().is_empty() {
            return Err(ConfigError::new("engine.group_id", "must not be empty"));
        }
        if self.engine.invalid_events_topic.trim().is_empty() {
            return Err(ConfigError::new("engine.invalid_events_topic", "must not be empty"));
        }
        for (setting, value) in
            [("mongodb.uri", &self.mongodb.uri), ("kafka.brokers", &self.kafka.brokers), ("nats.url", &self.nats.url)]
        {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(ConfigError::new(setting, "must not be empty when given"));
            }
        }
        if let Some(uri) = &self.mongodb.uri {
            if !uri.starts_with("mongodb://") && !uri.starts_with("mongodb+srv://") {
                return Err(ConfigError::new("FLOWHOST_MONGODB_URI", "must start with mongodb:// or mongodb+srv://"));
            }
        }
        self.redis_url()?;
        Ok(())
    }

    /// The Redis URL to use, or `None` for the embedded cache.
    pub fn redis_url(&self) -> Result<Option<String>, ConfigError> {
        let redis = &self.redis;
        if let Some(url) = &redis.url {
            if !url.starts_with("redis://") && !url.starts_with("rediss://") {
                return Err(ConfigError::new("FLOWHOST_REDIS_URL", "must start with redis:// or rediss://"));
            }
            return Ok(Some(url.clone()));
        }
        if let Some(name) = &redis.url_secret_name {
            return self.secret("FLOWHOST_REDIS_URL_SECRET_NAME", name).map(Some);
        }
        let host = match (&redis.host, &redis.host_secret_name) {
            (Some(host), _) => Some(host.clone()),
            (None, Some(name)) => Some(self.secret("FLOWHOST_REDIS_HOST_SECRET_NAME", name)?),
            (None, None) => None,
        };
        let Some(host) = host else {
            if redis.password.is_some() || redis.password_secret_name.is_some() || redis.db.is_some() {
                return Err(ConfigError::new("FLOWHOST_REDIS_HOST", "a Redis password or db is set without a host"));
            }
            return Ok(None);
        };
        let password = match (&redis.password, &redis.password_secret_name) {
            (Some(password), _) => Some(password.clone()),
            (None, Some(name)) => Some(self.secret("FLOWHOST_REDIS_PASSWORD_SECRET_NAME", name)?),
            (None, None) => None,
        };
        let host = host.trim_start_matches("redis://");
        let auth = password.map(|p| format!(":{p}@")).unwrap_or_default();
        let db = match redis.db {
            Some(db) if !host.contains('/') => format!("/{db}"),
            _ => String::new(),
        };
        Ok(Some(format!("redis://{auth}{host}{db}")))
    }

    /// Reads a secret from the secret store. No secret-store client ships yet, so a `*_SECRET_NAME` setting
    /// fails at start with a message saying what to set instead (never a silent fallback).
    fn secret(&self, setting: &str, _name: &str) -> Result<String, ConfigError> {
        match &self.key_vault_url {
            None => Err(ConfigError::new(setting, "needs KEY_VAULT_URL")),
            Some(_) => Err(ConfigError::new(
                setting,
                "secret-store lookups are not available in this build; set the literal variable instead",
            )),
        }
    }
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
    fn errors_name_the_setting() {
        let cases = [
            (vec![("API_PORT", "eighty")], "API_PORT"),
            (vec![("FLOWHOST_ROLES", "admin,bogus")], "FLOWHOST_ROLES"),
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
