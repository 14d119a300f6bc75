//! In-app messages on the push-api role: the bridge's routes (caller policy, like the push-platform routes) and
//! the players' websockets.
//!
//! Bridge routes (`Authorization: Bearer <caller token>`, `X-Source-App`; tenant scope from the body or query):
//! - `POST /api/v1/service/inapp/connect-tokens` `{tenant_id, player_id}` -> 201 `{token, expires_at,
//!   websocket_path}`: a connect token for that player, valid [`CONNECT_TOKEN_TTL_MS`];
//! - `GET /api/v1/service/inapp/inbox?tenant_id=&player_id=&status=&limit=&offset=` -> `{items, total, unread}`
//!   newest first (`status` `unread` or `read`);
//! - `POST /api/v1/service/inapp/inbox/read` `{tenant_id, player_id, notification_ids}` -> `{marked}`;
//! - `POST /api/v1/service/inapp/subscriptions` `{tenant_id, player_id}` -> `{active: true}` and
//!   `POST /api/v1/service/inapp/subscriptions/deactivate` -> `{deactivated}`: the player's in-app channel (a
//!   send to a deactivated one is a skip-forward).
//!
//! The websocket, `GET /api/v1/inapp/ws?token=<connect token>&after=<cursor>` (the protocol is in the README,
//! "In-app websocket"): a `hello` frame, then missed messages after `after` (oldest first), then every new
//! message as it is sent, `ping` frames every [`HEARTBEAT`] (the client answers `pong`; a connection silent for
//! three heartbeats is closed), and `read` frames from the client mark messages read. [`InAppHub`] keeps this
//! node's connections and takes the messages the sender publishes on the in-app delivery subject, so a player
//! connected to any node receives them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use flowhost_core::config::Channel;
use flowhost_core::ports::Subjects;
use flowhost_webpush::fields::Fields;
use flowhost_webpush::inapp::{self, InAppDelivery, InboxMessage, InboxQuery, INAPP_DELIVERY_SUBJECT};
use flowhost_webpush::token::{self, ConnectClaims};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::auth::PlatformCaller;
use crate::body::JsonObject;
use crate::error::PushError;
use crate::PushState;

type Shared = Arc<PushState>;

/// How long a connect token admits a websocket.
pub const CONNECT_TOKEN_TTL_MS: i64 = 60_000;
/// How often a connection gets a `ping` frame.
pub const HEARTBEAT: Duration = Duration::from_secs(20);
/// Frames queued for one connection; a connection that falls this far behind is closed (1013, try again) and
/// resumes from its cursor on reconnect.
const CONNECTION_QUEUE: usize = 256;
/// Notification ids a connection remembers to drop a message it already has (a redelivered send, or a live
/// message racing the resume).
const REMEMBERED_IDS: usize = 1024;
/// The websocket path, as the connect-token route names it.
pub const WEBSOCKET_PATH: &str = "/api/v1/inapp/ws";
const MAX_TENANT_LEN: usize = 128;
const MAX_READ_IDS: usize = 200;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/v1/service/inapp/connect-tokens", post(connect_token))
        .route("/api/v1/service/inapp/inbox", get(list_inbox))
        .route("/api/v1/service/inapp/inbox/read", post(mark_read))
        .route("/api/v1/service/inapp/subscriptions", post(activate))
        .route("/api/v1/service/inapp/subscriptions/deactivate", post(deactivate))
        .route(WEBSOCKET_PATH, get(websocket))
}

/// A `message` frame queued for a connection, with its notification id (to drop duplicates).
#[derive(Clone)]
struct Frame {
    notification_id: Arc<str>,
    text: Utf8Bytes,
}

type Connections = HashMap<String, Vec<(u64, mpsc::Sender<Frame>)>>;

/// The connections of this node, by player (`user_identity`).
#[derive(Default)]
pub struct InAppHub {
    connections: Mutex<Connections>,
    next_id: AtomicU64,
    open: AtomicU64,
}

impl std::fmt::Debug for InAppHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InAppHub").field("open", &self.open()).finish()
    }
}

impl InAppHub {
    /// How many websockets are open on this node.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.connections.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn register(&self, identity: &str) -> (u64, mpsc::Receiver<Frame>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(CONNECTION_QUEUE);
        self.lock().entry(identity.to_owned()).or_default().push((id, sender));
        self.open.fetch_add(1, Ordering::Relaxed);
        (id, receiver)
    }

    fn unregister(&self, identity: &str, id: u64) {
        let mut connections = self.lock();
        if let Some(list) = connections.get_mut(identity) {
            list.retain(|(other, _)| *other != id);
            if list.is_empty() {
                connections.remove(identity);
            }
        }
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Queues `delivery` for the player's connections on this node; a connection whose queue is full is
    /// dropped (it resumes on reconnect). Answers how many connections got it.
    pub fn deliver(&self, delivery: &InAppDelivery) -> usize {
        let identity = &delivery.message.user_identity;
        let frame = Frame {
            notification_id: delivery.message.notification_id.as_str().into(),
            text: message_frame(&delivery.message).to_string().into(),
        };
        let mut connections = self.lock();
        let Some(list) = connections.get_mut(identity) else { return 0 };
        let mut delivered = 0;
        list.retain(|(_, sender)| match sender.try_send(frame.clone()) {
            Ok(()) => {
                delivered += 1;
                true
            }
            Err(_) => false,
        });
        delivered
    }

    /// Takes what the sender publishes on the in-app delivery subject and delivers it here, until `shutdown`.
    pub async fn run(self: Arc<Self>, subjects: Arc<dyn Subjects>, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut stream = subjects.subscribe(INAPP_DELIVERY_SUBJECT).await?;
        info!(subject = INAPP_DELIVERY_SUBJECT, "in-app delivery listening");
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                message = stream.next() => message,
            };
            let Some(message) = message else {
                anyhow::bail!("the in-app delivery subscription ended");
            };
            match serde_json::from_slice::<InAppDelivery>(&message.payload) {
                Ok(delivery) => {
                    let delivered = self.deliver(&delivery);
                    debug!(notification_id = delivery.message.notification_id, delivered, "in-app message");
                }
                Err(error) => warn!(%error, "an in-app delivery that does not parse was dropped"),
            }
        }
    }
}

/// The `message` frame of an inbox message.
fn message_frame(message: &InboxMessage) -> Value {
    json!({ "type": "message", "message": public_message(message) })
}

/// An inbox message as the bridge and the browser see it.
fn public_message(message: &InboxMessage) -> Value {
    json!({
        "notification_id": message.notification_id,
        "cursor": message.cursor,
        "template_id": message.template_id,
        "language_id": message.language_id,
        "content": message.content,
        "vertical": message.vertical,
        "category": message.category,
        "subcategory": message.subcategory,
        "status": message.status,
        "read_at": message.read_at,
        "created_at": message.created_at,
    })
}

/// The recipient named by a bridge body or query, with the caller's tenant scope checked.
fn recipient(f: &mut Fields<'_>, caller: &PlatformCaller) -> Result<(String, i64), PushError> {
    let tenant_id = f.required_str("tenant_id", MAX_TENANT_LEN);
    let player_id = f.player_id("player_id", false);
    let (Some(tenant_id), Some(player_id)) = (tenant_id, player_id) else {
        return Err(PushError::internal());
    };
    caller.check_tenant(&tenant_id)?;
    Ok((tenant_id, player_id))
}

fn require_in_app(state: &PushState) -> Result<(), PushError> {
    if state.channel_enabled(Channel::InApp) {
        Ok(())
    } else {
        Err(PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "CHANNEL_DISABLED",
            "IN_APP is not in FLOWHOST_CHANNELS_ENABLED",
        ))
    }
}

/// `POST /api/v1/service/inapp/connect-tokens`.
async fn connect_token(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let mut f = Fields::new(&body);
    f.deny_unknown(&["tenant_id", "player_id"]);
    let checked = recipient(&mut f, &caller);
    f.finish()?;
    let (tenant_id, player_id) = checked?;
    require_in_app(&state)?;
    let secret = state.settings.token_secrets.as_ref().map(|(current, _)| current.clone()).ok_or_else(|| {
        PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "PUSH_ENV_NOT_READY",
            "no interaction-token secret is configured",
        )
    })?;
    let expires_at_ms = state.ports.clock.now_ms() + CONNECT_TOKEN_TTL_MS;
    let claims = ConnectClaims { tenant_id, player_id, expires_at_ms };
    let token = token::mint_connect(secret.expose().as_bytes(), &claims);
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "token": token,
            "expires_at": flowhost_webpush::records::iso(expires_at_ms),
            "websocket_path": WEBSOCKET_PATH,
        })),
    ))
}

/// `GET /api/v1/service/inapp/inbox`.
async fn list_inbox(
    State(state): State<Shared>,
    caller: PlatformCaller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, PushError> {
    let query: serde_json::Map<String, Value> = query
        .into_iter()
        .map(|(key, value)| {
            let typed = match key.as_str() {
                "player_id" | "limit" | "offset" => {
                    value.trim().parse::<i64>().map(Value::from).unwrap_or(Value::String(value))
                }
                _ => Value::String(value),
            };
            (key, typed)
        })
        .collect();
    let mut f = Fields::new(&query);
    f.deny_unknown(&["tenant_id", "player_id", "status", "limit", "offset"]);
    let checked = recipient(&mut f, &caller);
    let status = f.optional_str("status", 16);
    if status.as_deref().is_some_and(|s| s != "unread" && s != "read") {
        f.error("status", "must be unread or read");
    }
    let limit = query.get("limit").map(|_| f.required_i64("limit")).unwrap_or(Some(50));
    let offset = query.get("offset").map(|_| f.required_i64("offset")).unwrap_or(Some(0));
    if limit.is_some_and(|l| !(1..=inapp::MAX_PAGE as i64).contains(&l)) {
        f.error("limit", format!("must be between 1 and {}", inapp::MAX_PAGE));
    }
    if offset.is_some_and(|o| o < 0) {
        f.error("offset", "must not be negative");
    }
    f.finish()?;
    let (tenant_id, player_id) = checked?;
    let documents = state.ports.documents.as_ref();
    let page_query =
        InboxQuery { status, after: None, limit: limit.unwrap_or(50) as u64, offset: offset.unwrap_or(0) as u64 };
    let page = inapp::inbox(documents, &tenant_id, player_id, &page_query).await?;
    let unread = inapp::unread_count(documents, &tenant_id, player_id).await?;
    let items: Vec<Value> = page.items.iter().map(public_message).collect();
    Ok(Json(json!({ "items": items, "total": page.total, "unread": unread })))
}

/// `POST /api/v1/service/inapp/inbox/read`.
async fn mark_read(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let mut f = Fields::new(&body);
    f.deny_unknown(&["tenant_id", "player_id", "notification_ids"]);
    let checked = recipient(&mut f, &caller);
    let ids = read_ids(&mut f);
    f.finish()?;
    let (tenant_id, player_id) = checked?;
    let marked = inapp::mark_read(&state.ports, &tenant_id, player_id, &ids).await?;
    Ok(Json(json!({ "marked": marked })))
}

/// `notification_ids`: 1 to [`MAX_READ_IDS`] strings.
fn read_ids(f: &mut Fields<'_>) -> Vec<String> {
    let Some(items) = f.optional_array("notification_ids") else {
        f.error("notification_ids", "is required");
        return Vec::new();
    };
    let ids: Vec<String> = items.iter().filter_map(Value::as_str).map(str::to_owned).collect();
    if ids.len() != items.len() || ids.is_empty() || ids.len() > MAX_READ_IDS {
        f.error("notification_ids", format!("must be 1 to {MAX_READ_IDS} strings"));
    }
    ids
}

/// `POST /api/v1/service/inapp/subscriptions` and `.../deactivate`.
async fn set_channel(
    state: &PushState,
    caller: &PlatformCaller,
    body: &serde_json::Map<String, Value>,
    active: bool,
) -> Result<bool, PushError> {
    let mut f = Fields::new(body);
    f.deny_unknown(&["tenant_id", "player_id"]);
    let checked = recipient(&mut f, caller);
    f.finish()?;
    let (tenant_id, player_id) = checked?;
    Ok(inapp::set_channel(&state.ports, &tenant_id, player_id, active).await?)
}

async fn activate(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    set_channel(&state, &caller, &body, true).await?;
    Ok(Json(json!({ "active": true })))
}

async fn deactivate(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let changed = set_channel(&state, &caller, &body, false).await?;
    Ok(Json(json!({ "deactivated": changed })))
}

#[derive(Deserialize)]
struct WebSocketQuery {
    token: Option<String>,
    after: Option<String>,
}

/// `GET /api/v1/inapp/ws?token=&after=`: 401 `UNAUTHORIZED` without a valid connect token, 503 when the node
/// is at its connection limit; else the upgrade.
async fn websocket(
    State(state): State<Shared>,
    Query(query): Query<WebSocketQuery>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, PushError> {
    let secrets = state.interaction_secrets().unwrap_or_default();
    let claims = query
        .token
        .as_deref()
        .and_then(|token| token::verify_connect(token, &secrets, state.ports.clock.now_ms()).ok())
        .ok_or_else(|| PushError::unauthorized("a valid connect token is required (token query parameter)"))?;
    if query.after.as_ref().is_some_and(|after| after.len() > 200) {
        return Err(PushError::field("after", "is not a cursor"));
    }
    let hub = state.inapp.clone();
    if hub.open() >= state.settings.max_inapp_connections as u64 {
        return Err(PushError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "TOO_MANY_CONNECTIONS",
            "this node is at its websocket limit",
        )
        .with_retry_after(5));
    }
    Ok(upgrade.on_upgrade(move |socket| connection(socket, state, claims, query.after)))
}

/// Remembers the last notification ids a connection got.
struct Seen {
    ids: HashSet<String>,
    order: VecDeque<String>,
}

impl Seen {
    fn new() -> Seen {
        Seen { ids: HashSet::new(), order: VecDeque::new() }
    }

    /// False when `id` was seen before.
    fn insert(&mut self, id: &str) -> bool {
        if !self.ids.insert(id.to_owned()) {
            return false;
        }
        self.order.push_back(id.to_owned());
        if self.order.len() > REMEMBERED_IDS {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        true
    }
}

async fn connection(socket: WebSocket, state: Shared, claims: ConnectClaims, after: Option<String>) {
    let identity = flowhost_webpush::records::user_identity(&claims.tenant_id, claims.player_id);
    let hub = state.inapp.clone();
    let (id, mut queue) = hub.register(&identity);
    let (mut sink, mut incoming) = socket.split();
    let outcome = serve_connection(&state, &claims, after, &mut sink, &mut incoming, &mut queue).await;
    hub.unregister(&identity, id);
    let (code, reason) = match outcome {
        Ok(()) => (1000, "bye"),
        Err(reason) => (reason.0, reason.1),
    };
    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
    debug!(connection = id, code, "in-app websocket closed");
}

type Sink = futures::stream::SplitSink<WebSocket, Message>;
type Incoming = futures::stream::SplitStream<WebSocket>;

async fn send_json(sink: &mut Sink, value: &Value) -> Result<(), (u16, &'static str)> {
    sink.send(Message::Text(value.to_string().into())).await.map_err(|_| (1011, "send failed"))
}

async fn serve_connection(
    state: &PushState,
    claims: &ConnectClaims,
    after: Option<String>,
    sink: &mut Sink,
    incoming: &mut Incoming,
    queue: &mut mpsc::Receiver<Frame>,
) -> Result<(), (u16, &'static str)> {
    let documents = state.ports.documents.as_ref();
    let (tenant_id, player_id) = (claims.tenant_id.as_str(), claims.player_id);
    let unread =
        inapp::unread_count(documents, tenant_id, player_id).await.map_err(|_| (1011, "storage unavailable"))?;
    let hello = json!({ "type": "hello", "tenant_id": tenant_id, "player_id": player_id,
        "heartbeat_interval_ms": HEARTBEAT.as_millis() as u64, "unread": unread });
    send_json(sink, &hello).await?;
    let mut seen = Seen::new();
    if let Some(after) = after {
        let query = InboxQuery { status: None, after: Some(after), limit: inapp::MAX_PAGE, offset: 0 };
        let page =
            inapp::inbox(documents, tenant_id, player_id, &query).await.map_err(|_| (1011, "storage unavailable"))?;
        let count = page.items.len();
        for message in &page.items {
            seen.insert(&message.notification_id);
            send_json(sink, &message_frame(message)).await?;
        }
        let more = page.total > count as u64;
        send_json(sink, &json!({ "type": "resumed", "count": count, "more": more })).await?;
    }
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.tick().await;
    let mut silent_beats = 0u32;
    loop {
        tokio::select! {
            frame = queue.recv() => {
                let Some(frame) = frame else { return Err((1013, "too far behind; reconnect and resume")) };
                if seen.insert(&frame.notification_id) {
                    sink.send(Message::Text(frame.text)).await.map_err(|_| (1011, "send failed"))?;
                }
            }
            received = incoming.next() => {
                let Some(Ok(received)) = received else { return Ok(()) };
                silent_beats = 0;
                match received {
                    Message::Text(text) => client_frame(state, claims, sink, &text).await?,
                    Message::Close(_) => return Ok(()),
                    _ => {}
                }
            }
            _ = heartbeat.tick() => {
                silent_beats += 1;
                if silent_beats > 3 {
                    return Err((1001, "no answer to three heartbeats"));
                }
                send_json(sink, &json!({ "type": "ping" })).await?;
            }
        }
    }
}

/// A frame from the browser: `pong`, or `read` with `notification_ids`.
async fn client_frame(
    state: &PushState,
    claims: &ConnectClaims,
    sink: &mut Sink,
    text: &str,
) -> Result<(), (u16, &'static str)> {
    if text.len() > 64 * 1024 {
        return Err((1009, "frame too large"));
    }
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        return send_json(sink, &json!({ "type": "error", "message": "frames are JSON objects" })).await;
    };
    match frame["type"].as_str() {
        Some("pong") => Ok(()),
        Some("read") => {
            let ids: Vec<String> = frame["notification_ids"]
                .as_array()
                .map(|ids| ids.iter().filter_map(Value::as_str).take(MAX_READ_IDS).map(str::to_owned).collect())
                .unwrap_or_default();
            let marked = inapp::mark_read(&state.ports, &claims.tenant_id, claims.player_id, &ids)
                .await
                .map_err(|_| (1011, "storage unavailable"))?;
            send_json(sink, &json!({ "type": "read", "marked": marked })).await
        }
        _ => send_json(sink, &json!({ "type": "error", "message": "unknown frame type" })).await,
    }
}
