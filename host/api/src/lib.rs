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
use flowhost_core::digest::TokenDigest;
use flowhost_core::ports::Ports;
use flowhost_role::ApiRouter;
use tracing::warn;

pub use error::ApiError;
pub use role::AdminRole;

/// How long an upstream of the data-source proxy may take.
const UPSTREAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Everything the handlers need, passed as one value.
#[derive(Clone)]
pub struct AppState {
    pub ports: Ports,
    /// Outbound HTTP to registered endpoints (the data-source proxy of the component catalog), under the
    /// egress policy.
    pub egress: flowhost_egress::Egress,
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
        let egress = flowhost_egress::Egress::new(flowhost_egress::EgressPolicy::default(), UPSTREAM_TIMEOUT);
        AppState {
            flows: flowhost_flows::Flows::new(ports.clone()),
            ports,
            egress,
            components: None,
            reply_dedup: None,
            endpoint: None,
        }
    }

    /// Reaches registered endpoints under `policy` (`FLOWHOST_EGRESS_*`).
    pub fn with_egress(mut self, policy: flowhost_egress::EgressPolicy) -> AppState {
        self.egress = flowhost_egress::Egress::new(policy, UPSTREAM_TIMEOUT);
        self
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
pub fn app(state: AppState, max_body_bytes: usize, token: Option<&Secret>, allowed_hosts: &[String]) -> ApiRouter {
    let (routes, mut document) = ApiRouter::new()
        .merge(v1::routes())
        .merge(v2::routes())
        .merge(catalog::routes())
        .merge(plugins::routes())
        .split_for_parts();
    let (studio, studio_document) = flowhost_studio::router().split_for_parts();
    document.merge(studio_document);
    let router = routes
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .route_layer(axum::middleware::from_fn_with_state(token.map(TokenDigest::new), auth::require_admin_token))
        .with_state(Arc::new(state))
        // Studio's page loads without the token (it asks for it); its API calls carry it.
        .merge(studio)
        .layer(axum::middleware::from_fn(auth::refuse_cross_site_writes));
    let router = match token {
        Some(_) => router,
        // Without a token, only requests that name this API (DNS rebinding: see `auth`).
        None => router.layer(axum::middleware::from_fn_with_state(
            auth::AllowedHosts::new(allowed_hosts),
            auth::require_known_host,
        )),
    };
    flowhost_role::openapi::documented(router, document)
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
