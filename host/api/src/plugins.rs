//! Plugin administration: operators upload WebAssembly components (`PUT /api/v1/plugins/{id}/versions/{version}`,
//! the `.wasm` as the body), list them, activate a version (also a rollback), and invoke any action of any
//! stored version directly, which is what Studio's "test this node" calls. The component store also registers an
//! uploaded component in the component catalog (service = the manifest's `service`, or the plugin id), so Studio
//! sees its actions, `config_schema`s and data sources like those of an HTTP service. See `flowhost-components`
//! for the store itself.

use std::time::Instant;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_components::{Activation, ComponentError, ComponentStore, ComponentSummary};
use flowhost_core::collections::COMPONENT_VERSIONS;
use flowhost_core::stored::encode;
use flowhost_runtime::{InvocationContext, InvokeError};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tracing::{info, warn};

use flowhost_role::{routes, ApiRouter};

use crate::error::ApiError;
use crate::json::JsonBody;
use crate::v1::SharedState;

pub(crate) fn routes() -> ApiRouter<SharedState> {
    let routes = ApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(read))
        .routes(routes!(upload))
        .routes(routes!(activate))
        .routes(routes!(invoke));
    crate::v1::with_v1_errors(routes)
}

fn store(state: &SharedState) -> Result<&Arc<ComponentStore>, ApiError> {
    state
        .components
        .as_ref()
        .ok_or_else(|| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this process runs no plugin runtime"))
}

impl From<ComponentError> for ApiError {
    fn from(error: ComponentError) -> Self {
        match error {
            ComponentError::TooLarge { .. } => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, error.to_string()),
            ComponentError::InvalidName(_) | ComponentError::Mismatch { .. } => {
                ApiError::bad_request(error.to_string())
            }
            ComponentError::Invalid(load) => {
                warn!(error = %load, "component refused");
                ApiError::bad_request(format!("component refused: {}", load.public_message()))
            }
            ComponentError::Conflict { .. } => ApiError::conflict(error.to_string()),
            ComponentError::NotFound(_) => ApiError::not_found(error.to_string()),
            ComponentError::Catalog(error) => error.into(),
            ComponentError::Storage(error) => error.into(),
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct UploadQuery {
    /// Make the upload the active version (default true).
    activate: Option<bool>,
}

/// `PUT /api/v1/plugins/{id}/versions/{version}` with the component as the body: 201 when stored, 200 when
/// this exact version was already stored (the upload is a no-op, or an activation with `?activate=true`).
#[utoipa::path(put, path = "/api/v1/plugins/{id}/versions/{version}", tag = "plugins", params(UploadQuery), request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The component (`.wasm`); any content type is accepted"), responses((status = 201, description = "Stored", body = Value), (status = 200, description = "This exact version was already stored", body = Value)))]
async fn upload(
    State(state): State<SharedState>,
    Path((id, version)): Path<(String, String)>,
    query: Result<Query<UploadQuery>, QueryRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let store = store(&state)?;
    let wasm = read_limited(body, store.max_component_bytes()).await?;
    let prepared = store.prepare(&id, &version, wasm).await?;
    let manifest = encode(COMPONENT_VERSIONS, prepared.plugin.manifest())?;
    let uploaded = store.commit(prepared, query.activate.unwrap_or(true)).await?;
    info!(plugin = %uploaded.id, version = %uploaded.version, created = uploaded.created, active = uploaded.active,
          "component uploaded");
    let status = if uploaded.created { StatusCode::CREATED } else { StatusCode::OK };
    let mut body = encode(COMPONENT_VERSIONS, &uploaded)?;
    body["manifest"] = manifest;
    Ok((status, Json(body)).into_response())
}

/// Reads the body, answering 413 (in the API's envelope) as soon as it passes `limit` bytes.
async fn read_limited(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| ApiError::bad_request(format!("cannot read request body: {error}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the component exceeds the limit of {limit} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    if bytes.is_empty() {
        return Err(ApiError::bad_request("the body must be the component (.wasm)"));
    }
    Ok(bytes)
}

#[utoipa::path(get, path = "/api/v1/plugins", tag = "plugins", responses((status = 200, description = "Every plugin with its versions", body = Value)))]
async fn list(State(state): State<SharedState>) -> Result<Json<Vec<ComponentSummary>>, ApiError> {
    Ok(Json(store(&state)?.list().await?))
}

#[utoipa::path(get, path = "/api/v1/plugins/{id}", tag = "plugins", responses((status = 200, description = "The plugin with its versions", body = Value)))]
async fn read(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<ComponentSummary>, ApiError> {
    Ok(Json(store(&state)?.get(&id).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ActivateBody {
    version: String,
}

/// `POST /api/v1/plugins/{id}/activate` `{ "version": ... }`: makes a stored version active on every node
/// (roll forward or back); 404 for an unknown version.
#[utoipa::path(post, path = "/api/v1/plugins/{id}/activate", tag = "plugins", request_body = ActivateBody, responses((status = 200, description = "The activation", body = Value)))]
async fn activate(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ActivateBody>,
) -> Result<Json<Activation>, ApiError> {
    Ok(Json(store(&state)?.activate(&id, &body.version).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct InvokeBody {
    action: String,
    #[serde(default)]
    input: Value,
    /// A stored version to call instead of the active one.
    version: Option<String>,
    /// The tenant to invoke for, as a flow step for that tenant would: its documents, its notifications.
    tenant_id: Option<String>,
}

/// `POST /api/v1/plugins/{id}/invoke` `{ "action", "input", "version"?, "tenant_id"? }`: runs one action with
/// the plugin's limits, as the engine would (for `tenant_id`, as a step of that tenant's run). 200 `{ plugin, version, output, duration_us }`; a failed invocation is 422
/// with its `outcome` class (`skip-forward`, `permanent`, `retryable`) and `kind`; an action the manifest does
/// not declare is 400.
#[utoipa::path(post, path = "/api/v1/plugins/{id}/invoke", tag = "plugins", request_body = InvokeBody, responses((status = 200, description = "The action's output", body = Value)))]
async fn invoke(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<InvokeBody>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&state)?;
    let plugin = match &body.version {
        Some(version) => store.version(&id, version).await?,
        None => store
            .active(&id)
            .ok_or_else(|| ApiError::not_found(format!("plugin {id:?} has no active version on this node")))?,
    };
    let version = plugin.manifest().version.clone();
    let input = match body.input {
        Value::Null => "{}".to_owned(),
        input => input.to_string(),
    };
    let started = Instant::now();
    let context = InvocationContext { tenant_id: body.tenant_id.clone(), ..InvocationContext::default() };
    let result = plugin.invoke_in(&context, &body.action, &input, plugin.limits()).await;
    let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    match result {
        Ok(output) => {
            let output: Value = serde_json::from_str(&output).unwrap_or(Value::String(output));
            Ok(Json(json!({ "plugin": id, "version": version, "output": output, "duration_us": duration_us })))
        }
        Err(error @ InvokeError::UnknownAction(_)) => Err(ApiError::bad_request(format!(
            "plugin {id:?} version {version:?} has no action {:?} ({error})",
            body.action
        ))),
        Err(error) => {
            warn!(plugin = %id, %version, action = %body.action, %error, "test invocation failed");
            Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error.public_message())
                .with("outcome", json!(error.outcome().as_str()))
                .with("kind", json!(error.kind()))
                .with("plugin", json!(id))
                .with("version", json!(version))
                .with("duration_us", json!(duration_us)))
        }
    }
}
