//! In-app messages: the players' inboxes and how messages reach connected players. A message is stored once
//! per notification (id from the step's idempotency key, so a redelivered step finds it) with its rendered
//! content, the `vertical` / `category` / `subcategory` it was sent with, and `unread` / `read` state; it expires
//! after the retention days. The sender hands each message to the player's open websockets as an
//! [`InAppDelivery`], a request on the player's own subject ([`player_subject`]): every node holding a websocket
//! of the player subscribes to it while it does, writes the message to those connections and answers how many
//! took it ([`DeliveryAnswer`]), so a player connected to another node receives it too, and the sender knows
//! whether any socket did ("no responders": none is open anywhere). A player missed while offline reads it from
//! the inbox on the next connect (resume after a cursor).
//!
//! A player's in-app channel is active unless deactivated ([`set_channel`]); a deactivated channel makes a send
//! a skip-forward.

use flowhost_core::collections::{INAPP_CHANNELS, INAPP_MESSAGES};
use flowhost_core::digest::sha256_hex;
use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, PortError, Ports, Query};
use flowhost_core::stored::{self, Collection, Document};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::records::{expiry, iso, user_identity};

use flowhost_core::collections::INAPP_PLAYER_SUBJECT_PREFIX;

/// The most messages one inbox page (or one resume) carries.
pub const MAX_PAGE: u64 = 200;

/// One in-app message as stored and as a connection receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxMessage {
    pub notification_id: String,
    pub tenant_id: String,
    pub player_id: i64,
    pub user_identity: String,
    pub template_id: i64,
    pub language_id: String,
    /// The rendered content: `title`, `body`, `image?`, `target_url?`, `actions`, `data`.
    pub content: Value,
    #[serde(default)]
    pub vertical: Option<String>,
    #[serde(default)]
    pub category: Option<String>,
    #[serde(default)]
    pub subcategory: Option<String>,
    /// `unread` or `read`.
    pub status: String,
    #[serde(default)]
    pub read_at: Option<String>,
    pub created_at_ms: i64,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub run_id: Option<String>,
    /// Orders an inbox: creation time, then id (what resume passes as `after`).
    pub cursor: String,
    /// When the message expires (milliseconds since the epoch): the retention days after its creation.
    pub expires_at_ms: i64,
}

/// The cursor of a message created at `created_at_ms` with `notification_id`: sorts as creation order.
pub fn cursor(created_at_ms: i64, notification_id: &str) -> String {
    format!("{:015}-{notification_id}", created_at_ms.max(0))
}

/// The subject of one player's in-app delivery: the prefix and a hash of the player (tenant ids may hold
/// characters a subject token cannot).
pub fn player_subject(tenant_id: &str, player_id: i64) -> String {
    format!("{INAPP_PLAYER_SUBJECT_PREFIX}.{}", &sha256_hex(&[&user_identity(tenant_id, player_id)])[..32])
}

/// A node's answer to an [`InAppDelivery`]: how many of its websockets took the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryAnswer {
    pub taken: usize,
}

/// What travels on a [`player_subject`]: one message for one player.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InAppDelivery {
    pub tenant_id: String,
    pub player_id: i64,
    pub message: InboxMessage,
}

/// An in-app message is stored under its notification's id, found by its player's identity in cursor order.
impl Document for InboxMessage {
    const COLLECTION: &'static str = INAPP_MESSAGES;

    fn id(&self) -> String {
        self.notification_id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["user_identity", "cursor"])]
    }
}

/// Creates the indexes the inbox queries use.
pub async fn ensure_indexes(documents: &dyn DocumentStore) -> Result<(), PortError> {
    Collection::<InboxMessage>::ensure_indexes_in(documents).await
}

/// The message of notification `id`, if stored.
pub async fn message(documents: &dyn DocumentStore, id: &str) -> Result<Option<InboxMessage>, PortError> {
    documents.get(INAPP_MESSAGES, id).await?.map(|doc| stored::decode(INAPP_MESSAGES, doc)).transpose()
}

/// Stores `message` only when its notification has no message yet (one write, no read first);
/// `PortError::Conflict` when it has one, which is left as it is.
pub async fn store_new(documents: &dyn DocumentStore, message: &InboxMessage) -> Result<(), PortError> {
    let doc = stored::encode(INAPP_MESSAGES, message)?;
    documents.insert_expiring(INAPP_MESSAGES, &message.id(), doc, message.expires_at_ms).await
}

/// Stores (or rewrites) `message`, expiring at its `expires_at_ms`.
pub async fn store(documents: &dyn DocumentStore, message: &InboxMessage) -> Result<(), PortError> {
    let doc = stored::encode(INAPP_MESSAGES, message)?;
    documents.upsert_expiring(INAPP_MESSAGES, &message.id(), doc, message.expires_at_ms).await
}

/// The expiry of a message created at `created_at_ms` and kept for `retention`.
pub fn expires_at(created_at_ms: i64, retention: std::time::Duration) -> i64 {
    expiry(created_at_ms, retention)
}

/// Which messages of an inbox to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxQuery {
    /// `unread` or `read`; `None`: both.
    pub status: Option<String>,
    /// Only messages after this cursor (resume), oldest first; `None`: newest first.
    pub after: Option<String>,
    pub limit: u64,
    pub offset: u64,
}

/// A page of an inbox and how many messages matched.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxPage {
    pub items: Vec<InboxMessage>,
    pub total: u64,
}

/// The inbox of `(tenant_id, player_id)` as `query` asks.
pub async fn inbox(
    documents: &dyn DocumentStore,
    tenant_id: &str,
    player_id: i64,
    query: &InboxQuery,
) -> Result<InboxPage, PortError> {
    let mut q = Query::new().eq("user_identity", json!(user_identity(tenant_id, player_id)));
    if let Some(status) = &query.status {
        q = q.eq("status", json!(status));
    }
    q = match &query.after {
        Some(after) => q.filter("cursor", Filter::Gt(json!(after))).sort("cursor", Direction::Asc),
        None => q.sort("cursor", Direction::Desc),
    };
    let page = documents.query(INAPP_MESSAGES, &q.limit(query.limit.min(MAX_PAGE)).offset(query.offset)).await?;
    let items = stored::decode_valid::<InboxMessage>(INAPP_MESSAGES, page.items)
        .into_iter()
        .filter(|m| m.tenant_id == tenant_id && m.player_id == player_id)
        .collect();
    Ok(InboxPage { items, total: page.total })
}

/// How many unread messages `(tenant_id, player_id)` has.
pub async fn unread_count(documents: &dyn DocumentStore, tenant_id: &str, player_id: i64) -> Result<u64, PortError> {
    let query = Query::new()
        .eq("user_identity", json!(user_identity(tenant_id, player_id)))
        .eq("status", json!("unread"))
        .limit(0);
    Ok(documents.query(INAPP_MESSAGES, &query).await?.total)
}

/// Marks the messages `ids` of `(tenant_id, player_id)` read; answers how many changed (others' messages,
/// unknown ids and messages already read are left alone).
pub async fn mark_read(ports: &Ports, tenant_id: &str, player_id: i64, ids: &[String]) -> Result<usize, PortError> {
    let now = iso(ports.clock.now_ms());
    let mut marked = 0;
    for id in ids {
        let Some(mut stored) = message(ports.documents.as_ref(), id).await? else { continue };
        if stored.tenant_id != tenant_id || stored.player_id != player_id || stored.status == "read" {
            continue;
        }
        stored.status = "read".to_owned();
        stored.read_at = Some(now.clone());
        store(ports.documents.as_ref(), &stored).await?;
        marked += 1;
    }
    Ok(marked)
}

fn channel_id(tenant_id: &str, player_id: i64) -> String {
    sha256_hex(&[tenant_id, &player_id.to_string()])
}

/// Whether the in-app channel of `(tenant_id, player_id)` is active (it is unless deactivated).
pub async fn channel_active(documents: &dyn DocumentStore, tenant_id: &str, player_id: i64) -> Result<bool, PortError> {
    let stored = documents.get(INAPP_CHANNELS, &channel_id(tenant_id, player_id)).await?;
    Ok(stored.is_none_or(|doc| doc["status"] != "deactivated"))
}

/// Activates or deactivates the in-app channel of `(tenant_id, player_id)`; answers whether it changed.
pub async fn set_channel(ports: &Ports, tenant_id: &str, player_id: i64, active: bool) -> Result<bool, PortError> {
    let documents = ports.documents.as_ref();
    let was_active = channel_active(documents, tenant_id, player_id).await?;
    if was_active == active {
        return Ok(false);
    }
    let id = channel_id(tenant_id, player_id);
    if active {
        documents.delete(INAPP_CHANNELS, &id).await?;
    } else {
        let now = iso(ports.clock.now_ms());
        let doc = json!({ "tenant_id": tenant_id, "player_id": player_id, "status": "deactivated", "at": now });
        documents.upsert(INAPP_CHANNELS, &id, doc).await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_sort_as_creation_order() {
        assert!(cursor(999, "b") < cursor(1000, "a"));
        assert!(cursor(1000, "a") < cursor(1000, "b"));
        assert_eq!(cursor(-5, "x"), cursor(0, "x"));
    }
}
