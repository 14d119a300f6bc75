//! Push API test support: the caller policy, secrets and editor token that `TestHost::config` installs (so every
//! host serves the push routes), and request helpers that add the push-platform or editor headers.
//!
//! Callers of the test policy:
//! - `bridge`: all five routes (listed one by one), source app `casino-web`, tenant `tenant-a` only;
//! - `ops`: `*` routes, `*` source apps, every tenant;
//! - `config-only`: client-config only, source app `casino-web`, every tenant;
//! - `dashboard`: `*` and `*`, every tenant, and on `FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS` (player 0 allowed).

use flowhost_core::config::{Config, Secret};
use serde_json::{json, Value};

use crate::TestHost;

pub const BRIDGE_TOKEN: &str = "bridge-token-0123456789abcdef";
pub const OPS_TOKEN: &str = "ops-token-0123456789abcdef";
pub const CONFIG_ONLY_TOKEN: &str = "config-only-token-0123456789";
pub const DASHBOARD_TOKEN: &str = "dashboard-token-0123456789";
pub const SOURCE_APP: &str = "casino-web";
pub const TENANT_A: &str = "tenant-a";
pub const TENANT_B: &str = "tenant-b";
pub const EDITOR_TOKEN: &str = "editor-token-0123456789abcdef";
pub const INTERACTION_SECRET: &str = "interaction-secret-current";
pub const INTERACTION_SECRET_PREVIOUS: &str = "interaction-secret-previous";
/// Hosts a rendered `target_url` may point to.
pub const ALLOWED_TARGET_HOSTS: [&str; 2] = ["casino.example", "*.casino.example"];

/// The test caller policy (see the module doc).
pub fn callers_json() -> String {
    json!({ "callers": [
        {
            "caller_id": "bridge",
            "token": BRIDGE_TOKEN,
            "allowed_source_apps": [SOURCE_APP],
            "allowed_routes": [
                "GET /api/v1/webpush/client-config",
                "POST /api/v1/service/webpush/subscriptions",
                "POST /api/v1/service/webpush/subscriptions/deactivate",
                "POST /api/v1/service/webpush/events/browser",
                "POST /api/v1/service/webpush/events/semantic"
            ],
            "tenant_ids": [TENANT_A]
        },
        { "caller_id": "ops", "token": OPS_TOKEN, "allowed_source_apps": ["*"], "allowed_routes": ["*"] },
        {
            "caller_id": "config-only",
            "token": CONFIG_ONLY_TOKEN,
            "allowed_source_apps": [SOURCE_APP],
            "allowed_routes": ["GET /api/v1/webpush/client-config"]
        },
        { "caller_id": "dashboard", "token": DASHBOARD_TOKEN, "allowed_source_apps": ["*"], "allowed_routes": ["*"] }
    ]})
    .to_string()
}

/// Configures the push-api role for tests: the policy above, a fresh VAPID pair, both interaction secrets,
/// the editor token, the allowed target hosts and the tenants `tenant-a`, `tenant-b`.
pub fn configure(config: &mut Config) {
    // One keypair per test process: every TestHost of every suite comes here.
    static VAPID: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();
    let (public, private) =
        VAPID.get_or_init(|| flowhost_notifications::vapid::generate().expect("VAPID keypair")).clone();
    let push = config.section_mut::<flowhost_push_api::PushConfig>();
    push.callers_json = Some(Secret::new(callers_json()));
    push.vapid_public_key = Some(public);
    push.vapid_private_key = Some(Secret::new(private));
    push.interaction_token_secret = Some(Secret::new(INTERACTION_SECRET));
    push.interaction_token_secret_previous = Some(Secret::new(INTERACTION_SECRET_PREVIOUS));
    push.editor_token = Some(Secret::new(EDITOR_TOKEN));
    push.allowed_target_hosts = ALLOWED_TARGET_HOSTS.iter().map(|h| h.to_string()).collect();
    push.tenants = vec![TENANT_A.into(), TENANT_B.into()];
    push.smoke_test_callers = vec!["dashboard".into()];
}

/// Sends a request with the given headers and an optional body (JSON value, or raw bytes for malformed-body
/// tests); returns the status and the parsed body (`Null` when empty).
pub async fn send(host: &TestHost, method: &str, url: &str, headers: &[(&str, &str)], body: Body) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = host.http.request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request = match body {
        Body::None => request,
        Body::Json(value) => request.json(&value),
        Body::Raw(bytes) => request.header("content-type", "application/json").body(bytes),
    };
    crate::host::response_parts(request.send().await.expect("request")).await
}

/// A request body.
pub enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>),
}

impl From<Option<Value>> for Body {
    fn from(value: Option<Value>) -> Self {
        value.map(Body::Json).unwrap_or(Body::None)
    }
}

/// A push-platform call as `token` with `X-Source-App: casino-web`.
pub async fn platform(host: &TestHost, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    send(host, method, &host.url(path), &[("authorization", &auth), ("x-source-app", SOURCE_APP)], body.into()).await
}

/// An editor call with the editor token, optionally selecting a tenant (`X-Svc-Client-Id`).
pub async fn editor(
    host: &TestHost,
    tenant: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let auth = format!("Bearer {EDITOR_TOKEN}");
    let mut headers = vec![("authorization", auth.as_str()), ("x-admin-user", "alice@example.com")];
    if let Some(tenant) = tenant {
        headers.push(("x-svc-client-id", tenant));
    }
    send(host, method, &host.url(path), &headers, body.into()).await
}

/// Asserts the spec's error envelope with `status` and `code`; returns the `details` (or `Null`).
#[track_caller]
pub fn assert_error(response: &(u16, Value), status: u16, code: &str, context: &str) -> Value {
    let (actual, body) = response;
    assert_eq!(*actual, status, "{context}: {body}");
    assert_eq!(body["error"]["code"], code, "{context}: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{context}: no message in {body}");
    body["error"]["details"].clone()
}

/// The `field`s named in a `VALIDATION_ERROR`'s details.
pub fn detail_fields(details: &Value) -> Vec<String> {
    details
        .as_array()
        .map(|items| items.iter().filter_map(|d| d["field"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// A valid subscription body for `endpoint`: a real P-256 point and a 16-byte auth secret, base64url.
pub fn subscription(tenant: &str, player: i64, endpoint: &str) -> Value {
    json!({
        "tenant_id": tenant,
        "player_id": player,
        "endpoint": endpoint,
        "keys": {
            "p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM",
            "auth": "tBHItJI5svbpez7KI4CCXg"
        },
        "user_agent": "Mozilla/5.0 (test)",
        "platform": "web"
    })
}
