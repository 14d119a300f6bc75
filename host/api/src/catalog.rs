//! The component catalog's routes (spec 001): `POST /api/v1/components/register`, `GET /api/v1/components`,
//! and the data-source proxy `GET /api/v1/components/{id}/data/{source}` (`GET /api/v2/services/{service}` is a
//! v2 route: `v2/flows.rs`).
//! Thin handlers over `flowhost_catalog::Catalog`, which owns the model, registration, immutability and the
//! compatibility report; this module adds the HTTP proxy of data sources.

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_catalog::{
    Catalog, CatalogError, ComponentManifestRow, Owner, ServiceManifest, MANIFEST_LIMIT_BYTES, RUNTIME_FIELD,
    WASM_RUNTIME,
};
use flowhost_egress::EgressError;
use serde_json::Value;
use tracing::warn;

use flowhost_role::openapi::{ApiRouter, UtoipaMethodRouterExt};
use flowhost_role::routes;

use crate::error::ApiError;
use crate::json::JsonBody;
use crate::v1::SharedState;

pub(crate) fn routes() -> ApiRouter<SharedState> {
    let routes = ApiRouter::new()
        .routes(routes!(register).layer(DefaultBodyLimit::max(MANIFEST_LIMIT_BYTES)))
        .routes(routes!(list))
        .routes(routes!(data_source));
    crate::v1::with_v1_errors(routes)
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

#[utoipa::path(post, path = "/api/v1/components/register", tag = "component catalog", request_body = Value, responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Value)))]
async fn register(
    State(state): State<SharedState>,
    JsonBody(manifest): JsonBody<ServiceManifest>,
) -> Result<Json<Value>, ApiError> {
    Catalog::new(&state.ports).register(manifest).await?;
    Ok(crate::v1::status_ok())
}

#[utoipa::path(get, path = "/api/v1/components", tag = "component catalog", responses((status = 200, description = "Every registered component version", body = Vec<Value>)))]
async fn list(State(state): State<SharedState>) -> Result<Json<Vec<ComponentManifestRow>>, ApiError> {
    Ok(Json(Catalog::new(&state.ports).list().await?))
}

/// The upstream's `Content-Type` when a browser cannot run it (JSON types, plain text, CSV), else
/// `application/octet-stream`: an upstream answering `text/html` must not get script onto Studio's origin.
fn inert_content_type(upstream: Option<&header::HeaderValue>) -> header::HeaderValue {
    let inert = upstream.and_then(|value| value.to_str().ok()).is_some_and(|value| {
        let media = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        media == "application/json" || media.ends_with("+json") || media == "text/plain" || media == "text/csv"
    });
    match upstream {
        Some(value) if inert => value.clone(),
        _ => header::HeaderValue::from_static("application/octet-stream"),
    }
}

/// Proxies a form query to the service that owns component `id`: only the declared parameters are forwarded
/// (and `service`, which picks the owner when several services registered a component by that id); anything that
/// fails is a 502 saying why. The upstream is reached through the egress policy (no link-local or metadata
/// address, no redirect, at most `FLOWHOST_EGRESS_MAX_BODY_BYTES` read), and its answer comes back with its
/// `Content-Type` when that is inert ([`inert_content_type`]), never rendered: `nosniff` and a sandboxing CSP.
#[utoipa::path(get, path = "/api/v1/components/{id}/data/{source}", tag = "component catalog", params(("service" = Option<String>, Query, description = "The owning service, when several registered this component id")), responses((status = 200, description = "The upstream's answer, never rendered", content((Value = "application/json"), (Vec<u8> = "application/octet-stream")))))]
async fn data_source(
    State(state): State<SharedState>,
    Path((id, source)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let service = query.iter().find(|(key, _)| key == "service").map(|(_, value)| value.as_str());
    let row = match Catalog::new(&state.ports).latest_of(&id, service).await? {
        Owner::One(row) => row,
        Owner::None => return Err(ApiError::bad_gateway(format!("unknown component {id:?}: no manifest registered"))),
        Owner::Ambiguous(services) => {
            return Err(ApiError::bad_gateway(format!(
                "component id {id:?} is registered by several services ({}); name one with ?service=",
                services.join(", ")
            )))
        }
    };
    let declared = row.data_sources.iter().find(|d| d.name == source).ok_or_else(|| {
        ApiError::bad_gateway(format!("component {id:?} (version {}) declares no data source {source:?}", row.version))
    })?;
    if row.extra.get(RUNTIME_FIELD).and_then(Value::as_str) == Some(WASM_RUNTIME) {
        return query_data_source(&state, &id, &source, query).await;
    }
    let endpoint = row
        .endpoint()
        .ok_or_else(|| ApiError::bad_gateway(format!("component {id:?} has no transports.http.endpoint to query")))?;
    let url = format!("{}{}", endpoint.trim_end_matches('/'), declared.path);
    let forwarded: Vec<(String, String)> = query.into_iter().filter(|(k, _)| declared.params.contains(k)).collect();
    let upstream = |error: EgressError| {
        warn!(component = %id, source = %source, %error, "data-source upstream failed");
        ApiError::bad_gateway(format!("data source {source:?} of component {id:?}: {error}"))
    };
    let request = state.egress.request(reqwest::Method::GET, &url).map_err(upstream)?.query(&forwarded);
    let response = state.egress.send(request).await.map_err(upstream)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ApiError::bad_gateway(format!(
            "data source {source:?} of component {id:?}: upstream answered {}",
            status.as_u16()
        )));
    }
    let content_type = inert_content_type(response.headers().get(header::CONTENT_TYPE));
    let body = state.egress.read_body(response).await.map_err(upstream)?;
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff")),
            (header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static("sandbox; default-src 'none'")),
        ],
        body,
    )
        .into_response())
}

/// Answers a data source of an in-process (wasm) component for the catalog's data-source proxy: the active
/// version's answer with `Content-Type: application/json`, or a 502 saying why.
async fn query_data_source(
    state: &SharedState,
    id: &str,
    source: &str,
    query: Vec<(String, String)>,
) -> Result<Response, ApiError> {
    let plugin = state.components.as_ref().and_then(|store| store.active(id)).ok_or_else(|| {
        ApiError::bad_gateway(format!("component {id:?} runs in the plugin runtime but is not active here"))
    })?;
    match plugin.data_source(source, &query).await {
        Ok(body) => Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response()),
        Err(error) => {
            warn!(component = %id, source, %error, "in-process data source failed");
            Err(ApiError::bad_gateway(format!(
                "data source {source:?} of component {id:?} failed: {}",
                error.public_message()
            )))
        }
    }
}
