//! The web-push notification service's section (`[push]`), shared by its two roles: the push-api role's caller
//! policy, editor token, interaction tokens, retention and in-app limits, and the sender role's VAPID keys and
//! push services.

use flowhost_core::config::{Config, ConfigError, Secret};
use flowhost_core::secret_setting;
use flowhost_core::settings::{at_least, between, rule, SecretSetting, Section, Setting};
use flowhost_notifications::Channel;
use serde::{Deserialize, Serialize};

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
/// Every `[push]` setting (see `crate::settings`).
pub static PUSH_SETTINGS: &[Setting<PushConfig>] = flowhost_core::settings!(PushConfig, "push.", [
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

impl Section for PushConfig {
    const NAME: &'static str = "push";
    const PAGE: &'static str = "configuration.md";

    fn settings() -> &'static [Setting<Self>] {
        PUSH_SETTINGS
    }

    fn secrets() -> &'static [SecretSetting<Self>] {
        PUSH_SECRETS
    }

    /// A previous interaction-token key needs a current one.
    fn validate(&self) -> Result<(), ConfigError> {
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

/// The push settings that may be named in the secret store, in the order they are read (spec 000).
static PUSH_SECRETS: &[SecretSetting<PushConfig>] = &[
    secret_setting!(PushConfig, "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", callers_json, callers_json_secret_name),
    secret_setting!(PushConfig, "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY", vapid_public_key, vapid_public_key_secret_name),
    secret_setting!(PushConfig, "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", vapid_private_key, vapid_private_key_secret_name),
    secret_setting!(
        PushConfig,
        "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET",
        interaction_token_secret,
        interaction_token_secret_secret_name
    ),
    secret_setting!(PushConfig, "INAPP_EDITOR_API_AUTH_TOKEN", editor_token, editor_token_secret_name),
];

/// The push settings whose value may come from the secret store, resolved (see [`PushConfig::secret_values`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushSecrets {
    pub callers_json: Option<Secret>,
    pub vapid_public_key: Option<String>,
    pub vapid_private_key: Option<Secret>,
    pub interaction_token_secret: Option<Secret>,
    pub editor_token: Option<Secret>,
}

impl PushConfig {
    /// The push settings that may come from the secret store. Each is its literal value: at start
    /// `Config::resolve_secrets` fills the literals left unset from the secrets their `*_SECRET_NAME` names, so
    /// a name still unresolved here is an error naming it.
    pub fn secret_values(&self, config: &Config) -> Result<PushSecrets, ConfigError> {
        Ok(PushSecrets {
            callers_json: config.literal(
                self.callers_json.as_ref(),
                &self.callers_json_secret_name,
                "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME",
            )?,
            vapid_public_key: config.literal(
                self.vapid_public_key.as_ref(),
                &self.vapid_public_key_secret_name,
                "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME",
            )?,
            vapid_private_key: config.literal(
                self.vapid_private_key.as_ref(),
                &self.vapid_private_key_secret_name,
                "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME",
            )?,
            interaction_token_secret: config.literal(
                self.interaction_token_secret.as_ref(),
                &self.interaction_token_secret_secret_name,
                "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME",
            )?,
            editor_token: config.literal(
                self.editor_token.as_ref(),
                &self.editor_token_secret_name,
                "INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME",
            )?,
        })
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
    for pair in flowhost_core::settings::split_list(text) {
        let (tenant, language) = pair
            .split_once('=')
            .map(|(tenant, language)| (tenant.trim(), language.trim()))
            .filter(|(tenant, language)| !tenant.is_empty() && !language.is_empty() && language.len() <= 64)
            .ok_or_else(|| format!("{pair:?}: write tenant=language (a language of at most 64 bytes)"))?;
        languages.insert(tenant.to_owned(), language.to_owned());
    }
    Ok(languages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::config::SectionEntry;
    use std::collections::HashMap;

    const SECTIONS: [SectionEntry; 1] = [SectionEntry::of::<PushConfig>()];

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(None, |name| vars.get(name).cloned(), &SECTIONS)
    }

    fn push(vars: &[(&str, &str)]) -> PushConfig {
        load(vars).unwrap().section::<PushConfig>().into_owned()
    }

    #[test]
    fn sender_settings_come_from_the_environment_and_are_bounded() {
        let defaults = push(&[]);
        assert_eq!(defaults.vapid_subject, DEFAULT_VAPID_SUBJECT);
        assert_eq!((defaults.push_ttl_seconds, defaults.max_concurrent_pushes), (86_400, 256));
        assert_eq!((defaults.push_service_hosts, defaults.ssl_cert_file), (None, None));
        let push = push(&[
            ("FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS", " 127.0.0.1, push.example:8443 "),
            ("FLOWHOST_WEBPUSH_VAPID_SUBJECT", "https://casino.example/contact"),
            ("FLOWHOST_WEBPUSH_TTL_SECONDS", "600"),
            ("FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES", "32"),
            ("SSL_CERT_FILE", "/etc/ssl/extra.pem"),
        ]);
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
    }

    #[test]
    fn push_defaults() {
        let config = load(&[]).unwrap();
        let push = config.section::<PushConfig>();
        assert_eq!(push.retention_days, 30);
        assert_eq!(push.retention_sweep_interval_ms, 3_600_000);
        assert_eq!(push.channels_enabled, vec![Channel::WebPush, Channel::InApp]);
        assert!(!push.dry_run && !push.allow_auto_vapid);
        assert_eq!(push.listen, None);
        assert_eq!(push.secret_values(&config).unwrap(), PushSecrets::default());
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
            ("FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES", "t1=de, t2 = fr"),
            ("FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS", "dashboard"),
        ])
        .unwrap();
        let push = config.section::<PushConfig>();
        assert_eq!(push.allowed_target_hosts, ["casino.example", "*.cdn.example"]);
        assert!(push.dry_run && push.allow_auto_vapid);
        assert_eq!(push.channels_enabled, vec![Channel::WebPush]);
        assert_eq!((push.retention_days, push.retention_sweep_interval_ms), (7, 250));
        assert_eq!(push.listen.as_deref(), Some("127.0.0.1:8788"));
        assert_eq!(push.tenants, ["t1", "t2"]);
        assert_eq!(push.tenant_default_languages["t2"], "fr");
        assert_eq!(push.smoke_test_callers, ["dashboard"]);
        assert_eq!(push.interaction_token_secret_previous.as_ref().map(Secret::expose), Some("s0"));
        let secrets = push.secret_values(&config).unwrap();
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
            (vec![("FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES", "t1")], "FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES"),
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
        let config =
            load(&[("INAPP_EDITOR_API_AUTH_TOKEN", "t"), ("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "n")]).unwrap();
        let secrets = config.section::<PushConfig>().secret_values(&config).unwrap();
        assert_eq!(secrets.editor_token, Some(Secret::new("t")));
    }

    /// Each push secret named in the store is pending, in the spec's order, until read; reading one fills its
    /// literal.
    #[test]
    fn every_push_secret_is_read_by_name_into_its_literal() {
        let mut config = load(&[
            ("KEY_VAULT_URL", "https://vault.example"),
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME", "callers"),
            ("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY_SECRET_NAME", "vapid-public"),
            ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY_SECRET_NAME", "vapid-private"),
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME", "hmac"),
            ("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME", "editor"),
        ])
        .unwrap();
        let push = config.section::<PushConfig>().into_owned();
        // Before resolution the values are not there, and saying so names the setting.
        assert_eq!(
            push.secret_values(&config).unwrap_err().setting,
            "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON_SECRET_NAME"
        );
        let pending: Vec<String> = config.pending_secrets().into_iter().map(|pending| pending.name).collect();
        assert_eq!(pending, ["callers", "vapid-public", "vapid-private", "hmac", "editor"]);
        for secret in <PushConfig as Section>::secrets() {
            (secret.fill)(config.section_mut::<PushConfig>(), Secret::new(secret.literal));
        }
        assert!(config.pending_secrets().is_empty());
        let secrets = config.section::<PushConfig>().secret_values(&config).unwrap();
        assert_eq!(secrets.callers_json, Some(Secret::new("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON")));
        assert_eq!(secrets.vapid_public_key.as_deref(), Some("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY"));
        assert_eq!(secrets.vapid_private_key, Some(Secret::new("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY")));
        assert_eq!(secrets.interaction_token_secret, Some(Secret::new("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET")));
        assert_eq!(secrets.editor_token, Some(Secret::new("INAPP_EDITOR_API_AUTH_TOKEN")));
    }

    #[test]
    fn a_bad_caller_policy_does_not_stop_the_start() {
        // The policy's content is the push-api role's business (it answers 503 and /health 503), not a
        // configuration error.
        let config = load(&[("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", "{not json")]).unwrap();
        let secrets = config.section::<PushConfig>().secret_values(&config).unwrap();
        assert_eq!(secrets.callers_json.map(|s| s.expose().to_owned()).as_deref(), Some("{not json"));
    }

    #[test]
    fn secrets_are_redacted_in_debug() {
        let config = load(&[
            ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", "hmac-secret-value"),
            ("INAPP_EDITOR_API_AUTH_TOKEN", "editor-token-value"),
            ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", r#"{"callers":[{"token":"caller-token-value"}]}"#),
        ])
        .unwrap();
        let debug = format!("{config:?} {:?}", config.section::<PushConfig>().secret_values(&config).unwrap());
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
        let config = Config::load(Some(&path), |_| None, &SECTIONS).unwrap();
        assert_eq!(config.roles, ["admin", "push-api"]);
        let push = config.section::<PushConfig>();
        assert_eq!(push.retention_days, 9);
        assert_eq!(push.channels_enabled, vec![Channel::InApp]);
        assert_eq!(push.editor_token, Some(Secret::new("e")));
        std::fs::write(&path, "[push]\nretention = 9\n").unwrap();
        let error = Config::load(Some(&path), |_| None, &SECTIONS).unwrap_err();
        assert!(error.message.contains("retention"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
