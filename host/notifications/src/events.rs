//! Interaction events: `displayed`, `clicked` and `closed` reports from a service worker (browser events, their
//! identity taken from the interaction token) and `opened` and `read` reports from the product server (semantic
//! events, identity from the report). Each is stored once per report, keyed by kind, tenant, player and the
//! reporter's `event_id` ([`crate::records::event_id`]), and expires the retention after its receipt, never later
//! than the spec's 30-day interaction-event TTL ([`INTERACTION_EVENT_TTL`]): the retention setting
//! (`FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`, the sender's) may shorten it, never lengthen it, and the push-api
//! role enforces it at boot over events stored before ([`enforce_event_ttl`]).

use std::time::Duration;

use flowhost_core::collections::WEBPUSH_EVENTS;
use flowhost_core::ports::{DocumentStore, Filter, PortError, Query};
use serde_json::{json, Value};

use crate::records::{event_id, expiry, iso};

/// Where an event comes from, with what only that source reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSource {
    /// A service worker's report, authenticated by its interaction token.
    Browser { endpoint: Option<String>, action_id: Option<String> },
    /// The product server's report.
    Semantic,
}

impl EventSource {
    /// The source's name, as stored (`source`) and in the event's key.
    pub fn name(&self) -> &'static str {
        match self {
            EventSource::Browser { .. } => "browser",
            EventSource::Semantic => "semantic",
        }
    }
}

/// One interaction event, validated and authorized.
#[derive(Debug, Clone, PartialEq)]
pub struct InteractionEvent {
    pub source: EventSource,
    /// The reporter's id of this report: a repeated report overwrites itself.
    pub event_id: String,
    pub event_type: String,
    pub tenant_id: String,
    pub player_id: i64,
    pub notification_id: String,
    pub delivery_id: String,
    /// When it happened, as reported (ISO 8601).
    pub occurred_at: String,
    /// When the service received it (milliseconds since the Unix epoch, from the injected clock).
    pub received_at_ms: i64,
    pub metadata: Value,
    pub caller_id: String,
    pub source_app: String,
}

/// The spec's interaction-event TTL (seed 000, limits): 30 days after receipt.
pub const INTERACTION_EVENT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long an event is kept under the retention setting `retention`: at most [`INTERACTION_EVENT_TTL`].
pub fn event_retention(retention: Duration) -> Duration {
    retention.min(INTERACTION_EVENT_TTL)
}

/// Events removed per query of [`enforce_event_ttl`].
const TTL_PAGE: u64 = 500;

/// Removes every interaction event received more than [`INTERACTION_EVENT_TTL`] before `now_ms`, whatever expiry
/// it was stored with (an event written under a longer retention setting); returns how many it removed. The
/// push-api role runs it at boot, before its retention sweep.
pub async fn enforce_event_ttl(documents: &dyn DocumentStore, now_ms: i64) -> Result<u64, PortError> {
    let ttl_ms = i64::try_from(INTERACTION_EVENT_TTL.as_millis()).unwrap_or(i64::MAX);
    // `received_at` is ISO 8601 in one fixed format, so its order as text is its order in time.
    let cutoff = iso(now_ms.saturating_sub(ttl_ms));
    let query = Query::new().filter("received_at", Filter::Lt(json!(cutoff))).limit(TTL_PAGE).without_total();
    let mut removed = 0;
    loop {
        let page = documents.query(WEBPUSH_EVENTS, &query).await?;
        let mut progressed = false;
        for doc in &page.items {
            let (Some(kind), Some(tenant), Some(player), Some(reported)) = (
                doc["source"].as_str(),
                doc["tenant_id"].as_str(),
                doc["player_id"].as_i64(),
                doc["event_id"].as_str(),
            ) else {
                continue;
            };
            if documents.delete(WEBPUSH_EVENTS, &event_id(kind, tenant, player, reported)).await? {
                removed += 1;
                progressed = true;
            }
        }
        if (page.items.len() as u64) < TTL_PAGE || !progressed {
            return Ok(removed);
        }
    }
}

/// Stores `event` (overwriting the same report); it expires `retention` after its receipt, at most
/// [`INTERACTION_EVENT_TTL`].
pub async fn store_event(
    documents: &dyn DocumentStore,
    retention: Duration,
    event: InteractionEvent,
) -> Result<(), PortError> {
    let InteractionEvent {
        source,
        event_id: reported_id,
        event_type,
        tenant_id,
        player_id,
        notification_id,
        delivery_id,
        occurred_at,
        received_at_ms,
        metadata,
        caller_id,
        source_app,
    } = event;
    let id = event_id(source.name(), &tenant_id, player_id, &reported_id);
    let mut doc = json!({
        "source": source.name(),
        "event_id": reported_id,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "player_id": player_id,
        "notification_id": notification_id,
        "delivery_id": delivery_id,
        "occurred_at": occurred_at,
        "received_at": iso(received_at_ms),
        "metadata": metadata,
        "caller_id": caller_id,
        "source_app": source_app,
    });
    // A browser event also names the subscription it came from and the action clicked.
    if let EventSource::Browser { endpoint, action_id } = source {
        doc["endpoint"] = json!(endpoint);
        doc["action_id"] = json!(action_id);
    }
    documents.upsert_expiring(WEBPUSH_EVENTS, &id, doc, expiry(received_at_ms, event_retention(retention))).await
}
