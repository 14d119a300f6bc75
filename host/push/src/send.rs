//! The editor's send routes run the same action path as a flow: the active `notifications` plugin's
//! `send_webpush` / `send_inapp` with an invocation context of their own (a run id per request, node `editor`,
//! the idempotency key `sha256(run_id + node_id)` a flow step would have), so the records, the idempotency and
//! the outcome classification are the plugin's. A client that repeats a request with the same
//! `Idempotency-Key` header gets the same run id, hence the same notification, and nothing is pushed twice.
//!
//! Answers: the action's result with 200 once delivery was attempted. A skip-forward (no active subscription, an
//! inactive in-app channel) is 200 with the result and `delivered: false`; a permanent failure 422
//! `SEND_FAILED`; a retryable one 503 `SEND_RETRYABLE` with `Retry-After` (the push services' own wait when they
//! gave one); no sender in this deployment 503 `SENDER_NOT_RUNNING`.

use axum::http::{HeaderMap, StatusCode};
use flowhost_core::digest::{idempotency_key, sha256_hex};
use flowhost_core::notify::DeliveryOutcome;
use flowhost_runtime::{InvocationContext, InvokeError, Outcome};
use flowhost_webpush::records::NotificationActivity;
use flowhost_webpush::sender::notification_id;
use serde_json::{json, Value};
use tracing::info;

use crate::error::PushError;
use crate::{PushState, NOTIFICATIONS_PLUGIN};

/// The node id of an editor send in its run.
const EDITOR_NODE: &str = "editor";
/// The longest `Idempotency-Key` header taken.
const MAX_IDEMPOTENCY_KEY: usize = 256;
/// `Retry-After` when nothing says how long to wait: the first backoff of the spec's action retry policy.
const DEFAULT_RETRY_AFTER_SECONDS: u64 = 2;

/// The channel of a send: its action, the notification-id namespace the sender uses, its skip-forward result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendChannel {
    WebPush,
    InApp,
}

impl SendChannel {
    fn action(self) -> &'static str {
        match self {
            SendChannel::WebPush => "send_webpush",
            SendChannel::InApp => "send_inapp",
        }
    }

    fn name(self) -> &'static str {
        match self {
            SendChannel::WebPush => "WEB_PUSH",
            SendChannel::InApp => "IN_APP",
        }
    }

    fn namespace(self) -> &'static str {
        match self {
            SendChannel::WebPush => "webpush",
            SendChannel::InApp => "inapp",
        }
    }

    /// The result a skip-forward answers with: what the action would forward had it delivered.
    fn skipped(self, notification_id: String, input: &Value) -> Value {
        match self {
            SendChannel::WebPush => json!({
                "notification_id": notification_id,
                "player_id": input["player_id"],
                "status": "no_active_subscriptions",
                "delivered": false,
                "invalidated_subscriptions": [],
            }),
            SendChannel::InApp => {
                json!({ "notification_id": notification_id, "delivered": false, "status": "inactive" })
            }
        }
    }
}

/// The header [`run_id`] reads, as the OpenAPI document lists it.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // documentation only
pub(crate) struct IdempotencyHeader {
    /// Repeating a send with the same key sends nothing twice: the same run, hence the same notification.
    #[param(rename = "Idempotency-Key", min_length = 1, max_length = 256, nullable = false)]
    idempotency_key: Option<String>,
}

/// The run id of an editor send: from the client's `Idempotency-Key` when it sent one, else fresh.
fn run_id(headers: &HeaderMap) -> Result<String, PushError> {
    match headers.get("idempotency-key") {
        None => Ok(format!("editor-{}", uuid::Uuid::new_v4())),
        Some(value) => {
            let key = value.to_str().ok().map(str::trim).filter(|k| !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY);
            let key = key.ok_or_else(|| {
                PushError::field("Idempotency-Key", format!("must be 1 to {MAX_IDEMPOTENCY_KEY} visible characters"))
            })?;
            Ok(format!("editor-{}", &sha256_hex(&["editor-send", key])[..32]))
        }
    }
}

/// How long the client should wait before retrying notification `id`: the longest `Retry-After` a push service
/// asked for on a delivery still to retry, else the default.
async fn retry_after(state: &PushState, id: &str) -> u64 {
    let stored = state.ports.documents.get(flowhost_core::collections::WEBPUSH_ACTIVITY, id).await.ok().flatten();
    let activity: Option<NotificationActivity> = stored.and_then(|doc| serde_json::from_value(doc).ok());
    activity
        .iter()
        .flat_map(|a| &a.deliveries)
        .filter(|d| d.delivery.outcome == DeliveryOutcome::Retry)
        .filter_map(|d| d.delivery.retry_after_ms)
        .max()
        .map_or(DEFAULT_RETRY_AFTER_SECONDS, |ms| ms.div_ceil(1000).max(1))
}

/// Runs `channel`'s action on `input` for `tenant_id` as an editor send (see the module documentation).
pub(crate) async fn run(
    state: &PushState,
    channel: SendChannel,
    tenant_id: &str,
    input: &Value,
    headers: &HeaderMap,
) -> Result<Value, PushError> {
    let not_running = |why: &str| {
        PushError::new(StatusCode::SERVICE_UNAVAILABLE, "SENDER_NOT_RUNNING", format!("nothing was sent: {why}"))
            .with_details(json!({ "channel": channel.name() }))
            .with_retry_after(DEFAULT_RETRY_AFTER_SECONDS)
    };
    let store = state.components.as_ref().ok_or_else(|| not_running("this process runs no plugins"))?;
    let plugin = store
        .active(NOTIFICATIONS_PLUGIN)
        .ok_or_else(|| not_running(&format!("the {NOTIFICATIONS_PLUGIN} plugin is not active")))?;
    let run_id = run_id(headers)?;
    let key = idempotency_key(&run_id, EDITOR_NODE);
    let id = notification_id(channel.namespace(), &key);
    let context = InvocationContext {
        tenant_id: Some(tenant_id.to_owned()),
        flow_id: None,
        run_id: Some(run_id.clone()),
        node_id: Some(EDITOR_NODE.to_owned()),
        idempotency_key: key,
        attempt: 1,
    };
    let text = input.to_string();
    let result = plugin.invoke_in(&context, channel.action(), &text, plugin.limits()).await;
    info!(action = channel.action(), run_id, notification_id = id, ok = result.is_ok(), "editor send");
    match result {
        Ok(output) => serde_json::from_str(&output).map_err(|_| PushError::internal()),
        Err(InvokeError::SkipForward(_)) => Ok(channel.skipped(id, input)),
        Err(error) if error.outcome() == Outcome::Retryable => {
            let seconds = retry_after(state, &id).await;
            Err(PushError::new(StatusCode::SERVICE_UNAVAILABLE, "SEND_RETRYABLE", error.to_string())
                .with_details(json!({ "notification_id": id }))
                .with_retry_after(seconds))
        }
        Err(error) => Err(PushError::new(StatusCode::UNPROCESSABLE_ENTITY, "SEND_FAILED", error.to_string())
            .with_details(json!({ "notification_id": id }))),
    }
}
