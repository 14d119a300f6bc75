//! The five push-platform routes a bridge calls with a caller token: client config, subscription create and
//! deactivate, browser events (authenticated by the interaction token) and semantic events. Every handler takes
//! a [`PlatformCaller`], so the policy (token, route, source app) is checked before the body is read; tenant
//! scope comes from the body (`subscriptions`, `deactivate`, `semantic`), from the token (`browser`) or is
//! skipped (`client-config`). Bodies ignore unknown fields, so a bridge may forward more than the spec lists.
//! The handlers validate and authorize; storing subscriptions and events is `flowhost_notifications`'s.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use flowhost_notifications::events::{self, EventSource, InteractionEvent};
use flowhost_notifications::fields::{Fields, MAX_ID_LEN};
use flowhost_notifications::push::ece;
use flowhost_notifications::subscriptions::{self, Deactivation, NewSubscription};
use flowhost_notifications::{targets, token, vapid};
use flowhost_role::{routes, ApiRouter};
use serde_json::{json, Map, Value};
use tracing::{debug, info};

use crate::auth::{CallerHeaders, PlatformCaller};
use crate::body::JsonObject;
use crate::error::PushError;
use crate::{PushState, PAYLOAD_VERSION};

type Shared = Arc<PushState>;

const MAX_TENANT_LEN: usize = 128;
const MAX_ENDPOINT_LEN: usize = 2048;

pub(crate) fn routes() -> ApiRouter<Shared> {
    ApiRouter::new()
        .routes(routes!(client_config))
        .routes(routes!(subscribe))
        .routes(routes!(deactivate))
        .routes(routes!(browser_event))
        .routes(routes!(semantic_event))
}

/// A subscription to store (`serviceCreateSubscriptionBody`). Unknown fields are ignored.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct WebPushSubscriptionBody {
    #[schema(max_length = 128)]
    tenant_id: String,
    /// Positive; 0 only for a caller listed in `FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS`.
    player_id: i64,
    /// The browser push service's `https` URL; identifies the subscription.
    #[schema(max_length = 2048)]
    endpoint: String,
    keys: WebPushSubscriptionKeys,
    #[schema(max_length = 1024)]
    user_agent: Option<String>,
    /// `web` (the default).
    #[schema(max_length = 32)]
    platform: Option<String>,
}

/// The keys of a push subscription, both base64url.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct WebPushSubscriptionKeys {
    /// An uncompressed P-256 public key (65 bytes).
    p256dh: String,
    /// The authentication secret (16 bytes).
    auth: String,
}

/// The subscription to deactivate: the whole tuple must match. Unknown fields are ignored.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct WebPushDeactivateBody {
    #[schema(max_length = 128)]
    tenant_id: String,
    /// Positive; 0 only for a caller listed in `FLOWHOST_WEBPUSH_SMOKE_TEST_CALLERS`.
    player_id: i64,
    #[schema(max_length = 2048)]
    endpoint: String,
}

/// A service worker's report (`browserPushEventBody`). Unknown fields are ignored.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct BrowserEventBody {
    #[schema(max_length = 256)]
    event_id: String,
    #[schema(max_length = 256)]
    delivery_id: String,
    #[schema(max_length = 256)]
    notification_id: String,
    /// Verbatim from the delivered payload; gives tenant and player.
    #[schema(max_length = 4096)]
    interaction_token: String,
    #[schema(pattern = "^(displayed|clicked|closed)$")]
    event_type: String,
    /// The endpoint of the current subscription, null when none.
    #[schema(max_length = 2048)]
    endpoint: Option<String>,
    /// Only on `clicked`, when an action button was used: the action's `id`.
    #[schema(max_length = 256)]
    action_id: Option<String>,
    /// ISO 8601 with a time zone.
    #[schema(format = DateTime)]
    occurred_at: String,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

/// A product server's report (`semanticPushEventBody`). Unknown fields are ignored.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct SemanticEventBody {
    #[schema(max_length = 256)]
    event_id: String,
    #[schema(max_length = 256)]
    delivery_id: String,
    #[schema(max_length = 256)]
    notification_id: String,
    #[schema(pattern = "^(opened|read)$")]
    event_type: String,
    #[schema(max_length = 128)]
    tenant_id: String,
    /// Positive.
    player_id: i64,
    /// ISO 8601 with a time zone.
    #[schema(format = DateTime)]
    occurred_at: String,
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
}

fn accepted() -> impl IntoResponse {
    (StatusCode::ACCEPTED, Json(json!({ "status": "accepted" })))
}

/// `GET /api/v1/webpush/client-config`: the VAPID public key, ready exactly as the specification says: both VAPID
/// keys configured (a temporary pair does not count) and `WEB_PUSH_DRY_RUN` false. A disabled web-push channel
/// does not make it unready: the send path answers that (`CHANNEL_DISABLED`).
#[utoipa::path(get, path = "/api/v1/webpush/client-config", tag = "push platform", params(CallerHeaders), responses((status = 200, description = "`{ public_key, payload_version }`; 503 `PUSH_ENV_NOT_READY` with the `reasons` until web push can deliver", body = Value)))]
async fn client_config(State(state): State<Shared>, _caller: PlatformCaller) -> Result<Json<Value>, PushError> {
    let settings = &state.settings;
    let mut reasons = Vec::new();
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

/// Checks a base64url key of a push subscription and its decoded length; the public key (65 bytes) must also be
/// a point on P-256, or no message could ever be encrypted for the subscription.
fn check_key(fields: &mut Fields<'_>, name: &str, value: Option<String>, len: usize, what: &str) {
    let Some(value) = value else { return };
    match vapid::decode_base64url(&value) {
        None => fields.error(name, "must be base64url"),
        Some(bytes) if bytes.len() != len || (len == 65 && bytes[0] != 0x04) => {
            fields.error(name, format!("must be {what} ({len} bytes), got {} bytes", bytes.len()))
        }
        Some(bytes) if len == 65 && ece::check_public_key(&bytes).is_err() => {
            fields.error(name, format!("must be {what}: these 65 bytes are not a point on the P-256 curve"))
        }
        Some(_) => {}
    }
}

/// Checks a subscription body (what `POST /api/v1/service/webpush/subscriptions` stores): every offending field
/// named in one 400 `VALIDATION_ERROR`. `allow_zero` lets a smoke-test caller use player id 0; `caller_id` and
/// `source_app` say who asks.
pub fn new_subscription(
    body: &Map<String, Value>,
    allow_zero: bool,
    caller_id: &str,
    source_app: &str,
) -> Result<NewSubscription, PushError> {
    let mut f = Fields::new(body);
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
            Some((p256dh?, auth?))
        });
    }
    let user_agent = f.optional_text("user_agent", 1024);
    let platform = f.optional_str("platform", 32).unwrap_or_else(|| "web".to_owned());
    if platform != "web" {
        f.error("platform", "must be web");
    }
    f.finish()?;
    let (Some(tenant_id), Some(player_id), Some(endpoint), Some((p256dh, auth))) =
        (tenant_id, player_id, endpoint, keys)
    else {
        return Err(PushError::internal());
    };
    Ok(NewSubscription {
        tenant_id,
        player_id,
        endpoint,
        p256dh,
        auth,
        user_agent,
        platform,
        caller_id: caller_id.to_owned(),
        source_app: source_app.to_owned(),
    })
}

/// `POST /api/v1/service/webpush/subscriptions`: stores (or reactivates) the subscription of one endpoint.
#[utoipa::path(post, path = "/api/v1/service/webpush/subscriptions", tag = "push platform", params(CallerHeaders), request_body = WebPushSubscriptionBody, responses((status = 201, description = "`{ id, tenant_id, player_id, endpoint, platform, created_at }`", body = Value)))]
async fn subscribe(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let allow_zero = state.settings.smoke_test_callers.contains(&caller.caller.id);
    let subscription = new_subscription(&body, allow_zero, &caller.caller.id, &caller.source_app)?;
    caller.check_tenant(&subscription.tenant_id)?;

    let holder = subscriptions::holder(state.ports.documents.as_ref(), &subscription.endpoint).await?;
    if let Some(holder) = &holder {
        // Moving an endpoint to another tenant needs the right to act for the tenant that holds it.
        caller.check_tenant(&holder.tenant_id)?;
    }
    let stored = subscriptions::store(&state.ports, &subscription, holder.as_ref()).await?;
    info!(caller = caller.caller.id, reactivated = holder.is_some(), "web-push subscription stored");
    let response = json!({
        "id": stored.id,
        "tenant_id": subscription.tenant_id,
        "player_id": subscription.player_id,
        "endpoint": subscription.endpoint,
        "platform": subscription.platform,
        "created_at": stored.created_at,
    });
    Ok((StatusCode::CREATED, Json(response)))
}

/// `POST /api/v1/service/webpush/subscriptions/deactivate`: deactivates one endpoint when the whole tuple
/// matches; `{ "deactivated": false }` (200) when no subscription matches.
#[utoipa::path(post, path = "/api/v1/service/webpush/subscriptions/deactivate", tag = "push platform", params(CallerHeaders), request_body = WebPushDeactivateBody, responses((status = 200, description = "`{ deactivated }`: false when no subscription matches", body = Value)))]
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

    let deactivated = match subscriptions::deactivate(&state.ports, &tenant_id, player_id, &endpoint).await? {
        Deactivation::NoMatch => false,
        Deactivation::Deactivated => {
            info!(caller = caller.caller.id, "web-push subscription deactivated");
            true
        }
        Deactivation::AlreadyDeactivated => true,
    };
    Ok(Json(json!({ "deactivated": deactivated })))
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
#[utoipa::path(post, path = "/api/v1/service/webpush/events/browser", tag = "push platform", params(CallerHeaders), request_body = BrowserEventBody, responses((status = 202, description = "`{ \"status\": \"accepted\" }`", body = Value)))]
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
    let event = InteractionEvent {
        source: EventSource::Browser { endpoint, action_id },
        event_id,
        event_type,
        tenant_id: claims.tenant_id,
        player_id: claims.player_id,
        notification_id,
        delivery_id,
        occurred_at,
        received_at_ms: now,
        metadata: base.metadata,
        caller_id: caller.caller.id,
        source_app: caller.source_app,
    };
    events::store_event(state.ports.documents.as_ref(), state.settings.retention, event).await?;
    Ok(accepted())
}

/// `POST /api/v1/service/webpush/events/semantic`: an `opened` or `read` report from the product server, with
/// explicit identity.
#[utoipa::path(post, path = "/api/v1/service/webpush/events/semantic", tag = "push platform", params(CallerHeaders), request_body = SemanticEventBody, responses((status = 202, description = "`{ \"status\": \"accepted\" }`", body = Value)))]
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
    let event = InteractionEvent {
        source: EventSource::Semantic,
        event_id,
        event_type,
        tenant_id,
        player_id,
        notification_id,
        delivery_id,
        occurred_at,
        received_at_ms: state.ports.clock.now_ms(),
        metadata: base.metadata,
        caller_id: caller.caller.id,
        source_app: caller.source_app,
    };
    events::store_event(state.ports.documents.as_ref(), state.settings.retention, event).await?;
    Ok(accepted())
}
