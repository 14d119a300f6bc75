//! The sender: the host side of the `notifications` capability ([`Notifications`]), which the bundled
//! `notifications` plugin calls for `send_webpush` and `send_inapp` and for its data sources. It holds what the
//! plugin never sees: the VAPID private key (inside the [`PushClient`]'s signer), the interaction-token secret
//! and the subscriptions' keys.
//!
//! **Web push** ([`Sender::send_webpush`]): render the template for the tenant (a missing template or language
//! and a render failure are `invalid`), resolve the active subscriptions of the exact `(tenant_id, player_id)`,
//! and deliver to each concurrently (one permit of a process-wide pool per request in flight; connections are
//! reused per push service). Each delivery gets a fresh `delivery_id` and an interaction token bound to tenant,
//! player, notification and delivery; the payload is `DeliveryContent` v1. A 404/410 deactivates the
//! subscription. The notification record (id derived from the step's idempotency key) is written with every
//! delivery's outcome before the report returns.
//!
//! **Redelivery.** A later attempt of the same step finds the record: subscriptions already delivered, expired
//! or refused for good are not sent to again (their recorded outcome is reported), and a subscription whose push
//! service asked to wait (`Retry-After`) is not called before that time. So at-least-once steps do not push
//! twice, except when the record write itself failed after a push (the step is then retried and pushes again).
//!
//! **Dry run** (`WEB_PUSH_DRY_RUN`): nothing is sent; every subscription is recorded as `skipped`.
//!
//! **Passthrough `data`**: a request's `data` (a JSON object of at most [`MAX_PASSTHROUGH_DATA_BYTES`]) is merged
//! over the template's `data` in the payload; `data.notification_id` is always the host's.
//!
//! **In-app** ([`Sender::send_inapp`]): a deactivated channel is `inactive` (the plugin's skip-forward); else the
//! template renders (default language when none is asked), the message is stored in the player's inbox and in
//! the activity records (once per idempotency key), and handed to the player's open websockets with a request on
//! the player's subject (see [`crate::inapp`]): `delivered` when a socket took it, `stored` when none is open
//! (no responders, or no answer within [`INAPP_ANSWER_TIMEOUT`]).
//!
//! A channel the deployment does not run (`FLOWHOST_CHANNELS_ENABLED`) fails as `channel-disabled`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::channel::Channel;
use async_trait::async_trait;
use flowhost_core::collections::{WEBPUSH_ACTIVITY, WEBPUSH_SUBSCRIPTIONS};
use flowhost_core::config::Secret;
use flowhost_core::digest::sha256_hex;
use flowhost_core::notify::{
    Delivery, DeliveryOutcome, InAppOutcome, InAppReport, InAppRequest, Notifications, SendFailure, TemplateChannel,
    WebPushReport, WebPushRequest, MAX_PASSTHROUGH_DATA_BYTES,
};
use flowhost_core::ports::{PortError, Ports};
use serde_json::{json, Map, Value};
use tokio::sync::Semaphore;
use tracing::{debug, info};

use crate::inapp::{self, DeliveryAnswer, InAppDelivery, InboxMessage};
use crate::metrics::PushMetrics;
use crate::push::{PushClient, PushMessage, PushOutcome, Urgency};
use crate::records::{self, iso, DeliveryRecord, NotificationActivity};
use crate::subscriptions::{self, Subscription};
use crate::targets::TargetPolicy;
use crate::templates::{self, Template};
use crate::token::{self, InteractionClaims};
use crate::{WebPushError, PAYLOAD_VERSION};

/// How long an in-app send waits for a websocket node's answer; past it the message counts as stored (it is in
/// the inbox either way).
pub const INAPP_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// What the sender needs besides the ports and the push client.
#[derive(Debug)]
pub struct SenderSettings {
    /// The channels this deployment runs (`FLOWHOST_CHANNELS_ENABLED`).
    pub channels: Vec<Channel>,
    /// `WEB_PUSH_DRY_RUN`: record every delivery as skipped, send nothing.
    pub dry_run: bool,
    /// How long records and interaction tokens live (`FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`).
    pub retention: Duration,
    /// The allowlist of rendered `target_url` hosts (`FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS`).
    pub targets: TargetPolicy,
    /// Signs interaction tokens (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET`).
    pub token_secret: Secret,
    /// The push messages' `TTL` (`FLOWHOST_WEBPUSH_TTL_SECONDS`).
    pub ttl_seconds: u32,
    /// Push requests in flight at once over the whole process (`FLOWHOST_WEBPUSH_MAX_CONCURRENT_PUSHES`).
    pub max_concurrent_pushes: usize,
    /// Tenants configured for the editor (`FLOWHOST_WEBPUSH_TENANTS`), part of the `tenants` data source.
    pub tenants: Vec<String>,
    /// Each tenant's default language (`FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES`): `send_inapp`'s last fallback
    /// before the template's first language.
    pub tenant_languages: std::collections::BTreeMap<String, String>,
}

/// The host side of the `notifications` capability (see the module documentation).
pub struct Sender {
    ports: Ports,
    settings: SenderSettings,
    client: PushClient,
    permits: Arc<Semaphore>,
    metrics: PushMetrics,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("client", &self.client).field("dry_run", &self.settings.dry_run).finish()
    }
}

/// The id of the notification a step sends: the same for every attempt of the step (its idempotency key),
/// different per channel.
pub fn notification_id(channel: &str, idempotency_key: &str) -> String {
    sha256_hex(&[channel, idempotency_key])[..32].to_owned()
}

/// A subscription as delivery needs it.
#[derive(Debug, Clone)]
struct Target {
    endpoint: String,
    p256dh: String,
    auth: String,
}

fn channel_noun(channel: Channel) -> &'static str {
    match channel {
        Channel::WebPush => "web-push",
        Channel::InApp => "in-app",
    }
}

fn channel_of(channel: TemplateChannel) -> Channel {
    match channel {
        TemplateChannel::WebPush => Channel::WebPush,
        TemplateChannel::InApp => Channel::InApp,
    }
}

fn unavailable(error: impl std::fmt::Display) -> SendFailure {
    SendFailure::Unavailable(format!("the document store failed: {error}"))
}

/// A template load failure as the plugin sees it.
fn template_failure(error: WebPushError, channel: Channel, template_id: i64, tenant_id: &str) -> SendFailure {
    match error {
        WebPushError::NotFound(_) => SendFailure::Invalid(format!(
            "{} template {template_id} does not exist for tenant {tenant_id:?}",
            channel_noun(channel)
        )),
        WebPushError::Storage(error) => unavailable(error),
        other => SendFailure::Unavailable(other.to_string()),
    }
}

impl Sender {
    /// A sender over `ports`, delivering with `client`. Creates the index its subscription lookup uses.
    pub async fn new(ports: Ports, settings: SenderSettings, client: PushClient) -> Result<Sender, PortError> {
        Sender::ensure_indexes(ports.documents.as_ref()).await?;
        Ok(Sender::without_indexes(ports, settings, client))
    }

    /// The sender, its indexes left to [`Sender::ensure_indexes`] (a role creates them once the store answers,
    /// so a start with the store down still serves).
    pub fn without_indexes(ports: Ports, settings: SenderSettings, client: PushClient) -> Sender {
        let permits = Arc::new(Semaphore::new(settings.max_concurrent_pushes.max(1)));
        Sender { ports, settings, client, permits, metrics: PushMetrics::default() }
    }

    /// Counts deliveries and in-app sends into `metrics`, and times the client's encryption and POSTs there.
    pub fn with_metrics(mut self, metrics: PushMetrics) -> Sender {
        self.client = self.client.with_metrics(metrics.clone());
        self.metrics = metrics;
        self
    }

    /// The indexes the sender's reads use (subscriptions by player, the activity list, the in-app inbox).
    pub async fn ensure_indexes(documents: &dyn flowhost_core::ports::DocumentStore) -> Result<(), PortError> {
        crate::subscriptions::ensure_indexes(documents).await?;
        crate::records::ensure_activity_indexes(documents).await?;
        inapp::ensure_indexes(documents).await
    }

    fn require(&self, channel: Channel, name: &str) -> Result<(), SendFailure> {
        if self.settings.channels.contains(&channel) {
            Ok(())
        } else {
            Err(SendFailure::ChannelDisabled(format!("{name} is not in FLOWHOST_CHANNELS_ENABLED")))
        }
    }

    /// The active subscriptions of exactly `(tenant_id, player_id)`.
    async fn active_subscriptions(&self, tenant_id: &str, player_id: i64) -> Result<Vec<Target>, PortError> {
        let identity = records::user_identity(tenant_id, player_id);
        let found = self.ports.documents.find(WEBPUSH_SUBSCRIPTIONS, "user_identity", &json!(identity)).await?;
        Ok(flowhost_core::stored::decode_valid::<Subscription>(WEBPUSH_SUBSCRIPTIONS, found)
            .into_iter()
            .filter(|stored| stored.is_active() && stored.tenant_id == tenant_id && stored.player_id == player_id)
            .map(|stored| Target { endpoint: stored.endpoint, p256dh: stored.keys.p256dh, auth: stored.keys.auth })
            .collect())
    }

    async fn load_activity(&self, id: &str) -> Result<Option<NotificationActivity>, SendFailure> {
        let stored = self.ports.documents.get(WEBPUSH_ACTIVITY, id).await.map_err(unavailable)?;
        // A record that no longer decodes (logged) is written anew rather than blocking the notification for good.
        Ok(stored.and_then(|doc| flowhost_core::stored::decode(WEBPUSH_ACTIVITY, doc).ok()))
    }

    /// The `DeliveryContent` v1 of one delivery: the rendered notification with the delivery's id and token,
    /// and `data.notification_id`.
    fn payload(&self, rendered: &Value, notification_id: &str, claims: &InteractionClaims) -> Value {
        let mut payload = rendered.clone();
        payload["payload_version"] = json!(PAYLOAD_VERSION);
        payload["delivery_id"] = json!(claims.delivery_id);
        payload["interaction_token"] = json!(token::mint(self.settings.token_secret.expose().as_bytes(), claims));
        if !payload["data"].is_object() {
            payload["data"] = json!({});
        }
        payload["data"]["notification_id"] = json!(notification_id);
        payload
    }

    /// Delivers one payload to one subscription, holding a permit of the pool while the request is in flight.
    async fn deliver(&self, target: &Target, payload: &[u8], topic: Option<&str>) -> PushOutcome {
        let Ok(_permit) = self.permits.acquire().await else {
            return PushOutcome::Retry { status: None, after: None, reason: "the sender is shutting down".into() };
        };
        let message = PushMessage {
            endpoint: &target.endpoint,
            p256dh: &target.p256dh,
            auth: &target.auth,
            payload,
            ttl_seconds: self.settings.ttl_seconds,
            urgency: Urgency::Normal,
            topic,
        };
        self.client.send(&message).await
    }

    /// Sends to `target` (or skips it on a dry run) and turns the answer into a recorded delivery; an expired
    /// subscription is deactivated here (when that fails, the delivery is to retry: the next attempt meets the
    /// same 404/410 and deactivates it then).
    async fn attempt(
        &self,
        target: &Target,
        request: &WebPushRequest,
        notification_id: &str,
        rendered: &Value,
    ) -> Delivery {
        let now = self.ports.clock.now_ms();
        let claims = InteractionClaims {
            tenant_id: request.tenant_id.clone(),
            player_id: request.player_id,
            notification_id: notification_id.to_owned(),
            delivery_id: uuid::Uuid::new_v4().to_string(),
            expires_at_ms: records::expiry(now, self.settings.retention),
        };
        let delivery = |outcome, status_code, retry_after_ms, reason| Delivery {
            delivery_id: claims.delivery_id.clone(),
            endpoint: target.endpoint.clone(),
            outcome,
            status_code,
            retry_after_ms,
            reason,
        };
        if self.settings.dry_run {
            return delivery(DeliveryOutcome::Skipped, None, None, Some("WEB_PUSH_DRY_RUN is on".to_owned()));
        }
        let payload = self.payload(rendered, notification_id, &claims);
        let bytes = serde_json::to_vec(&payload).unwrap_or_default();
        let topic = rendered["tag"].as_str();
        match self.deliver(target, &bytes, topic).await {
            PushOutcome::Delivered { status } => delivery(DeliveryOutcome::Delivered, Some(status), None, None),
            PushOutcome::Expired { status } => {
                match subscriptions::deactivate(&self.ports, &request.tenant_id, request.player_id, &target.endpoint)
                    .await
                {
                    Ok(_) => {
                        self.metrics.expired_endpoint();
                        delivery(DeliveryOutcome::Expired, Some(status), None, None)
                    }
                    Err(error) => delivery(
                        DeliveryOutcome::Retry,
                        Some(status),
                        None,
                        Some(format!("the subscription expired ({status}) but deactivating it failed: {error}")),
                    ),
                }
            }
            PushOutcome::Retry { status, after, reason } => {
                delivery(DeliveryOutcome::Retry, status, after.map(|a| a.as_millis() as u64), Some(reason))
            }
            PushOutcome::Rejected { status, reason } => delivery(DeliveryOutcome::Rejected, status, None, Some(reason)),
        }
    }

    /// Renders `template` in `language` with `placeholders`; a failure is `invalid`, naming every problem.
    fn render(
        &self,
        template: &Template,
        language: &str,
        placeholders: &[(String, String)],
    ) -> Result<Value, SendFailure> {
        let values: Map<String, Value> =
            placeholders.iter().map(|(name, value)| (name.clone(), json!(value))).collect();
        template.render(language, &values, &self.settings.targets).map_err(|errors| {
            let problems: Vec<String> = errors.iter().map(ToString::to_string).collect();
            SendFailure::Invalid(format!("the template does not render: {}", problems.join("; ")))
        })
    }

    /// The in-app message of `request`: the one a previous attempt stored, else rendered now and stored.
    ///
    /// The message is rendered and inserted without reading first (a first attempt is the common case, and the
    /// insert tells a redelivery apart): an existing message wins, and is read and handed over as it was. A
    /// redelivery whose template no longer renders (changed or deleted since) still gets its stored message.
    async fn inbox_message(&self, request: &InAppRequest, notification_id: &str) -> Result<InboxMessage, SendFailure> {
        let documents = self.ports.documents.as_ref();
        let message = match self.render_inapp(request, notification_id).await {
            Ok(message) => message,
            Err(failure) => {
                // Whether a stored message exists decides between the two: unknown is worth a retry.
                return match inapp::message(documents, notification_id).await {
                    Ok(Some(stored)) => Ok(stored),
                    Ok(None) => Err(failure),
                    Err(error) => Err(unavailable(error)),
                };
            }
        };
        match inapp::store_new(documents, &message).await {
            Ok(()) => Ok(message),
            Err(PortError::Conflict(_)) => inapp::message(documents, notification_id)
                .await
                .map_err(unavailable)?
                .ok_or_else(|| unavailable("the stored message expired while it was sent again; retry")),
            Err(error) => Err(unavailable(error)),
        }
    }

    /// The in-app message of `request` as its template renders it now, not yet stored.
    async fn render_inapp(&self, request: &InAppRequest, notification_id: &str) -> Result<InboxMessage, SendFailure> {
        let documents = self.ports.documents.as_ref();
        let template = templates::load(documents, Channel::InApp, request.template_id, Some(&request.tenant_id))
            .await
            .map_err(|error| template_failure(error, Channel::InApp, request.template_id, &request.tenant_id))?;
        // The asked language, else the template's default, else the tenant's default when the template has it.
        let tenant_default = self.settings.tenant_languages.get(&request.tenant_id).map(String::as_str);
        let asked = request
            .language_id
            .as_deref()
            .or(template.default_language.as_deref())
            .or(tenant_default.filter(|language| template.contents.contains_key(*language)));
        let language = template
            .language_or_default(asked)
            .ok_or_else(|| SendFailure::Invalid(format!("in-app template {} has no content", template.id)))?
            .to_owned();
        let mut content = self.render(&template, &language, &request.placeholders)?;
        content["data"]["notification_id"] = json!(notification_id);
        let now = self.ports.clock.now_ms();
        let message = InboxMessage {
            notification_id: notification_id.to_owned(),
            tenant_id: request.tenant_id.clone(),
            player_id: request.player_id,
            user_identity: records::user_identity(&request.tenant_id, request.player_id),
            template_id: template.id,
            language_id: language,
            content,
            vertical: request.vertical.clone(),
            category: request.category.clone(),
            subcategory: request.subcategory.clone(),
            status: "unread".to_owned(),
            read_at: None,
            created_at_ms: now,
            created_at: iso(now),
            run_id: request.run_id.clone(),
            cursor: inapp::cursor(now, notification_id),
            expires_at_ms: inapp::expires_at(now, self.settings.retention),
        };
        Ok(message)
    }

    /// The activity record of an in-app message: `delivered` when an open socket took it, else `stored`.
    fn inapp_activity(&self, request: &InAppRequest, message: &InboxMessage, delivered: bool) -> NotificationActivity {
        let mut shown = message.content.clone();
        for (field, value) in
            [("vertical", &message.vertical), ("category", &message.category), ("subcategory", &message.subcategory)]
        {
            if let Some(value) = value {
                shown[field] = json!(value);
            }
        }
        NotificationActivity {
            notification_id: message.notification_id.clone(),
            tenant_id: request.tenant_id.clone(),
            player_id: request.player_id,
            channel: "IN_APP".to_owned(),
            template_id: Some(message.template_id),
            language_enabled_id: Some(message.language_id.clone()),
            status: if delivered { "delivered" } else { "stored" }.to_owned(),
            delivered,
            delivery_ids: vec![message.notification_id.clone()],
            invalidated_subscriptions: Vec::new(),
            deliveries: Vec::new(),
            run_id: request.run_id.clone(),
            attempts: 1,
            content: shown,
            created_at_ms: message.created_at_ms,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    async fn render_webpush(&self, request: &WebPushRequest) -> Result<(Template, Value), SendFailure> {
        let documents = self.ports.documents.as_ref();
        let template = templates::load(documents, Channel::WebPush, request.template_id, Some(&request.tenant_id))
            .await
            .map_err(|error| template_failure(error, Channel::WebPush, request.template_id, &request.tenant_id))?;
        let mut rendered = self.render(&template, &request.language_enabled_id, &request.placeholders)?;
        if let Some(data) = &request.data {
            merge_passthrough(&mut rendered, data)?;
        }
        let size = serde_json::to_vec(&rendered).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
        // The token and ids take about 400 bytes of the message.
        let room = crate::push::ece::MAX_PAYLOAD - 400;
        if size > room {
            return Err(SendFailure::Invalid(format!(
                "the rendered notification is {size} bytes; a push message carries at most {room} besides its ids"
            )));
        }
        Ok((template, rendered))
    }
}

/// Merges a request's passthrough `data` (JSON text) over the rendered notification's `data`; `invalid` unless
/// it is a JSON object of at most [`MAX_PASSTHROUGH_DATA_BYTES`]. `notification_id` is set by the host later.
fn merge_passthrough(rendered: &mut Value, data: &str) -> Result<(), SendFailure> {
    if data.len() > MAX_PASSTHROUGH_DATA_BYTES {
        return Err(SendFailure::Invalid(format!(
            "data is {} bytes; at most {MAX_PASSTHROUGH_DATA_BYTES} pass through into the payload",
            data.len()
        )));
    }
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(data) else {
        return Err(SendFailure::Invalid("data must be a JSON object".to_owned()));
    };
    if !rendered["data"].is_object() {
        rendered["data"] = json!({});
    }
    if let Some(target) = rendered["data"].as_object_mut() {
        target.extend(fields);
    }
    Ok(())
}

/// What a redelivered step keeps from the previous attempts: deliveries that are settled (delivered, expired,
/// refused, skipped), by endpoint, and the retry holds (`Retry-After`) still running at `now`.
fn settled_and_held(
    previous: Option<&NotificationActivity>,
    now: i64,
) -> (Vec<DeliveryRecord>, HashMap<String, Delivery>) {
    let mut settled = Vec::new();
    let mut held = HashMap::new();
    for record in previous.into_iter().flat_map(|p| &p.deliveries) {
        match record.delivery.outcome {
            DeliveryOutcome::Retry => {
                let until = record.delivery.retry_after_ms.map(|ms| record.attempted_at_ms + ms as i64);
                if let Some(until) = until.filter(|until| *until > now) {
                    let mut waiting = record.delivery.clone();
                    waiting.retry_after_ms = Some((until - now) as u64);
                    held.insert(record.delivery.endpoint.clone(), waiting);
                }
            }
            _ => settled.push(record.clone()),
        }
    }
    (settled, held)
}

#[async_trait]
impl Notifications for Sender {
    async fn send_webpush(&self, request: WebPushRequest) -> Result<WebPushReport, SendFailure> {
        self.require(Channel::WebPush, "WEB_PUSH")?;
        let notification_id = notification_id("webpush", &request.idempotency_key);
        let previous = self.load_activity(&notification_id).await?;
        let (_, rendered) = self.render_webpush(&request).await?;
        let targets = self.active_subscriptions(&request.tenant_id, request.player_id).await.map_err(unavailable)?;
        let now = self.ports.clock.now_ms();
        let (mut deliveries, held) = settled_and_held(previous.as_ref(), now);
        let mut waiting = Vec::new();
        let mut to_send = Vec::new();
        for target in &targets {
            if deliveries.iter().any(|d| d.delivery.endpoint == target.endpoint) {
                continue;
            }
            match held.get(&target.endpoint) {
                Some(delivery) => waiting.push(delivery.clone()),
                None => to_send.push(target),
            }
        }
        let attempts = to_send.iter().map(|target| self.attempt(target, &request, &notification_id, &rendered));
        let sent = futures::future::join_all(attempts).await;
        for delivery in &sent {
            self.metrics.delivery(delivery.outcome);
        }
        let attempted_at = self.ports.clock.now_ms();
        deliveries.extend(sent.into_iter().map(|delivery| DeliveryRecord {
            delivery,
            attempted_at_ms: attempted_at,
            attempted_at: iso(attempted_at),
        }));
        // A held delivery keeps its original record (and its hold); it is reported with the time left.
        let kept_holds = previous
            .iter()
            .flat_map(|p| &p.deliveries)
            .filter(|record| waiting.iter().any(|w| w.delivery_id == record.delivery.delivery_id))
            .cloned();
        deliveries.extend(kept_holds);
        let invalidated: Vec<String> = deliveries
            .iter()
            .filter(|d| d.delivery.outcome == DeliveryOutcome::Expired)
            .map(|d| d.delivery.endpoint.clone())
            .collect();
        let activity = NotificationActivity {
            notification_id: notification_id.clone(),
            tenant_id: request.tenant_id.clone(),
            player_id: request.player_id,
            channel: "WEB_PUSH".to_owned(),
            template_id: Some(request.template_id),
            language_enabled_id: Some(request.language_enabled_id.clone()),
            status: previous.as_ref().map_or("sending", |p| p.status.as_str()).to_owned(),
            delivered: deliveries.iter().any(|d| d.delivery.outcome == DeliveryOutcome::Delivered),
            delivery_ids: deliveries.iter().map(|d| d.delivery.delivery_id.clone()).collect(),
            invalidated_subscriptions: invalidated,
            deliveries: deliveries.clone(),
            run_id: request.run_id.clone(),
            attempts: previous.as_ref().map_or(0, |p| p.attempts) + 1,
            content: rendered,
            created_at_ms: previous.as_ref().map_or(now, |p| p.created_at_ms),
            created_at: String::new(),
            updated_at: String::new(),
        };
        records::store_activity(&self.ports, self.settings.retention, &activity).await.map_err(unavailable)?;
        records::register_tenant(self.ports.documents.as_ref(), &request.tenant_id, now).await.map_err(unavailable)?;
        let mut report: Vec<Delivery> = deliveries.into_iter().map(|d| d.delivery).collect();
        for delivery in &mut report {
            if let Some(waiting) = waiting.iter().find(|w| w.delivery_id == delivery.delivery_id) {
                delivery.retry_after_ms = waiting.retry_after_ms;
            }
        }
        info!(
            notification_id,
            subscriptions = targets.len(),
            sent = to_send.len(),
            dry_run = self.settings.dry_run,
            "web push attempted"
        );
        Ok(WebPushReport { notification_id, deliveries: report })
    }

    async fn complete(&self, notification_id: &str, status: &str, delivered: bool) -> Result<(), SendFailure> {
        let valid = (1..=64).contains(&status.len()) && status.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if !valid {
            return Err(SendFailure::Invalid(format!("status {status:?} is not 1 to 64 of a-z and _")));
        }
        let Some(mut activity) = self.load_activity(notification_id).await? else {
            return Err(SendFailure::Invalid(format!("no notification {notification_id:?}")));
        };
        if activity.status == status && activity.delivered == delivered {
            return Ok(());
        }
        activity.status = status.to_owned();
        activity.delivered = delivered;
        records::store_activity(&self.ports, self.settings.retention, &activity).await.map_err(unavailable)?;
        debug!(notification_id, status, delivered, "notification completed");
        Ok(())
    }

    async fn send_inapp(&self, request: InAppRequest) -> Result<InAppReport, SendFailure> {
        self.require(Channel::InApp, "IN_APP")?;
        let notification_id = notification_id("inapp", &request.idempotency_key);
        let documents = self.ports.documents.as_ref();
        if !inapp::channel_active(documents, &request.tenant_id, request.player_id).await.map_err(unavailable)? {
            self.metrics.inapp(InAppOutcome::Inactive);
            return Ok(InAppReport { notification_id, outcome: InAppOutcome::Inactive });
        }
        // A redelivered step finds its message and hands it over again: connections drop a message they have.
        let message = self.inbox_message(&request, &notification_id).await?;
        let delivery = InAppDelivery { tenant_id: request.tenant_id.clone(), player_id: request.player_id, message };
        let payload = serde_json::to_vec(&delivery).map_err(|e| SendFailure::Unavailable(e.to_string()))?;
        let subject = inapp::player_subject(&request.tenant_id, request.player_id);
        let taken = match self.ports.subjects.request(&subject, payload, INAPP_ANSWER_TIMEOUT).await {
            Ok(answer) => serde_json::from_slice::<DeliveryAnswer>(&answer.payload).map_or(0, |answer| answer.taken),
            // No node holds a socket of the player: the inbox keeps the message for the next connect.
            Err(PortError::NoResponders(_)) => 0,
            Err(PortError::Timeout(_)) => {
                debug!(notification_id, "no websocket node answered in time; the message waits in the inbox");
                0
            }
            Err(error) => {
                return Err(SendFailure::Unavailable(format!("handing the message to websockets failed: {error}")))
            }
        };
        // Written after the hand-over, on every attempt, so it says whether a socket took the message.
        let activity = self.inapp_activity(&request, &delivery.message, taken > 0);
        records::store_activity(&self.ports, self.settings.retention, &activity).await.map_err(unavailable)?;
        let outcome = if taken > 0 { InAppOutcome::Delivered } else { InAppOutcome::Stored };
        self.metrics.inapp(outcome);
        debug!(notification_id, taken, "in-app message sent");
        Ok(InAppReport { notification_id, outcome })
    }

    async fn templates(&self, channel: TemplateChannel, tenant_id: Option<&str>) -> Result<String, SendFailure> {
        let items: Vec<Value> = templates::list(self.ports.documents.as_ref(), channel_of(channel), tenant_id)
            .await
            .map_err(|error| SendFailure::Unavailable(error.to_string()))?
            .iter()
            .map(|t| {
                json!({
                    "id": t.id, "name": t.name, "tenant_id": t.tenant_id, "description": t.description,
                    "languages": t.contents.keys().collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(json!({ "items": items }).to_string())
    }

    async fn template_fields(&self, channel: TemplateChannel, template_id: i64) -> Result<String, SendFailure> {
        let channel = channel_of(channel);
        let template =
            templates::load(self.ports.documents.as_ref(), channel, template_id, None).await.map_err(|error| {
                match error {
                    WebPushError::NotFound(_) => {
                        SendFailure::Invalid(format!("{} template {template_id} does not exist", channel_noun(channel)))
                    }
                    other => SendFailure::Unavailable(other.to_string()),
                }
            })?;
        let placeholders: Vec<Value> = template
            .placeholders
            .iter()
            .map(|p| json!({ "name": p.name, "default": p.default, "required": p.default.is_none() }))
            .collect();
        Ok(json!({
            "template_id": template.id,
            "tenant_id": template.tenant_id,
            "languages": template.contents.keys().collect::<Vec<_>>(),
            "placeholders": placeholders,
        })
        .to_string())
    }

    async fn tenants(&self) -> Result<String, SendFailure> {
        let known = records::known_tenants(self.ports.documents.as_ref(), &self.settings.tenants, None)
            .await
            .map_err(unavailable)?;
        let languages = &self.settings.tenant_languages;
        let items: Vec<Value> = known.iter().map(|tenant| records::tenant_row(tenant, languages)).collect();
        Ok(json!({ "items": items }).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(endpoint: &str, outcome: DeliveryOutcome, at: i64, retry_after_ms: Option<u64>) -> DeliveryRecord {
        DeliveryRecord {
            delivery: Delivery {
                delivery_id: format!("d-{endpoint}"),
                endpoint: endpoint.to_owned(),
                outcome,
                status_code: None,
                retry_after_ms,
                reason: None,
            },
            attempted_at_ms: at,
            attempted_at: String::new(),
        }
    }

    #[test]
    fn a_redelivered_step_keeps_settled_deliveries_and_running_holds() {
        let previous = NotificationActivity {
            notification_id: "n".into(),
            tenant_id: "t".into(),
            player_id: 1,
            channel: "WEB_PUSH".into(),
            template_id: Some(1),
            language_enabled_id: Some("en".into()),
            status: "retrying".into(),
            delivered: false,
            delivery_ids: vec![],
            invalidated_subscriptions: vec![],
            deliveries: vec![
                record("a", DeliveryOutcome::Delivered, 1000, None),
                record("b", DeliveryOutcome::Expired, 1000, None),
                record("c", DeliveryOutcome::Retry, 1000, Some(60_000)),
                record("d", DeliveryOutcome::Retry, 1000, Some(1_000)),
                record("e", DeliveryOutcome::Retry, 1000, None),
            ],
            run_id: None,
            attempts: 1,
            content: Value::Null,
            created_at_ms: 1000,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let (settled, held) = settled_and_held(Some(&previous), 11_000);
        let endpoints: Vec<&str> = settled.iter().map(|d| d.delivery.endpoint.as_str()).collect();
        assert_eq!(endpoints, ["a", "b"]);
        assert_eq!(held.len(), 1);
        assert_eq!(held["c"].retry_after_ms, Some(50_000), "the hold counts from the attempt");
        assert_eq!(notification_id("webpush", "k").len(), 32);
        assert_ne!(notification_id("webpush", "k"), notification_id("inapp", "k"));
    }
}
