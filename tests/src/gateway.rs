//! Gateway test support: the operator's player-validation backend (served over HTTP by the test: it is the
//! operator's system, not ours), free ports for the gateway's five listeners, and a configuration that points
//! the gateway at both.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use flowhost_core::config::Config;
use serde_json::{json, Value};

/// The HMAC key the tests configure (32 bytes).
pub const HMAC_KEY: &str = "test-gateway-cache-hmac-key-0123456789";
/// The rollout checksum that goes with the HMAC key (`GATEWAY_EDGE_ROLLOUT_CHECKSUM`).
pub const ROLLOUT_CHECKSUM: &str = "test-rollout-1";
/// The tenant and site of the test origin.
pub const TENANT: &str = "12";
pub const SITE: &str = "34";

/// The validation backend. Bearers: `player-<N>` is player N (global id 1000 + N); `invalid` answers 401,
/// `forbidden` 403, `broken` 500, `garbage` 200 with a body that is not an id pair, `slow` answers after 3 s.
pub struct PlayerBackend {
    pub url: String,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

async fn get_player(State(calls): State<Calls>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    calls.lock().unwrap().push((token.clone(), body));
    match token.as_str() {
        "invalid" => StatusCode::UNAUTHORIZED.into_response(),
        "forbidden" => StatusCode::FORBIDDEN.into_response(),
        "broken" => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        "garbage" => Json(json!({"client_player_id": 0, "global_player_id": "x"})).into_response(),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Json(json!({"client_player_id": 7, "global_player_id": 1007})).into_response()
        }
        other => match other.strip_prefix("player-").and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n > 0 => Json(json!({"client_player_id": n, "global_player_id": 1000 + n})).into_response(),
            _ => StatusCode::UNPROCESSABLE_ENTITY.into_response(),
        },
    }
}

impl PlayerBackend {
    pub async fn start() -> PlayerBackend {
        let calls: Calls = Arc::default();
        let router = Router::new().route("/getPlayer", get(get_player)).with_state(calls.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        PlayerBackend { url, calls, task }
    }

    /// How many validation requests carried `token`.
    pub fn calls_of(&self, token: &str) -> usize {
        self.calls.lock().unwrap().iter().filter(|(t, _)| t == token).count()
    }

    /// The body of the last validation request of `token`.
    pub fn last_body_of(&self, token: &str) -> Option<Value> {
        self.calls.lock().unwrap().iter().rev().find(|(t, _)| t == token).map(|(_, body)| body.clone())
    }
}

impl Drop for PlayerBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub use crate::process::free_port;

/// The gateway's listeners of one test host.
#[derive(Debug, Clone, Copy)]
pub struct GatewayAddrs {
    pub edge: SocketAddr,
    pub ingest: SocketAddr,
    pub admin: SocketAddr,
    pub private: SocketAddr,
    pub metrics: SocketAddr,
}

impl GatewayAddrs {
    pub fn free() -> GatewayAddrs {
        let addr = |port| SocketAddr::from(([127, 0, 0, 1], port));
        GatewayAddrs {
            edge: addr(free_port()),
            ingest: addr(free_port()),
            admin: addr(free_port()),
            private: addr(free_port()),
            metrics: addr(free_port()),
        }
    }

    pub fn edge_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.edge)
    }

    /// The environment a `flowhost` process needs to serve on these addresses.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GATEWAY_EDGE_HTTP_PORT", self.edge.port().to_string()),
            ("GATEWAY_INGEST_HTTP_PORT", self.ingest.port().to_string()),
            ("GATEWAY_ADMIN_HTTP_PORT", self.admin.port().to_string()),
            ("GATEWAY_INGEST_PRIVATE_PORT", self.private.port().to_string()),
            ("GATEWAY_METRICS_PORT", self.metrics.port().to_string()),
            ("GATEWAY_EDGE_INGEST_URL", format!("http://{}/internal/v1/events", self.private)),
        ]
    }
}

/// The origin map of the tests: `origin` belongs to tenant 12, site 34, validated by `backend`.
pub fn origins_json(origins: &[&str], player_url: &str) -> String {
    let origins: Vec<Value> = origins
        .iter()
        .map(|origin| json!({"origin": origin, "tenant_id": TENANT, "site_id": SITE, "player_url": player_url}))
        .collect();
    json!({"schema_version": 1, "origins": origins}).to_string()
}

/// Turns `config` into a gateway on `addrs` for `origins`, validated by `backend`.
pub fn configure(config: &mut Config, addrs: &GatewayAddrs, origins: &[&str], backend: &PlayerBackend) {
    config.roles = vec!["gateway".to_owned()];
    let gateway = config.section_mut::<flowhost_gateway::GatewayConfig>();
    gateway.edge_port = addrs.edge.port();
    gateway.ingest_port = addrs.ingest.port();
    gateway.admin_port = addrs.admin.port();
    gateway.ingest_private_port = addrs.private.port();
    gateway.metrics_port = addrs.metrics.port();
    gateway.ingest_url = format!("http://{}/internal/v1/events", addrs.private);
    gateway.origins_json = Some(origins_json(origins, &backend.url));
    gateway.cache_hmac_key = Some(flowhost_core::config::Secret::new(HMAC_KEY));
    gateway.rollout_checksum = Some(ROLLOUT_CHECKSUM.to_owned());
    gateway.analytics_topic = crate::unique("gateway.analytics");
}

/// A presence event body as a browser posts it.
pub fn presence_event(action: &str) -> Value {
    json!({"event_type": "player.casino-presence.v1", "event_id": uuid::Uuid::new_v4().to_string(),
        "occurred_at": "2026-11-24T10:00:00.000Z",
        "event_payload": {"presence_session_id": "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99", "action": action}})
}

/// A response's status, headers and JSON body (`Null` when the body is not JSON).
pub async fn parts(response: reqwest::Response) -> (u16, HashMap<String, String>, Value) {
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned()))
        .collect();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}
