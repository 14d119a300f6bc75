//! The main listener's settings (`[api]`): where the administration API listens, its token and limits, and the
//! addresses under which services reach it.

use serde::{Deserialize, Serialize};

use super::Config;
use crate::secret::Secret;

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

impl Config {
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

    /// The main listener's address, `api.host:api.port` (the admin API's, and the push routes' by default).
    pub fn api_addr(&self) -> String {
        if self.api.host.contains(':') && !self.api.host.starts_with('[') {
            format!("[{}]:{}", self.api.host, self.api.port)
        } else {
            format!("{}:{}", self.api.host, self.api.port)
        }
    }
}

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
pub(super) fn http_addr_base(addr: &str) -> Result<String, String> {
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
