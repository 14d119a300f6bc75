//! Redis's process-wide settings (`[redis]`, `FLOWHOST_REDIS_*`): where the cache and the work queue live when
//! not in process, the address composed in the specification's order, and the secret names that may give its
//! parts.

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};
use crate::secret::Secret;
use crate::settings::SecretSetting;

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

impl Config {
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
}

/// Redis's `*_SECRET_NAME` settings, in the spec's order (spec 001 item 8: URL, then the URL's secret name,
/// then host and password composition); read first.
pub static REDIS_SECRETS: &[SecretSetting<Config>] = &[
    crate::secret_setting!(Config, "FLOWHOST_REDIS_URL", redis.url, redis.url_secret_name),
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
];

/// A Redis key prefix: 1 to 100 characters, no whitespace, control characters or braces (a brace would pick a
/// cluster hash slot).
pub(super) fn key_prefix(prefix: &Option<String>) -> Result<(), String> {
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
