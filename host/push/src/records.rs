//! The stored records of the push service and how they are keyed: subscriptions (one per endpoint, id
//! `sha256(endpoint)` in hex, grouped by `user_identity` `<tenant_id>_<player_id>`), notification activity (one
//! per notification, written by the sender, expiring after the retention days), interaction events (browser and
//! semantic, expiring likewise) and the tenants the service has seen. The sender (a later issue) writes activity
//! through [`store_activity`], so the editor routes and the retention sweep agree with it.

use flowhost_core::collections::{WEBPUSH_ACTIVITY, WEBPUSH_TENANTS};
use flowhost_core::ports::{DocumentStore, PortError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::PushState;

pub use flowhost_core::digest::iso_utc as iso;
use flowhost_core::digest::sha256_hex;

/// The document id (and response `id`) of the subscription of `endpoint`.
pub fn subscription_id(endpoint: &str) -> String {
    sha256_hex(&[endpoint])
}

/// The storage identity of a recipient, as the spec gives it: `<tenant_id>_<player_id>`.
pub fn user_identity(tenant_id: &str, player_id: i64) -> String {
    format!("{tenant_id}_{player_id}")
}

/// The document id of an interaction event: the reporter's `event_id` within its kind and identity, so a
/// repeated report overwrites itself and no caller can overwrite another tenant's event.
pub fn event_id(kind: &str, tenant_id: &str, player_id: i64, event_id: &str) -> String {
    sha256_hex(&[kind, tenant_id, &player_id.to_string(), event_id])
}

/// A notification activity record: what was rendered for one notification and how its delivery went. The
/// sender writes and updates it; the editor lists it (`/api/v1/webpush/activity`) and reads it
/// (`/api/v1/webpush/notifications/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationActivity {
    pub notification_id: String,
    pub tenant_id: String,
    pub player_id: i64,
    /// `WEB_PUSH` or `IN_APP`.
    pub channel: String,
    #[serde(default)]
    pub template_id: Option<i64>,
    #[serde(default)]
    pub language_enabled_id: Option<String>,
    /// The sender's outcome, e.g. `delivered`, `subscription_expired`, `no_subscriptions`.
    pub status: String,
    pub delivered: bool,
    #[serde(default)]
    pub delivery_ids: Vec<String>,
    #[serde(default)]
    pub invalidated_subscriptions: Vec<String>,
    /// Rendered payload metadata (title, body, target_url, tag, ...).
    #[serde(default)]
    pub content: Value,
    pub created_at_ms: i64,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
}

/// Writes (or rewrites) an activity record; it expires `retention days` after its creation.
pub async fn store_activity(state: &PushState, activity: &NotificationActivity) -> Result<(), PortError> {
    let now = state.ports.clock.now_ms();
    let mut record = activity.clone();
    record.created_at = iso(record.created_at_ms);
    record.updated_at = iso(now);
    let doc = serde_json::to_value(&record).map_err(|e| PortError::Invalid(e.to_string()))?;
    let expires_at = record.created_at_ms.saturating_add(state.retention_ms());
    state.ports.documents.upsert_expiring(WEBPUSH_ACTIVITY, &record.notification_id, doc, expires_at).await
}

/// Remembers that `tenant_id` exists (for the editor's tenants list). Cheap when it is already known.
pub async fn register_tenant(documents: &dyn DocumentStore, tenant_id: &str, now_ms: i64) -> Result<(), PortError> {
    let id = sha256_hex(&[tenant_id]);
    if documents.get(WEBPUSH_TENANTS, &id).await?.is_some() {
        return Ok(());
    }
    match documents.insert(WEBPUSH_TENANTS, &id, json!({ "tenant_id": tenant_id, "first_seen_at": iso(now_ms) })).await
    {
        Ok(()) | Err(PortError::Conflict(_)) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_times() {
        assert_eq!(user_identity("casino-1", 42), "casino-1_42");
        assert_eq!(subscription_id("https://push.example/a").len(), 64);
        assert_ne!(subscription_id("https://push.example/a"), subscription_id("https://push.example/b"));
        assert_ne!(event_id("browser", "ab", 1, "c"), event_id("browser", "a", 1, "bc"));
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
    }
}
