//! The five push-platform routes a bridge calls with a caller token: client config, subscription create and
//! deactivate, browser events (authenticated by the interaction token) and semantic events. Every handler takes
//! a [`PlatformCaller`], so the policy (token, route, source app) is checked before the body is read; tenant
//! scope comes from the body (`subscriptions`, `deactivate`, `semantic`), from the token (`browser`) or is
//! skipped (`client-config`). Bodies ignore unknown fields, so a bridge may forward more than the spec lists.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_core::collections::{WEBPUSH_EVENTS, WEBPUSH_SUBSCRIPTIONS};
use flowhost_core::config::Channel;
use flowhost_webpush::fields::{Fields, MAX_ID_LEN};
use flowhost_webpush::{targets, token, vapid};
use serde_json::{json, Value};
use tracing::{debug, info};

use crate::auth::PlatformCaller;
use crate::body::JsonObject;
use crate::error::PushError;
use crate::records::{self, iso, subscription_id, user_identity};
use crate::{PushState, PAYLOAD_VERSION};

type Shared = Arc<PushState>;

const MAX_TENANT_LEN: usize = 128;
const MAX_ENDPOINT_LEN: usize = 2048;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/v1/webpush/client-config", get(client_config))
        .route("/api/v1/service/webpush/subscriptions", post(subscribe))
        .route("/api/v1/service/webpush/subscriptions/deactivate", post(deactivate))
        .route("/api/v1/service/webpush/events/browser", post(browser_event))
        .route("/api/v1/service/webpush/events/semantic", post(semantic_event))
}

fn accepted() -> impl IntoResponse {
    (StatusCode::ACCEPTED, Json(json!({ "status": "accepted" })))
}

/// `GET /api/v1/webpush/client-config`: the VAPID public key, once the environment can really deliver.
async fn client_config(State(state): State<Shared>, _caller: PlatformCaller) -> Result<Json<Value>, PushError> {
    let settings = &state.settings;
    let mut reasons = Vec::new();
    if !state.channel_enabled(Channel::WebPush) {
        reasons.push("WEB_PUSH is not in FLOWHOST_CHANNELS_ENABLED".to_owned());
    }
    match &settings.vapid {
        None => reasons.push(
            "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY and FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY must both be set".to_owned(),
        ),
        Some(keys) if keys.temporary => {
            reasons.push("the VAPID keypair is temporary (FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID)".to_owned())
        }
        Some(_) => {}
    }
    if settings.dry_run {
        reasons.push("WEB_PUSH_DRY_RUN is true".to_owned());
    }
    match (&settings.vapid, reasons.is_empty()) {
        (Some(keys), true) => Ok(Json(json!({ "public_key": keys.public_key, "payload_version": PAYLOAD_VERSION }))),
        _ => Err(PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PUSH_ENV_NOT_READY",
            "web push is not ready in this environment",
        )
        .with_details(json!({ "reasons": reasons }))),
    }
}

/// Checks a base64url key of a push subscription and its decoded length.
fn check_key(fields: &mut Fields<'_>, name: &str, value: Option<String>, len: usize, what: &str) {
    let Some(value) = value else { return };
    match vapid::decode_base64url(&value) {
        None => fields.error(name, "must be base64url"),
        Some(bytes) if bytes.len() != len || (len == 65 && bytes[0] != 0x04) => {
            fields.error(name, format!("must be {what} ({len} bytes), got {} bytes", bytes.len()))
        }
        Some(_) => {}
    }
}

/// `POST /api/v1/service/webpush/subscriptions`: stores (or reactivates) the subscription of one endpoint.
async fn subscribe(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let allow_zero = state.settings.smoke_test_callers.contains(&caller.caller.id);
    let mut f = Fields::new(&body);
    let tenant_id = f.required_str("tenant_id", MAX_TENANT_LEN);
    let player_id = f.player_id("player_id", allow_zero);
    let endpoint = f.required_str("endpoint", MAX_ENDPOINT_LEN);
    if let Some(endpoint) = &endpoint {
        match targets::check_scheme(endpoint) {
            Ok(url) if url.scheme() == "https" => {}
            _ => f.error("endpoint", "must be an https URL"),
        }
    }
    let mut keys = None;
    if let Some(map) = f.required_object("keys") {
        keys = f.nested("keys", map, |k| {
            let p256dh = k.required_str("p256dh", 256);
            let auth = k.required_str("auth", 64);
            check_key(k, "p256dh", p256dh.clone(), 65, "an uncompressed P-256 public key");
            check_key(k, "auth", auth.clone(), 16, "an authentication secret");
            Some(json!({ "p256dh": p256dh?, "auth": auth? }))
        });
    }
    let user_agent = f.optional_text("user_agent", 1024);
    let platform = f.optional_str("platform", 32).unwrap_or_else(|| "web".to_owned());
    if platform != "web" {
        f.error("platform", "must be web");
    }
    f.finish()?;
    let (Some(tenant_id), Some(player_id), Some(endpoint), Some(keys)) = (tenant_id, player_id, endpoint, keys) else {
        return Err(PushError::internal());
    };
    caller.check_tenant(&tenant_id)?;

    let documents = &state.ports.documents;
    let id = subscription_id(&endpoint);
    let now = state.ports.clock.now_ms();
    let existing = documents.get(WEBPUSH_SUBSCRIPTIONS, &id).await?;
    let mut created_at = iso(now);
    if let Some(existing) = &existing {
        let old_tenant = existing["tenant_id"].as_str().unwrap_or_default();
        // Moving an endpoint to another tenant needs the right to act for the tenant that holds it.
        caller.check_tenant(old_tenant)?;
        if old_tenant == tenant_id && existing["player_id"].as_i64() == Some(player_id) {
            created_at = existing["created_at"].as_str().map(str::to_owned).unwrap_or(created_at);
        }
    }
    let doc = json!({
        "id": id,
        "tenant_id": tenant_id,
        "player_id": player_id,
        "user_identity": user_identity(&tenant_id, player_id),
        "endpoint": endpoint,
        "keys": keys,
        "user_agent": user_agent,
        "platform": platform,
        "status": "active",
        "created_at": created_at,
        "updated_at": iso(now),
        "deactivated_at": null,
        "caller_id": caller.caller.id,
        "source_app": caller.source_app,
    });
    documents.upsert(WEBPUSH_SUBSCRIPTIONS, &id, doc).await?;
    records::register_tenant(documents.as_ref(), &tenant_id, now).await?;
    info!(caller = caller.caller.id, reactivated = existing.is_some(), "web-push subscription stored");
    let response = json!({
        "id": id,
        "tenant_id": tenant_id,
        "player_id": player_id,
        "endpoint": endpoint,
        "platform": platform,
        "created_at": created_at,
    });
    Ok((StatusCode::CREATED, Json(response)))
}

/// `POST /api/v1/service/webpush/subscriptions/deactivate`: deactivates one endpoint when the whole tuple
/// matches; `{ "deactivated": false }` (200) when no subscription matches.
async fn deactivate(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let allow_zero = state.settings.smoke_test_callers.contains(&caller.caller.id);
    let mut f = Fields::new(&body);
    let tenant_id = f.required_str("tenant_id", MAX_TENANT_LEN);
    let player_id = f.player_id("player_id", allow_zero);
    let endpoint = f.required_str("endpoint", MAX_ENDPOINT_LEN);
    f.finish()?;
    let (Some(tenant_id), Some(player_id), Some(endpoint)) = (tenant_id, player_id, endpoint) else {
        return Err(PushError::internal());
    };
    caller.check_tenant(&tenant_id)?;

    let documents = &state.ports.documents;
    let id = subscription_id(&endpoint);
    let Some(mut doc) = documents.get(WEBPUSH_SUBSCRIPTIONS, &id).await? else {
        return Ok(Json(json!({ "deactivated": false })));
    };
    let matches = doc["tenant_id"].as_str() == Some(tenant_id.as_str())
        && doc["player_id"].as_i64() == Some(player_id)
        && doc["endpoint"].as_str() == Some(endpoint.as_str());
    if !matches {
        return Ok(Json(json!({ "deactivated": false })));
    }
    if doc["status"] != "deactivated" {
        let now = iso(state.ports.clock.now_ms());
        doc["status"] = json!("deactivated");
        doc["deactivated_at"] = json!(now);
        doc["updated_at"] = json!(now);
        documents.replace(WEBPUSH_SUBSCRIPTIONS, &id, doc).await?;
        info!(caller = caller.caller.id, "web-push subscription deactivated");
    }
    Ok(Json(json!({ "deactivated": true })))
}

/// The fields every interaction event has, validated.
struct EventBase {
    event_id: Option<String>,
    delivery_id: Option<String>,
    notification_id: Option<String>,
    occurred_at: Option<String>,
    metadata: Value,
}

fn event_base(f: &mut Fields<'_>) -> EventBase {
    EventBase {
        event_id: f.required_str("event_id", MAX_ID_LEN),
        delivery_id: f.required_str("delivery_id", MAX_ID_LEN),
        notification_id: f.required_str("notification_id", MAX_ID_LEN),
        occurred_at: f.required_timestamp("occurred_at"),
        metadata: f.optional_object("metadata").map(|m| Value::Object(m.clone())).unwrap_or_else(|| json!({})),
    }
}

/// `POST /api/v1/service/webpush/events/browser`: a `displayed`, `clicked` or `closed` report from a service
/// worker, authenticated by its interaction token, which also gives tenant and player.
async fn browser_event(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let mut f = Fields::new(&body);
    let base = event_base(&mut f);
    let interaction_token = f.required_str("interaction_token", token::MAX_TOKEN_LEN);
    let event_type = f.required_enum("event_type", &["displayed", "clicked", "closed"]);
    let endpoint = f.optional_text("endpoint", MAX_ENDPOINT_LEN);
    let action_id = f.optional_text("action_id", MAX_ID_LEN).filter(|a| !a.is_empty());
    if action_id.is_some() && event_type.as_deref().is_some_and(|t| t != "clicked") {
        f.error("action_id", "is only allowed on clicked events");
    }
    f.finish()?;
    let (Some(event_id), Some(delivery_id), Some(notification_id), Some(occurred_at), Some(token), Some(event_type)) =
        (base.event_id, base.delivery_id, base.notification_id, base.occurred_at, interaction_token, event_type)
    else {
        return Err(PushError::internal());
    };
    let secrets = state.interaction_secrets().ok_or_else(|| {
        PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PUSH_ENV_NOT_READY",
            "the interaction-token secret is not configured",
        )
        .with_details(json!({ "reasons": ["FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET is not set"] }))
    })?;
    let now = state.ports.clock.now_ms();
    let claims = token::verify(&token, &secrets, now).map_err(|reason| {
        debug!(%reason, caller = caller.caller.id, "browser event refused");
        PushError::unauthorized("the interaction token did not verify; do not retry")
    })?;
    if claims.delivery_id != delivery_id || claims.notification_id != notification_id {
        debug!(caller = caller.caller.id, "browser event refused: token bound to another delivery");
        return Err(PushError::unauthorized("the interaction token is not for this delivery; do not retry"));
    }
    caller.check_tenant(&claims.tenant_id)?;
    let doc = json!({
        "source": "browser",
        "event_id": event_id,
        "event_type": event_type,
        "tenant_id": claims.tenant_id,
        "player_id": claims.player_id,
        "notification_id": notification_id,
        "delivery_id": delivery_id,
        "endpoint": endpoint,
        "action_id": action_id,
        "occurred_at": occurred_at,
        "received_at": iso(now),
        "metadata": base.metadata,
        "caller_id": caller.caller.id,
        "source_app": caller.source_app,
    });
    let id = records::event_id("browser", &claims.tenant_id, claims.player_id, &event_id);
    state.ports.documents.upsert_expiring(WEBPUSH_EVENTS, &id, doc, now.saturating_add(state.retention_ms())).await?;
    Ok(accepted())
}

/// `POST /api/v1/service/webpush/events/semantic`: an `opened` or `read` report from the product server, with
/// explicit identity.
async fn semantic_event(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let mut f = Fields::new(&body);
    let base = event_base(&mut f);
    let event_type = f.required_enum("event_type", &["opened", "read"]);
    let tenant_id = f.required_str("tenant_id", MAX_TENANT_LEN);
    let player_id = f.player_id("player_id", false);
    f.finish()?;
    let (
        Some(event_id),
        Some(delivery_id),
        Some(notification_id),
        Some(occurred_at),
        Some(event_type),
        Some(tenant_id),
        Some(player_id),
    ) = (base.event_id, base.delivery_id, base.notification_id, base.occurred_at, event_type, tenant_id, player_id)
    else {
        return Err(PushError::internal());
    };
    caller.check_tenant(&tenant_id)?;
    let now = state.ports.clock.now_ms();
    let doc = json!({
        "source": "semantic",
        "event_id": event_id,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "player_id": player_id,
        "notification_id": notification_id,
        "delivery_id": delivery_id,
        "occurred_at": occurred_at,
        "received_at": iso(now),
        "metadata": base.metadata,
        "caller_id": caller.caller.id,
        "source_app": caller.source_app,
    });
    let id = records::event_id("semantic", &tenant_id, player_id, &event_id);
    state.ports.documents.upsert_expiring(WEBPUSH_EVENTS, &id, doc, now.saturating_add(state.retention_ms())).await?;
    Ok(accepted())
}
