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
//! The websocket, `GET /api/v1/inapp/ws?token=<connect token>&after=<cursor>` (the protocol is in docs/push.md,
//! "The websocket protocol"): a `hello` frame, then missed messages after `after` (oldest first), then every new
//! message as it is sent, `ping` frames every [`HEARTBEAT`] (the client answers `pong`; a connection silent for
//! three heartbeats is closed), and `read` frames from the client mark messages read. [`InAppHub`] keeps this
//! node's connections and, for each player with one here, listens on the player's delivery subject: it takes
//! the messages the sender hands over there and answers how many sockets took each, so a player connected to
//! any node receives them and the sender reports `delivered` only when a socket did.
//!
//! What one client can hold is bounded: a connect token admits one websocket (its nonce is spent in the cache
//! port, so every node agrees), a connection lives until its token expires unless the client sends a `refresh`
//! frame with a fresh token, a player has at most `FLOWHOST_INAPP_MAX_CONNECTIONS_PER_PLAYER` websockets on a
//! node, the node's slot is taken before the upgrade (so parallel upgrades cannot pass the cap), frames from the
//! client are at most [`MAX_CLIENT_FRAME`] bytes (refused from the frame header, before buffering) and
//! [`CLIENT_FRAMES_PER_SECOND`] per second, and a client that stops reading is closed after [`WRITE_TIMEOUT`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::ports::Subjects;
use flowhost_notifications::fields::Fields;
use flowhost_notifications::inapp::{self, DeliveryAnswer, InAppDelivery, InboxMessage, InboxQuery};
use flowhost_notifications::token::{self, ConnectClaims};
use flowhost_notifications::Channel;
use flowhost_role::{routes, ApiRouter};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::auth::{CallerHeaders, PlatformCaller};
use crate::body::JsonObject;
use crate::error::{ErrorBody, PushError};
use crate::PushState;

type Shared = Arc<PushState>;

/// How long a connect token admits a websocket.
pub const CONNECT_TOKEN_TTL_MS: i64 = 60_000;
/// How long a new connection waits for its player's delivery subscription before it reads the inbox.
const LISTEN_WAIT: Duration = Duration::from_secs(2);
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
/// The largest frame (and message) a client may send; a longer one closes the connection with 1009 as soon as
/// its header announces it.
pub const MAX_CLIENT_FRAME: usize = 64 * 1024;
/// A connection's read buffer. Clients send small frames (`pong`, `read`, `refresh`), and a longer one (up to
/// [`MAX_CLIENT_FRAME`]) grows the buffer for itself. tungstenite's default, 128 KiB, is zeroed before every read
/// and held by every connection: 1.4 GB at 10,000 sockets, and a tenth of the node's CPU in the in-app benchmark.
pub const READ_BUFFER: usize = 4 * 1024;
/// How long one write to a client may wait (a client that stops reading fills its buffers): past it the
/// connection is closed (1013) and its slot freed.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Client frames a connection may send per second on average (bursts of twice as many); more close it (1008).
pub const CLIENT_FRAMES_PER_SECOND: u32 = 10;
/// How long before its token expires a connection is told to refresh it.
const REFRESH_NOTICE: Duration = Duration::from_secs(15);
const MAX_TENANT_LEN: usize = 128;
const MAX_READ_IDS: usize = 200;

/// `#[utoipa::path]` takes a literal path: the websocket's, checked against [`WEBSOCKET_PATH`] by the tests.
pub(crate) fn routes() -> ApiRouter<Shared> {
    ApiRouter::new()
        .routes(routes!(connect_token))
        .routes(routes!(list_inbox))
        .routes(routes!(mark_read))
        .routes(routes!(activate))
        .routes(routes!(deactivate))
        .routes(routes!(websocket))
}

/// The player a bridge call is about. Other fields are refused.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handlers read the fields one by one
pub(crate) struct InAppRecipientBody {
    #[schema(max_length = 128)]
    tenant_id: String,
    /// Positive.
    player_id: i64,
}

/// The messages of a player to mark read. Other fields are refused.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct InAppReadBody {
    #[schema(max_length = 128)]
    tenant_id: String,
    /// Positive.
    player_id: i64,
    /// The messages to mark read: 1 to 200.
    #[schema(min_items = 1, max_items = 200)]
    notification_ids: Vec<String>,
}

/// The query of `GET /api/v1/service/inapp/inbox`. Other parameters are refused.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only: the handler reads the query as a map
pub(crate) struct InboxParams {
    #[param(max_length = 128)]
    tenant_id: String,
    /// Positive.
    player_id: i64,
    /// `unread` or `read`; all messages without it.
    #[param(pattern = "^(unread|read)$")]
    status: Option<String>,
    /// 1 to 200; 50 without it.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
    /// 0 without it.
    #[param(minimum = 0)]
    offset: Option<i64>,
}

/// The headers of a websocket handshake, which a websocket client sends by itself: axum's `WebSocketUpgrade`
/// reads them, and answers a handshake without them in plain text.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // documentation only
pub(crate) struct HandshakeHeaders {
    /// Includes `upgrade`.
    #[param(rename = "Connection")]
    connection: String,
    /// `websocket`.
    #[param(rename = "Upgrade")]
    upgrade: String,
    /// `13`.
    #[param(rename = "Sec-WebSocket-Version")]
    version: String,
    #[param(rename = "Sec-WebSocket-Key")]
    key: String,
}

/// A `message` frame queued for a connection, with its notification id (to drop duplicates).
#[derive(Clone)]
pub(crate) struct Frame {
    notification_id: Arc<str>,
    text: Utf8Bytes,
}

/// One player's connections on this node, and the listener of the player's delivery subject, which runs while
/// the player has a connection here.
struct Player {
    connections: Vec<(u64, mpsc::Sender<Frame>)>,
    /// Whether the listener holds its subscription now (a new connection waits for it before reading the inbox).
    listening: watch::Receiver<bool>,
    /// Stops the listener (the player's last connection here is gone).
    stop: CancellationToken,
}

type Players = HashMap<String, Player>;

/// The connections of this node, by player (`user_identity`), and the delivery listeners of those players.
pub struct InAppHub {
    players: Mutex<Players>,
    subjects: Arc<dyn Subjects>,
    /// Cancelled at shutdown: the parent of every listener's stop token.
    stopping: CancellationToken,
    next_id: AtomicU64,
    open: AtomicU64,
}

/// A connection's place in the [`InAppHub`], taken before the upgrade and given back when dropped (the upgrade
/// failed, or the connection ended).
pub(crate) struct Slot {
    hub: Arc<InAppHub>,
    identity: String,
    id: u64,
    /// Whether the player's delivery listener is subscribed (see [`Slot::listening`]).
    listening: watch::Receiver<bool>,
}

impl Slot {
    /// Waits (at most [`LISTEN_WAIT`]) until the player's delivery listener is subscribed, so that a message sent
    /// from now on either reaches the connection live or is in the inbox the connection reads next. With the
    /// subjects backend down it goes on after the wait: the inbox still has every message.
    async fn listening(&mut self) {
        if tokio::time::timeout(LISTEN_WAIT, self.listening.wait_for(|subscribed| *subscribed)).await.is_err() {
            // Debug only: with the subjects backend down every connection lands here, and readiness names it.
            debug!("the player's in-app delivery subscription is not made yet; live messages wait for it");
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.hub.unregister(&self.identity, self.id);
    }
}

/// Why the hub refused a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    Node,
    Player,
}

impl std::fmt::Debug for InAppHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InAppHub").field("open", &self.open()).finish()
    }
}

impl InAppHub {
    /// A hub taking deliveries from `subjects`.
    pub fn new(subjects: Arc<dyn Subjects>) -> InAppHub {
        InAppHub {
            players: Mutex::default(),
            subjects,
            stopping: CancellationToken::new(),
            next_id: AtomicU64::new(0),
            open: AtomicU64::new(0),
        }
    }

    /// How many websockets are open on this node.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Players> {
        self.players.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot for a connection of `identity` (`tenant_id`, `player_id`), unless the node has `max_open`
    /// connections or the player `max_per_player`: checked and taken under one lock, so parallel upgrades cannot
    /// pass either cap. The player's first connection here starts the listener of its delivery subject.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        (tenant_id, player_id): (&str, i64),
        max_open: usize,
        max_per_player: usize,
    ) -> Result<(Slot, mpsc::Receiver<Frame>), Full> {
        let identity = flowhost_notifications::records::user_identity(tenant_id, player_id);
        let mut players = self.lock();
        if self.open.load(Ordering::Relaxed) >= max_open as u64 {
            return Err(Full::Node);
        }
        if players.get(&identity).is_some_and(|player| player.connections.len() >= max_per_player) {
            return Err(Full::Player);
        }
        let player = players.entry(identity.clone()).or_insert_with(|| {
            let (subscribed, listening) = watch::channel(false);
            let stop = self.stopping.child_token();
            let subject = inapp::player_subject(tenant_id, player_id);
            tokio::spawn(self.clone().listen(subject, subscribed, stop.clone()));
            Player { connections: Vec::new(), listening, stop }
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel(CONNECTION_QUEUE);
        player.connections.push((id, sender));
        let listening = player.listening.clone();
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok((Slot { hub: self.clone(), identity, id, listening }, receiver))
    }

    fn unregister(&self, identity: &str, id: u64) {
        let mut players = self.lock();
        if let Some(player) = players.get_mut(identity) {
            player.connections.retain(|(other, _)| *other != id);
            if player.connections.is_empty() {
                player.stop.cancel();
                players.remove(identity);
            }
        }
        self.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Queues `delivery` for the player's connections on this node; a connection whose queue is full is
    /// dropped (it resumes on reconnect). Answers how many connections took it.
    pub fn deliver(&self, delivery: &InAppDelivery) -> usize {
        let identity = &delivery.message.user_identity;
        let frame = Frame {
            notification_id: delivery.message.notification_id.as_str().into(),
            text: message_frame(&delivery.message).into(),
        };
        let mut players = self.lock();
        let Some(player) = players.get_mut(identity) else { return 0 };
        let mut delivered = 0;
        player.connections.retain(|(_, sender)| match sender.try_send(frame.clone()) {
            Ok(()) => {
                delivered += 1;
                true
            }
            Err(_) => false,
        });
        delivered
    }

    /// One player's delivery listener: subscribed to the player's subject (again, with backoff, whenever the
    /// subscription cannot be made or ends) until `stop`; delivers each message here and answers the sender's
    /// request with how many connections took it.
    async fn listen(self: Arc<Self>, subject: String, subscribed: watch::Sender<bool>, stop: CancellationToken) {
        let subjects = self.subjects.clone();
        loop {
            // While the subjects backend is down, wait quietly: one player per connection retrying (and logging)
            // on its own would flood the log; the process's readiness names the backend once.
            let mut backoff = flowhost_core::backoff::Backoff::for_backend();
            while subjects.connected().is_err() {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                }
            }
            let Some(mut stream) =
                flowhost_core::ports::subscribe_until_done(subjects.as_ref(), &subject, None, &stop).await
            else {
                return;
            };
            subscribed.send_replace(true);
            loop {
                let message = tokio::select! {
                    _ = stop.cancelled() => return,
                    message = stream.next() => message,
                };
                let Some(message) = message else {
                    warn!("an in-app delivery subscription ended; subscribing again");
                    break;
                };
                let Ok(delivery) = serde_json::from_slice::<InAppDelivery>(&message.payload) else {
                    warn!("an in-app delivery that does not parse was dropped");
                    continue;
                };
                let taken = self.deliver(&delivery);
                debug!(notification_id = delivery.message.notification_id, taken, "in-app message");
                if let Some(reply) = &message.reply {
                    let answer = serde_json::to_vec(&DeliveryAnswer { taken }).unwrap_or_default();
                    if let Err(error) = subjects.respond(reply, answer).await {
                        debug!(%error, "an in-app delivery answer was not sent");
                    }
                }
            }
            subscribed.send_replace(false);
        }
    }

    /// Runs until `shutdown`, then stops every player's delivery listener.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) -> anyhow::Result<()> {
        shutdown.cancelled().await;
        self.stopping.cancel();
        Ok(())
    }
}

/// The `message` frame of an inbox message, as text: printed from the message in place, without a copy of it.
fn message_frame(message: &InboxMessage) -> String {
    #[derive(serde::Serialize)]
    struct MessageFrame<'a> {
        r#type: &'static str,
        message: PublicMessage<'a>,
    }
    let frame = MessageFrame { r#type: "message", message: PublicMessage::from(message) };
    serde_json::to_string(&frame).expect("a message frame of strings, numbers and JSON values prints")
}

/// An inbox message as the bridge and the browser see it.
#[derive(serde::Serialize)]
struct PublicMessage<'a> {
    notification_id: &'a str,
    cursor: &'a str,
    template_id: i64,
    language_id: &'a str,
    content: &'a Value,
    vertical: Option<&'a str>,
    category: Option<&'a str>,
    subcategory: Option<&'a str>,
    status: &'a str,
    read_at: Option<&'a str>,
    created_at: &'a str,
}

impl<'a> From<&'a InboxMessage> for PublicMessage<'a> {
    fn from(message: &'a InboxMessage) -> PublicMessage<'a> {
        PublicMessage {
            notification_id: &message.notification_id,
            cursor: &message.cursor,
            template_id: message.template_id,
            language_id: &message.language_id,
            content: &message.content,
            vertical: message.vertical.as_deref(),
            category: message.category.as_deref(),
            subcategory: message.subcategory.as_deref(),
            status: &message.status,
            read_at: message.read_at.as_deref(),
            created_at: &message.created_at,
        }
    }
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
#[utoipa::path(post, path = "/api/v1/service/inapp/connect-tokens", tag = "in-app", params(CallerHeaders), request_body = InAppRecipientBody, responses((status = 201, description = "`{ token, expires_at, websocket_path }`: a connect token for the player, valid 60 seconds, admitting one websocket", body = Value)))]
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
    let claims = ConnectClaims::new(tenant_id, player_id, expires_at_ms);
    let token = token::mint_connect(secret.expose().as_bytes(), &claims);
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "token": token,
            "expires_at": flowhost_notifications::records::iso(expires_at_ms),
            "websocket_path": WEBSOCKET_PATH,
        })),
    ))
}

/// `GET /api/v1/service/inapp/inbox`.
#[utoipa::path(get, path = "/api/v1/service/inapp/inbox", tag = "in-app", params(CallerHeaders, InboxParams), responses((status = 200, description = "`{ items, total, unread }`, newest first", body = Value)))]
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
    let items: Vec<PublicMessage<'_>> = page.items.iter().map(PublicMessage::from).collect();
    Ok(Json(json!({ "items": items, "total": page.total, "unread": unread })))
}

/// `POST /api/v1/service/inapp/inbox/read`.
#[utoipa::path(post, path = "/api/v1/service/inapp/inbox/read", tag = "in-app", params(CallerHeaders), request_body = InAppReadBody, responses((status = 200, description = "`{ marked }`", body = Value)))]
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

/// `POST /api/v1/service/inapp/subscriptions`: activates the player's in-app channel.
#[utoipa::path(post, path = "/api/v1/service/inapp/subscriptions", tag = "in-app", params(CallerHeaders), request_body = InAppRecipientBody, responses((status = 200, description = "`{ \"active\": true }`", body = Value)))]
async fn activate(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    set_channel(&state, &caller, &body, true).await?;
    Ok(Json(json!({ "active": true })))
}

/// `POST /api/v1/service/inapp/subscriptions/deactivate`: deactivates the player's in-app channel (a send to it
/// is then a skip-forward).
#[utoipa::path(post, path = "/api/v1/service/inapp/subscriptions/deactivate", tag = "in-app", params(CallerHeaders), request_body = InAppRecipientBody, responses((status = 200, description = "`{ deactivated }`: whether it was active", body = Value)))]
async fn deactivate(
    State(state): State<Shared>,
    caller: PlatformCaller,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let changed = set_channel(&state, &caller, &body, false).await?;
    Ok(Json(json!({ "deactivated": changed })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct WebSocketQuery {
    /// A connect token from `POST /api/v1/service/inapp/connect-tokens`, unused (401 without a valid one).
    token: Option<String>,
    /// The `cursor` of the last message the client has: the missed ones follow `hello`.
    #[param(max_length = 200)]
    after: Option<String>,
}

/// `GET /api/v1/inapp/ws?token=&after=`: 401 `UNAUTHORIZED` without a valid connect token or with one already
/// used, 429 when the player has its most websockets on this node, 503 when the node is at its limit; else
/// the upgrade, with the connection's slot taken first.
#[utoipa::path(get, path = "/api/v1/inapp/ws", tag = "in-app", params(WebSocketQuery, HandshakeHeaders), responses(
    (status = 101, description = "Switching Protocols: the websocket (`hello`, missed messages, `message`, `ping`, ...; see docs/push.md, \"The websocket protocol\")"),
    (status = 400, description = "`after` is not a cursor (the push envelope), or a malformed query or handshake (plain text, from axum)", content((ErrorBody = "application/json"), (String = "text/plain"))),
    (status = 426, description = "Upgrade Required: the connection cannot be upgraded (plain text)", body = String, content_type = "text/plain"),
))]
async fn websocket(
    State(state): State<Shared>,
    Query(query): Query<WebSocketQuery>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, PushError> {
    let claims = spend_connect_token(&state, query.token.as_deref()).await?;
    if query.after.as_ref().is_some_and(|after| after.len() > 200) {
        return Err(PushError::field("after", "is not a cursor"));
    }
    let settings = &state.settings;
    let player = (claims.tenant_id.as_str(), claims.player_id);
    let (slot, queue) =
        match state.inapp.reserve(player, settings.max_inapp_connections, settings.max_inapp_connections_per_player) {
            Ok(reserved) => reserved,
            Err(Full::Node) => {
                return Err(PushError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "TOO_MANY_CONNECTIONS",
                    "this node is at its websocket limit",
                )
                .with_retry_after(5))
            }
            Err(Full::Player) => {
                return Err(PushError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TOO_MANY_CONNECTIONS",
                    "this player has the most websockets a node keeps for one player; close one first",
                ))
            }
        };
    Ok(upgrade
        .read_buffer_size(READ_BUFFER)
        .max_message_size(MAX_CLIENT_FRAME)
        .max_frame_size(MAX_CLIENT_FRAME)
        .on_upgrade(move |socket| connection(socket, state, claims, query.after, slot, queue)))
}

/// Verifies a connect token and spends it: its nonce is set in the cache port until the token expires, and a
/// token whose nonce is there already is refused as if forged (401). A cache that does not answer refuses
/// too (500 `INTERNAL_ERROR`, as every storage failure): a token must never admit two websockets.
async fn spend_connect_token(state: &PushState, token: Option<&str>) -> Result<ConnectClaims, PushError> {
    let secrets = state.interaction_secrets().unwrap_or_default();
    let now_ms = state.ports.clock.now_ms();
    let claims = token
        .and_then(|token| token::verify_connect(token, &secrets, now_ms).ok())
        .ok_or_else(|| PushError::unauthorized("a valid connect token is required (token query parameter)"))?;
    let left = Duration::from_millis(u64::try_from(claims.expires_at_ms - now_ms).unwrap_or(0).max(1));
    let key = format!("inapp:connect:{}", claims.nonce);
    match state.ports.cache.set_if_absent(&key, b"1".to_vec(), left).await {
        Ok(true) => Ok(claims),
        Ok(false) => Err(PushError::unauthorized("this connect token was used already; ask the bridge for another")),
        Err(error) => {
            warn!(%error, "the cache did not answer; a connect token cannot be spent");
            Err(PushError::internal())
        }
    }
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

async fn connection(
    socket: WebSocket,
    state: Shared,
    claims: ConnectClaims,
    after: Option<String>,
    mut slot: Slot,
    mut queue: mpsc::Receiver<Frame>,
) {
    slot.listening().await;
    let (mut sink, mut incoming) = socket.split();
    let mut session = Session { state: &state, claims, frames: FrameBudget::new() };
    let outcome = session.serve(after, &mut sink, &mut incoming, &mut queue).await;
    let (code, reason) = match outcome {
        Ok(()) => (1000, "bye"),
        Err(reason) => (reason.0, reason.1),
    };
    // The slot goes back now: a client that never reads must not hold it while its close frame waits.
    let id = slot.id;
    drop(slot);
    let close = Message::Close(Some(CloseFrame { code, reason: reason.into() }));
    let _ = tokio::time::timeout(WRITE_TIMEOUT, sink.send(close)).await;
    debug!(connection = id, code, "in-app websocket closed");
}

type Sink = futures::stream::SplitSink<WebSocket, Message>;
type Incoming = futures::stream::SplitStream<WebSocket>;
/// Why a connection ends: its close code and reason.
type Closing = (u16, &'static str);

/// Sends one frame within [`WRITE_TIMEOUT`].
async fn send(sink: &mut Sink, message: Message) -> Result<(), Closing> {
    match tokio::time::timeout(WRITE_TIMEOUT, sink.send(message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err((1011, "send failed")),
        Err(_elapsed) => Err((1013, "the client does not read; reconnect and resume")),
    }
}

async fn send_json(sink: &mut Sink, value: &Value) -> Result<(), Closing> {
    send(sink, Message::Text(value.to_string().into())).await
}

/// A token bucket over the frames a client sends: [`CLIENT_FRAMES_PER_SECOND`] a second, bursts of twice that.
struct FrameBudget {
    tokens: f64,
    at: tokio::time::Instant,
}

impl FrameBudget {
    const BURST: f64 = 2.0 * CLIENT_FRAMES_PER_SECOND as f64;

    fn new() -> FrameBudget {
        FrameBudget { tokens: Self::BURST, at: tokio::time::Instant::now() }
    }

    /// Takes one frame's token; false when the client sends faster than its budget.
    fn take(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * f64::from(CLIENT_FRAMES_PER_SECOND);
        self.tokens = (self.tokens + refill).min(Self::BURST);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// One player's websocket after the upgrade: whose it is (the claims of the token that admitted or last
/// refreshed it) and its frame budget.
struct Session<'a> {
    state: &'a PushState,
    claims: ConnectClaims,
    frames: FrameBudget,
}

impl Session<'_> {
    /// When the connection's token expires, on the runtime's clock.
    fn expiry(&self) -> tokio::time::Instant {
        let left = self.claims.expires_at_ms - self.state.ports.clock.now_ms();
        tokio::time::Instant::now() + Duration::from_millis(u64::try_from(left).unwrap_or(0))
    }

    async fn serve(
        &mut self,
        after: Option<String>,
        sink: &mut Sink,
        incoming: &mut Incoming,
        queue: &mut mpsc::Receiver<Frame>,
    ) -> Result<(), Closing> {
        let documents = self.state.ports.documents.as_ref();
        let (tenant_id, player_id) = (self.claims.tenant_id.clone(), self.claims.player_id);
        let unread =
            inapp::unread_count(documents, &tenant_id, player_id).await.map_err(|_| (1011, "storage unavailable"))?;
        let hello = json!({ "type": "hello", "tenant_id": tenant_id, "player_id": player_id,
            "heartbeat_interval_ms": HEARTBEAT.as_millis() as u64, "unread": unread,
            "expires_at": flowhost_notifications::records::iso(self.claims.expires_at_ms) });
        send_json(sink, &hello).await?;
        let mut seen = Seen::new();
        if let Some(after) = after {
            let query = InboxQuery { status: None, after: Some(after), limit: inapp::MAX_PAGE, offset: 0 };
            let page = inapp::inbox(documents, &tenant_id, player_id, &query)
                .await
                .map_err(|_| (1011, "storage unavailable"))?;
            let count = page.items.len();
            for message in &page.items {
                seen.insert(&message.notification_id);
                send(sink, Message::Text(message_frame(message).into())).await?;
            }
            let more = page.total > count as u64;
            send_json(sink, &json!({ "type": "resumed", "count": count, "more": more })).await?;
        }
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.tick().await;
        let mut silent_beats = 0u32;
        let mut expires = self.expiry();
        let mut notice = Some(expires.checked_sub(REFRESH_NOTICE).unwrap_or_else(tokio::time::Instant::now));
        loop {
            tokio::select! {
                frame = queue.recv() => {
                    let Some(frame) = frame else { return Err((1013, "too far behind; reconnect and resume")) };
                    if seen.insert(&frame.notification_id) {
                        send(sink, Message::Text(frame.text)).await?;
                    }
                }
                received = incoming.next() => {
                    let received = match received {
                        None => return Ok(()),
                        Some(Ok(received)) => received,
                        // Over `MAX_CLIENT_FRAME`: refused from its header, before buffering.
                        Some(Err(error)) => {
                            return if is_too_long(error) { Err((1009, "frame too large")) } else { Ok(()) };
                        }
                    };
                    silent_beats = 0;
                    if !matches!(received, Message::Close(_)) && !self.frames.take() {
                        return Err((1008, "too many frames; slow down"));
                    }
                    match received {
                        Message::Text(text) if self.client_frame(sink, &text).await? => {
                            // Refreshed: the connection lives until the new token's expiry.
                            expires = self.expiry();
                            notice = expires.checked_sub(REFRESH_NOTICE);
                        }
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
                () = sleep_until_some(notice) => {
                    notice = None;
                    let expires_at = flowhost_notifications::records::iso(self.claims.expires_at_ms);
                    send_json(sink, &json!({ "type": "expiring", "expires_at": expires_at })).await?;
                }
                () = tokio::time::sleep_until(expires) => {
                    return Err((4001, "the connect token expired; refresh it, or reconnect with a fresh one"));
                }
            }
        }
    }

    /// A frame from the browser: `pong`, `read` with `notification_ids`, or `refresh` with a fresh connect
    /// token of the same player. Answers whether the token was refreshed.
    async fn client_frame(&mut self, sink: &mut Sink, text: &str) -> Result<bool, Closing> {
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            send_json(sink, &json!({ "type": "error", "message": "frames are JSON objects" })).await?;
            return Ok(false);
        };
        let (state, claims) = (self.state, &self.claims);
        match frame["type"].as_str() {
            Some("pong") => Ok(false),
            Some("read") => {
                let ids: Vec<String> = frame["notification_ids"]
                    .as_array()
                    .map(|ids| ids.iter().filter_map(Value::as_str).take(MAX_READ_IDS).map(str::to_owned).collect())
                    .unwrap_or_default();
                let marked = inapp::mark_read(&state.ports, &claims.tenant_id, claims.player_id, &ids)
                    .await
                    .map_err(|_| (1011, "storage unavailable"))?;
                send_json(sink, &json!({ "type": "read", "marked": marked })).await?;
                Ok(false)
            }
            Some("refresh") => match spend_connect_token(state, frame["token"].as_str()).await {
                Ok(fresh) if fresh.tenant_id == claims.tenant_id && fresh.player_id == claims.player_id => {
                    let expires_at = flowhost_notifications::records::iso(fresh.expires_at_ms);
                    self.claims = fresh;
                    send_json(sink, &json!({ "type": "refreshed", "expires_at": expires_at })).await?;
                    Ok(true)
                }
                Ok(_) | Err(_) => {
                    let message = "the token is not a fresh connect token of this player";
                    send_json(sink, &json!({ "type": "error", "message": message })).await?;
                    Ok(false)
                }
            },
            _ => {
                send_json(sink, &json!({ "type": "error", "message": "unknown frame type" })).await?;
                Ok(false)
            }
        }
    }
}

/// Waits until `at`, or forever when there is nothing to wait for.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether a receive failed because the client's frame or message is over [`MAX_CLIENT_FRAME`] (tungstenite's
/// capacity error, under axum's).
fn is_too_long(error: axum::Error) -> bool {
    error
        .into_inner()
        .downcast::<tungstenite::Error>()
        .is_ok_and(|error| matches!(*error, tungstenite::Error::Capacity(_)))
}
