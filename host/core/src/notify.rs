//! The notification capability as the host sees it: what a sender plugin asks for (`wit/flowhost-notify*`,
//! interface `sender`, every served version) in host types, and the [`Notifications`] trait the plugin runtime calls. The runtime
//! (`host/runtime`) translates the WIT calls into these types; the web-push domain (`host/notifications`, its
//! `sender` module) implements the trait with the secrets, the stores and the push client, so neither knows
//! the other.

use async_trait::async_trait;
use serde::Serialize;

/// Why the host could not do what was asked (WIT `send-failure`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendFailure {
    /// The request cannot succeed as given; retrying it cannot help.
    #[error("{0}")]
    Invalid(String),
    /// A transient host-side failure; try again later.
    #[error("{0}")]
    Unavailable(String),
    /// The host cannot send here (no sender in this process, or its keys are missing).
    #[error("{0}")]
    NotReady(String),
    /// The deployment does not run the channel (`FLOWHOST_CHANNELS_ENABLED`).
    #[error("{0}")]
    ChannelDisabled(String),
}

/// The most bytes of the JSON object a `send_webpush` passes through into the payload's `data`.
pub const MAX_PASSTHROUGH_DATA_BYTES: usize = 1024;

/// One `send_webpush` invocation (WIT `web-push-request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPushRequest {
    pub tenant_id: String,
    pub player_id: i64,
    pub template_id: i64,
    pub language_enabled_id: String,
    pub placeholders: Vec<(String, String)>,
    pub idempotency_key: String,
    pub run_id: Option<String>,
    /// Free-form fields for the payload's `data` (a JSON object of at most [`MAX_PASSTHROUGH_DATA_BYTES`]).
    pub data: Option<String>,
}

/// What became of one subscription (WIT `delivery-outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryOutcome {
    Delivered,
    Expired,
    Retry,
    Rejected,
    Skipped,
}

impl DeliveryOutcome {
    /// `delivered`, `expired`, `retry`, `rejected` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryOutcome::Delivered => "delivered",
            DeliveryOutcome::Expired => "expired",
            DeliveryOutcome::Retry => "retry",
            DeliveryOutcome::Rejected => "rejected",
            DeliveryOutcome::Skipped => "skipped",
        }
    }
}

/// One delivery to one subscription (WIT `delivery`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Delivery {
    pub delivery_id: String,
    pub endpoint: String,
    pub outcome: DeliveryOutcome,
    #[serde(default)]
    pub status_code: Option<u16>,
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a web-push send did (WIT `web-push-report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebPushReport {
    pub notification_id: String,
    pub deliveries: Vec<Delivery>,
}

/// One `send_inapp` invocation (WIT `in-app-request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InAppRequest {
    pub tenant_id: String,
    pub player_id: i64,
    pub template_id: i64,
    pub language_id: Option<String>,
    pub placeholders: Vec<(String, String)>,
    pub vertical: Option<String>,
    pub category: Option<String>,
    pub subcategory: Option<String>,
    pub idempotency_key: String,
    pub run_id: Option<String>,
}

/// What became of an in-app message (WIT `in-app-outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InAppOutcome {
    /// Stored in the inbox, and an open websocket of the player took it.
    Delivered,
    /// Stored in the inbox; no open websocket took it (the player reads it on the next connect).
    Stored,
    /// The player's in-app channel is deactivated; nothing stored.
    Inactive,
}

/// What an in-app send did (WIT `in-app-report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InAppReport {
    pub notification_id: String,
    pub outcome: InAppOutcome,
}

/// The channel of a template (WIT `channel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateChannel {
    WebPush,
    InApp,
}

/// The host side of the `notifications` capability.
#[async_trait]
pub trait Notifications: Send + Sync + 'static {
    /// Renders and delivers a web-push notification to every active subscription of the recipient.
    async fn send_webpush(&self, request: WebPushRequest) -> Result<WebPushReport, SendFailure>;
    /// Records the plugin's classification of a notification.
    async fn complete(&self, notification_id: &str, status: &str, delivered: bool) -> Result<(), SendFailure>;
    /// Renders an in-app message, stores it in the inbox and hands it to the player's open websockets.
    async fn send_inapp(&self, request: InAppRequest) -> Result<InAppReport, SendFailure>;
    /// The templates of `channel` (of `tenant_id`, or every tenant), as a JSON document.
    async fn templates(&self, channel: TemplateChannel, tenant_id: Option<&str>) -> Result<String, SendFailure>;
    /// The fields template `template_id` of `channel` takes, as a JSON document.
    async fn template_fields(&self, channel: TemplateChannel, template_id: i64) -> Result<String, SendFailure>;
    /// The known tenants, as a JSON document.
    async fn tenants(&self) -> Result<String, SendFailure>;
}
