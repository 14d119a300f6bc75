//! The editor routes other than template CRUD, for Studio and the dashboard (editor token): the tenants list,
//! the delivery activity list, one notification record, and the two send routes; thin handlers over
//! `flowhost_webpush` (`records`, `templates`). No sender runs in this build yet, so the send routes validate
//! the request completely (body, channel, template, rendering) and then answer 503 `SENDER_NOT_RUNNING`:
//! nothing is recorded and nothing pretends to be delivered.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_core::config::Channel;
use flowhost_webpush::fields::Fields;
use flowhost_webpush::records::{self, ActivityQuery};
use flowhost_webpush::FieldError;
use serde_json::{json, Value};
use tracing::info;

use crate::auth::Editor;
use crate::body::JsonObject;
use crate::error::PushError;
use crate::PushState;

type Shared = Arc<PushState>;

const MAX_LIMIT: usize = 500;
const DEFAULT_LIMIT: usize = 50;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/v1/tenants", get(tenants))
        .route("/api/v1/tenants/", get(tenants))
        .route("/api/v1/webpush/activity", get(activity))
        .route("/api/v1/webpush/notifications/{id}", get(notification))
        .route("/api/v1/webpush/send", post(send_webpush))
        .route("/api/v1/templates/in-app/send", post(send_inapp))
}

/// `GET /api/v1/tenants/`: `{ "tenants": [{ "tenant_id" }] }`. With `X-Svc-Client-Id` it verifies the
/// selection: 200 with that one tenant when it is known, 403 `FORBIDDEN` when not.
async fn tenants(State(state): State<Shared>, editor: Editor) -> Result<Json<Value>, PushError> {
    let configured = &state.settings.tenants;
    let known = records::known_tenants(state.ports.documents.as_ref(), configured, state.policy.as_ref().ok()).await?;
    let listed: Vec<Value> = match &editor.tenant {
        Some(selected) if known.contains(selected) => vec![json!({ "tenant_id": selected })],
        Some(_) => return Err(PushError::forbidden("the selected tenant (X-Svc-Client-Id) is not known here")),
        None => known.iter().map(|t| json!({ "tenant_id": t })).collect(),
    };
    info!(admin_user = editor.admin_user.as_deref(), count = listed.len(), "tenants listed");
    Ok(Json(json!({ "tenants": listed })))
}

fn query_number(query: &HashMap<String, String>, name: &str, errors: &mut Vec<FieldError>) -> Option<i64> {
    let value = query.get(name)?;
    match value.trim().parse::<i64>() {
        Ok(n) => Some(n),
        Err(_) => {
            errors.push(FieldError::new(name, "must be an integer"));
            None
        }
    }
}

/// `GET /api/v1/webpush/activity?tenant_id=&player_id=&status=&limit=&offset=`: notification activity, newest
/// first: `{ "items": [...], "total", "limit", "offset" }`. The selected tenant (`X-Svc-Client-Id`) scopes it.
async fn activity(
    State(state): State<Shared>,
    editor: Editor,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, PushError> {
    let mut errors = Vec::new();
    let player_id = query_number(&query, "player_id", &mut errors);
    let limit = query_number(&query, "limit", &mut errors).unwrap_or(DEFAULT_LIMIT as i64);
    let offset = query_number(&query, "offset", &mut errors).unwrap_or(0);
    if !(1..=MAX_LIMIT as i64).contains(&limit) {
        errors.push(FieldError::new("limit", format!("must be between 1 and {MAX_LIMIT}")));
    }
    if offset < 0 {
        errors.push(FieldError::new("offset", "must not be negative"));
    }
    if !errors.is_empty() {
        return Err(PushError::validation(errors));
    }
    let filter = ActivityQuery {
        tenant_id: editor.tenant_for(query.get("tenant_id").filter(|t| !t.is_empty()).cloned(), "tenant_id")?,
        player_id,
        status: query.get("status").cloned(),
        limit: limit as usize,
        offset: offset as usize,
    };
    let page = records::list_activity(state.ports.documents.as_ref(), &filter).await?;
    Ok(Json(json!({ "items": page.items, "total": page.total, "limit": limit, "offset": offset })))
}

/// `GET /api/v1/webpush/notifications/{id}`: the activity record with its interaction events (oldest first)
/// under `events`; 404 when missing, expired or of another tenant than the selected one.
async fn notification(
    State(state): State<Shared>,
    editor: Editor,
    Path(id): Path<String>,
) -> Result<Json<Value>, PushError> {
    match records::notification(state.ports.documents.as_ref(), &id, editor.tenant.as_deref()).await? {
        Some(record) => Ok(Json(record)),
        None => Err(PushError::not_found("no such notification")),
    }
}

fn sender_not_running(channel: &str) -> PushError {
    PushError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "SENDER_NOT_RUNNING",
        "the request is valid, but no sender runs in this deployment yet: nothing was sent",
    )
    .with_details(json!({ "channel": channel }))
}

fn channel_disabled(state: &PushState, channel: Channel, name: &str) -> Result<(), PushError> {
    if state.channel_enabled(channel) {
        Ok(())
    } else {
        Err(PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "CHANNEL_DISABLED",
            format!("{name} is not in FLOWHOST_CHANNELS_ENABLED"),
        ))
    }
}

/// `POST /api/v1/webpush/send` with a `send_webpush` input (`tenant_id`, `player_id`, `template_id`,
/// `language_enabled_id`, `placeholders`). `player_id` 0 is allowed here: the dashboard's smoke test.
async fn send_webpush(
    State(state): State<Shared>,
    editor: Editor,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let mut f = Fields::new(&body);
    let tenant_id = f.required_str("tenant_id", 128);
    let player_id = f.player_id("player_id", true);
    let template_id = f.required_i64("template_id");
    let language = f.required_str("language_enabled_id", 64);
    let placeholders = f.optional_string_map("placeholders").unwrap_or_default();
    f.finish()?;
    let (Some(tenant_id), Some(_player_id), Some(template_id), Some(language)) =
        (tenant_id, player_id, template_id, language)
    else {
        return Err(PushError::internal());
    };
    let tenant_id = editor.tenant_for(Some(tenant_id), "tenant_id")?.unwrap_or_default();
    channel_disabled(&state, Channel::WebPush, "WEB_PUSH")?;
    let template = crate::templates::load(&state, &editor, template_id).await?;
    if template.tenant_id != tenant_id {
        return Err(PushError::not_found("no such template"));
    }
    template.render(&language, &placeholders, &state.settings.targets).map_err(PushError::validation)?;
    info!(admin_user = editor.admin_user.as_deref(), template_id, "web-push send refused: no sender is running");
    Err(sender_not_running("WEB_PUSH"))
}

/// `POST /api/v1/templates/in-app/send` with a `send_inapp` input (`tenant_id`, `template_id`, `player_id`,
/// `language_id?`, `placeholders?`, `vertical?`, `category?`, `subcategory?`).
async fn send_inapp(
    State(state): State<Shared>,
    editor: Editor,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let mut f = Fields::new(&body);
    let tenant_id = f.required_str("tenant_id", 128);
    f.required_i64("template_id");
    f.player_id("player_id", true);
    f.optional_str("language_id", 64);
    f.optional_string_map("placeholders");
    for name in ["vertical", "category", "subcategory"] {
        f.optional_str(name, 128);
    }
    f.finish()?;
    editor.tenant_for(tenant_id, "tenant_id")?;
    channel_disabled(&state, Channel::InApp, "IN_APP")?;
    info!(admin_user = editor.admin_user.as_deref(), "in-app send refused: no sender is running");
    Err(sender_not_running("IN_APP"))
}
