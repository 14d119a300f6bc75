//! The campaign events API's settings (spec 002 part C): its listener, the explorer's bearer
//! (`CAMPAIGN_EVENTS_API_BEARER_TOKEN`), how often the read models sync and how long a sync stays fresh, and the
//! optional external sources.

use serde::{Deserialize, Serialize};

use super::{parse, ConfigError, Secret};

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

impl CampaignsConfig {
    pub(super) fn apply_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = get("FLOWHOST_CAMPAIGNS_LISTEN") {
            self.listen = v.trim().to_owned();
        }
        for (name, slot) in [
            ("FLOWHOST_CAMPAIGNS_SUPPORT_URL", &mut self.support_url),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_URL", &mut self.external_url),
        ] {
            if let Some(v) = get(name) {
                *slot = Some(v.trim().to_owned()).filter(|url| !url.is_empty());
            }
        }
        for (name, slot) in [
            ("FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN", &mut self.support_token),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN", &mut self.external_token),
        ] {
            if let Some(v) = get(name) {
                *slot = Some(Secret::new(v.trim())).filter(|s| !s.expose().is_empty());
            }
        }
        if let Some(v) = get("FLOWHOST_CAMPAIGNS_DATABASE") {
            self.database = v.trim().to_owned();
        }
        if let Some(v) = get("CAMPAIGN_EVENTS_API_BEARER_TOKEN") {
            self.bearer_token = Some(Secret::new(v.trim())).filter(|s| !s.expose().is_empty());
        }
        for (name, slot) in [
            ("FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER", &mut self.direct_without_bearer),
            ("FLOWHOST_CAMPAIGNS_ALLOW_UNAUTHENTICATED", &mut self.allow_unauthenticated),
        ] {
            if let Some(v) = get(name) {
                *slot = super::parse_bool(name, &v)?;
            }
        }
        for (name, slot) in [
            ("FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", &mut self.sync_interval_ms),
            ("FLOWHOST_CAMPAIGNS_FRESH_FOR_SECONDS", &mut self.fresh_for_seconds),
            ("FLOWHOST_CAMPAIGNS_SYNC_BATCH", &mut self.sync_batch),
        ] {
            if let Some(v) = get(name) {
                *slot = parse(name, v)?;
            }
        }
        Ok(())
    }

    /// Checks what the campaigns role needs.
    pub fn validate(&self) -> Result<(), ConfigError> {
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
        for (name, value) in [
            ("FLOWHOST_CAMPAIGNS_SYNC_INTERVAL_MS", self.sync_interval_ms),
            ("FLOWHOST_CAMPAIGNS_FRESH_FOR_SECONDS", self.fresh_for_seconds),
            ("FLOWHOST_CAMPAIGNS_SYNC_BATCH", self.sync_batch),
        ] {
            if value == 0 {
                return Err(ConfigError::new(name, "must be positive"));
            }
        }
        for (name, url) in [
            ("FLOWHOST_CAMPAIGNS_SUPPORT_URL", &self.support_url),
            ("FLOWHOST_CAMPAIGNS_EXTERNAL_URL", &self.external_url),
        ] {
            let Some(url) = url else { continue };
            if !(url.starts_with("http://") || url.starts_with("https://")) || url::Url::parse(url).is_err() {
                return Err(ConfigError::new(name, "must be an http:// or https:// URL"));
            }
        }
        if !crate::model::is_identifier(&self.database) {
            return Err(ConfigError::new("FLOWHOST_CAMPAIGNS_DATABASE", "use letters, digits and underscores"));
        }
        if self.bearer_token.as_ref().is_some_and(|token| token.expose().len() < 16) {
            return Err(ConfigError::new("CAMPAIGN_EVENTS_API_BEARER_TOKEN", "use at least 16 characters"));
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
        config.apply_env(&get)?;
        config.validate()?;
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
