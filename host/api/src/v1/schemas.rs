//! `/api/v1/schemas` and `/api/v1/validate/expression`: event-type schemas and checking an expression
//! against one.

use axum::extract::{Path, State};
use axum::Json;
use flowhost_core::collections::SCHEMAS;
use flowhost_core::model::{EventSchema, SchemaField};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{encode, load, load_all, SharedState};
use crate::error::ApiError;
use crate::json::JsonBody;

#[utoipa::path(get, path = "/api/v1/schemas", tag = "v1 schemas", responses((status = 200, description = "Every event schema", body = Vec<EventSchema>)))]
pub(crate) async fn list(State(state): State<SharedState>) -> Result<Json<Vec<EventSchema>>, ApiError> {
    Ok(Json(load_all(state.ports.documents.as_ref(), SCHEMAS).await?))
}

fn not_found(event_type: &str) -> ApiError {
    ApiError::not_found(format!("no schema for event type {event_type:?}"))
}

#[utoipa::path(get, path = "/api/v1/schemas/{event_type}", tag = "v1 schemas", responses((status = 200, description = "The event schema", body = EventSchema)))]
pub(crate) async fn read(
    State(state): State<SharedState>,
    Path(event_type): Path<String>,
) -> Result<Json<EventSchema>, ApiError> {
    load(state.ports.documents.as_ref(), SCHEMAS, &event_type).await?.map(Json).ok_or_else(|| not_found(&event_type))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SchemaBody {
    #[serde(default)]
    fields: Vec<SchemaField>,
}

#[utoipa::path(put, path = "/api/v1/schemas/{event_type}", tag = "v1 schemas", request_body = SchemaBody, responses((status = 200, description = "The stored event schema", body = EventSchema)))]
pub(crate) async fn put(
    State(state): State<SharedState>,
    Path(event_type): Path<String>,
    JsonBody(body): JsonBody<SchemaBody>,
) -> Result<Json<EventSchema>, ApiError> {
    let schema = EventSchema { event_type, fields: body.fields };
    let problems = schema.problems();
    if !problems.is_empty() {
        return Err(ApiError::invalid("invalid schema", problems));
    }
    state.ports.documents.upsert(SCHEMAS, &schema.event_type, encode(SCHEMAS, &schema)?).await?;
    state.announce_change().await;
    Ok(Json(schema))
}

/// Deleting answers 200 `{ "status": "deleted" }` (the spec leaves the success status open).
#[utoipa::path(delete, path = "/api/v1/schemas/{event_type}", tag = "v1 schemas", responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Value)))]
pub(crate) async fn remove(
    State(state): State<SharedState>,
    Path(event_type): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !state.ports.documents.delete(SCHEMAS, &event_type).await? {
        return Err(not_found(&event_type));
    }
    state.announce_change().await;
    Ok(Json(json!({ "status": "deleted" })))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ValidateBody {
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    expression: Option<String>,
}

#[utoipa::path(post, path = "/api/v1/validate/expression", tag = "v1 schemas", request_body = ValidateBody, responses((status = 200, description = "`{\"valid\": bool, \"errors\": [...]}`", body = Value)))]
pub(crate) async fn validate_expression(
    State(state): State<SharedState>,
    JsonBody(body): JsonBody<ValidateBody>,
) -> Result<Json<Value>, ApiError> {
    let event_type = body.event_type.unwrap_or_default();
    if event_type.trim().is_empty() {
        return Err(ApiError::bad_request("event_type is required"));
    }
    let schema: EventSchema = load(state.ports.documents.as_ref(), SCHEMAS, &event_type)
        .await?
        .ok_or_else(|| ApiError::bad_request(format!("no schema for event type {event_type:?}")))?;
    let errors = flowhost_expr::validate(body.expression.as_deref().unwrap_or_default(), Some(&schema));
    Ok(Json(json!({ "valid": errors.is_empty(), "errors": errors })))
}
