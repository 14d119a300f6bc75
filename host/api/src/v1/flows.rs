//! `/api/v1/flows`: v1 Studio graphs, their structural validation and their compilation into rules.
//!
//! Compile writes the new rules before removing stale ones, so a recompile never leaves a gap in matching;
//! rule ids are deterministic, so tenant overrides on compiled rules survive a recompile. Saving a flow (PUT)
//! stores the body as given, status included (default `draft`): an edited flow is a draft until compiled
//! again, while its previously compiled rules keep running.

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use flowhost_core::collections::{FLOWS, RULES, SCHEMAS};
use flowhost_core::flows;
use flowhost_core::model::{EventSchema, Flow, FlowStatus, Rule};
use flowhost_core::ports::DocumentStore;
use serde_json::{json, Value};

use super::triggers::delete_rule;
use super::{decode_all, encode, insert_new, load, load_all, status_ok, EnabledBody, SharedState};
use crate::error::ApiError;
use crate::json::JsonBody;

#[utoipa::path(get, path = "/api/v1/flows", tag = "v1 flows", responses((status = 200, description = "Every flow", body = Vec<Flow>)))]
pub(crate) async fn list(State(state): State<SharedState>) -> Result<Json<Vec<Flow>>, ApiError> {
    Ok(Json(load_all(state.ports.documents.as_ref(), FLOWS).await?))
}

#[utoipa::path(post, path = "/api/v1/flows", tag = "v1 flows", request_body = Flow, responses((status = 201, description = "The stored flow", body = Flow)))]
pub(crate) async fn create(
    State(state): State<SharedState>,
    JsonBody(mut flow): JsonBody<Flow>,
) -> Result<(StatusCode, Json<Flow>), ApiError> {
    if flow.id.trim().is_empty() {
        flow.id = uuid::Uuid::new_v4().to_string();
    }
    insert_new(state.ports.documents.as_ref(), FLOWS, "flow", &flow.id, &flow).await?;
    Ok((StatusCode::CREATED, Json(flow)))
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("flow {id:?} not found"))
}

async fn existing(documents: &dyn DocumentStore, id: &str) -> Result<Flow, ApiError> {
    load(documents, FLOWS, id).await?.ok_or_else(|| not_found(id))
}

/// Whether a stored flow is a v2 graph (listed and read here, deleted here, edited only under `/api/v2`).
fn is_v2(flow: &Flow) -> bool {
    flow.extra.get("api_version").and_then(Value::as_u64) == Some(u64::from(flowhost_flows::model::API_VERSION))
}

/// A v1 flow to edit, validate or compile: a v2 flow is a 409 pointing at its own routes.
async fn existing_v1(documents: &dyn DocumentStore, id: &str) -> Result<Flow, ApiError> {
    let flow = existing(documents, id).await?;
    if is_v2(&flow) {
        return Err(ApiError::conflict(format!("flow {id:?} is a v2 flow; use /api/v2/flows/{id}")));
    }
    Ok(flow)
}

#[utoipa::path(get, path = "/api/v1/flows/{id}", tag = "v1 flows", responses((status = 200, description = "The flow", body = Flow)))]
pub(crate) async fn read(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Flow>, ApiError> {
    Ok(Json(existing(state.ports.documents.as_ref(), &id).await?))
}

#[utoipa::path(put, path = "/api/v1/flows/{id}", tag = "v1 flows", request_body = Flow, responses((status = 200, description = "The stored flow", body = Flow)))]
pub(crate) async fn update(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(mut flow): JsonBody<Flow>,
) -> Result<Json<Flow>, ApiError> {
    existing_v1(state.ports.documents.as_ref(), &id).await?;
    flow.id = id;
    if !state.ports.documents.replace(FLOWS, &flow.id, encode(FLOWS, &flow)?).await? {
        return Err(not_found(&flow.id));
    }
    Ok(Json(flow))
}

async fn compiled_rules(documents: &dyn DocumentStore, flow_id: &str) -> Result<Vec<Rule>, ApiError> {
    Ok(decode_all(RULES, documents.find(RULES, "flow_id", &json!(flow_id)).await?)?)
}

#[utoipa::path(delete, path = "/api/v1/flows/{id}", tag = "v1 flows", responses((status = 204, description = "Deleted with the rules compiled from it")))]
pub(crate) async fn remove(State(state): State<SharedState>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let documents = state.ports.documents.as_ref();
    existing(documents, &id).await?;
    for rule in compiled_rules(documents, &id).await? {
        delete_rule(documents, &rule.id).await?;
    }
    // Versions, release attempts, edit lock, service references, runs and dead letters (v2), and the flow.
    state.flows.forget(&id).await.map_err(flow_error)?;
    flowhost_runs::Runs::new(&state.ports).forget_flow(&id).await.map_err(|error| match error {
        flowhost_runs::RunsError::Storage(error) => ApiError::from(error),
        other => {
            tracing::error!(error = %other, "deleting a flow's runs failed");
            ApiError::internal()
        }
    })?;
    state.announce_change().await;
    Ok(StatusCode::NO_CONTENT)
}

/// A v2 flow operation's failure in the v1 envelope.
fn flow_error(error: flowhost_flows::FlowError) -> ApiError {
    use flowhost_flows::FlowError;
    match error {
        FlowError::Storage(error) => ApiError::from(error),
        FlowError::NotFound(id) => not_found(&id),
        other @ FlowError::Concurrent(_) => ApiError::conflict(other.to_string()),
        other => {
            tracing::error!(error = %other, "unexpected v2 flow failure behind a v1 route");
            ApiError::internal()
        }
    }
}

/// Body `{ "enabled": bool }` (the spec leaves it open); answers `{ "status": "ok", "rule_count": n }` with the
/// number of compiled rules updated.
#[utoipa::path(put, path = "/api/v1/flows/{id}/enabled", tag = "v1 flows", request_body = super::EnabledBody, responses((status = 200, description = "The flow with its rule count", body = Value)))]
pub(crate) async fn set_enabled(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<EnabledBody>,
) -> Result<Json<Value>, ApiError> {
    let documents = state.ports.documents.as_ref();
    let mut flow = existing(documents, &id).await?;
    if is_v2(&flow) {
        // A v2 flow's services are told through its own operation.
        state.flows.set_enabled(&id, body.enabled).await.map_err(flow_error)?;
        let mut body = status_ok().0;
        body["rule_count"] = json!(0);
        return Ok(Json(body));
    }
    flow.enabled = body.enabled;
    let rules = compiled_rules(documents, &id).await?;
    for mut rule in rules.iter().cloned() {
        rule.enabled = body.enabled;
        documents.replace(RULES, &rule.id, encode(RULES, &rule)?).await?;
    }
    documents.replace(FLOWS, &id, encode(FLOWS, &flow)?).await?;
    state.announce_change().await;
    let mut body = status_ok().0;
    body["rule_count"] = json!(rules.len());
    Ok(Json(body))
}

#[utoipa::path(post, path = "/api/v1/flows/{id}/validate", tag = "v1 flows", responses((status = 200, description = "`{\"valid\": bool, \"errors\": [...]}`", body = Value)))]
pub(crate) async fn validate(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let flow = existing_v1(state.ports.documents.as_ref(), &id).await?;
    let errors = flows::validate(&flow);
    Ok(Json(json!({ "valid": errors.is_empty(), "errors": errors })))
}

#[utoipa::path(post, path = "/api/v1/flows/{id}/compile", tag = "v1 flows", responses((status = 200, description = "`{\"status\": \"compiled\", \"rule_ids\", \"rule_count\"}`", body = Value)))]
pub(crate) async fn compile(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let documents = state.ports.documents.as_ref();
    let mut flow = existing_v1(documents, &id).await?;
    let compiled = flows::compile(&flow).map_err(|errors| ApiError::invalid("flow validation failed", errors))?;

    // Expressions are checked against the event type's schema, like rules created directly.
    let event_type = flow.source.as_ref().map(|s| s.event_type.clone()).unwrap_or_default();
    let schema: Option<EventSchema> = load(documents, SCHEMAS, &event_type).await?;
    let mut errors = Vec::new();
    let mut seen_nodes = HashSet::new();
    for c in &compiled {
        if !seen_nodes.insert(c.condition_node.clone()) {
            continue;
        }
        for error in flowhost_expr::validate(&c.rule.conditions.expression, schema.as_ref()) {
            errors.push(format!("condition node {:?}: {error}", c.condition_node));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid("flow validation failed", errors));
    }

    let previous = compiled_rules(documents, &id).await?;
    let new_ids: HashSet<&str> = compiled.iter().map(|c| c.rule.id.as_str()).collect();
    for c in &compiled {
        documents.upsert(RULES, &c.rule.id, encode(RULES, &c.rule)?).await?;
    }
    for stale in previous.iter().filter(|r| !new_ids.contains(r.id.as_str())) {
        delete_rule(documents, &stale.id).await?;
    }
    flow.status = FlowStatus::Active;
    documents.replace(FLOWS, &id, encode(FLOWS, &flow)?).await?;
    state.announce_change().await;
    let rule_ids: Vec<&str> = compiled.iter().map(|c| c.rule.id.as_str()).collect();
    Ok(Json(json!({ "status": "compiled", "rule_ids": rule_ids, "rule_count": rule_ids.len() })))
}
