//! Push subscriptions: storing (or reactivating) the subscription of one endpoint, and deactivating it. A
//! subscription is keyed by `sha256(endpoint)` ([`subscription_id`]) and carries `user_identity`
//! `<tenant_id>_<player_id>`; re-subscribing an endpoint reactivates it with the new keys, keeping `created_at`
//! for the same identity. Whether a caller may move an endpoint away from the tenant that [`holder`] reports is
//! the caller's decision, made before [`store`].

use flowhost_core::collections::WEBPUSH_SUBSCRIPTIONS;
use flowhost_core::ports::{DocumentStore, IndexSpec, PortError, Ports};
use flowhost_core::stored::{self, Collection, Document};
use serde::{Deserialize, Serialize};

use crate::records::{iso, register_tenant, subscription_id, user_identity};

/// A subscription to store, validated, with who asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSubscription {
    pub tenant_id: String,
    pub player_id: i64,
    /// The push service's https endpoint.
    pub endpoint: String,
    /// The browser's P-256 public key, base64url.
    pub p256dh: String,
    /// The browser's authentication secret, base64url.
    pub auth: String,
    pub user_agent: Option<String>,
    /// Always `web` today.
    pub platform: String,
    pub caller_id: String,
    pub source_app: String,
}

/// A subscription as stored, under [`subscription_id`] of its endpoint; the sender finds a player's by
/// `user_identity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    pub tenant_id: String,
    pub player_id: i64,
    pub user_identity: String,
    pub endpoint: String,
    pub keys: SubscriptionKeys,
    #[serde(default)]
    pub user_agent: Option<String>,
    pub platform: String,
    /// `active` or `deactivated`.
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub deactivated_at: Option<String>,
    pub caller_id: String,
    pub source_app: String,
}

/// The browser's keys of a subscription, base64url.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionKeys {
    pub p256dh: String,
    pub auth: String,
}

impl Subscription {
    pub fn is_active(&self) -> bool {
        self.status == "active"
    }
}

impl Document for Subscription {
    const COLLECTION: &'static str = WEBPUSH_SUBSCRIPTIONS;

    fn id(&self) -> String {
        self.id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["user_identity"])]
    }
}

/// Creates the index the sender's lookups by player use.
pub async fn ensure_indexes(documents: &dyn DocumentStore) -> Result<(), PortError> {
    Collection::<Subscription>::ensure_indexes_in(documents).await
}

/// The stored subscription of `endpoint`, active or deactivated.
async fn stored_subscription(documents: &dyn DocumentStore, endpoint: &str) -> Result<Option<Subscription>, PortError> {
    let id = subscription_id(endpoint);
    documents.get(WEBPUSH_SUBSCRIPTIONS, &id).await?.map(|doc| stored::decode(WEBPUSH_SUBSCRIPTIONS, doc)).transpose()
}

/// Who holds an endpoint's subscription before a write, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub tenant_id: String,
    pub player_id: Option<i64>,
    pub created_at: Option<String>,
}

/// What [`store`] stored: the subscription's id and its creation time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub id: String,
    pub created_at: String,
}

/// The holder of `endpoint`'s stored subscription, if there is one (active or deactivated).
pub async fn holder(documents: &dyn DocumentStore, endpoint: &str) -> Result<Option<Holder>, PortError> {
    let existing = stored_subscription(documents, endpoint).await?;
    Ok(existing.map(|subscription| Holder {
        tenant_id: subscription.tenant_id,
        player_id: Some(subscription.player_id),
        created_at: Some(subscription.created_at),
    }))
}

/// Stores (or reactivates) the subscription of `subscription.endpoint`, active; `holder` is what [`holder`]
/// reported. `created_at` stays when the same identity subscribes again; the tenant is registered.
pub async fn store(
    ports: &Ports,
    subscription: &NewSubscription,
    holder: Option<&Holder>,
) -> Result<Stored, PortError> {
    let NewSubscription { tenant_id, player_id, endpoint, .. } = subscription;
    let id = subscription_id(endpoint);
    let now = ports.clock.now_ms();
    let mut created_at = iso(now);
    if let Some(holder) = holder {
        if holder.tenant_id == *tenant_id && holder.player_id == Some(*player_id) {
            created_at = holder.created_at.clone().unwrap_or(created_at);
        }
    }
    let stored = Subscription {
        id: id.clone(),
        tenant_id: tenant_id.clone(),
        player_id: *player_id,
        user_identity: user_identity(tenant_id, *player_id),
        endpoint: endpoint.clone(),
        keys: SubscriptionKeys { p256dh: subscription.p256dh.clone(), auth: subscription.auth.clone() },
        user_agent: subscription.user_agent.clone(),
        platform: subscription.platform.clone(),
        status: "active".to_owned(),
        created_at: created_at.clone(),
        updated_at: iso(now),
        deactivated_at: None,
        caller_id: subscription.caller_id.clone(),
        source_app: subscription.source_app.clone(),
    };
    let documents = &ports.documents;
    documents.upsert(WEBPUSH_SUBSCRIPTIONS, &id, stored::encode(WEBPUSH_SUBSCRIPTIONS, &stored)?).await?;
    register_tenant(documents.as_ref(), tenant_id, now).await?;
    Ok(Stored { id, created_at })
}

/// What [`deactivate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deactivation {
    /// No subscription matches the whole tuple (tenant, player, endpoint).
    NoMatch,
    /// The matching subscription was active and is now deactivated.
    Deactivated,
    /// The matching subscription was already deactivated.
    AlreadyDeactivated,
}

/// Deactivates the subscription of `endpoint` when tenant, player and endpoint all match it.
pub async fn deactivate(
    ports: &Ports,
    tenant_id: &str,
    player_id: i64,
    endpoint: &str,
) -> Result<Deactivation, PortError> {
    let documents = ports.documents.as_ref();
    let Some(mut subscription) = stored_subscription(documents, endpoint).await? else {
        return Ok(Deactivation::NoMatch);
    };
    let matches =
        subscription.tenant_id == tenant_id && subscription.player_id == player_id && subscription.endpoint == endpoint;
    if !matches {
        return Ok(Deactivation::NoMatch);
    }
    if subscription.status == "deactivated" {
        return Ok(Deactivation::AlreadyDeactivated);
    }
    let now = iso(ports.clock.now_ms());
    subscription.status = "deactivated".to_owned();
    subscription.deactivated_at = Some(now.clone());
    subscription.updated_at = now;
    let doc = stored::encode(WEBPUSH_SUBSCRIPTIONS, &subscription)?;
    documents.replace(WEBPUSH_SUBSCRIPTIONS, &subscription.id, doc).await?;
    Ok(Deactivation::Deactivated)
}
