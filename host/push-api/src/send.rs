//! The editor's send routes run the same action path as a flow: the active `notifications` plugin's
//! `send_webpush` / `send_inapp` with an invocation context of their own (a run id per request, node `editor`,
//! the idempotency key `sha256(run_id + node_id)` a flow step would have), so the records, the idempotency and
//! the outcome classification are the plugin's. A client that repeats a request with the same
//! `Idempotency-Key` header gets the same run id, hence the same notification, and nothing is pushed twice.
//!
//! The plugin runs where the sender role runs, which may be another process: the API process sends the request
//! over the subjects port ([`EDITOR_SEND_SUBJECT`], request/reply, signed like the service transports) and one
//! sender of the deployment answers ([`SendServer`]); in one process the embedded subjects carry it the same way.
//!
//! Answers: the action's result with 200 once delivery was attempted. A skip-forward (no active subscription, an
//! inactive in-app channel) is 200 with the result and `delivered: false`; a permanent failure 422
//! `SEND_FAILED`; a retryable one (or no answer within [`SEND_TIMEOUT`]) 503 `SEND_RETRYABLE` with `Retry-After`
//! (the push services' own wait when they gave one); a sender without its VAPID pair or interaction-token secret
//! 503 `PUSH_ENV_NOT_READY`; no sender in this deployment 503 `SENDER_NOT_RUNNING`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use flowhost_components::ComponentStore;
use flowhost_core::digest::{idempotency_key, sha256_hex};
use flowhost_core::notify::DeliveryOutcome;
use flowhost_core::ports::{PortError, Ports, SubjectStream};
use flowhost_core::signing::SIGNATURE_HEADER;
use flowhost_notifications::records::NotificationActivity;
use flowhost_notifications::sender::notification_id;
use flowhost_runtime::{InvocationContext, InvokeError, Outcome};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::PushError;
use crate::{PushState, NOTIFICATIONS_PLUGIN};

/// The subject an editor send travels on from the API process to a sender (queue group
/// `<engine.group_id>.sender`, so one sender of a deployment takes each).
pub(crate) const EDITOR_SEND_SUBJECT: &str = "flowhost.push.editor-send";
/// How long the API waits for a sender's answer: a send to a slow push service takes the push client's own
/// timeouts, so this is longer than one of them.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// The spec's code for a sender without its VAPID pair or interaction-token secret.
const PUSH_ENV_NOT_READY: &str = "PUSH_ENV_NOT_READY";

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
    // Best effort: without the record (unreadable or gone), the default.
    let activity = flowhost_core::stored::Collection::<NotificationActivity>::new(state.ports.documents.clone())
        .get(id)
        .await
        .ok()
        .flatten();
    activity
        .iter()
        .flat_map(|a| &a.deliveries)
        .filter(|d| d.delivery.outcome == DeliveryOutcome::Retry)
        .filter_map(|d| d.delivery.retry_after_ms)
        .max()
        .map_or(DEFAULT_RETRY_AFTER_SECONDS, |ms| ms.div_ceil(1000).max(1))
}

/// An editor send as the API process hands it to a sender.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SendRequest {
    /// `send_webpush` or `send_inapp`.
    action: String,
    tenant_id: String,
    /// The run id; the idempotency key is derived from it and the editor node as a flow step's would be.
    run_id: String,
    /// The action's input, already checked by the editor route.
    input: Value,
}

/// A sender's answer to a [`SendRequest`]: the invocation's class and what goes with it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub(crate) enum SendReply {
    Success {
        output: Value,
    },
    SkipForward,
    Retryable {
        message: String,
    },
    Permanent {
        message: String,
    },
    /// The sender cannot send at all: `code` is `PUSH_ENV_NOT_READY` (no VAPID pair or interaction-token secret)
    /// or `SENDER_NOT_RUNNING` (the `notifications` plugin is not active there).
    NotReady {
        code: String,
        message: String,
    },
}

/// The answer when no sender took the request.
fn not_running(channel: SendChannel, why: &str) -> PushError {
    PushError::new(StatusCode::SERVICE_UNAVAILABLE, "SENDER_NOT_RUNNING", format!("nothing was sent: {why}"))
        .with_details(json!({ "channel": channel.name() }))
        .with_retry_after(DEFAULT_RETRY_AFTER_SECONDS)
}

/// Runs `channel`'s action on `input` for `tenant_id` as an editor send (see the module documentation): the
/// request goes to a sender of this deployment over [`EDITOR_SEND_SUBJECT`], and its answer is the route's.
pub(crate) async fn run(
    state: &PushState,
    channel: SendChannel,
    tenant_id: &str,
    input: &Value,
    headers: &HeaderMap,
) -> Result<Value, PushError> {
    let run_id = run_id(headers)?;
    let id = notification_id(channel.namespace(), &idempotency_key(&run_id, EDITOR_NODE));
    let request = SendRequest {
        action: channel.action().to_owned(),
        tenant_id: tenant_id.to_owned(),
        run_id: run_id.clone(),
        input: input.clone(),
    };
    let payload = serde_json::to_vec(&request).map_err(|_| PushError::internal())?;
    let signed = state.ports.signing.headers(&payload);
    let subjects = &state.ports.subjects;
    let reply = match subjects.request_with_headers(EDITOR_SEND_SUBJECT, signed, payload, SEND_TIMEOUT).await {
        Ok(message) => {
            if let Err(error) = state.ports.signing.verify(message.header(SIGNATURE_HEADER), &message.payload) {
                warn!(%error, "a sender's answer to an editor send was refused");
                return Err(PushError::internal());
            }
            serde_json::from_slice::<SendReply>(&message.payload).map_err(|error| {
                warn!(%error, "a sender's answer to an editor send does not parse");
                PushError::internal()
            })?
        }
        Err(PortError::NoResponders(_)) => return Err(not_running(channel, "no sender runs in this deployment")),
        Err(PortError::Timeout(_)) => SendReply::Retryable {
            message: format!("no sender answered within {} s; the send may still complete", SEND_TIMEOUT.as_secs()),
        },
        Err(error) => return Err(error.into()),
    };
    let outcome = match &reply {
        SendReply::Success { .. } => "success",
        SendReply::SkipForward => "skip-forward",
        SendReply::Retryable { .. } => "retryable",
        SendReply::Permanent { .. } => "permanent",
        SendReply::NotReady { .. } => "not-ready",
    };
    info!(action = channel.action(), run_id, notification_id = id, outcome, "editor send");
    match reply {
        SendReply::Success { output } => Ok(output),
        SendReply::SkipForward => Ok(channel.skipped(id, input)),
        SendReply::Retryable { message } => {
            let seconds = retry_after(state, &id).await;
            Err(PushError::new(StatusCode::SERVICE_UNAVAILABLE, "SEND_RETRYABLE", message)
                .with_details(json!({ "notification_id": id }))
                .with_retry_after(seconds))
        }
        SendReply::Permanent { message } => {
            Err(PushError::new(StatusCode::UNPROCESSABLE_ENTITY, "SEND_FAILED", message)
                .with_details(json!({ "notification_id": id })))
        }
        SendReply::NotReady { code, message } if code == PUSH_ENV_NOT_READY => Err(PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            PUSH_ENV_NOT_READY,
            format!("nothing was sent: {message}"),
        )
        .with_details(json!({ "channel": channel.name(), "reasons": [message] }))
        .with_retry_after(DEFAULT_RETRY_AFTER_SECONDS)),
        SendReply::NotReady { message, .. } => Err(not_running(channel, &message)),
    }
}

/// The sender's side of editor sends: answers [`SendRequest`]s with the `notifications` plugin, one replica of
/// a deployment per request (the queue group).
#[derive(Clone)]
pub(crate) struct SendServer {
    pub(crate) store: Arc<ComponentStore>,
    pub(crate) ports: Ports,
    /// Why this sender cannot deliver (missing VAPID pair or token secret), answered as `PUSH_ENV_NOT_READY`.
    pub(crate) not_ready: Option<String>,
}

impl std::fmt::Debug for SendServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendServer").field("not_ready", &self.not_ready).finish_non_exhaustive()
    }
}

impl SendServer {
    /// Subscribes to editor sends in the queue group `group` and serves them until `shutdown`, subscribing again
    /// (with capped backoff) while the subjects backend refuses and when a subscription ends; `subscribed` says
    /// whether one is live (the sender's readiness).
    pub(crate) async fn serve_subscribed(
        self,
        group: String,
        subscribed: Arc<AtomicBool>,
        shutdown: CancellationToken,
    ) {
        let subjects = self.ports.subjects.clone();
        while let Some(requests) =
            flowhost_core::ports::subscribe_until_done(subjects.as_ref(), EDITOR_SEND_SUBJECT, Some(&group), &shutdown)
                .await
        {
            subscribed.store(true, Ordering::Relaxed);
            self.clone().serve(requests, shutdown.clone()).await;
            subscribed.store(false, Ordering::Relaxed);
        }
    }

    /// Takes the requests of `stream` (a queue subscription to [`EDITOR_SEND_SUBJECT`], taken before the role
    /// reports ready) until `shutdown`. Requests that are unsigned where signing is on, or that do not parse,
    /// are not answered (the client's request times out and learns nothing).
    pub(crate) async fn serve(self, mut stream: SubjectStream, shutdown: CancellationToken) {
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => return,
                message = stream.next() => message,
            };
            let Some(message) = message else { return warn!("the editor-send subscription ended") };
            let Some(reply_to) = message.reply.clone() else { continue };
            if let Err(error) = self.ports.signing.verify(message.header(SIGNATURE_HEADER), &message.payload) {
                warn!(%error, "an editor-send request was refused");
                continue;
            }
            let Ok(request) = serde_json::from_slice::<SendRequest>(&message.payload) else {
                warn!("an editor-send request that does not parse was dropped");
                continue;
            };
            let server = self.clone();
            tokio::spawn(async move {
                let reply = server.handle(request).await;
                let payload = serde_json::to_vec(&reply).unwrap_or_default();
                let signed = server.ports.signing.headers(&payload);
                if let Err(error) = server.ports.subjects.respond_with_headers(&reply_to, signed, payload).await {
                    debug!(%error, "an editor-send answer was not delivered");
                }
            });
        }
    }

    async fn handle(&self, request: SendRequest) -> SendReply {
        if let Some(reason) = &self.not_ready {
            return SendReply::NotReady { code: PUSH_ENV_NOT_READY.to_owned(), message: reason.clone() };
        }
        if !matches!(request.action.as_str(), "send_webpush" | "send_inapp") {
            return SendReply::Permanent { message: format!("unknown action {:?}", request.action) };
        }
        let Some(plugin) = self.store.active(NOTIFICATIONS_PLUGIN) else {
            return SendReply::NotReady {
                code: "SENDER_NOT_RUNNING".to_owned(),
                message: format!("the {NOTIFICATIONS_PLUGIN} plugin is not active on the sender"),
            };
        };
        let context = InvocationContext {
            tenant_id: Some(request.tenant_id),
            flow_id: None,
            node_id: Some(EDITOR_NODE.to_owned()),
            idempotency_key: idempotency_key(&request.run_id, EDITOR_NODE),
            run_id: Some(request.run_id),
            attempt: 1,
            smoke_test: true,
        };
        let input = request.input.to_string();
        match plugin.invoke_in(&context, &request.action, &input, plugin.limits()).await {
            Ok(output) => match serde_json::from_str(&output) {
                Ok(output) => SendReply::Success { output },
                Err(_) => SendReply::Permanent { message: "the action's result is not JSON".to_owned() },
            },
            Err(InvokeError::SkipForward(_)) => SendReply::SkipForward,
            Err(error) if error.outcome() == Outcome::Retryable => {
                SendReply::Retryable { message: error.public_message() }
            }
            Err(error) => SendReply::Permanent { message: error.public_message() },
        }
    }
}
