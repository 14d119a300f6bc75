//! The edge analytics gateway's settings (spec 002 part A): every `GATEWAY_EDGE_*` name of the spec, the
//! spec's ports, and the limits the spec leaves to the product (documented in docs/gateway.md).

use serde::{Deserialize, Serialize};

use flowhost_core::config::{Config, ConfigError, Secret};
use flowhost_core::settings::{at_least, rule, topic_name, Section, Setting};

/// The shortest HMAC key the spec allows (`GATEWAY_EDGE_CACHE_HMAC_KEY`, at least 32 bytes).
pub const MIN_CACHE_HMAC_KEY_BYTES: usize = 32;

/// The default player-validation statuses that mean "definitively invalid" (cached for the negative lifetime).
pub const DEFAULT_INVALID_STATUSES: [u16; 3] = [401, 403, 422];

/// Requests or player validations allowed per minute in one scope; 0 means no limit in that scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScopeLimits {
    pub token: u64,
    pub tenant: u64,
    pub global: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Host the edge, ingest-health, admin and metrics listeners bind (`GATEWAY_BIND_HOST`; default
    /// `127.0.0.1`; `0.0.0.0` in a pod behind its ingress).
    pub bind_host: String,
    /// Host the private ingest listener binds (`GATEWAY_INGEST_PRIVATE_HOST`; default `127.0.0.1`, never a
    /// public address by default: the edge pods reach it over the cluster network only).
    pub ingest_private_host: String,
    /// `GATEWAY_EDGE_HTTP_PORT` (8083): the public route `/api/gateway/events`.
    pub edge_port: u16,
    /// `GATEWAY_INGEST_HTTP_PORT` (8080): the ingest process's `/health` and `/ready`.
    pub ingest_port: u16,
    /// `GATEWAY_ADMIN_HTTP_PORT` (8081): `GET /admin/v1/queues`.
    pub admin_port: u16,
    /// `GATEWAY_INGEST_PRIVATE_PORT` (8082): `POST /internal/v1/events`.
    pub ingest_private_port: u16,
    /// `GATEWAY_METRICS_PORT` (9090): `/metrics`.
    pub metrics_port: u16,
    /// `GATEWAY_EDGE_TRUSTED_PROXY_CIDRS`: comma-separated canonical prefixes; empty is local mode (the socket
    /// peer is the client).
    pub trusted_proxy_cidrs: Vec<String>,
    /// `GATEWAY_EDGE_ORIGINS_FILE`: the mounted origin map.
    pub origins_file: Option<String>,
    /// `GATEWAY_EDGE_ORIGINS_JSON`: an inline origin map, for local use only (at most 128 KiB).
    pub origins_json: Option<String>,
    /// `GATEWAY_EDGE_CACHE_URL`: the Redis URL of the validation cache and limits; unset is the embedded
    /// (per-process) cache.
    pub cache_url: Option<Secret>,
    /// `GATEWAY_EDGE_CACHE_HMAC_KEY`: keys every cache identity (at least 32 bytes; required by the edge).
    pub cache_hmac_key: Option<Secret>,
    /// `GATEWAY_EDGE_ROLLOUT_CHECKSUM`: the opaque checksum of the two secrets above, changed on every
    /// rotation; required (non-empty) whenever either is set; logged at start and exported as
    /// `gateway_edge_rollout_info{checksum}`.
    pub rollout_checksum: Option<String>,
    /// `GATEWAY_EDGE_MAX_INFLIGHT` (256): requests in progress on the public route before shedding with 503.
    pub max_inflight: usize,
    /// `GATEWAY_EDGE_MAX_BODY_BYTES` (16384): the largest event body.
    pub max_body_bytes: usize,
    /// `GATEWAY_EDGE_CACHE_TIMEOUT_MS` (200).
    pub cache_timeout_ms: u64,
    /// `GATEWAY_EDGE_PLAYER_TIMEOUT_MS` (2000).
    pub player_timeout_ms: u64,
    /// `GATEWAY_EDGE_PLAYER_CACHE_TTL_SECONDS` (300).
    pub player_cache_ttl_seconds: u64,
    /// `GATEWAY_EDGE_PLAYER_NEGATIVE_TTL_SECONDS` (5).
    pub player_negative_ttl_seconds: u64,
    /// `GATEWAY_EDGE_PLAYER_INVALID_STATUSES` (401,403,422).
    pub player_invalid_statuses: Vec<u16>,
    /// `GATEWAY_EDGE_INGEST_URL`: the full URL of the internal ingest route.
    pub ingest_url: String,
    /// `GATEWAY_EDGE_INGEST_TIMEOUT_MS` (1000): the ingest request and the edge's readiness probe of it.
    pub ingest_timeout_ms: u64,
    /// `GATEWAY_EDGE_{TOKEN,TENANT,GLOBAL}_REQUESTS_PER_MINUTE` (600, 600000, 0 = none).
    pub requests_per_minute: ScopeLimits,
    /// `GATEWAY_EDGE_{TOKEN,TENANT,GLOBAL}_VALIDATIONS_PER_MINUTE` (20, 6000, 60000): calls to the validation
    /// backend on a cache miss.
    pub validations_per_minute: ScopeLimits,
    /// `GATEWAY_ANALYTICS_TOPIC` (`gateway.analytics-events.v1`): where event types other than presence go.
    pub analytics_topic: String,
    /// `GATEWAY_WORKER_BATCH_SIZE` (500): messages the worker leases and produces at once.
    pub worker_batch_size: usize,
    /// `GATEWAY_WORKER_LEASE_MS` (30000): how long a leased message stays hidden before it is delivered again.
    pub worker_lease_ms: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            bind_host: "127.0.0.1".to_owned(),
            ingest_private_host: "127.0.0.1".to_owned(),
            edge_port: 8083,
            ingest_port: 8080,
            admin_port: 8081,
            ingest_private_port: 8082,
            metrics_port: 9090,
            trusted_proxy_cidrs: Vec::new(),
            origins_file: None,
            origins_json: None,
            cache_url: None,
            cache_hmac_key: None,
            rollout_checksum: None,
            max_inflight: 256,
            max_body_bytes: 16 * 1024,
            cache_timeout_ms: 200,
            player_timeout_ms: 2000,
            player_cache_ttl_seconds: 300,
            player_negative_ttl_seconds: 5,
            player_invalid_statuses: DEFAULT_INVALID_STATUSES.to_vec(),
            ingest_url: "http://127.0.0.1:8082/internal/v1/events".to_owned(),
            ingest_timeout_ms: 1000,
            requests_per_minute: ScopeLimits { token: 600, tenant: 600_000, global: 0 },
            validations_per_minute: ScopeLimits { token: 20, tenant: 6_000, global: 60_000 },
            analytics_topic: "gateway.analytics-events.v1".to_owned(),
            worker_batch_size: 500,
            worker_lease_ms: 30_000,
        }
    }
}

/// Every `[gateway]` setting (see `crate::settings`).
pub static GATEWAY_SETTINGS: &[Setting<GatewayConfig>] = flowhost_core::settings!(GatewayConfig, "gateway.", [
    { "GATEWAY_EDGE_CACHE_HMAC_KEY", cache_hmac_key, "keys every cache identity", check: rule(hmac_key, "at least 32 bytes"), default: "(required by the edge)" },
    { "GATEWAY_EDGE_CACHE_URL", cache_url, "Redis URL of the validation cache and limits", default: "unset (embedded)" },
    { "GATEWAY_EDGE_ROLLOUT_CHECKSUM", rollout_checksum, "checksum of the two secrets above, changed on every rotation (see rotation); required, non-empty, when either is set" },
    { "GATEWAY_EDGE_ORIGINS_FILE", origins_file, "the mounted origin map (the edge needs it or the next one)" },
    { "GATEWAY_EDGE_ORIGINS_JSON", origins_json, "an inline origin map, for local use only" },
    { "GATEWAY_EDGE_TRUSTED_PROXY_CIDRS", trusted_proxy_cidrs, "the ingress's prefixes, comma-separated canonical prefixes", default: "empty: local mode (only with a loopback `GATEWAY_BIND_HOST`; otherwise the start is refused)" },
    { "GATEWAY_EDGE_MAX_INFLIGHT", max_inflight, "in-flight budget per process", check: at_least(1) },
    { "GATEWAY_EDGE_MAX_BODY_BYTES", max_body_bytes, "largest event body", check: at_least(1) },
    { "GATEWAY_EDGE_CACHE_TIMEOUT_MS", cache_timeout_ms, "each cache call", check: at_least(1) },
    { "GATEWAY_EDGE_PLAYER_TIMEOUT_MS", player_timeout_ms, "the validation request", check: at_least(1) },
    { "GATEWAY_EDGE_PLAYER_CACHE_TTL_SECONDS", player_cache_ttl_seconds, "a valid player's cache entry", check: at_least(1) },
    { "GATEWAY_EDGE_PLAYER_NEGATIVE_TTL_SECONDS", player_negative_ttl_seconds, "an invalid player's cache entry", check: at_least(1) },
    { "GATEWAY_EDGE_PLAYER_INVALID_STATUSES", player_invalid_statuses, "statuses that mean \"invalid player\"", check: rule(client_errors, "4xx only") },
    { "GATEWAY_EDGE_INGEST_URL", ingest_url, "internal ingest", check: rule(http_url, "") },
    { "GATEWAY_EDGE_INGEST_TIMEOUT_MS", ingest_timeout_ms, "the ingest request and the readiness probe", check: at_least(1) },
    { "GATEWAY_EDGE_TOKEN_REQUESTS_PER_MINUTE", requests_per_minute.token, "requests of one bearer (`0`: no limit)" },
    { "GATEWAY_EDGE_TENANT_REQUESTS_PER_MINUTE", requests_per_minute.tenant, "requests of one tenant (`0`: no limit)" },
    { "GATEWAY_EDGE_GLOBAL_REQUESTS_PER_MINUTE", requests_per_minute.global, "every request (`0`: no limit)" },
    { "GATEWAY_EDGE_TOKEN_VALIDATIONS_PER_MINUTE", validations_per_minute.token, "calls to the validation backend for one bearer (`0`: no limit)" },
    { "GATEWAY_EDGE_TENANT_VALIDATIONS_PER_MINUTE", validations_per_minute.tenant, "calls for one tenant (`0`: no limit)" },
    { "GATEWAY_EDGE_GLOBAL_VALIDATIONS_PER_MINUTE", validations_per_minute.global, "every call (`0`: no limit)" },
    { "GATEWAY_EDGE_HTTP_PORT", edge_port, "the edge's public listener" },
    { "GATEWAY_INGEST_HTTP_PORT", ingest_port, "the ingest's probes" },
    { "GATEWAY_ADMIN_HTTP_PORT", admin_port, "the queue administration API" },
    { "GATEWAY_INGEST_PRIVATE_PORT", ingest_private_port, "the private ingest listener" },
    { "GATEWAY_METRICS_PORT", metrics_port, "`/metrics` of every part" },
    { "GATEWAY_BIND_HOST", bind_host, "address of the edge, probes, admin and metrics listeners", check: rule(ip_address, "an IP address") },
    { "GATEWAY_INGEST_PRIVATE_HOST", ingest_private_host, "address of the private ingest listener", check: rule(ip_address, "an IP address") },
    { "GATEWAY_ANALYTICS_TOPIC", analytics_topic, "topic of non-presence events", check: topic_name() },
    { "GATEWAY_WORKER_BATCH_SIZE", worker_batch_size, "messages the worker leases and produces at once", check: at_least(1) },
    { "GATEWAY_WORKER_LEASE_MS", worker_lease_ms, "how long a leased message stays hidden before it is delivered again", check: at_least(1) },
]);

fn hmac_key(key: &Option<Secret>) -> Result<(), String> {
    match key {
        Some(key) if key.expose().len() < MIN_CACHE_HMAC_KEY_BYTES => {
            Err(format!("must be at least {MIN_CACHE_HMAC_KEY_BYTES} bytes"))
        }
        _ => Ok(()),
    }
}

fn client_errors(statuses: &[u16]) -> Result<(), String> {
    match statuses.iter().find(|status| !(400..=499).contains(*status)) {
        Some(status) => Err(format!("{status} is not a 4xx status (only a client error can say a player is invalid)")),
        None => Ok(()),
    }
}

fn http_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?}: {e}"))?;
    if matches!(parsed.scheme(), "http" | "https") {
        Ok(())
    } else {
        Err("must be an http:// or https:// URL".to_owned())
    }
}

fn ip_address(host: &str) -> Result<(), String> {
    match host.parse::<std::net::IpAddr>() {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("{host:?} is not an IP address")),
    }
}

impl Section for GatewayConfig {
    const NAME: &'static str = "gateway";
    const PAGE: &'static str = "gateway.md";

    fn settings() -> &'static [Setting<Self>] {
        GATEWAY_SETTINGS
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

impl GatewayParts {
    /// The parts role `name` runs, when it is one of the gateway's roles.
    pub fn of(name: &str) -> Option<GatewayParts> {
        let (edge, ingest, worker, admin) = match name {
            "gateway" => (true, true, true, true),
            "gateway-edge" => (true, false, false, false),
            "gateway-ingest" => (false, true, false, false),
            "gateway-worker" => (false, false, true, false),
            "gateway-admin" => (false, false, false, true),
            _ => return None,
        };
        Some(GatewayParts { edge, ingest, worker, admin })
    }
}

/// What the gateway's roles need of the configuration, given every role the process runs: each part once, and
/// what the edge needs when one of them runs it.
pub fn check_roles(config: &Config, roles: &[&str]) -> Result<(), ConfigError> {
    let parts: Vec<GatewayParts> = roles.iter().filter_map(|role| GatewayParts::of(role)).collect();
    let count = |part: fn(&GatewayParts) -> bool| parts.iter().filter(|p| part(p)).count();
    if count(|p| p.edge) > 1 || count(|p| p.ingest) > 1 || count(|p| p.worker) > 1 || count(|p| p.admin) > 1 {
        return Err(ConfigError::new(
            "FLOWHOST_ROLES",
            "a gateway part is named twice (gateway already runs gateway-edge, gateway-ingest, gateway-worker and \
             gateway-admin)",
        ));
    }
    config.section::<GatewayConfig>().validate(count(|p| p.edge) > 0)
}

impl GatewayConfig {
    /// Checks what every gateway process needs; `edge` adds what only the public listener needs (the HMAC
    /// key and an origin map).
    pub fn validate(&self, edge: bool) -> Result<(), ConfigError> {
        if edge {
            if self.cache_hmac_key.is_none() {
                return Err(ConfigError::new(
                    "GATEWAY_EDGE_CACHE_HMAC_KEY",
                    "is required by the gateway (at least 32 bytes; generate one with `openssl rand -base64 48`)",
                ));
            }
            if self.origins_file.is_none() && self.origins_json.is_none() {
                return Err(ConfigError::new(
                    "GATEWAY_EDGE_ORIGINS_FILE",
                    "the gateway needs an origin map (GATEWAY_EDGE_ORIGINS_FILE, or GATEWAY_EDGE_ORIGINS_JSON locally)",
                ));
            }
        }
        flowhost_core::settings::check(self, GATEWAY_SETTINGS)?;
        // Spec 002 rule 1: only local mode may leave the list empty (the socket peer is the client). An edge
        // other hosts reach without a proxy list would take any peer for the player.
        let local = self.bind_host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if edge && self.trusted_proxy_cidrs.is_empty() && !local {
            return Err(ConfigError::new(
                "GATEWAY_EDGE_TRUSTED_PROXY_CIDRS",
                format!(
                    "is empty, which is local mode, but GATEWAY_BIND_HOST {:?} is not loopback: list the networks of \
                     the proxies in front of the edge",
                    self.bind_host
                ),
            ));
        }
        // Spec 002, authentication 4: a non-empty opaque rollout checksum goes with the two secrets and changes
        // whenever either rotates, so a rotation rolls the pods and `gateway_edge_rollout_info` shows which pods
        // run which secrets. Checked last: a wrong secret is named before its missing checksum.
        if self.cache_url.is_some() || self.cache_hmac_key.is_some() {
            let secrets = match (&self.cache_url, &self.cache_hmac_key) {
                (Some(_), Some(_)) => "GATEWAY_EDGE_CACHE_URL and GATEWAY_EDGE_CACHE_HMAC_KEY are",
                (Some(_), None) => "GATEWAY_EDGE_CACHE_URL is",
                _ => "GATEWAY_EDGE_CACHE_HMAC_KEY is",
            };
            match self.rollout_checksum.as_deref().map(str::trim) {
                None => {
                    return Err(ConfigError::new(
                        "GATEWAY_EDGE_ROLLOUT_CHECKSUM",
                        format!(
                            "is required because {secrets} set: an opaque checksum of the secrets that changes \
                             whenever either rotates (e.g. `sha256(url + \"\\n\" + key)`)"
                        ),
                    ))
                }
                Some("") => {
                    return Err(ConfigError::new(
                        "GATEWAY_EDGE_ROLLOUT_CHECKSUM",
                        format!("must not be empty ({secrets} set)"),
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The address of one of the gateway's listeners.
    pub fn addr(&self, port: u16) -> String {
        join_host_port(&self.bind_host, port)
    }

    pub fn ingest_private_addr(&self) -> String {
        join_host_port(&self.ingest_private_host, self.ingest_private_port)
    }
}

fn join_host_port(host: &str, port: u16) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> Result<GatewayConfig, ConfigError> {
        let mut config = GatewayConfig::default();
        let get = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        flowhost_core::settings::apply_env(&mut config, GATEWAY_SETTINGS, &get)?;
        config.validate(true)?;
        Ok(config)
    }

    const KEY: &str = "0123456789abcdef0123456789abcdef";
    const CHECKSUM: (&str, &str) = ("GATEWAY_EDGE_ROLLOUT_CHECKSUM", "sha256:1f0c");

    #[test]
    fn the_spec_names_set_the_settings() {
        let config = with(&[
            ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
            ("GATEWAY_EDGE_ORIGINS_FILE", "/etc/gateway/origins.json"),
            ("GATEWAY_EDGE_TRUSTED_PROXY_CIDRS", "10.0.0.0/8, fd00::/8"),
            ("GATEWAY_EDGE_PLAYER_INVALID_STATUSES", "401,403"),
            ("GATEWAY_EDGE_TOKEN_REQUESTS_PER_MINUTE", "5"),
            ("GATEWAY_EDGE_MAX_INFLIGHT", "8"),
            ("GATEWAY_EDGE_HTTP_PORT", "9083"),
            CHECKSUM,
        ])
        .unwrap();
        assert_eq!(config.trusted_proxy_cidrs, ["10.0.0.0/8", "fd00::/8"]);
        assert_eq!(config.player_invalid_statuses, [401, 403]);
        assert_eq!(config.requests_per_minute.token, 5);
        assert_eq!(config.max_inflight, 8);
        assert_eq!(config.addr(config.edge_port), "127.0.0.1:9083");
        assert_eq!(config.ingest_private_addr(), "127.0.0.1:8082");
    }

    #[test]
    fn an_edge_other_hosts_reach_needs_its_proxies_listed() {
        let exposed = [
            ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
            ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
            ("GATEWAY_BIND_HOST", "0.0.0.0"),
            CHECKSUM,
        ];
        assert_eq!(with(&exposed).unwrap_err().setting, "GATEWAY_EDGE_TRUSTED_PROXY_CIDRS");
        let behind_proxies = [exposed.as_slice(), &[("GATEWAY_EDGE_TRUSTED_PROXY_CIDRS", "10.0.0.0/8")]].concat();
        assert!(with(&behind_proxies).is_ok());
        let local = [
            ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
            ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
            ("GATEWAY_BIND_HOST", "::1"),
            CHECKSUM,
        ];
        assert!(with(&local).is_ok(), "local mode may leave the list empty");
    }

    #[test]
    fn the_edge_refuses_to_start_without_its_secrets_or_with_bad_values() {
        for (vars, setting) in [
            (vec![("GATEWAY_EDGE_ORIGINS_JSON", "{}")], "GATEWAY_EDGE_CACHE_HMAC_KEY"),
            (
                vec![("GATEWAY_EDGE_CACHE_HMAC_KEY", "short"), ("GATEWAY_EDGE_ORIGINS_JSON", "{}")],
                "GATEWAY_EDGE_CACHE_HMAC_KEY",
            ),
            (vec![("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY)], "GATEWAY_EDGE_ORIGINS_FILE"),
            (
                vec![
                    ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
                    ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
                    ("GATEWAY_EDGE_MAX_INFLIGHT", "0"),
                ],
                "GATEWAY_EDGE_MAX_INFLIGHT",
            ),
            (
                vec![
                    ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
                    ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
                    ("GATEWAY_EDGE_PLAYER_INVALID_STATUSES", "401,500"),
                ],
                "GATEWAY_EDGE_PLAYER_INVALID_STATUSES",
            ),
            (
                vec![
                    ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
                    ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
                    ("GATEWAY_EDGE_INGEST_URL", "ftp://x"),
                ],
                "GATEWAY_EDGE_INGEST_URL",
            ),
            (
                vec![
                    ("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY),
                    ("GATEWAY_EDGE_ORIGINS_JSON", "{}"),
                    ("GATEWAY_BIND_HOST", "example.com"),
                ],
                "GATEWAY_BIND_HOST",
            ),
        ] {
            let error = with(&vars).unwrap_err();
            assert_eq!(error.setting, setting, "{vars:?}: {error}");
        }
    }

    #[test]
    fn the_cache_secrets_need_a_non_empty_rollout_checksum() {
        let edge = [("GATEWAY_EDGE_CACHE_HMAC_KEY", KEY), ("GATEWAY_EDGE_ORIGINS_JSON", "{}")];
        let error = with(&edge).unwrap_err();
        assert_eq!(error.setting, "GATEWAY_EDGE_ROLLOUT_CHECKSUM");
        assert!(error.message.contains("GATEWAY_EDGE_CACHE_HMAC_KEY is set"), "{error}");
        for blank in ["", "  "] {
            let vars = [edge.as_slice(), &[("GATEWAY_EDGE_ROLLOUT_CHECKSUM", blank)]].concat();
            assert_eq!(with(&vars).unwrap_err().setting, "GATEWAY_EDGE_ROLLOUT_CHECKSUM", "{blank:?}");
        }
        let with_url = [edge.as_slice(), &[("GATEWAY_EDGE_CACHE_URL", "redis://127.0.0.1:6379/3")]].concat();
        let error = with(&with_url).unwrap_err();
        assert!(error.message.contains("GATEWAY_EDGE_CACHE_URL and GATEWAY_EDGE_CACHE_HMAC_KEY are set"), "{error}");
        assert!(with(&[with_url.as_slice(), &[CHECKSUM]].concat()).is_ok());
        // A process without the edge that is given the cache URL (a shared environment) needs it too.
        let mut worker =
            GatewayConfig { cache_url: Some(Secret::new("redis://127.0.0.1:6379/3")), ..GatewayConfig::default() };
        assert_eq!(worker.validate(false).unwrap_err().setting, "GATEWAY_EDGE_ROLLOUT_CHECKSUM");
        worker.rollout_checksum = Some("v2".to_owned());
        assert!(worker.validate(false).is_ok());
    }
}
