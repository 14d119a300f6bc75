//! The HTTP surface of the admin role: `/health`, `/metrics`, the flow runtime's administration API v1
//! (spec 001), the component catalog and plugin administration (upload, activate, invoke). Only this crate knows HTTP. Handlers validate, talk to the documents port and announce changes
//! on the subjects port so engines reload at once.

mod catalog;
mod error;
mod json;
mod plugins;
mod v1;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use flowhost_core::collections::CONFIG_CHANGED_SUBJECT;
use flowhost_core::ports::Ports;
use prometheus::{Encoder, Registry, TextEncoder};
use serde_json::json;
use tracing::warn;

pub use error::ApiError;
pub use plugins::register_in_catalog;

/// A readiness check another role contributes to `/health`, so this crate needs no knowledge of that role:
/// `Err(name)` makes `/health` answer 503 naming the failing check.
pub type HealthCheck = Arc<dyn Fn() -> Result<(), &'static str> + Send + Sync>;

/// Everything the handlers need, passed as one value.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    pub registry: Registry,
    /// Checks `/health` runs besides its own (e.g. the push-api role's caller policy).
    pub health_checks: Vec<HealthCheck>,
    /// Outbound HTTP (the data-source proxy of the component catalog).
    pub http: reqwest::Client,
    /// Uploaded plugins; `None` answers the plugin routes with 503.
    pub components: Option<Arc<flowhost_components::ComponentStore>>,
}

impl AppState {
    pub fn new(ports: Ports, registry: Registry, health_checks: Vec<HealthCheck>) -> AppState {
        // The data-source proxy talks only to the endpoint a manifest names: a redirect is answered as an
        // upstream non-2xx (502), never followed to another host.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        AppState { ports, registry, health_checks, http, components: None }
    }

    /// Serves the plugin routes (and in-process data sources) from `store`.
    pub fn with_components(mut self, store: Arc<flowhost_components::ComponentStore>) -> AppState {
        self.components = Some(store);
        self
    }
}

impl AppState {
    /// Tells engines that rules, schemas, sources or flows changed. Best effort: the periodic reload is the
    /// fallback, so a failed signal is logged, not returned.
    pub(crate) async fn announce_change(&self) {
        if let Err(error) = self.ports.subjects.publish(CONFIG_CHANGED_SUBJECT, b"{}".to_vec()).await {
            warn!(%error, "could not signal a configuration change; engines reload on their next tick");
        }
    }
}

/// The router of the admin role; `max_body_bytes` caps every request body (413 beyond it).
pub fn app(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .merge(v1::routes())
        .merge(catalog::routes())
        .merge(plugins::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(Arc::new(state))
}

/// 200 `{ "status": "ok" }`, or 503 `{ "status": "unavailable", "failing": [names] }` when a contributed check
/// fails.
async fn health(State(state): State<Arc<AppState>>) -> axum::response::Response {
    let failing: Vec<&'static str> = state.health_checks.iter().filter_map(|check| check().err()).collect();
    if failing.is_empty() {
        Json(json!({ "status": "ok" })).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "unavailable", "failing": failing }))).into_response()
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let mut body = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&state.registry.gather(), &mut body) {
        warn!(%error, "metrics encoding failed");
        return ApiError::internal().into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
}
