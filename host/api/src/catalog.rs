//! The component catalog's routes (spec 001): `POST /api/v1/components/register`, `GET /api/v1/components`,
//! the data-source proxy `GET /api/v1/components/{id}/data/{source}` and `GET /api/v2/services/{service}`.
//! Thin handlers over `flowhost_catalog::Catalog`, which owns the model, registration, immutability and the
//! compatibility report; this module adds the HTTP proxy of data sources.

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_catalog::{
    Catalog, CatalogError, ComponentManifestRow, ServiceManifest, MANIFEST_LIMIT_BYTES, RUNTIME_FIELD, WASM_RUNTIME,
};
use serde_json::Value;
use tracing::warn;

use crate::error::ApiError;
use crate::json::JsonBody;
use crate::v1::SharedState;

const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn routes() -> Router<SharedState> {
    Router::new()
        .route("/api/v1/components/register", post(register).layer(DefaultBodyLimit::max(MANIFEST_LIMIT_BYTES)))
        .route("/api/v1/components", get(list))
        .route("/api/v1/components/{id}/data/{source}", get(data_source))
        .route("/api/v2/services/{service}", get(service))
}

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::Invalid(problems) => ApiError::invalid("malformed manifest", problems),
            CatalogError::Conflict(message) => ApiError::conflict(message),
            CatalogError::Storage(error) => error.into(),
        }
    }
}

async fn register(
    State(state): State<SharedState>,
    JsonBody(manifest): JsonBody<ServiceManifest>,
) -> Result<Json<Value>, ApiError> {
    Catalog::new(&state.ports).register(manifest).await?;
    Ok(crate::v1::status_ok())
}

async fn list(State(state): State<SharedState>) -> Result<Json<Vec<ComponentManifestRow>>, ApiError> {
    Ok(Json(Catalog::new(&state.ports).list().await?))
}

/// `GET /api/v2/services/{service}`: the service's latest version of each component (404 when the service
/// never registered).
async fn service(State(state): State<SharedState>, Path(service): Path<String>) -> Result<Response, ApiError> {
    match Catalog::new(&state.ports).service(&service).await? {
        Some(view) => Ok(Json(view).into_response()),
        None => Err(ApiError::not_found(format!("service {service:?} has not registered"))),
    }
}

pub(crate) fn bad_gateway(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_GATEWAY, message)
}

/// Proxies a form query to the service that owns component `id`: only the declared parameters are forwarded,
/// the upstream body and `Content-Type` come back as they are; anything that fails is a 502 saying why.
async fn data_source(
    State(state): State<SharedState>,
    Path((id, source)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let row = Catalog::new(&state.ports)
        .latest(&id)
        .await?
        .ok_or_else(|| bad_gateway(format!("unknown component {id:?}: no manifest registered")))?;
    let declared = row.data_sources.iter().find(|d| d.name == source).ok_or_else(|| {
        bad_gateway(format!("component {id:?} (version {}) declares no data source {source:?}", row.version))
    })?;
    if row.extra.get(RUNTIME_FIELD).and_then(Value::as_str) == Some(WASM_RUNTIME) {
        return crate::plugins::query_data_source(&state, &id, &source, query).await;
    }
    let endpoint = row
        .endpoint()
        .ok_or_else(|| bad_gateway(format!("component {id:?} has no transports.http.endpoint to query")))?;
    let url = format!("{}{}", endpoint.trim_end_matches('/'), declared.path);
    let forwarded: Vec<(String, String)> = query.into_iter().filter(|(k, _)| declared.params.contains(k)).collect();
    let response = state.http.get(&url).query(&forwarded).timeout(UPSTREAM_TIMEOUT).send().await.map_err(|e| {
        warn!(component = %id, source = %source, error = %e, "data-source upstream unreachable");
        bad_gateway(format!("data source {source:?} of component {id:?}: upstream unreachable"))
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(bad_gateway(format!(
            "data source {source:?} of component {id:?}: upstream answered {}",
            status.as_u16()
        )));
    }
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let body = response
        .bytes()
        .await
        .map_err(|_| bad_gateway(format!("data source {source:?} of component {id:?}: upstream body failed")))?;
    let mut out = (StatusCode::OK, body).into_response();
    if let Some(content_type) = content_type {
        out.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    Ok(out)
}
