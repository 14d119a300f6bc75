//! A stand-in Azure Key Vault on `127.0.0.1:0` speaking the requests `flowhost-keyvault` sends: the secret GET
//! (`/secrets/{name}?api-version=7.4` with a bearer token it issued), the Microsoft identity platform token
//! endpoint (`POST /{tenant}/oauth2/v2.0/token`, client secret or federated assertion), the App Service
//! managed-identity endpoint (`GET /msi/token`, `X-IDENTITY-HEADER`) and the instance metadata service
//! (`GET /metadata/identity/oauth2/token`, `Metadata: true`). A request of the wrong shape is refused as
//! Azure would and recorded in [`StandInVault::problems`], so a test sees what was wrong; every error body
//! carries [`LEAK_MARKER`], which must never show up in Flowhost's errors.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

pub const TENANT: &str = "tenant-0123";
pub const CLIENT_ID: &str = "client-0123";
pub const CLIENT_SECRET: &str = "client-secret-never-logged";
pub const IDENTITY_HEADER: &str = "identity-header-never-logged";
pub const FEDERATED_TOKEN: &str = "federated-assertion-never-logged";
/// In every error body the stand-in sends.
pub const LEAK_MARKER: &str = "stand-in-body-text-that-must-not-leak";

/// Which credential the environment from [`StandInVault::env`] configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialKind {
    ClientSecret,
    /// Workload identity with the federated token in this file.
    WorkloadIdentity(std::path::PathBuf),
    AppService,
    Imds,
}

#[derive(Default)]
struct Vault {
    secrets: Mutex<HashMap<String, String>>,
    /// Secret name -> the status answered instead of the value (0: never answer).
    failures: Mutex<HashMap<String, u16>>,
    issued: Mutex<HashSet<String>>,
    token_requests: AtomicUsize,
    secret_requests: AtomicUsize,
    expires_in: AtomicI64,
    problems: Mutex<Vec<String>>,
}

impl Vault {
    fn problem(&self, what: String) -> Response {
        self.problems.lock().unwrap().push(what.clone());
        (StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_request", "error_description": LEAK_MARKER})))
            .into_response()
    }

    fn issue(&self) -> String {
        let n = self.token_requests.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("stand-in-access-token-{n}");
        self.issued.lock().unwrap().insert(token.clone());
        token
    }
}

pub struct StandInVault {
    /// `http://127.0.0.1:PORT`: the vault, the authority host and the metadata host at once.
    pub url: String,
    vault: Arc<Vault>,
    task: tokio::task::JoinHandle<()>,
}

impl StandInVault {
    pub async fn start() -> StandInVault {
        let vault = Arc::new(Vault { expires_in: AtomicI64::new(3600), ..Vault::default() });
        let app = Router::new()
            .route("/{tenant}/oauth2/v2.0/token", post(aad_token))
            .route("/msi/token", get(app_service_token))
            .route("/metadata/identity/oauth2/token", get(imds_token))
            .route("/secrets/{name}", get(secret))
            .with_state(vault.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the stand-in vault");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("stand-in vault");
        });
        StandInVault { url, vault, task }
    }

    pub fn set_secret(&self, name: &str, value: &str) {
        self.vault.secrets.lock().unwrap().insert(name.to_owned(), value.to_owned());
    }

    /// Answers `status` (with [`LEAK_MARKER`] in the body) for `name`; 0 never answers.
    pub fn fail_secret(&self, name: &str, status: u16) {
        self.vault.failures.lock().unwrap().insert(name.to_owned(), status);
    }

    /// Lifetime (`expires_in` / `expires_on` from now) of the tokens issued from now on.
    pub fn set_token_lifetime_secs(&self, seconds: i64) {
        self.vault.expires_in.store(seconds, Ordering::SeqCst);
    }

    /// Every issued token stops working (401), as after a revocation.
    pub fn revoke_tokens(&self) {
        self.vault.issued.lock().unwrap().clear();
    }

    pub fn token_requests(&self) -> usize {
        self.vault.token_requests.load(Ordering::SeqCst)
    }

    pub fn secret_requests(&self) -> usize {
        self.vault.secret_requests.load(Ordering::SeqCst)
    }

    /// Requests that did not have the shape Azure expects.
    pub fn problems(&self) -> Vec<String> {
        self.vault.problems.lock().unwrap().clone()
    }

    /// The environment that points `KEY_VAULT_URL` and the `kind` credential at this stand-in (and nothing at
    /// a real Azure host or 169.254.169.254).
    pub fn env(&self, kind: &CredentialKind) -> HashMap<String, String> {
        let mut vars = vec![("KEY_VAULT_URL", self.url.clone()), ("AZURE_AUTHORITY_HOST", self.url.clone())];
        vars.push(("AZURE_POD_IDENTITY_AUTHORITY_HOST", self.url.clone()));
        match kind {
            CredentialKind::ClientSecret => {
                vars.push(("AZURE_TENANT_ID", TENANT.into()));
                vars.push(("AZURE_CLIENT_ID", CLIENT_ID.into()));
                vars.push(("AZURE_CLIENT_SECRET", CLIENT_SECRET.into()));
            }
            CredentialKind::WorkloadIdentity(file) => {
                vars.push(("AZURE_TENANT_ID", TENANT.into()));
                vars.push(("AZURE_CLIENT_ID", CLIENT_ID.into()));
                vars.push(("AZURE_FEDERATED_TOKEN_FILE", file.display().to_string()));
            }
            CredentialKind::AppService => {
                vars.push(("IDENTITY_ENDPOINT", format!("{}/msi/token", self.url)));
                vars.push(("IDENTITY_HEADER", IDENTITY_HEADER.into()));
            }
            CredentialKind::Imds => {}
        }
        vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

impl Drop for StandInVault {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn aad_token(State(vault): State<Arc<Vault>>, Path(tenant): Path<String>, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let field = |name: &str| form.get(name).map(String::as_str);
    if tenant != TENANT {
        return vault.problem(format!("token request for tenant {tenant:?}"));
    }
    for (name, expected) in
        [("grant_type", "client_credentials"), ("scope", "https://vault.azure.net/.default"), ("client_id", CLIENT_ID)]
    {
        if field(name) != Some(expected) {
            return vault.problem(format!("token request with {name} = {:?}", field(name)));
        }
    }
    let by_secret = field("client_secret") == Some(CLIENT_SECRET);
    let by_assertion = field("client_assertion_type") == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        && field("client_assertion") == Some(FEDERATED_TOKEN);
    if !(by_secret ^ by_assertion) {
        return vault.problem(format!("token request without a valid client credential: {:?}", form.keys()));
    }
    let expires_in = vault.expires_in.load(Ordering::SeqCst);
    let token = vault.issue();
    Json(json!({"token_type": "Bearer", "expires_in": expires_in, "ext_expires_in": expires_in, "access_token": token}))
        .into_response()
}

fn check_query(vault: &Vault, query: &HashMap<String, String>, api_version: &str) -> Option<Response> {
    if query.get("api-version").map(String::as_str) != Some(api_version) {
        return Some(vault.problem(format!("identity request with api-version {:?}", query.get("api-version"))));
    }
    if query.get("resource").map(String::as_str) != Some("https://vault.azure.net") {
        return Some(vault.problem(format!("identity request with resource {:?}", query.get("resource"))));
    }
    None
}

async fn app_service_token(
    State(vault): State<Arc<Vault>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = check_query(&vault, &query, "2019-08-01") {
        return refused;
    }
    if headers.get("x-identity-header").and_then(|v| v.to_str().ok()) != Some(IDENTITY_HEADER) {
        return vault.problem("App Service identity request without the right X-IDENTITY-HEADER".into());
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let expires_on = now + vault.expires_in.load(Ordering::SeqCst);
    let token = vault.issue();
    Json(json!({
        "access_token": token, "expires_on": expires_on.to_string(), "resource": "https://vault.azure.net",
        "token_type": "Bearer", "client_id": CLIENT_ID
    }))
    .into_response()
}

async fn imds_token(
    State(vault): State<Arc<Vault>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = check_query(&vault, &query, "2018-02-01") {
        return refused;
    }
    if headers.get("metadata").and_then(|v| v.to_str().ok()) != Some("true") {
        return vault.problem("IMDS request without Metadata: true".into());
    }
    let expires_in = vault.expires_in.load(Ordering::SeqCst);
    let token = vault.issue();
    Json(json!({
        "access_token": token, "expires_in": expires_in.to_string(), "resource": "https://vault.azure.net",
        "token_type": "Bearer"
    }))
    .into_response()
}

async fn secret(
    State(vault): State<Arc<Vault>>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    vault.secret_requests.fetch_add(1, Ordering::SeqCst);
    if query.get("api-version").map(String::as_str) != Some("7.4") {
        return vault.problem(format!("secret GET with api-version {:?}", query.get("api-version")));
    }
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !bearer.is_some_and(|token| vault.issued.lock().unwrap().contains(token)) {
        let body = json!({"error": {"code": "Unauthorized", "message": LEAK_MARKER}});
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Bearer resource=\"https://vault.azure.net\"")],
            Json(body),
        )
            .into_response();
    }
    let failure = vault.failures.lock().unwrap().get(&name).copied();
    if let Some(status) = failure {
        if status == 0 {
            std::future::pending::<()>().await;
        }
        let body = json!({"error": {"code": "Failure", "message": LEAK_MARKER}});
        return (StatusCode::from_u16(status).unwrap(), Json(body)).into_response();
    }
    let value = vault.secrets.lock().unwrap().get(&name).cloned();
    match value {
        Some(value) => Json(json!({
            "value": value,
            "id": format!("https://stand-in.vault.azure.net/secrets/{name}/0123456789abcdef"),
            "attributes": {"enabled": true}
        }))
        .into_response(),
        None => {
            let message = format!("A secret with (name/id) {name} was not found in this key vault. {LEAK_MARKER}");
            (StatusCode::NOT_FOUND, Json(json!({"error": {"code": "SecretNotFound", "message": message}})))
                .into_response()
        }
    }
}
