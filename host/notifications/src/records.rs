//! The stored records of the push service and how they are keyed: subscriptions (one per endpoint, id
//! `sha256(endpoint)` in hex, grouped by `user_identity` `<tenant_id>_<player_id>`; written by
//! [`crate::subscriptions`]), notification activity (one per notification, written by the sender, expiring after
//! the retention days), interaction events (browser and semantic, expiring likewise; written by
//! [`crate::events`]) and the tenants the service has seen. The sender (a later issue) writes activity through
//! [`store_activity`], so the editor routes and the retention sweep agree with it; the editor reads it with
//! [`list_activity`] and [`notification`].

use std::collections::BTreeSet;
use std::time::Duration;

use flowhost_core::collections::{WEBPUSH_ACTIVITY, WEBPUSH_EVENTS, WEBPUSH_TENANTS};
use flowhost_core::ports::{Direction, DocumentStore, IndexSpec, PortError, Ports, Query};
use flowhost_core::stored::{self, Collection, Document};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::policy::CallerPolicy;

pub use flowhost_core::digest::iso_utc as iso;
use flowhost_core::digest::sha256_hex;

/// How long activity and interaction events are kept: `days` (`FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS`).
pub fn retention(days: u32) -> Duration {
    Duration::from_secs(u64::from(days) * 24 * 3600)
}

/// The expiry of a record written at `at_ms` and kept for `retention`.
pub(crate) fn expiry(at_ms: i64, retention: Duration) -> i64 {
    at_ms.saturating_add(retention.as_millis() as i64)
}

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
    /// Every delivery to a subscription with its outcome (a redelivered step adds only what it sent again).
    #[serde(default)]
    pub deliveries: Vec<DeliveryRecord>,
    /// The flow run (or the editor's send) the notification belongs to.
    #[serde(default)]
    pub run_id: Option<String>,
    /// How many times the sender worked on this notification (a redelivered step adds one).
    #[serde(default)]
    pub attempts: u32,
    /// Rendered payload metadata (title, body, target_url, tag, ...).
    #[serde(default)]
    pub content: Value,
    pub created_at_ms: i64,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
}

/// One delivery of a notification to one subscription, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    #[serde(flatten)]
    pub delivery: flowhost_core::notify::Delivery,
    pub attempted_at_ms: i64,
    #[serde(default)]
    pub attempted_at: String,
}

/// Writes (or rewrites) an activity record; it expires `retention` (see [`retention`]) after its creation.
pub async fn store_activity(
    ports: &Ports,
    retention: Duration,
    activity: &NotificationActivity,
) -> Result<(), PortError> {
    let now = ports.clock.now_ms();
    let mut record = activity.clone();
    record.created_at = iso(record.created_at_ms);
    record.updated_at = iso(now);
    let doc = stored::encode(WEBPUSH_ACTIVITY, &record)?;
    let expires_at = expiry(record.created_at_ms, retention);
    ports.documents.upsert_expiring(WEBPUSH_ACTIVITY, &record.id(), doc, expires_at).await
}

/// Which activity records to list: filters (each `None` matches all) and the page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityQuery {
    pub tenant_id: Option<String>,
    pub player_id: Option<i64>,
    pub status: Option<String>,
    pub limit: usize,
    pub offset: usize,
}

/// One page of activity records, newest first, and how many matched in all.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityPage {
    pub items: Vec<Value>,
    pub total: usize,
}

/// The activity records matching `query`, newest first (`created_at_ms`, then `notification_id`, descending).
pub async fn list_activity(documents: &dyn DocumentStore, query: &ActivityQuery) -> Result<ActivityPage, PortError> {
    // One page, filtered, ordered and counted by the store (newest first; ties by notification id, newest
    // first too): never the whole collection in memory.
    let mut page = Query::new();
    if let Some(tenant) = &query.tenant_id {
        page = page.eq("tenant_id", json!(tenant));
    }
    if let Some(player) = query.player_id {
        page = page.eq("player_id", json!(player));
    }
    if let Some(status) = &query.status {
        page = page.eq("status", json!(status));
    }
    let page = page
        .sort("created_at_ms", Direction::Desc)
        .limit(u64::try_from(query.limit).unwrap_or(u64::MAX))
        .offset(u64::try_from(query.offset).unwrap_or(u64::MAX));
    let found = documents.query(WEBPUSH_ACTIVITY, &page).await?;
    Ok(ActivityPage { total: usize::try_from(found.total).unwrap_or(usize::MAX), items: found.items })
}

/// An activity record is stored under its notification's id. Its indexes are the activity list's: by tenant,
/// newest first (with or without a player), and the whole collection newest first.
impl Document for NotificationActivity {
    const COLLECTION: &'static str = WEBPUSH_ACTIVITY;

    fn id(&self) -> String {
        self.notification_id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        let index = |fields: &[&str]| IndexSpec {
            fields: fields
                .iter()
                .map(|field| {
                    (field.to_string(), if *field == "created_at_ms" { Direction::Desc } else { Direction::Asc })
                })
                .collect(),
            unique: false,
            sparse: false,
        };
        vec![
            index(&["tenant_id", "created_at_ms"]),
            index(&["tenant_id", "player_id", "created_at_ms"]),
            index(&["created_at_ms"]),
        ]
    }
}

/// Creates the activity list's indexes ([`NotificationActivity`]'s).
pub async fn ensure_activity_indexes(documents: &dyn DocumentStore) -> Result<(), PortError> {
    Collection::<NotificationActivity>::ensure_indexes_in(documents).await
}

/// The activity record of notification `id` with its interaction events (oldest first) under `events`; `None`
/// when it is missing (or expired and swept) or outside `scope` (a tenant; `None`: every tenant).
pub async fn notification(
    documents: &dyn DocumentStore,
    id: &str,
    scope: Option<&str>,
) -> Result<Option<Value>, PortError> {
    let Some(mut record) = documents.get(WEBPUSH_ACTIVITY, id).await? else {
        return Ok(None);
    };
    let tenant = record["tenant_id"].as_str().unwrap_or_default().to_owned();
    if scope.is_some_and(|selected| selected != tenant) {
        return Ok(None);
    }
    let mut events = documents.find(WEBPUSH_EVENTS, "notification_id", &json!(id)).await?;
    events.retain(|event| event["tenant_id"].as_str() == Some(tenant.as_str()));
    events.sort_by(|a, b| a["occurred_at"].as_str().cmp(&b["occurred_at"].as_str()));
    record["events"] = Value::Array(events);
    Ok(Some(record))
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

/// A tenant as the tenants list and the `tenants` data source show it: `tenant_id`, and `default_language` when
/// one is configured (`FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES`).
pub fn tenant_row(tenant: &str, languages: &std::collections::BTreeMap<String, String>) -> serde_json::Value {
    let mut row = serde_json::json!({ "tenant_id": tenant });
    if let Some(language) = languages.get(tenant) {
        row["default_language"] = serde_json::json!(language);
    }
    row
}

/// Every tenant the deployment knows: `configured` (`FLOWHOST_WEBPUSH_TENANTS`), those the caller `policy` names
/// in `tenant_ids`, and every tenant seen on a stored subscription or template.
pub async fn known_tenants(
    documents: &dyn DocumentStore,
    configured: &[String],
    policy: Option<&CallerPolicy>,
) -> Result<BTreeSet<String>, PortError> {
    let mut tenants: BTreeSet<String> = configured.iter().cloned().collect();
    if let Some(policy) = policy {
        for caller in policy.callers() {
            tenants.extend(caller.tenant_ids().into_iter().flatten().map(str::to_owned));
        }
    }
    for doc in documents.list(WEBPUSH_TENANTS).await? {
        if let Some(tenant) = doc["tenant_id"].as_str() {
            tenants.insert(tenant.to_owned());
        }
    }
    Ok(tenants)
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
