//! The secrets port on Azure Key Vault: `GET {KEY_VAULT_URL}/secrets/{name}?api-version=7.4` with a bearer
//! token, the value read from `value`. The token comes from the first credential the environment configures,
//! in the order Azure's `DefaultAzureCredential` tries them ([`Credential::from_env`]): client credentials
//! (`AZURE_TENANT_ID`, `AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`), workload identity
//! (`AZURE_FEDERATED_TOKEN_FILE`), then managed identity (App Service / Container Apps `IDENTITY_ENDPOINT`
//! and `IDENTITY_HEADER`, else the instance metadata service). The token is cached until shortly before it
//! expires, measured by the injected clock.
//!
//! Every endpoint can be moved by the environment variable Azure's SDKs read (`AZURE_AUTHORITY_HOST`,
//! `IDENTITY_ENDPOINT`, `AZURE_POD_IDENTITY_AUTHORITY_HOST`), which is how the tests point it at a stand-in.
//! Errors name settings, secret names and HTTP statuses only: no secret value, token, client secret or
//! response body (which could echo any of them) ever reaches an error or a log.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use flowhost_core::config::Secret;
use flowhost_core::ports::{SecretError, SecretStore};
use flowhost_core::{Clock, PortError};
use serde_json::Value;
use tracing::{debug, info};
use url::{Host, Url};

/// The Key Vault REST API version of the secret GET.
pub const API_VERSION: &str = "7.4";
/// The OAuth scope of Key Vault (client credentials and workload identity).
pub const SCOPE: &str = "https://vault.azure.net/.default";
/// The resource of Key Vault (managed identity endpoints).
pub const RESOURCE: &str = "https://vault.azure.net";
/// Azure's public-cloud authority, unless `AZURE_AUTHORITY_HOST` says otherwise.
pub const DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com";
/// The instance metadata service, unless `AZURE_POD_IDENTITY_AUTHORITY_HOST` says otherwise.
pub const DEFAULT_IMDS_HOST: &str = "http://169.254.169.254";
/// Limit of every HTTP call (token and secret), connection included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Azure's SDKs refresh a token five minutes before it expires.
const REFRESH_MARGIN_MS: i64 = 5 * 60 * 1000;

/// Why a [`KeyVault`] could not be built from its settings; names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyVaultError {
    #[error("{setting}: {message}")]
    Setting { setting: &'static str, message: String },
    #[error("building the HTTP client: {0}")]
    Client(String),
}

impl KeyVaultError {
    /// The setting at fault (`KEY_VAULT_URL`, `AZURE_AUTHORITY_HOST`, ...), if one is.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            KeyVaultError::Setting { setting, .. } => Some(setting),
            KeyVaultError::Client(_) => None,
        }
    }
}

fn setting_error(setting: &'static str, message: impl Into<String>) -> KeyVaultError {
    KeyVaultError::Setting { setting, message: message.into() }
}

/// Where the access token comes from. `Debug` shows no secret (they are [`Secret`]s).
#[derive(Debug, Clone)]
pub enum Credential {
    /// A service principal's client secret: `POST {authority}/{tenant}/oauth2/v2.0/token`.
    ClientSecret { authority: Url, tenant: String, client_id: String, client_secret: Secret },
    /// Workload identity (e.g. AKS): the same token endpoint with the federated token read from a file, re-read
    /// on every fetch because the platform rotates it.
    WorkloadIdentity { authority: Url, tenant: String, client_id: String, token_file: PathBuf },
    /// Managed identity on App Service / Container Apps / Functions: `GET {IDENTITY_ENDPOINT}` with
    /// `X-IDENTITY-HEADER`.
    AppServiceIdentity { endpoint: Url, header: Secret, client_id: Option<String> },
    /// Managed identity through the instance metadata service (VMs, scale sets, pod identity).
    Imds { endpoint: Url, client_id: Option<String> },
}

impl Credential {
    /// The first credential the environment configures, in `DefaultAzureCredential`'s order. Nothing is
    /// contacted here; a credential that does not work fails the first lookup.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Credential, KeyVaultError> {
        let get = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let tenant = get("AZURE_TENANT_ID");
        let client_id = get("AZURE_CLIENT_ID");
        let authority = || match get("AZURE_AUTHORITY_HOST") {
            Some(host) => check_endpoint("AZURE_AUTHORITY_HOST", &host),
            None => Ok(Url::parse(DEFAULT_AUTHORITY_HOST).expect("the default authority is a URL")),
        };
        if let (Some(tenant), Some(client_id), Some(secret)) = (&tenant, &client_id, get("AZURE_CLIENT_SECRET")) {
            return Ok(Credential::ClientSecret {
                authority: authority()?,
                tenant: check_tenant(tenant)?,
                client_id: client_id.clone(),
                client_secret: Secret::new(secret),
            });
        }
        if let (Some(tenant), Some(client_id), Some(file)) = (&tenant, &client_id, get("AZURE_FEDERATED_TOKEN_FILE")) {
            return Ok(Credential::WorkloadIdentity {
                authority: authority()?,
                tenant: check_tenant(tenant)?,
                client_id: client_id.clone(),
                token_file: PathBuf::from(file),
            });
        }
        if let (Some(endpoint), Some(header)) = (get("IDENTITY_ENDPOINT"), get("IDENTITY_HEADER")) {
            let endpoint = Url::parse(&endpoint)
                .map_err(|error| setting_error("IDENTITY_ENDPOINT", format!("not a URL: {error}")))?;
            return Ok(Credential::AppServiceIdentity { endpoint, header: Secret::new(header), client_id });
        }
        let host = get("AZURE_POD_IDENTITY_AUTHORITY_HOST").unwrap_or_else(|| DEFAULT_IMDS_HOST.to_owned());
        let endpoint = Url::parse(&format!("{}/metadata/identity/oauth2/token", host.trim_end_matches('/')))
            .map_err(|error| setting_error("AZURE_POD_IDENTITY_AUTHORITY_HOST", format!("not a URL: {error}")))?;
        Ok(Credential::Imds { endpoint, client_id })
    }

    /// The credential's kind, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Credential::ClientSecret { .. } => "client secret",
            Credential::WorkloadIdentity { .. } => "workload identity",
            Credential::AppServiceIdentity { .. } => "managed identity (IDENTITY_ENDPOINT)",
            Credential::Imds { .. } => "managed identity (instance metadata service)",
        }
    }

    /// Asks the token endpoint for a Key Vault token.
    async fn fetch(&self, http: &reqwest::Client, now_ms: i64) -> Result<Token, PortError> {
        let kind = self.kind();
        let request = match self {
            Credential::ClientSecret { authority, tenant, client_id, client_secret } => {
                http.post(token_endpoint(authority, tenant)).form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", client_secret.expose()),
                    ("scope", SCOPE),
                ])
            }
            Credential::WorkloadIdentity { authority, tenant, client_id, token_file } => {
                let assertion = tokio::fs::read_to_string(token_file).await.map_err(|error| {
                    PortError::Unavailable(format!(
                        "reading AZURE_FEDERATED_TOKEN_FILE {}: {}",
                        token_file.display(),
                        error.kind()
                    ))
                })?;
                http.post(token_endpoint(authority, tenant)).form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                    ("client_assertion", assertion.trim()),
                    ("scope", SCOPE),
                ])
            }
            Credential::AppServiceIdentity { endpoint, header, client_id } => {
                let mut query = vec![("api-version", "2019-08-01"), ("resource", RESOURCE)];
                query.extend(client_id.as_deref().map(|id| ("client_id", id)));
                http.get(endpoint.clone()).query(&query).header("X-IDENTITY-HEADER", header.expose())
            }
            Credential::Imds { endpoint, client_id } => {
                let mut query = vec![("api-version", "2018-02-01"), ("resource", RESOURCE)];
                query.extend(client_id.as_deref().map(|id| ("client_id", id)));
                http.get(endpoint.clone()).query(&query).header("Metadata", "true")
            }
        };
        let response =
            request.send().await.map_err(|error| transport_error(&format!("the {kind} token endpoint"), &error))?;
        let status = response.status();
        if !status.is_success() {
            // The body may echo the request (client id, assertion); only the status goes on.
            let message = format!("the {kind} token endpoint answered {status}");
            return Err(if status.is_server_error() || status.as_u16() == 429 {
                PortError::Unavailable(message)
            } else {
                PortError::Backend(message)
            });
        }
        let body: Value = response.json().await.map_err(|_| {
            PortError::Backend(format!("the {kind} token endpoint answered something that is not JSON"))
        })?;
        parse_token(&body, now_ms)
            .ok_or_else(|| PortError::Backend(format!("the {kind} token endpoint answered no usable access_token")))
    }
}

fn token_endpoint(authority: &Url, tenant: &str) -> String {
    format!("{}/{tenant}/oauth2/v2.0/token", authority.as_str().trim_end_matches('/'))
}

/// A tenant goes into the token URL's path: a GUID or a domain name, nothing that could change the path.
fn check_tenant(tenant: &str) -> Result<String, KeyVaultError> {
    if tenant.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') {
        Ok(tenant.to_owned())
    } else {
        Err(setting_error("AZURE_TENANT_ID", "must be a tenant id or domain (letters, digits, '-', '.')"))
    }
}

/// An endpoint Flowhost sends a credential or bearer token to: https, except a loopback host (a local
/// stand-in in tests), so a token never crosses a network in clear text.
pub fn check_endpoint(setting: &'static str, value: &str) -> Result<Url, KeyVaultError> {
    let url = Url::parse(value.trim()).map_err(|error| setting_error(setting, format!("not a URL: {error}")))?;
    let loopback = match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(setting_error(setting, "must be an https:// URL (http:// is accepted only for a loopback host)")),
    }
}

/// An access token and when it expires (clock milliseconds).
#[derive(Debug, Clone)]
struct Token {
    value: Secret,
    obtained_ms: i64,
    expires_ms: i64,
}

impl Token {
    /// Usable until `REFRESH_MARGIN_MS` before expiry, or half its lifetime for a short-lived token.
    fn fresh_at(&self, now_ms: i64) -> bool {
        let margin = REFRESH_MARGIN_MS.min((self.expires_ms - self.obtained_ms) / 2);
        now_ms < self.expires_ms - margin
    }
}

/// Reads `access_token` and its lifetime: `expires_in` (seconds from now; client credentials, IMDS) or
/// `expires_on` (Unix seconds; App Service), each a number or a numeric string as the endpoints send them.
/// Without either the token is used once and not cached.
fn parse_token(body: &Value, now_ms: i64) -> Option<Token> {
    let value = body.get("access_token")?.as_str().filter(|t| !t.is_empty())?;
    let seconds = |field: &str| match body.get(field)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    let expires_ms = match (seconds("expires_in"), seconds("expires_on")) {
        (Some(in_s), _) => now_ms.saturating_add(in_s.saturating_mul(1000)),
        (None, Some(on_s)) => on_s.saturating_mul(1000),
        (None, None) => now_ms,
    };
    Some(Token { value: Secret::new(value), obtained_ms: now_ms, expires_ms })
}

fn transport_error(what: &str, error: &reqwest::Error) -> PortError {
    if error.is_timeout() {
        PortError::Unavailable(format!("{what} did not answer in time"))
    } else {
        // Without the URL: it names only hosts and secret names, but the status line is what helps.
        PortError::Unavailable(format!("{what} is unreachable: {}", error_chain(error)))
    }
}

/// The error and its sources (reqwest's own Display hides the cause, e.g. "connection refused").
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Key Vault names: 1 to 127 letters, digits and dashes. Checked before the name goes into a URL path.
fn check_secret_name(name: &str) -> Result<(), PortError> {
    if (1..=127).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        Ok(())
    } else {
        Err(PortError::Invalid(format!(
            "secret name {name:?} is not a Key Vault name (1-127 letters, digits and dashes)"
        )))
    }
}

/// A Key Vault client: the [`SecretStore`] of `KEY_VAULT_URL`.
pub struct KeyVault {
    vault: Url,
    credential: Credential,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    /// Held across a fetch, so concurrent lookups share one token request.
    token: tokio::sync::Mutex<Option<Token>>,
}

impl std::fmt::Debug for KeyVault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyVault")
            .field("vault", &self.vault.as_str())
            .field("credential", &self.credential.kind())
            .finish()
    }
}

impl KeyVault {
    /// A client of the vault at `vault_url` (`KEY_VAULT_URL`: https, or http on a loopback host) with
    /// `credential`; every call is limited to [`DEFAULT_TIMEOUT`].
    pub fn new(vault_url: &str, credential: Credential, clock: Arc<dyn Clock>) -> Result<KeyVault, KeyVaultError> {
        Self::with_timeout(vault_url, credential, clock, DEFAULT_TIMEOUT)
    }

    /// [`KeyVault::new`] with another limit per HTTP call.
    pub fn with_timeout(
        vault_url: &str,
        credential: Credential,
        clock: Arc<dyn Clock>,
        timeout: Duration,
    ) -> Result<KeyVault, KeyVaultError> {
        let vault = check_endpoint("KEY_VAULT_URL", vault_url)?;
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A redirect would carry the bearer token elsewhere; Key Vault does not redirect.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| KeyVaultError::Client(error_chain(&error)))?;
        Ok(KeyVault { vault, credential, http, clock, token: tokio::sync::Mutex::new(None) })
    }

    /// A client of `vault_url` with the credential the environment configures ([`Credential::from_env`]).
    pub fn from_env(
        vault_url: &str,
        env: &dyn Fn(&str) -> Option<String>,
        clock: Arc<dyn Clock>,
    ) -> Result<KeyVault, KeyVaultError> {
        Self::new(vault_url, Credential::from_env(env)?, clock)
    }

    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The cached token, or a new one when it is missing or about to expire.
    async fn token(&self) -> Result<Secret, PortError> {
        let mut cached = self.token.lock().await;
        let now_ms = self.clock.now_ms();
        if let Some(token) = cached.as_ref().filter(|token| token.fresh_at(now_ms)) {
            return Ok(token.value.clone());
        }
        let token = self.credential.fetch(&self.http, now_ms).await?;
        info!(credential = self.credential.kind(), "obtained a Key Vault access token");
        let value = token.value.clone();
        *cached = Some(token);
        Ok(value)
    }

    async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    fn secret_url(&self, name: &str) -> Result<Url, PortError> {
        Url::parse(&format!("{}/secrets/{name}", self.vault.as_str().trim_end_matches('/')))
            .map_err(|error| PortError::Invalid(format!("secret URL for {name:?}: {error}")))
    }
}

#[async_trait]
impl SecretStore for KeyVault {
    fn backend(&self) -> &'static str {
        "azure-key-vault"
    }

    async fn get(&self, name: &str) -> Result<Secret, SecretError> {
        check_secret_name(name)?;
        let url = self.secret_url(name)?;
        // A 401 on a cached token (revoked, or expired earlier than announced) gets one retry with a new one.
        for attempt in 0..2 {
            let token = self.token().await?;
            let response = self
                .http
                .get(url.clone())
                .query(&[("api-version", API_VERSION)])
                .bearer_auth(token.expose())
                .send()
                .await
                .map_err(|error| transport_error("Key Vault", &error))?;
            let status = response.status();
            match status.as_u16() {
                200 => {
                    let body: Value = response.json().await.map_err(|_| {
                        PortError::Backend(format!("Key Vault answered secret {name:?} with a body that is not JSON"))
                    })?;
                    let value = body.get("value").and_then(Value::as_str).ok_or_else(|| {
                        PortError::Backend(format!("Key Vault answered secret {name:?} without a string value"))
                    })?;
                    debug!(secret = name, "read a secret from Key Vault");
                    return Ok(Secret::new(value));
                }
                404 => return Err(SecretError::NotFound(name.to_owned())),
                401 if attempt == 0 => self.forget_token().await,
                401 => {
                    return Err(PortError::Backend(format!(
                        "Key Vault refused the {} token for secret {name:?} (401)",
                        self.credential.kind()
                    ))
                    .into())
                }
                403 => {
                    return Err(PortError::Backend(format!(
                        "Key Vault answered 403 for secret {name:?}: the identity may not get secrets in this vault"
                    ))
                    .into())
                }
                code if code == 429 || status.is_server_error() => {
                    return Err(
                        PortError::Unavailable(format!("Key Vault answered {status} for secret {name:?}")).into()
                    )
                }
                _ => return Err(PortError::Backend(format!("Key Vault answered {status} for secret {name:?}")).into()),
            }
        }
        unreachable!("the second attempt returns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn vault_url_must_be_https_except_on_loopback() {
        for ok in [
            "https://v.vault.azure.net",
            "https://v.vault.azure.net/",
            "http://127.0.0.1:8200",
            "http://[::1]:1",
            "http://localhost:9",
        ] {
            assert!(check_endpoint("KEY_VAULT_URL", ok).is_ok(), "{ok}");
        }
        for bad in ["http://v.vault.azure.net", "http://10.0.0.1", "ftp://x", "v.vault.azure.net", "https://"] {
            let error = check_endpoint("KEY_VAULT_URL", bad).unwrap_err();
            assert_eq!(error.setting(), Some("KEY_VAULT_URL"), "{bad}");
        }
        let error = check_endpoint("KEY_VAULT_URL", "http://v.vault.azure.net").unwrap_err();
        assert!(error.to_string().contains("https://") && error.to_string().contains("loopback"), "{error}");
    }

    #[test]
    fn credentials_in_default_azure_credential_order() {
        let client_secret = [
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_CLIENT_SECRET", "s"),
            ("IDENTITY_ENDPOINT", "http://localhost:1"),
            ("IDENTITY_HEADER", "h"),
        ];
        let credential = Credential::from_env(&env(&client_secret)).unwrap();
        assert!(
            matches!(&credential, Credential::ClientSecret { authority, .. } if authority.as_str() == "https://login.microsoftonline.com/")
        );
        let workload = [
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/token"),
            ("IDENTITY_ENDPOINT", "http://localhost:1"),
            ("IDENTITY_HEADER", "h"),
        ];
        assert!(matches!(Credential::from_env(&env(&workload)).unwrap(), Credential::WorkloadIdentity { .. }));
        let app_service =
            [("AZURE_CLIENT_ID", "c"), ("IDENTITY_ENDPOINT", "http://localhost:1/msi"), ("IDENTITY_HEADER", "h")];
        assert!(matches!(
            Credential::from_env(&env(&app_service)).unwrap(),
            Credential::AppServiceIdentity { client_id: Some(_), .. }
        ));
        let Credential::Imds { endpoint, client_id } = Credential::from_env(&env(&[])).unwrap() else {
            panic!("IMDS last")
        };
        assert_eq!((endpoint.as_str(), client_id), ("http://169.254.169.254/metadata/identity/oauth2/token", None));
        let Credential::Imds { endpoint, .. } =
            Credential::from_env(&env(&[("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9/")])).unwrap()
        else {
            panic!("IMDS")
        };
        assert_eq!(endpoint.as_str(), "http://127.0.0.1:9/metadata/identity/oauth2/token");
    }

    #[test]
    fn a_bad_authority_or_tenant_names_its_setting() {
        let base = [("AZURE_TENANT_ID", "t"), ("AZURE_CLIENT_ID", "c"), ("AZURE_CLIENT_SECRET", "s")];
        let mut vars = base.to_vec();
        vars.push(("AZURE_AUTHORITY_HOST", "http://login.example"));
        assert_eq!(Credential::from_env(&env(&vars)).unwrap_err().setting(), Some("AZURE_AUTHORITY_HOST"));
        let vars = [("AZURE_TENANT_ID", "../evil"), ("AZURE_CLIENT_ID", "c"), ("AZURE_CLIENT_SECRET", "s")];
        assert_eq!(Credential::from_env(&env(&vars)).unwrap_err().setting(), Some("AZURE_TENANT_ID"));
    }

    #[test]
    fn credential_debug_shows_no_secret() {
        let vars = [("AZURE_TENANT_ID", "t"), ("AZURE_CLIENT_ID", "c"), ("AZURE_CLIENT_SECRET", "client-secret-value")];
        let credential = Credential::from_env(&env(&vars)).unwrap();
        assert!(!format!("{credential:?}").contains("client-secret-value"));
        let vars = [("IDENTITY_ENDPOINT", "http://localhost:1"), ("IDENTITY_HEADER", "identity-header-value")];
        assert!(!format!("{:?}", Credential::from_env(&env(&vars)).unwrap()).contains("identity-header-value"));
    }

    #[test]
    fn token_lifetimes_as_each_endpoint_sends_them() {
        let now = 1_000_000;
        let token = parse_token(&serde_json::json!({"access_token": "a", "expires_in": 3600}), now).unwrap();
        assert_eq!(token.expires_ms, now + 3_600_000);
        let token = parse_token(&serde_json::json!({"access_token": "a", "expires_in": "60"}), now).unwrap();
        assert_eq!(token.expires_ms, now + 60_000);
        let token = parse_token(&serde_json::json!({"access_token": "a", "expires_on": "5000"}), now).unwrap();
        assert_eq!(token.expires_ms, 5_000_000);
        assert!(parse_token(&serde_json::json!({"expires_in": 60}), now).is_none());
        // Refreshed five minutes early, or at half the lifetime of a short one; never cached without one.
        let long = parse_token(&serde_json::json!({"access_token": "a", "expires_in": 3600}), 0).unwrap();
        assert!(long.fresh_at(3_600_000 - 300_001) && !long.fresh_at(3_600_000 - 300_000));
        let short = parse_token(&serde_json::json!({"access_token": "a", "expires_in": 60}), 0).unwrap();
        assert!(short.fresh_at(29_999) && !short.fresh_at(30_000));
        assert!(!parse_token(&serde_json::json!({"access_token": "a"}), 0).unwrap().fresh_at(0));
    }

    #[test]
    fn secret_names_are_key_vault_names() {
        assert!(check_secret_name("redis-password-2").is_ok());
        for bad in ["", "a/b", "../x", "a b", "a?b", &"x".repeat(128)] {
            assert!(matches!(check_secret_name(bad), Err(PortError::Invalid(_))), "{bad:?}");
        }
    }
}
