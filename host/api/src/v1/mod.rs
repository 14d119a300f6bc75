//! Administration API v1: rules (triggers) and their tenant overrides, event-source defaults, event schemas,
//! expression validation and v1 flows. Paths, bodies and status codes follow spec 001 to the letter.

mod event_sources;
mod flows;
mod schemas;
mod triggers;

use std::sync::Arc;

use axum::routing::{get, post, put};
use axum::Router;
use flowhost_core::ports::DocumentStore;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tracing::error;

use crate::error::ApiError;
use crate::AppState;

pub(crate) type SharedState = Arc<AppState>;

pub(crate) fn routes() -> Router<SharedState> {
    Router::new()
        .route("/api/v1/triggers", get(triggers::list).post(triggers::create))
        .route("/api/v1/triggers/{id}", get(triggers::read).put(triggers::update).delete(triggers::remove))
        .route("/api/v1/triggers/{id}/enabled", put(triggers::set_enabled))
        .route("/api/v1/triggers/{id}/tenants", get(triggers::list_tenants))
        .route("/api/v1/triggers/{id}/tenants/{tenant_id}", put(triggers::put_tenant).post(triggers::put_tenant))
        .route("/api/v1/event-sources", get(event_sources::list))
        .route("/api/v1/event-sources/{source_topic}", get(event_sources::read).put(event_sources::put))
        .route("/api/v1/schemas", get(schemas::list))
        .route("/api/v1/schemas/{event_type}", get(schemas::read).put(schemas::put).delete(schemas::remove))
        .route("/api/v1/validate/expression", post(schemas::validate_expression))
        .route("/api/v1/flows", get(flows::list).post(flows::create))
        .route("/api/v1/flows/{id}", get(flows::read).put(flows::update).delete(flows::remove))
        .route("/api/v1/flows/{id}/enabled", put(flows::set_enabled))
        .route("/api/v1/flows/{id}/validate", post(flows::validate))
        .route("/api/v1/flows/{id}/compile", post(flows::compile))
}

/// Reads and parses one stored document; `None` when absent. A stored document that no longer parses is a
/// server-side defect, logged and reported as 500.
pub(crate) async fn load<T: DeserializeOwned>(
    documents: &dyn DocumentStore,
    collection: &str,
    id: &str,
) -> Result<Option<T>, ApiError> {
    match documents.get(collection, id).await? {
        None => Ok(None),
        Some(doc) => decode(collection, doc).map(Some),
    }
}

/// Reads every document of a collection.
pub(crate) async fn load_all<T: DeserializeOwned>(
    documents: &dyn DocumentStore,
    collection: &str,
) -> Result<Vec<T>, ApiError> {
    documents.list(collection).await?.into_iter().map(|doc| decode(collection, doc)).collect()
}

/// Stores a new document; an existing `id` is a 409 naming the `kind` (`flow "x" already exists`).
pub(crate) async fn insert_new<T: Serialize>(
    documents: &dyn DocumentStore,
    collection: &str,
    kind: &str,
    id: &str,
    value: &T,
) -> Result<(), ApiError> {
    match documents.insert(collection, id, encode(value)?).await {
        Err(flowhost_core::PortError::Conflict(_)) => Err(ApiError::conflict(format!("{kind} {id:?} already exists"))),
        other => Ok(other?),
    }
}

pub(crate) fn decode<T: DeserializeOwned>(collection: &str, doc: Value) -> Result<T, ApiError> {
    serde_json::from_value(doc).map_err(|e| {
        error!(collection, error = %e, "stored document does not parse");
        ApiError::internal()
    })
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| {
        error!(error = %e, "cannot encode a document");
        ApiError::internal()
    })
}

/// The body of the `enabled` toggles of rules and flows.
#[derive(serde::Deserialize)]
pub(crate) struct EnabledBody {
    pub(crate) enabled: bool,
}

/// `{ "status": "ok" }`.
pub(crate) fn status_ok() -> axum::Json<Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}
