//! The web-push notification service's settings (`[push]`): the push-api role's caller policy, editor token,
//! interaction tokens, retention and in-app limits, and the sender role's VAPID keys and push services.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret};
use crate::settings::{at_least, between, from_str, rule, FromSetting, Setting};

/// A delivery channel of the notification service (`FLOWHOST_CHANNELS_ENABLED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Channel {
    #[serde(rename = "WEB_PUSH")]
    WebPush,
    #[serde(rename = "IN_APP")]
    InApp,
}

impl FromStr for Channel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "WEB_PUSH" => Ok(Channel::WebPush),
            "IN_APP" => Ok(Channel::InApp),
            other => Err(format!("unknown channel {other:?} (known: WEB_PUSH, IN_APP)")),
        }
    }
}

/// The push-api role: the web-push service's push-platform routes (caller policy), editor routes (editor token),
/// interaction tokens and retention. Every secret may instead be named in the secret store with the matching
/// `*_SECRET_NAME` setting (needs `KEY_VAULT_URL`); the literal value wins when both are set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PushConfig {
    /// Caller policy `{ "callers": [...] }` (`FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON`). The push-api role parses
    /// it at start; a policy that does not parse or names an unknown route does **not** stop the process: the
    /// push-platform routes then answer 503 `CALLER_POLICY_INVALID` and `/health` answers 503. Unset: no caller
    /// is authorized (401).
    pub callers_json: Option<Secret>,
    /// Secret-store name of the caller policy (`FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME`).
    pub callers_json_secret_name: Option<String>,
    /// VAPID public key, base64url of the uncompressed P-256 point (`FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY`).
    pub vapid_public_key: Option<String>,
    /// Secret-store name of the VAPID public key (`FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME`).
    pub vapid_public_key_secret_name: Option<String>,
    /// VAPID private key, base64url of the 32-byte scalar (`FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY`).
    pub vapid_private_key: Option<Secret>,
    /// Secret-store name of the VAPID private key (`FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME`).
    pub vapid_private_key_secret_name: Option<String>,
    /// HMAC-SHA256 key that signs and verifies interaction tokens (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET`).
    pub interaction_token_secret: Option<Secret>,
    /// Secret-store name of the interaction-token secret (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME`).
    pub interaction_token_secret_secret_name: Option<String>,
    /// The previous interaction-token secret during a rotation (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS`):
    /// tokens signed with it still verify; new tokens use the current secret. Remove it once the tokens it
    /// signed have expired.
    pub interaction_token_secret_previous: Option<Secret>,
    /// Hosts a rendered `target_url` may point to, comma-separated (`FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS`);
    /// `*.example.com` covers the subdomains of `example.com`. Empty: only the scheme (https) is checked.
    pub allowed_target_hosts: Vec<String>,
    /// `WEB_PUSH_DRY_RUN`: pushes are skipped; client-config is not ready while it is true (default false).
    pub dry_run: bool,
    /// Channels this deployment runs, comma-separated `WEB_PUSH`, `IN_APP` (`FLOWHOST_CHANNELS_ENABLED`;
    /// default both).
    pub channels_enabled: Vec<Channel>,
    /// Bearer token of the editor routes (`INAPP_EDITOR_API_AUTH_TOKEN`). Unset: editor routes answer 503.
    pub editor_token: Option<Secret>,
    /// Secret-store name of the editor token (`INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME`).
    pub editor_token_secret_name: Option<String>,
    /// Local development only: without a configured VAPID pair, generate a temporary one at start
    /// (`FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID`; default false). Client-config stays not ready.
    pub allow_auto_vapid: bool,
    /// Days notification activity and interaction events are kept (`FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`;
    /// default 30).
    pub retention_days: u32,
    /// How often the push-api role sweeps expired activity and events, in milliseconds
    /// (`FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS`; default one hour).
    pub retention_sweep_interval_ms: u64,
    /// A separate `host:port` for the push routes (`FLOWHOST_PUSH_API_LISTEN`). Unset: they share the
    /// administration API's listener.
    pub listen: Option<String>,
    /// Tenants the editor may select, comma-separated (`FLOWHOST_WEBPUSH_TENANTS`); the tenants list also holds
    /// every `tenant_ids` entry of the caller policy and every tenant that stored a subscription or template.
    pub tenants: Vec<String>,
    /// Each tenant's default language, `tenant=language` pairs, comma-separated
    /// (`FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES`; default none): `send_inapp` without `language_id` renders
    /// the template's `default_language`, else this one when the template has it, else the template's first.
    pub tenant_default_languages: std::collections::BTreeMap<String, String>,
    /// `caller_id`s that may use `player_id` 0, the identity the spec reserves for dashboard smoke tests, on
    /// subscription create and deactivate (`FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS`, comma-separated; default none).
    pub smoke_test_callers: Vec<String>,
    /// The push services the sender may POST to, comma-separated `host` (every port) or `host:port`, `*.` for
    /// subdomains (`FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS`). Unset: the public push services of Chrome, Firefox,
    /// Edge and Safari. Loopback and private addresses are allowed only when listed.
    pub push_service_hosts: Option<String>,
    /// The contact the VAPID JWT names in `sub`, a `mailto:` or `https:` URI (`FLOWHOST_WEBPUSH_VAPID_SUBJECT`).
    /// Push services use it to reach the operator; set a real one in production.
    pub vapid_subject: String,
    /// How long a push service keeps a message for an offline browser, in seconds (`FLOWHOST_WEBPUSH_TTL_SECONDS`;
    /// default one day, at most 28 days).
    pub push_ttl_seconds: u32,
    /// Push requests in flight at once, over all notifications of this process
    /// (`FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES`; default 256).
    pub max_concurrent_pushes: usize,
    /// A PEM bundle of extra CA roots for push services (`SSL_CERT_FILE`, as OpenSSL-based tools read it).
    pub ssl_cert_file: Option<String>,
    /// In-app websockets one node keeps open at most (`FLOWHOST_INAPP_MAX_CONNECTIONS`; default 20000); more
    /// are refused with 503 and `Retry-After`.
    pub max_inapp_connections: usize,
    /// In-app websockets one player may have open on one node (`FLOWHOST_INAPP_MAX_CONNECTIONS_PER_PLAYER`;
    /// default 5); more are refused with 429.
    pub max_inapp_connections_per_player: usize,
}

/// The default VAPID subject: a `mailto:` URI on a reserved domain, to be replaced by a real contact.
pub const DEFAULT_VAPID_SUBJECT: &str = "mailto:webpush-operator@flowhost.invalid";
/// The longest push TTL push services accept (FCM: 28 days).
pub const MAX_PUSH_TTL_SECONDS: u32 = 28 * 24 * 3600;

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            callers_json: None,
            callers_json_secret_name: None,
            vapid_public_key: None,
            vapid_public_key_secret_name: None,
            vapid_private_key: None,
            vapid_private_key_secret_name: None,
            interaction_token_secret: None,
            interaction_token_secret_secret_name: None,
            interaction_token_secret_previous: None,
            allowed_target_hosts: Vec::new(),
            dry_run: false,
            channels_enabled: vec![Channel::WebPush, Channel::InApp],
            editor_token: None,
            editor_token_secret_name: None,
            allow_auto_vapid: false,
            retention_days: 30,
            retention_sweep_interval_ms: 60 * 60 * 1000,
            listen: None,
            tenants: Vec::new(),
            tenant_default_languages: std::collections::BTreeMap::new(),
            smoke_test_callers: Vec::new(),
            push_service_hosts: None,
            vapid_subject: DEFAULT_VAPID_SUBJECT.to_owned(),
            push_ttl_seconds: 24 * 3600,
            max_concurrent_pushes: 256,
            ssl_cert_file: None,
            max_inapp_connections: 20_000,
            max_inapp_connections_per_player: 5,
        }
    }
}
impl FromSetting for Channel {
    fn from_setting(value: &str) -> Result<Self, String> {
        from_str(value)
    }
}

/// Every `[push]` setting (see `crate::settings`).
pub static PUSH_SETTINGS: &[Setting<PushConfig>] = crate::settings!(PushConfig, "push.", [
    { "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", callers_json, "push-platform caller policy (see [Push API](push.md#push-api-web-push-notification-service)); one that does not parse makes the push-platform routes and `/health` answer 503", default: "unset (every caller 401)" },
    { "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME", callers_json_secret_name, "secret-store name of the caller policy" },
    { "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY", vapid_public_key, "VAPID public key, base64url (`flowhost webpush vapid-keys`); a pair that does not match stops the start" },
    { "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME", vapid_public_key_secret_name, "secret-store name of the VAPID public key" },
    { "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", vapid_private_key, "VAPID private key, base64url" },
    { "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME", vapid_private_key_secret_name, "secret-store name of the VAPID private key" },
    { "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", interaction_token_secret, "HMAC-SHA256 key of interaction tokens" },
    { "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME", interaction_token_secret_secret_name, "secret-store name of the interaction-token key" },
    { "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS", interaction_token_secret_previous, "previous key, still accepted during a rotation (needs the current one)", check: rule(not_blank_secret, "") },
    { "FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS", allowed_target_hosts, "hosts a rendered `target_url` may use, comma-separated; `*.example.com` for subdomains", check: rule(host_patterns, ""), default: "empty (scheme check only; a warning on `/ready`)" },
    { "WEB_PUSH_DRY_RUN", dry_run, "pushes skipped; client-config not ready" },
    { "FLOWHOST_CHANNELS_ENABLED", channels_enabled, "channels of this deployment" },
    { "INAPP_EDITOR_API_AUTH_TOKEN", editor_token, "bearer token of the editor routes", default: "unset (editor routes 503)" },
    { "INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", editor_token_secret_name, "secret-store name of the editor token" },
    { "FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID", allow_auto_vapid, "local development only: a temporary VAPID pair when none is set" },
    { "FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS", retention_days, "days activity and interaction events are kept", check: between(1, 3650) },
    { "FLOWHOST_WEBPUSH_RETENTION_SWEEP_INTERVAL_MS", retention_sweep_interval_ms, "how often expired records are swept", check: at_least(10) },
    { "FLOWHOST_PUSH_API_LISTEN", listen, "separate `host:port` for the push routes", check: rule(socket_addr, ""), default: "unset (the admin listener)" },
    { "FLOWHOST_WEBPUSH_TENANTS", tenants, "tenants the editor may select, comma-separated", check: rule(|tenants: &[String]| if tenants.iter().any(|t| t.trim().is_empty()) { Err("tenant ids must not be empty".to_owned()) } else { Ok(()) }, "") },
    { "FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES", tenant_default_languages, "each tenant's default language, `tenant=language` comma-separated: `send_inapp` without `language_id` renders the template's `default_language`, else this one when the template has it, else the template's first language", parse: parse_languages, default: "empty" },
    { "FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS", smoke_test_callers, "`caller_id`s that may use `player_id` 0" },
    { "FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS", push_service_hosts, "push services the sender may POST to: `host` (every port) or `host:port`, `*.` for subdomains, comma-separated; loopback only when listed", default: "the browsers' push services" },
    { "FLOWHOST_WEBPUSH_VAPID_SUBJECT", vapid_subject, "the VAPID JWT's `sub`, a `mailto:` or `https:` URI (set a real contact)", check: rule(vapid_subject, "") },
    { "FLOWHOST_WEBPUSH_TTL_SECONDS", push_ttl_seconds, "`TTL` of push messages", check: between(1, MAX_PUSH_TTL_SECONDS) },
    { "FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES", max_concurrent_pushes, "push requests in flight per process", check: between(1, 10_000) },
    { "SSL_CERT_FILE", ssl_cert_file, "PEM bundle of extra CA roots for push services" },
    { "FLOWHOST_INAPP_MAX_CONNECTIONS", max_inapp_connections, "in-app websockets one node keeps open (more are refused with 503)", check: at_least(1) },
    { "FLOWHOST_INAPP_MAX_CONNECTIONS_PER_PLAYER", max_inapp_connections_per_player, "in-app websockets one player keeps open on one node (more are refused with 429)", check: between(1, 100) },
]);

impl PushConfig {
    /// The rules that tie settings together (each setting's bounds are in [`PUSH_SETTINGS`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::settings::check(self, PUSH_SETTINGS)?;
        let current = self.interaction_token_secret.is_some() || self.interaction_token_secret_secret_name.is_some();
        if self.interaction_token_secret_previous.is_some() && !current {
            return Err(ConfigError::new(
                "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS",
                "is set without FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET",
            ));
        }
        Ok(())
    }
}

fn not_blank_secret(secret: &Option<Secret>) -> Result<(), String> {
    match secret {
        Some(secret) if secret.expose().trim().is_empty() => Err("must not be empty".to_owned()),
        _ => Ok(()),
    }
}

/// Every allowed-target-host entry is a host name (or `*.` and a host name), no scheme, port or path.
fn host_patterns(entries: &[String]) -> Result<(), String> {
    let is_host_pattern = |entry: &str| {
        let host = entry.strip_prefix("*.").unwrap_or(entry);
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
    };
    match entries.iter().find(|entry| !is_host_pattern(entry)) {
        Some(entry) => {
            Err(format!("{entry:?} is not a host name (write `example.com` or `*.example.com`, no scheme or port)"))
        }
        None => Ok(()),
    }
}

fn socket_addr(listen: &Option<String>) -> Result<(), String> {
    match listen {
        Some(listen) => listen
            .parse::<std::net::SocketAddr>()
            .map(|_| ())
            .map_err(|error| format!("{listen:?}: {error} (write host:port)")),
        None => Ok(()),
    }
}

fn vapid_subject(subject: &str) -> Result<(), String> {
    if subject.starts_with("mailto:") || subject.starts_with("https:") {
        Ok(())
    } else {
        Err("must be a mailto: or https: URI".to_owned())
    }
}

/// `FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES`: `tenant=language` pairs, comma-separated.
fn parse_languages(text: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut languages = std::collections::BTreeMap::new();
    for pair in crate::settings::split_list(text) {
        let (tenant, language) = pair
            .split_once('=')
            .map(|(tenant, language)| (tenant.trim(), language.trim()))
            .filter(|(tenant, language)| !tenant.is_empty() && !language.is_empty() && language.len() <= 64)
            .ok_or_else(|| format!("{pair:?}: write tenant=language (a language of at most 64 bytes)"))?;
        languages.insert(tenant.to_owned(), language.to_owned());
    }
    Ok(languages)
}
