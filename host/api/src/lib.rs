//! The HTTP surface of the admin role: the flow runtime's administration API v1 and v2 (spec 001), the
//! component catalog and plugin administration (upload, activate, invoke), behind the admin token when one is configured
//! (`auth`). Handlers validate, talk to the documents port and announce changes on the subjects port so engines
//! reload at once. [`AdminRole`] is the role `flowhost serve` composes; `/health`, `/ready` and `/metrics` are the
//! listener's (`flowhost-role`).

mod auth;
mod catalog;
mod error;
mod json;
mod plugins;
mod role;
mod v1;
mod v2;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;
use flowhost_core::collections::CONFIG_CHANGED_SUBJECT;
use flowhost_core::config::Secret;
use flowhost_core::ports::Ports;
use tracing::warn;

pub use auth::AdminToken;
pub use error::ApiError;
pub use role::AdminRole;

/// Everything the handlers need, passed as one value.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    /// Outbound HTTP (the data-source proxy of the component catalog).
    pub http: reqwest::Client,
    /// Uploaded plugins; `None` answers the plugin routes with 503.
    pub components: Option<Arc<flowhost_components::ComponentStore>>,
    /// v2 flows: drafts, validation, releases.
    pub flows: flowhost_flows::Flows,
    /// How long a service reply is remembered to ignore its redeliveries (`engine.dedup_ttl_ms`).
    pub reply_dedup: Option<std::time::Duration>,
    /// Serves `/v2/<service>/inbound` for the services running in process; `None` answers it 404.
    pub endpoint: Option<flowhost_runs::ServiceEndpoint>,
}

impl AppState {
    pub fn new(ports: Ports) -> AppState {
        // The data-source proxy talks only to the endpoint a manifest names: a redirect is answered as an
        // upstream non-2xx (502), never followed to another host.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        AppState {
            flows: flowhost_flows::Flows::new(ports.clone()),
            ports,
            http,
            components: None,
            reply_dedup: None,
            endpoint: None,
        }
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

/// The routes of the admin role, every one behind the admin token when `token` is set, and Studio's page under
/// `/studio/` (see `flowhost-studio`); `max_body_bytes` caps every request body (413 beyond it); a write a browser
/// marks cross-site is refused (see [`auth`]). Without `/health`, `/ready`, `/metrics` and a fallback: the
/// listener adds those (see [`fallback`]).
pub fn app(state: AppState, max_body_bytes: usize, token: Option<&Secret>) -> Router {
    Router::new()
        .merge(v1::routes())
        .merge(v2::routes())
        .merge(catalog::routes())
        .merge(plugins::routes())
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .route_layer(axum::middleware::from_fn_with_state(token.map(AdminToken::new), auth::require_admin_token))
        .with_state(Arc::new(state))
        // Studio's page loads without the token (it asks for it); its API calls carry it.
        .merge(flowhost_studio::router())
        .layer(axum::middleware::from_fn(auth::refuse_cross_site_writes))
}

/// The admin API's answer to an unknown route: 404 in its envelope.
pub fn fallback() -> Router {
    Router::new().fallback(not_found)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
}
