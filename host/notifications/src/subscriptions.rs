//! Push subscriptions: storing (or reactivating) the subscription of one endpoint, and deactivating it. A
//! subscription is keyed by `sha256(endpoint)` ([`subscription_id`]) and carries `user_identity`
//! `<tenant_id>_<player_id>`; re-subscribing an endpoint reactivates it with the new keys, keeping `created_at`
//! for the same identity. Whether a caller may move an endpoint away from the tenant that [`holder`] reports is
//! the caller's decision, made before [`store`].

use flowhost_core::collections::WEBPUSH_SUBSCRIPTIONS;
use flowhost_core::ports::{DocumentStore, PortError, Ports};
use serde_json::json;

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
    let existing = documents.get(WEBPUSH_SUBSCRIPTIONS, &subscription_id(endpoint)).await?;
    Ok(existing.map(|doc| Holder {
        tenant_id: doc["tenant_id"].as_str().unwrap_or_default().to_owned(),
        player_id: doc["player_id"].as_i64(),
        created_at: doc["created_at"].as_str().map(str::to_owned),
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
    let doc = json!({
        "id": id,
        "tenant_id": tenant_id,
        "player_id": player_id,
        "user_identity": user_identity(tenant_id, *player_id),
        "endpoint": endpoint,
        "keys": { "p256dh": subscription.p256dh, "auth": subscription.auth },
        "user_agent": subscription.user_agent,
        "platform": subscription.platform,
        "status": "active",
        "created_at": created_at,
        "updated_at": iso(now),
        "deactivated_at": null,
        "caller_id": subscription.caller_id,
        "source_app": subscription.source_app,
    });
    let documents = &ports.documents;
    documents.upsert(WEBPUSH_SUBSCRIPTIONS, &id, doc).await?;
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
    let documents = &ports.documents;
    let id = subscription_id(endpoint);
    let Some(mut doc) = documents.get(WEBPUSH_SUBSCRIPTIONS, &id).await? else {
        return Ok(Deactivation::NoMatch);
    };
    let matches = doc["tenant_id"].as_str() == Some(tenant_id)
        && doc["player_id"].as_i64() == Some(player_id)
        && doc["endpoint"].as_str() == Some(endpoint);
    if !matches {
        return Ok(Deactivation::NoMatch);
    }
    if doc["status"] == "deactivated" {
        return Ok(Deactivation::AlreadyDeactivated);
    }
    let now = iso(ports.clock.now_ms());
    doc["status"] = json!("deactivated");
    doc["deactivated_at"] = json!(now);
    doc["updated_at"] = json!(now);
    documents.replace(WEBPUSH_SUBSCRIPTIONS, &id, doc).await?;
    Ok(Deactivation::Deactivated)
}
