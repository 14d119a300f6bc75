//! Interaction events: `displayed`, `clicked` and `closed` reports from a service worker (browser events, their
//! identity taken from the interaction token) and `opened` and `read` reports from the product server (semantic
//! events, identity from the report). Each is stored once per report, keyed by kind, tenant, player and the
//! reporter's `event_id` ([`crate::records::event_id`]), and expires the retention after its receipt.

use std::time::Duration;

use flowhost_core::collections::WEBPUSH_EVENTS;
use flowhost_core::ports::{DocumentStore, PortError};
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

/// Stores `event` (overwriting the same report); it expires `retention` after its receipt.
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
    documents.upsert_expiring(WEBPUSH_EVENTS, &id, doc, expiry(received_at_ms, retention)).await
}
