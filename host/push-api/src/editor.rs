//! The editor routes other than template CRUD, for Studio and the dashboard (editor token): the tenants list,
//! the delivery activity list, one notification record, and the two send routes; thin handlers over
//! `flowhost_notifications` (`records`, `templates`). The send routes validate the request completely (body, channel,
//! template, rendering) and then run the `notifications` plugin's action as a flow would (`send.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use flowhost_core::notify::MAX_PASSTHROUGH_DATA_BYTES;
use flowhost_notifications::fields::Fields;
use flowhost_notifications::records::{self, ActivityQuery};
use flowhost_notifications::Channel;
use flowhost_notifications::FieldError;
use flowhost_role::{routes, ApiRouter};
use serde_json::{json, Value};
use tracing::info;

use crate::auth::{Editor, EditorHeaders};
use crate::body::JsonObject;
use crate::error::PushError;
use crate::send::{self, IdempotencyHeader, SendChannel};
use crate::{moved, PushState};

type Shared = Arc<PushState>;

const MAX_LIMIT: usize = 500;
const DEFAULT_LIMIT: usize = 50;

pub(crate) fn routes() -> ApiRouter<Shared> {
    ApiRouter::new()
        .routes(routes!(tenants))
        .routes(moved(routes!(tenants), "/api/v1/tenants/", "/api/v1/tenants"))
        .routes(routes!(activity))
        .routes(routes!(notification))
        .routes(routes!(send_webpush))
        .routes(routes!(send_inapp))
}

/// The query of `GET /api/v1/webpush/activity`.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only: the handler reads the query as a map
pub(crate) struct ActivityParams {
    /// Must match `X-Svc-Client-Id` when both are given.
    tenant_id: Option<String>,
    player_id: Option<i64>,
    /// Only the records of this status.
    status: Option<String>,
    /// 1 to 500; 50 without it.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// 0 without it.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// A `send_webpush` input (`SendWebPushInput`). Other fields are refused.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct WebPushSendBody {
    /// Must match `X-Svc-Client-Id` when both are given.
    #[schema(max_length = 128)]
    tenant_id: String,
    /// 0 is allowed here: the dashboard's smoke test.
    #[schema(minimum = 0)]
    player_id: i64,
    /// A web-push template of the tenant.
    template_id: i64,
    /// The language of the template's content to render.
    #[schema(max_length = 64)]
    language_enabled_id: String,
    /// Values of the template's placeholders (strings).
    placeholders: Option<HashMap<String, String>>,
    /// Free-form fields passed through into the delivered payload's `data` (at most 1024 bytes as JSON;
    /// `notification_id` is always the service's).
    data: Option<HashMap<String, Value>>,
}

/// A `send_inapp` input (`SendInAppInput`). Other fields are refused.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct InAppSendBody {
    /// Must match `X-Svc-Client-Id` when both are given.
    #[schema(max_length = 128)]
    tenant_id: String,
    /// An in-app template.
    template_id: i64,
    /// 0 is allowed here: the dashboard's smoke test.
    #[schema(minimum = 0)]
    player_id: i64,
    /// The language to render; the template's default without it.
    #[schema(max_length = 64)]
    language_id: Option<String>,
    /// Values of the template's placeholders (strings).
    placeholders: Option<HashMap<String, String>>,
    /// Forwarded into the websocket payload and the stored record.
    #[schema(max_length = 128)]
    vertical: Option<String>,
    #[schema(max_length = 128)]
    category: Option<String>,
    #[schema(max_length = 128)]
    subcategory: Option<String>,
}

/// `GET /api/v1/tenants/`: `{ "tenants": [{ "tenant_id" }] }`. With `X-Svc-Client-Id` it verifies the
/// selection: 200 with that one tenant when it is known, 403 `FORBIDDEN` when not.
#[utoipa::path(get, path = "/api/v1/tenants/", tag = "push editor", params(EditorHeaders), responses((status = 200, description = "`{ \"tenants\": [{ \"tenant_id\", \"default_language\" }] }` (`default_language` only when one is configured)", body = Value)))]
async fn tenants(State(state): State<Shared>, editor: Editor) -> Result<Json<Value>, PushError> {
    let configured = &state.settings.tenants;
    let known = records::known_tenants(state.ports.documents.as_ref(), configured, state.policy.as_ref().ok()).await?;
    let languages = &state.settings.tenant_languages;
    let row = |tenant: &String| records::tenant_row(tenant, languages);
    let listed: Vec<Value> = match &editor.tenant {
        Some(selected) if known.contains(selected) => vec![row(selected)],
        Some(_) => return Err(PushError::forbidden("the selected tenant (X-Svc-Client-Id) is not known here")),
        None => known.iter().map(row).collect(),
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
#[utoipa::path(get, path = "/api/v1/webpush/activity", tag = "push editor", params(EditorHeaders, ActivityParams), responses((status = 200, description = "`{ items, total, limit, offset }`, newest first", body = Value)))]
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
#[utoipa::path(get, path = "/api/v1/webpush/notifications/{id}", tag = "push editor", params(EditorHeaders, ("id" = String, Path, description = "The notification id")), responses((status = 200, description = "The activity record with its `events`", body = Value)))]
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
/// `language_enabled_id`, `placeholders`, `data`), run as the `notifications` plugin's action (see `send.rs`).
/// `player_id` 0 is allowed here: the dashboard's smoke test. The template is checked first, so a missing
/// template or language and a render failure are 404 / 400 before anything runs.
#[utoipa::path(post, path = "/api/v1/webpush/send", tag = "push editor", params(EditorHeaders, IdempotencyHeader), request_body = WebPushSendBody, responses((status = 200, description = "The action's result (`notification_id`, `player_id`, `status`, `delivered`, `invalidated_subscriptions`); `delivered: false` on a skip-forward. 422 `SEND_FAILED`, 503 `SEND_RETRYABLE` or `SENDER_NOT_RUNNING` otherwise", body = Value)))]
async fn send_webpush(
    State(state): State<Shared>,
    editor: Editor,
    headers: HeaderMap,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let mut f = Fields::new(&body);
    f.deny_unknown(&["tenant_id", "player_id", "template_id", "language_enabled_id", "placeholders", "data"]);
    let tenant_id = f.required_str("tenant_id", 128);
    let player_id = f.player_id("player_id", true);
    let template_id = f.required_i64("template_id");
    let language = f.required_str("language_enabled_id", 64);
    let placeholders = f.optional_string_map("placeholders").unwrap_or_default();
    let data = f.optional_object("data").map(|data| Value::Object(data.clone()));
    if data.as_ref().is_some_and(|data| data.to_string().len() > MAX_PASSTHROUGH_DATA_BYTES) {
        f.error("data", format!("must be at most {MAX_PASSTHROUGH_DATA_BYTES} bytes as JSON"));
    }
    f.finish()?;
    let (Some(tenant_id), Some(player_id), Some(template_id), Some(language)) =
        (tenant_id, player_id, template_id, language)
    else {
        return Err(PushError::internal());
    };
    let tenant_id = editor.tenant_for(Some(tenant_id), "tenant_id")?.unwrap_or_default();
    channel_disabled(&state, Channel::WebPush, "WEB_PUSH")?;
    let template = crate::templates::load(&state, &editor, Channel::WebPush, template_id).await?;
    if template.tenant_id != tenant_id {
        return Err(PushError::not_found("no such template"));
    }
    template.render(&language, &placeholders, &state.settings.targets).map_err(PushError::validation)?;
    let mut input = json!({
        "tenant_id": tenant_id, "player_id": player_id, "template_id": template_id,
        "language_enabled_id": language, "placeholders": placeholders,
    });
    if let Some(data) = data {
        input["data"] = data;
    }
    let result = send::run(&state, SendChannel::WebPush, &tenant_id, &input, &headers).await?;
    info!(admin_user = editor.admin_user.as_deref(), template_id, status = %result["status"], "web-push send");
    Ok(Json(result))
}

/// `POST /api/v1/templates/in-app/send` with a `send_inapp` input (`tenant_id`, `template_id`, `player_id`,
/// `language_id?`, `placeholders?`, `vertical?`, `category?`, `subcategory?`), run as the `notifications`
/// plugin's action (see `send.rs`).
#[utoipa::path(post, path = "/api/v1/templates/in-app/send", tag = "push editor", params(EditorHeaders, IdempotencyHeader), request_body = InAppSendBody, responses((status = 200, description = "The action's result (`notification_id`, `delivered`); `delivered: false` on a skip-forward. 422 `SEND_FAILED`, 503 `SEND_RETRYABLE` or `SENDER_NOT_RUNNING` otherwise", body = Value)))]
async fn send_inapp(
    State(state): State<Shared>,
    editor: Editor,
    headers: HeaderMap,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    const LABELS: [&str; 3] = ["vertical", "category", "subcategory"];
    let mut f = Fields::new(&body);
    f.deny_unknown(&[
        "tenant_id",
        "template_id",
        "player_id",
        "language_id",
        "placeholders",
        "vertical",
        "category",
        "subcategory",
    ]);
    let tenant_id = f.required_str("tenant_id", 128);
    let template_id = f.required_i64("template_id");
    let player_id = f.player_id("player_id", true);
    let language = f.optional_str("language_id", 64);
    let placeholders = f.optional_string_map("placeholders").unwrap_or_default();
    let labels: Vec<(&str, Option<String>)> = LABELS.iter().map(|name| (*name, f.optional_str(name, 128))).collect();
    f.finish()?;
    let (Some(tenant_id), Some(template_id), Some(player_id)) = (tenant_id, template_id, player_id) else {
        return Err(PushError::internal());
    };
    let tenant_id = editor.tenant_for(Some(tenant_id), "tenant_id")?.unwrap_or_default();
    channel_disabled(&state, Channel::InApp, "IN_APP")?;
    let mut input = json!({
        "tenant_id": tenant_id, "template_id": template_id, "player_id": player_id, "placeholders": placeholders,
    });
    if let Some(language) = language {
        input["language_id"] = json!(language);
    }
    for (name, value) in labels {
        if let Some(value) = value {
            input[name] = json!(value);
        }
    }
    let result = send::run(&state, SendChannel::InApp, &tenant_id, &input, &headers).await?;
    info!(admin_user = editor.admin_user.as_deref(), template_id, delivered = %result["delivered"], "in-app send");
    Ok(Json(result))
}
