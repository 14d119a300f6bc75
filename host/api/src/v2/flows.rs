//! `/api/v2/flows`: thin handlers over `flowhost_flows::Flows`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use flowhost_catalog::ServiceView;
use flowhost_flows::{
    body_schema, broadcast, FlowBody, FlowInput, FlowRecord, FlowStatus, Report, LOCK_TTL_DEFAULT_SECONDS,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Caller, V2Error, V2Json};
use crate::v1::SharedState;

/// A flow record with the validation of its draft beside it.
fn with_validation(flow: &FlowRecord, report: &Report) -> Value {
    let mut body = json!(flow);
    body["validation"] = json!(report);
    body
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    status: Option<String>,
}

/// `GET /api/v2/flows[?status=draft|valid|invalid]`: every v2 flow with `id`, `status` and `broken_reasons`.
#[utoipa::path(get, path = "/api/v2/flows", tag = "v2 flows", params(ListQuery), responses((status = 200, description = "`{\"flows\": [...]}` with `id`, `status` and `broken_reasons`", body = Value)))]
pub(crate) async fn list(
    State(state): State<SharedState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, V2Error> {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(s) => Some(serde_json::from_value::<FlowStatus>(json!(s)).map_err(|_| {
            V2Error::new(
                StatusCode::BAD_REQUEST,
                "INVALID_QUERY",
                format!("status {s:?} is not draft, valid or invalid"),
            )
            .with_details(json!({ "field": "status" }))
        })?),
    };
    Ok(Json(json!(state.flows.list(status).await?)))
}

/// `GET /api/v2/flows/schema`: the JSON Schema of a flow body.
#[utoipa::path(get, path = "/api/v2/flows/schema", tag = "v2 flows", responses((status = 200, description = "The JSON Schema of a v2 flow body", body = Value)))]
pub(crate) async fn schema() -> Json<Value> {
    Json(body_schema())
}

/// `POST /api/v2/flows`: creates a draft (201), validated but never refused for its issues.
#[utoipa::path(post, path = "/api/v2/flows", tag = "v2 flows", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body = Value, responses((status = 201, description = "The created flow (a draft)", body = Value)))]
pub(crate) async fn create(
    State(state): State<SharedState>,
    caller: Caller,
    V2Json(input): V2Json<FlowInput>,
) -> Result<(StatusCode, Json<Value>), V2Error> {
    let (flow, report) = state.flows.create(input, caller.0.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(with_validation(&flow, &report))))
}

/// `POST /api/v2/flows/validate-draft`: validates a body against dependencies loaded now.
#[utoipa::path(post, path = "/api/v2/flows/validate-draft", tag = "v2 flows", request_body = Value, responses((status = 200, description = "The validation report of the body", body = Value)))]
pub(crate) async fn validate_draft(
    State(state): State<SharedState>,
    V2Json(body): V2Json<FlowBody>,
) -> Result<Json<Report>, V2Error> {
    Ok(Json(state.flows.validate_draft(&body).await?))
}

#[utoipa::path(get, path = "/api/v2/flows/{id}", tag = "v2 flows", responses((status = 200, description = "The flow: its draft and its releases", body = Value)))]
pub(crate) async fn read(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<FlowRecord>, V2Error> {
    Ok(Json(state.flows.get(&id).await?))
}

/// `GET /api/v2/flows/{id}/draft`: the draft body and the issues found when it was saved.
#[utoipa::path(get, path = "/api/v2/flows/{id}/draft", tag = "v2 flows", responses((status = 200, description = "The draft body", body = Value)))]
pub(crate) async fn draft(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Value>, V2Error> {
    let flow = state.flows.get(&id).await?;
    Ok(Json(json!({
        "nodes": flow.draft.nodes, "edges": flow.draft.edges, "issues": flow.draft_issues,
        "draft_changed": flow.draft_changed, "updated_at": flow.updated_at, "updated_by": flow.updated_by,
    })))
}

/// `PUT /api/v2/flows/{id}`: saves the draft (409 `FLOW_LOCKED` while another editor holds the lock).
#[utoipa::path(put, path = "/api/v2/flows/{id}", tag = "v2 flows", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body = Value, responses((status = 200, description = "The saved flow", body = Value)))]
pub(crate) async fn save(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    caller: Caller,
    V2Json(input): V2Json<FlowInput>,
) -> Result<Json<Value>, V2Error> {
    if input.id.as_ref().is_some_and(|body_id| body_id != &id) {
        return Err(V2Error::invalid_field("id", "differs from the id in the path"));
    }
    let (flow, report) = state.flows.save(&id, input, caller.0.as_deref()).await?;
    Ok(Json(with_validation(&flow, &report)))
}

/// `DELETE /api/v2/flows/{id}`: the flow, its versions, release attempts, edit lock, service references, runs and
/// dead letters.
#[utoipa::path(delete, path = "/api/v2/flows/{id}", tag = "v2 flows", responses((status = 204, description = "Deleted")))]
pub(crate) async fn remove(State(state): State<SharedState>, Path(id): Path<String>) -> Result<StatusCode, V2Error> {
    state.flows.get(&id).await?;
    state.flows.forget(&id).await?;
    flowhost_runs::Runs::new(&state.ports).forget_flow(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct EnabledBody {
    enabled: bool,
}

/// `PUT /api/v2/flows/{id}/enabled` with `{ "enabled": bool }`.
#[utoipa::path(put, path = "/api/v2/flows/{id}/enabled", tag = "v2 flows", request_body = EnabledBody, responses((status = 200, description = "The flow", body = Value)))]
pub(crate) async fn set_enabled(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    V2Json(body): V2Json<EnabledBody>,
) -> Result<Json<Value>, V2Error> {
    let flow = state.flows.set_enabled(&id, body.enabled).await?;
    Ok(Json(json!({ "status": "ok", "enabled": flow.enabled })))
}

/// `POST /api/v2/flows/{id}/validate`: the released version against fresh dependencies.
#[utoipa::path(post, path = "/api/v2/flows/{id}/validate", tag = "v2 flows", responses((status = 200, description = "The validation report of the draft", body = Value)))]
pub(crate) async fn validate_released(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<Report>, V2Error> {
    Ok(Json(state.flows.validate_released(&id).await?))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct ReleaseBody {
    #[serde(default)]
    acknowledged_warnings: Vec<String>,
}

/// `POST /api/v2/flows/{id}/release` with `{ "acknowledged_warnings": ["ORPHAN_NODE", ...] }`: 200 with the new
/// version and the warnings it was released with (acknowledged or not: warnings never block), or 422
/// `RELEASE_BLOCKED` when a blocking issue remains.
#[utoipa::path(post, path = "/api/v2/flows/{id}/release", tag = "v2 flows", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body(content = Option<ReleaseBody>), responses((status = 200, description = "The new version", body = Value)))]
pub(crate) async fn release(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    caller: Caller,
    V2Json(body): V2Json<ReleaseBody>,
) -> Result<Json<Value>, V2Error> {
    let (flow, version, report) = state.flows.release(&id, body.acknowledged_warnings, caller.name()).await?;
    Ok(Json(json!({
        "flow_id": flow.id, "version": version.version, "status": flow.status, "released_at": version.released_at,
        "released_by": version.released_by, "released_by_claimed": true, "body_hash": version.body_hash,
        "services": version.services, "warnings": version.warnings,
        "acknowledged_warnings": version.acknowledged_warnings,
        "unacknowledged_warnings": version.unacknowledged_warnings, "validation": report,
    })))
}

/// `GET /api/v2/flows/{id}/versions`: released versions, newest first, without their bodies.
#[utoipa::path(get, path = "/api/v2/flows/{id}/versions", tag = "v2 flows", responses((status = 200, description = "Every released version", body = Value)))]
pub(crate) async fn versions(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Value>, V2Error> {
    let versions = state.flows.versions(&id).await?;
    let rows: Vec<Value> = versions
        .into_iter()
        .map(|v| {
            json!({ "version": v.version, "body_hash": v.body_hash, "services": v.services,
                    "released_at": v.released_at, "released_by": v.released_by, "released_by_claimed": true,
                    "warnings": v.warnings, "acknowledged_warnings": v.acknowledged_warnings,
                    "unacknowledged_warnings": v.unacknowledged_warnings })
        })
        .collect();
    Ok(Json(json!(rows)))
}

/// `GET /api/v2/flows/{id}/versions/{version}`: one released version with its normalized body.
#[utoipa::path(get, path = "/api/v2/flows/{id}/versions/{version}", tag = "v2 flows", responses((status = 200, description = "One released version with its body", body = Value)))]
pub(crate) async fn version(
    State(state): State<SharedState>,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<Value>, V2Error> {
    let number: u64 = version.parse().map_err(|_| {
        V2Error::new(StatusCode::BAD_REQUEST, "INVALID_PATH", format!("version {version:?} is not a positive integer"))
    })?;
    state.flows.get(&id).await?;
    let mut answer = json!(state.flows.version(&id, number).await?);
    answer["released_by_claimed"] = json!(true);
    Ok(Json(answer))
}

/// `GET /api/v2/flows/{id}/release-attempts`: every release request, newest first.
#[utoipa::path(get, path = "/api/v2/flows/{id}/release-attempts", tag = "v2 flows", responses((status = 200, description = "Release attempts, newest first", body = Value)))]
pub(crate) async fn attempts(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Value>, V2Error> {
    Ok(Json(json!(state.flows.attempts(&id).await?)))
}

/// `GET /api/v2/flows/{id}/lock`: who holds the draft and until when (404 `NOT_LOCKED` when nobody does).
#[utoipa::path(get, path = "/api/v2/flows/{id}/lock", tag = "v2 flows", responses((status = 200, description = "The edit lock, or `{\"locked\": false}`", body = Value)))]
pub(crate) async fn lock(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Value>, V2Error> {
    state.flows.get(&id).await?;
    match state.flows.current_lock(&id).await? {
        Some(lock) => Ok(Json(json!(lock))),
        None => {
            Err(V2Error::new(StatusCode::NOT_FOUND, "NOT_LOCKED", format!("nobody holds the draft of flow {id:?}")))
        }
    }
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct LockBody {
    ttl_seconds: Option<u64>,
}

/// `PUT /api/v2/flows/{id}/lock` with `{ "ttl_seconds"?: n }` (default 300, at most 3600): takes or renews the
/// edit lock for the caller (`X-Flowhost-User` required); 409 `FLOW_LOCKED` while someone else holds it.
#[utoipa::path(put, path = "/api/v2/flows/{id}/lock", tag = "v2 flows", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body(content = Option<LockBody>), responses((status = 200, description = "The lock held by the caller", body = Value)))]
pub(crate) async fn take_lock(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    caller: Caller,
    V2Json(body): V2Json<LockBody>,
) -> Result<Json<Value>, V2Error> {
    let holder = required_caller(&caller)?;
    if body.ttl_seconds == Some(0) {
        return Err(V2Error::invalid_field("ttl_seconds", "must be at least 1"));
    }
    let lock = state.flows.lock(&id, holder, body.ttl_seconds.unwrap_or(LOCK_TTL_DEFAULT_SECONDS)).await?;
    Ok(Json(json!(lock)))
}

/// `DELETE /api/v2/flows/{id}/lock`: gives the caller's lock up (204).
#[utoipa::path(delete, path = "/api/v2/flows/{id}/lock", tag = "v2 flows", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), responses((status = 204, description = "Released")))]
pub(crate) async fn give_up_lock(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<StatusCode, V2Error> {
    state.flows.unlock(&id, required_caller(&caller)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn required_caller(caller: &Caller) -> Result<&str, V2Error> {
    caller.0.as_deref().ok_or_else(|| {
        V2Error::new(StatusCode::BAD_REQUEST, "INVALID_HEADER", "an edit lock needs the X-Flowhost-User header")
    })
}

/// `GET /api/v2/services/{service}`: the service's **active** manifest, the one validation checks flows against
/// (per component the version the component store activated, so a rollback shows here at once, else the most
/// recent registration); 404 `SERVICE_NOT_FOUND` when it never registered.
#[utoipa::path(get, path = "/api/v2/services/{service}", tag = "component catalog", responses((status = 200, description = "The service's active version of each component", body = Value), (status = 404, description = "`SERVICE_NOT_FOUND`: the service never registered", body = Value)))]
pub(crate) async fn service(
    State(state): State<SharedState>,
    Path(service): Path<String>,
) -> Result<Json<ServiceView>, V2Error> {
    let active = flowhost_flows::active_service(&state.ports, &service).await?.ok_or_else(|| {
        V2Error::new(StatusCode::NOT_FOUND, "SERVICE_NOT_FOUND", format!("service {service:?} has not registered"))
    })?;
    let last_seen_at = active.components.iter().map(|c| c.last_seen_at.clone()).max().unwrap_or_default();
    Ok(Json(ServiceView { service, registered: true, last_seen_at, components: active.components }))
}

/// `GET /api/v2/node-kinds`: every node kind a flow can place (`{"kind": "node-kind", "config": {"plugin",
/// "kind", ...}}`): per declaring component's active version, the declaration (`config_schema`, `answers`,
/// `adds_fields`), sorted by plugin then name. Studio's palette offers these.
#[utoipa::path(get, path = "/api/v2/node-kinds", tag = "v2 flows", responses((status = 200, description = "The node kinds the active plugins declare: `[{plugin, service, version, name, description?, config_schema, answers, adds_fields?}]`", body = Value)))]
pub(crate) async fn node_kinds(
    State(state): State<SharedState>,
) -> Result<Json<Vec<flowhost_flows::PlaceableNodeKind>>, V2Error> {
    Ok(Json(flowhost_flows::placeable_node_kinds(&state.ports).await?))
}

/// `GET /api/v2/services/{service}/flows`: the service's current flow broadcast.
#[utoipa::path(get, path = "/api/v2/services/{service}/flows", tag = "v2 flows", responses((status = 200, description = "The flows broadcast to the service", body = Value)))]
pub(crate) async fn service_flows(
    State(state): State<SharedState>,
    Path(service): Path<String>,
) -> Result<Json<broadcast::FlowBroadcast>, V2Error> {
    Ok(Json(broadcast::current(&state.flows, &service).await?))
}
