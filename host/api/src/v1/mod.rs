//! Administration API v1: rules (triggers) and their tenant overrides, event-source defaults, event schemas,
//! expression validation and v1 flows. Paths, bodies and status codes follow spec 001 to the letter.

mod event_sources;
mod flows;
mod schemas;
mod triggers;

pub(crate) use flowhost_core::stored::{decode, decode_all, encode};
use std::sync::Arc;

use flowhost_core::ports::DocumentStore;
use flowhost_role::openapi::{with_default_error, ApiRouter};
use flowhost_role::routes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::AppState;

pub(crate) type SharedState = Arc<AppState>;

pub(crate) fn routes() -> ApiRouter<SharedState> {
    let routes = ApiRouter::new()
        .routes(routes!(triggers::list, triggers::create))
        .routes(routes!(triggers::read, triggers::update, triggers::remove))
        .routes(routes!(triggers::set_enabled))
        .routes(routes!(triggers::list_tenants))
        .routes(routes!(triggers::put_tenant))
        .routes(routes!(event_sources::list))
        .routes(routes!(event_sources::read, event_sources::put))
        .routes(routes!(schemas::list))
        .routes(routes!(schemas::read, schemas::put, schemas::remove))
        .routes(routes!(schemas::validate_expression))
        .routes(routes!(flows::list, flows::create))
        .routes(routes!(flows::read, flows::update, flows::remove))
        .routes(routes!(flows::set_enabled))
        .routes(routes!(flows::validate))
        .routes(routes!(flows::compile));
    with_v1_errors(routes)
}

/// `routes` with the v1 error envelope as every operation's `default` answer (v1, catalog and plugins).
pub(crate) fn with_v1_errors(routes: ApiRouter<SharedState>) -> ApiRouter<SharedState> {
    with_default_error::<crate::error::ErrorBody, _>(routes, "The v1 error envelope `{ \"error\": message }`")
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
        Some(doc) => Ok(Some(decode(collection, doc)?)),
    }
}

/// Reads every document of a collection.
pub(crate) async fn load_all<T: DeserializeOwned>(
    documents: &dyn DocumentStore,
    collection: &str,
) -> Result<Vec<T>, ApiError> {
    Ok(decode_all(collection, documents.list(collection).await?)?)
}

/// Stores a new document; an existing `id` is a 409 naming the `kind` (`flow "x" already exists`).
pub(crate) async fn insert_new<T: Serialize>(
    documents: &dyn DocumentStore,
    collection: &str,
    kind: &str,
    id: &str,
    value: &T,
) -> Result<(), ApiError> {
    match documents.insert(collection, id, encode(collection, value)?).await {
        Err(flowhost_core::PortError::Conflict(_)) => Err(ApiError::conflict(format!("{kind} {id:?} already exists"))),
        other => Ok(other?),
    }
}

/// The body of the `enabled` toggles of rules and flows.
#[derive(serde::Deserialize, utoipa::ToSchema)]
pub(crate) struct EnabledBody {
    pub(crate) enabled: bool,
}

/// `{ "status": "ok" }`.
pub(crate) fn status_ok() -> axum::Json<Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}
