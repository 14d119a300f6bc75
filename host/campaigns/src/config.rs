//! The campaigns role's section (spec 002 part C): its listener, the explorer's bearer
//! (`CAMPAIGN_EVENTS_API_BEARER_TOKEN`), how often the read models sync and how long a sync stays fresh, and the
//! optional external sources.

use flowhost_core::config::{ConfigError, Secret};
use flowhost_core::settings::{at_least, rule, Section, Setting};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CampaignsConfig {
    /// `FLOWHOST_CAMPAIGNS_LISTEN`: the role's main listener (`/api/v1`, `/health`, `/ready`, `/metrics`).
    pub listen: String,
    /// `CAMPAIGN_EVENTS_API_BEARER_TOKEN`: what requests through the API explorer must carry, and direct
    /// `/api/v1` requests too unless `direct_without_bearer`; unset turns the explorer's request path off.
    pub bearer_token: Option<Secret>,
    /// `FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER` (false): direct `/api/v1` callers need no bearer even when one
    /// is set, as the specification's in-cluster callers behind network isolation; only the explorer's path
    /// checks it then.
    pub direct_without_bearer: bool,
    /// `FLOWHOST_CAMPAIGNS_ALLOW_UNAUTHENTICATED` (false): accept a non-loopback `listen` without a bearer
    /// token (an API every host that reaches the address can read).
    pub allow_unauthenticated: bool,
    /// `FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS` (5000): how often each slice syncs.
    pub sync_interval_ms: u64,
    /// `FLOWHOST_CAMPAIGNS_FRESH_FOR_SECONDS` (60): how long after a successful sync a slice counts as fresh.
    pub fresh_for_seconds: u64,
    /// `FLOWHOST_CAMPAIGNS_SYNC_BATCH` (1000): source records read per query while catching up.
    pub sync_batch: u64,
    /// `FLOWHOST_CAMPAIGNS_DATABASE` (`campaigns`): the logical database of the read models (one per
    /// installation when several share a MongoDB server).
    pub database: String,
    /// `FLOWHOST_CAMPAIGNS_SUPPORT_URL`: the optional external source of support cases (HTTP JSON); unset, the
    /// support slice is `not_configured`.
    pub support_url: Option<String>,
    /// `FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN`: the bearer sent to the support source, if it needs one.
    pub support_token: Option<Secret>,
    /// `FLOWHOST_CAMPAIGNS_EXTERNAL_URL`: the optional external campaign source (HTTP JSON); unset, every
    /// campaign comes from a flow.
    pub external_url: Option<String>,
    /// `FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN`: the bearer sent to the external campaign source, if it needs one.
    pub external_token: Option<Secret>,
}

impl Default for CampaignsConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8086".to_owned(),
            bearer_token: None,
            direct_without_bearer: false,
            allow_unauthenticated: false,
            sync_interval_ms: 5000,
            fresh_for_seconds: 60,
            sync_batch: 1000,
            database: "campaigns".to_owned(),
            support_url: None,
            support_token: None,
            external_url: None,
            external_token: None,
        }
    }
}

/// Every `[campaigns]` setting (see `crate::settings`).
pub static CAMPAIGNS_SETTINGS: &[Setting<CampaignsConfig>] = flowhost_core::settings!(CampaignsConfig, "campaigns.", [
    { "FLOWHOST_CAMPAIGNS_LISTEN", listen, "the API's listener, `host:port`", check: rule(socket_addr, "") },
    { "FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", sync_interval_ms, "time between sync passes", check: at_least(1) },
    { "FLOWHOST_CAMPAIGNS_FRESH_FOR_SECONDS", fresh_for_seconds, "how long a successful sync counts as fresh", check: at_least(1) },
    { "FLOWHOST_CAMPAIGNS_SYNC_BATCH", sync_batch, "source records per query", check: at_least(1) },
    { "FLOWHOST_CAMPAIGNS_DATABASE", database, "the read models' logical database", check: rule(identifier, "letters, digits, `_`") },
    { "FLOWHOST_CAMPAIGNS_SUPPORT_URL", support_url, "the support-case source (`http://` or `https://`)", check: rule(http_url, ""), default: "unset (`not_configured`)" },
    { "FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN", support_token, "the bearer sent to the support-case source", parse: trimmed_secret },
    { "FLOWHOST_CAMPAIGNS_EXTERNAL_URL", external_url, "the external campaign source (`http://` or `https://`)", check: rule(http_url, ""), default: "unset (flows' campaigns only)" },
    { "FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN", external_token, "the bearer sent to the external campaign source", parse: trimmed_secret },
    { "CAMPAIGN_EVENTS_API_BEARER_TOKEN", bearer_token, "the bearer of requests through the API explorer and, unless the next setting says otherwise, of direct ones", parse: trimmed_secret, check: rule(bearer, "at least 16 characters") },
    { "FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER", direct_without_bearer, "direct `/api/v1` callers need no bearer (the specification's in-cluster model)" },
    { "FLOWHOST_CAMPAIGNS_ALLOW_UNAUTHENTICATED", allow_unauthenticated, "accept a non-loopback `FLOWHOST_CAMPAIGNS_LISTEN` without a bearer" },
]);

fn trimmed_secret(value: &str) -> Result<Option<Secret>, String> {
    Ok(Some(Secret::new(value.trim())))
}

fn socket_addr(listen: &str) -> Result<(), String> {
    listen.parse::<std::net::SocketAddr>().map(|_| ()).map_err(|e| format!("{listen:?}: {e} (write host:port)"))
}

fn identifier(database: &str) -> Result<(), String> {
    if flowhost_core::model::is_identifier(database) {
        Ok(())
    } else {
        Err("use letters, digits and underscores".to_owned())
    }
}

fn http_url(url: &Option<String>) -> Result<(), String> {
    match url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) || url::Url::parse(url).is_err() => {
            Err("must be an http:// or https:// URL".to_owned())
        }
        _ => Ok(()),
    }
}

fn bearer(token: &Option<Secret>) -> Result<(), String> {
    match token {
        Some(token) if token.expose().len() < 16 => Err("use at least 16 characters".to_owned()),
        _ => Ok(()),
    }
}

impl Section for CampaignsConfig {
    const NAME: &'static str = "campaigns";
    const PAGE: &'static str = "campaigns.md";

    fn settings() -> &'static [Setting<Self>] {
        CAMPAIGNS_SETTINGS
    }
}

impl CampaignsConfig {
    /// What the campaigns role needs besides each setting's bounds: a bearer (or explicit consent) for a
    /// listener other hosts reach.
    pub fn check_role(&self) -> Result<(), ConfigError> {
        flowhost_core::settings::check(self, CAMPAIGNS_SETTINGS)?;
        let listen = self.listen.parse::<std::net::SocketAddr>().map_err(|e| {
            ConfigError::new("FLOWHOST_CAMPAIGNS_LISTEN", format!("{:?}: {e} (write host:port)", self.listen))
        })?;
        if !listen.ip().is_loopback() && self.bearer_token.is_none() && !self.allow_unauthenticated {
            return Err(ConfigError::new(
                "FLOWHOST_CAMPAIGNS_LISTEN",
                format!(
                    "{:?} exposes the campaign events API to other hosts without a bearer; set \
                     CAMPAIGN_EVENTS_API_BEARER_TOKEN, or FLOWHOST_CAMPAIGNS_ALLOW_UNAUTHENTICATED=true",
                    self.listen
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_env(vars: &[(&str, &str)]) -> Result<CampaignsConfig, ConfigError> {
        let mut config = CampaignsConfig::default();
        let get = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        flowhost_core::settings::apply_env(&mut config, CAMPAIGNS_SETTINGS, &get)?;
        config.check_role()?;
        Ok(config)
    }

    #[test]
    fn settings_keep_their_names_and_are_checked() {
        let config = from_env(&[
            ("FLOWHOST_CAMPAIGNS_LISTEN", "0.0.0.0:9086"),
            ("CAMPAIGN_EVENTS_API_BEARER_TOKEN", "0123456789abcdef"),
            ("FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", "250"),
            ("FLOWHOST_CAMPAIGNS_FRESH_FOR_SECONDS", "30"),
            ("FLOWHOST_CAMPAIGNS_SYNC_BATCH", "50"),
            ("FLOWHOST_CAMPAIGNS_DATABASE", "campaigns_eu"),
            ("FLOWHOST_CAMPAIGNS_SUPPORT_URL", "https://support.internal/cases"),
            ("FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN", "s3cret"),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_URL", "http://crm.internal/campaigns"),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN", "crm-token"),
        ])
        .unwrap();
        assert_eq!(
            (config.listen.as_str(), config.sync_interval_ms, config.fresh_for_seconds),
            ("0.0.0.0:9086", 250, 30)
        );
        assert_eq!((config.sync_batch, config.database.as_str()), (50, "campaigns_eu"));
        assert_eq!(config.bearer_token.unwrap().expose(), "0123456789abcdef");
        assert_eq!(config.support_url.as_deref(), Some("https://support.internal/cases"));
        assert_eq!(config.support_token.unwrap().expose(), "s3cret");
        assert_eq!(config.external_url.as_deref(), Some("http://crm.internal/campaigns"));
        assert_eq!(config.external_token.unwrap().expose(), "crm-token");
        assert_eq!(CampaignsConfig::default().listen, "127.0.0.1:8086");

        for (name, value) in [
            ("FLOWHOST_CAMPAIGNS_LISTEN", "8086"),
            ("CAMPAIGN_EVENTS_API_BEARER_TOKEN", "short"),
            ("FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", "0"),
            ("FLOWHOST_CAMPAIGNS_SYNC_BATCH", "many"),
            ("FLOWHOST_CAMPAIGNS_DATABASE", "campaigns-eu"),
            ("FLOWHOST_CAMPAIGNS_SUPPORT_URL", "ftp://support"),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_URL", "crm.internal"),
        ] {
            let error = from_env(&[(name, value)]).unwrap_err();
            assert!(error.to_string().contains(name), "{name}: {error}");
        }
    }

    /// An API other hosts reach needs a bearer, or the operator's explicit consent to an open one.
    #[test]
    fn a_non_loopback_listener_needs_a_bearer() {
        let error = from_env(&[("FLOWHOST_CAMPAIGNS_LISTEN", "0.0.0.0:8086")]).unwrap_err();
        assert!(error.to_string().contains("CAMPAIGN_EVENTS_API_BEARER_TOKEN"), "{error}");
        let open =
            [("FLOWHOST_CAMPAIGNS_LISTEN", "0.0.0.0:8086"), ("FLOWHOST_CAMPAIGNS_ALLOW_UNAUTHENTICATED", "true")];
        assert!(from_env(&open).unwrap().allow_unauthenticated);
        assert!(from_env(&[("FLOWHOST_CAMPAIGNS_LISTEN", "127.0.0.1:8086")]).is_ok());
        let spec = [("FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER", "true")];
        assert!(from_env(&spec).unwrap().direct_without_bearer);
    }
}
