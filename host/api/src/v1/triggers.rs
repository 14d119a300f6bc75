//! `/api/v1/triggers`: rules and their tenant overrides.

use std::collections::HashSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use flowhost_core::collections::{RULES, SCHEMAS, TENANT_OVERRIDES};
use flowhost_core::model::{EventSchema, Rule, TenantOverride};
use flowhost_core::ports::{check_topic_name, DocumentStore};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{decode_all, encode, insert_new, load, load_all, status_ok, EnabledBody, SharedState};
use crate::error::ApiError;
use crate::json::JsonBody;

#[utoipa::path(get, path = "/api/v1/triggers", tag = "v1 rules", responses((status = 200, description = "Every rule", body = Vec<Rule>)))]
pub(crate) async fn list(State(state): State<SharedState>) -> Result<Json<Vec<Rule>>, ApiError> {
    Ok(Json(load_all(state.ports.documents.as_ref(), RULES).await?))
}

#[utoipa::path(post, path = "/api/v1/triggers", tag = "v1 rules", request_body = Rule, responses((status = 201, description = "The stored rule (an empty `id` is given a UUID)", body = Rule)))]
pub(crate) async fn create(
    State(state): State<SharedState>,
    JsonBody(mut rule): JsonBody<Rule>,
) -> Result<(StatusCode, Json<Rule>), ApiError> {
    if rule.id.trim().is_empty() {
        rule.id = uuid::Uuid::new_v4().to_string();
    }
    rule.flow_id = None;
    let documents = state.ports.documents.as_ref();
    check_rule(documents, &rule).await?;
    insert_new(documents, RULES, "rule", &rule.id, &rule).await?;
    state.announce_change().await;
    Ok((StatusCode::CREATED, Json(rule)))
}

#[utoipa::path(get, path = "/api/v1/triggers/{id}", tag = "v1 rules", responses((status = 200, description = "The rule", body = Rule)))]
pub(crate) async fn read(State(state): State<SharedState>, Path(id): Path<String>) -> Result<Json<Rule>, ApiError> {
    Ok(Json(existing(state.ports.documents.as_ref(), &id).await?))
}

#[utoipa::path(put, path = "/api/v1/triggers/{id}", tag = "v1 rules", request_body = Rule, responses((status = 200, description = "The stored rule", body = Rule)))]
pub(crate) async fn update(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(mut rule): JsonBody<Rule>,
) -> Result<Json<Rule>, ApiError> {
    let documents = state.ports.documents.as_ref();
    let current = existing(documents, &id).await?;
    refuse_flow_managed(&current, "update")?;
    rule.id = id;
    rule.flow_id = None;
    check_rule(documents, &rule).await?;
    if !documents.replace(RULES, &rule.id, encode(RULES, &rule)?).await? {
        return Err(not_found(&rule.id));
    }
    state.announce_change().await;
    Ok(Json(rule))
}

#[utoipa::path(delete, path = "/api/v1/triggers/{id}", tag = "v1 rules", responses((status = 204, description = "Deleted with its tenant overrides")))]
pub(crate) async fn remove(State(state): State<SharedState>, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let documents = state.ports.documents.as_ref();
    let current = existing(documents, &id).await?;
    refuse_flow_managed(&current, "delete")?;
    delete_rule(documents, &id).await?;
    state.announce_change().await;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/api/v1/triggers/{id}/enabled", tag = "v1 rules", request_body = EnabledBody, responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Value)))]
pub(crate) async fn set_enabled(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<EnabledBody>,
) -> Result<Json<Value>, ApiError> {
    let documents = state.ports.documents.as_ref();
    let mut rule = existing(documents, &id).await?;
    rule.enabled = body.enabled;
    if !documents.replace(RULES, &id, encode(RULES, &rule)?).await? {
        return Err(not_found(&id));
    }
    state.announce_change().await;
    Ok(status_ok())
}

#[utoipa::path(get, path = "/api/v1/triggers/{id}/tenants", tag = "v1 rules", responses((status = 200, description = "The rule's tenant overrides", body = Vec<Value>)))]
pub(crate) async fn list_tenants(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let documents = state.ports.documents.as_ref();
    existing(documents, &id).await?;
    let overrides = documents.find(TENANT_OVERRIDES, "rule_id", &json!(id)).await?;
    let overrides: Vec<TenantOverride> = decode_all(TENANT_OVERRIDES, overrides)?;
    Ok(Json(
        overrides
            .into_iter()
            .map(|o| match o.enabled {
                Some(enabled) => json!({ "tenant_id": o.tenant_id, "enabled": enabled }),
                None => json!({ "tenant_id": o.tenant_id }),
            })
            .collect(),
    ))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct TenantBody {
    #[serde(default)]
    #[allow(dead_code)] // accepted for compatibility; the path value wins
    tenant_id: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

#[utoipa::path(method(put, post), path = "/api/v1/triggers/{id}/tenants/{tenant_id}", tag = "v1 rules", request_body = TenantBody, responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Value)))]
pub(crate) async fn put_tenant(
    State(state): State<SharedState>,
    Path((id, tenant_id)): Path<(String, String)>,
    JsonBody(body): JsonBody<TenantBody>,
) -> Result<Json<Value>, ApiError> {
    let documents = state.ports.documents.as_ref();
    existing(documents, &id).await?;
    if tenant_id.trim().is_empty() {
        return Err(ApiError::bad_request("tenant_id must not be empty"));
    }
    let document_id = TenantOverride::document_id(&id, &tenant_id);
    let prior: Option<TenantOverride> = load(documents, TENANT_OVERRIDES, &document_id).await?;
    let enabled = body.enabled.or(prior.and_then(|p| p.enabled));
    let record = TenantOverride { rule_id: id, tenant_id, enabled };
    documents.upsert(TENANT_OVERRIDES, &document_id, encode(TENANT_OVERRIDES, &record)?).await?;
    state.announce_change().await;
    Ok(status_ok())
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("rule {id:?} not found"))
}

pub(crate) async fn existing(documents: &dyn DocumentStore, id: &str) -> Result<Rule, ApiError> {
    load(documents, RULES, id).await?.ok_or_else(|| not_found(id))
}

fn refuse_flow_managed(rule: &Rule, action: &str) -> Result<(), ApiError> {
    match &rule.flow_id {
        Some(flow_id) => Err(ApiError::conflict(format!(
            "rule {:?} is managed by flow {flow_id:?}; {action} the flow instead",
            rule.id
        ))),
        None => Ok(()),
    }
}

/// Removes a rule and its tenant overrides.
pub(crate) async fn delete_rule(documents: &dyn DocumentStore, id: &str) -> Result<(), ApiError> {
    documents.delete(RULES, id).await?;
    documents.delete_where(TENANT_OVERRIDES, "rule_id", &json!(id)).await?;
    Ok(())
}

/// The 400 checks of create and update: required fields, topic names, the output mapping and the expression
/// against the event type's schema (when one exists).
async fn check_rule(documents: &dyn DocumentStore, rule: &Rule) -> Result<(), ApiError> {
    let mut problems = Vec::new();
    if let Err(e) = check_topic_name(&rule.source.topic) {
        problems.push(format!("source.topic: {e}"));
    }
    if !rule.output_topic.is_empty() {
        if let Err(e) = check_topic_name(&rule.output_topic) {
            problems.push(format!("output_topic: {e}"));
        }
    }
    if rule.conditions.event_type.trim().is_empty() {
        problems.push("conditions.event_type must not be empty".to_owned());
    }
    if !problems.is_empty() {
        return Err(ApiError::invalid("invalid rule", problems));
    }
    if let Some(mapping) = &rule.output_mapping {
        let mut targets = HashSet::new();
        let mut problems = Vec::new();
        if mapping.fields.is_empty() {
            problems.push("fields must not be empty".to_owned());
        }
        for (i, field) in mapping.fields.iter().enumerate() {
            if field.source.trim().is_empty() || field.target.trim().is_empty() {
                problems.push(format!("fields[{i}]: source and target must not be empty"));
            } else if !targets.insert(field.target.as_str()) {
                problems.push(format!("fields[{i}]: target {:?} is mapped more than once", field.target));
            }
        }
        if !problems.is_empty() {
            return Err(ApiError::invalid("invalid output mapping", problems));
        }
    }
    let schema: Option<EventSchema> = load(documents, SCHEMAS, &rule.conditions.event_type).await?;
    let errors = flowhost_expr::validate(&rule.conditions.expression, schema.as_ref());
    if !errors.is_empty() {
        return Err(ApiError::invalid("invalid expression", errors));
    }
    Ok(())
}
