//! `/api/v1/event-sources`: the default output topic of each source topic.

use axum::extract::{Path, State};
use axum::Json;
use flowhost_core::collections::EVENT_SOURCES;
use flowhost_core::model::EventSource;
use flowhost_core::ports::check_topic_name;
use serde::Deserialize;

use super::{encode, load, load_all, SharedState};
use crate::error::ApiError;
use crate::json::JsonBody;

#[utoipa::path(get, path = "/api/v1/event-sources", tag = "v1 event sources", responses((status = 200, description = "Every event source", body = Vec<EventSource>)))]
pub(crate) async fn list(State(state): State<SharedState>) -> Result<Json<Vec<EventSource>>, ApiError> {
    Ok(Json(load_all(state.ports.documents.as_ref(), EVENT_SOURCES).await?))
}

#[utoipa::path(get, path = "/api/v1/event-sources/{source_topic}", tag = "v1 event sources", responses((status = 200, description = "The event source", body = EventSource)))]
pub(crate) async fn read(
    State(state): State<SharedState>,
    Path(source_topic): Path<String>,
) -> Result<Json<EventSource>, ApiError> {
    load(state.ports.documents.as_ref(), EVENT_SOURCES, &source_topic)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no default for source topic {source_topic:?}")))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct EventSourceBody {
    #[serde(default)]
    default_output_topic: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

#[utoipa::path(put, path = "/api/v1/event-sources/{source_topic}", tag = "v1 event sources", request_body = EventSourceBody, responses((status = 200, description = "The stored event source", body = EventSource)))]
pub(crate) async fn put(
    State(state): State<SharedState>,
    Path(source_topic): Path<String>,
    JsonBody(body): JsonBody<EventSourceBody>,
) -> Result<Json<EventSource>, ApiError> {
    let topic = body.default_output_topic.as_deref().map(str::trim).unwrap_or_default();
    if topic.is_empty() {
        return Err(ApiError::bad_request("default_output_topic is required and must not be empty"));
    }
    check_topic_name(topic).map_err(|e| ApiError::bad_request(format!("default_output_topic: {e}")))?;
    let source = EventSource { source_topic, default_output_topic: topic.to_owned(), description: body.description };
    state.ports.documents.upsert(EVENT_SOURCES, &source.source_topic, encode(EVENT_SOURCES, &source)?).await?;
    state.announce_change().await;
    Ok(Json(source))
}
