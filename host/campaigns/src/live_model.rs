//! What the live-events slice stores and answers (see [`crate::live`] for how it is read): the live events
//! themselves, the per-hour and all-time counts per kind, and the names of their collections. The read models
//! ([`crate::read_model`]) and the slice's sync both use them.

use flowhost_core::ports::IndexSpec;
use flowhost_core::stored::Document;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const LIVE_EVENTS: &str = "live_events";
pub const ENGAGEMENT: &str = "campaign_engagement";
pub const LIVE_EVENT_HOURS: &str = "live_event_hours";
pub const LIVE_EVENT_TOTALS: &str = "live_event_totals";

/// A tenant's live events per kind: of one hour (`hour_ms` its start), or of all time (`hour_ms` `None`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveCounts {
    pub tenant_id: String,
    pub hour_ms: Option<i64>,
    pub counts: std::collections::BTreeMap<String, u64>,
}

impl LiveCounts {
    /// The events of `kind` (`None`: of every kind).
    pub fn total(&self, kind: Option<&str>) -> u64 {
        match kind {
            Some(kind) => self.counts.get(kind).copied().unwrap_or(0),
            None => self.counts.values().sum(),
        }
    }
}

/// One live event (collection `live_events`, id = `event_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveEvent {
    /// `run:<run_id>`, `delivery:<notification_id>` or
    /// `interaction:<tenant_id>:<player_id>:<source>:<event_id>`.
    pub event_id: String,
    pub tenant_id: String,
    pub kind: String,
    pub occurred_at: String,
    pub occurred_ms: i64,
    pub campaign_id: Option<String>,
    pub run_id: Option<String>,
    pub notification_id: Option<String>,
    pub player_id: Option<i64>,
    /// `WEB_PUSH` or `IN_APP` for deliveries.
    pub channel: Option<String>,
    /// The interaction's type (`displayed`, `clicked`, `closed`, `opened`, `read`).
    pub interaction_type: Option<String>,
}

impl LiveEvent {
    /// What the API answers for it.
    pub fn item(&self) -> Value {
        json!({
            "event_id": self.event_id,
            "kind": self.kind,
            "occurred_at": self.occurred_at,
            "campaign_id": self.campaign_id,
            "run_id": self.run_id,
            "notification_id": self.notification_id,
            "player_id": self.player_id,
            "channel": self.channel,
            "interaction_type": self.interaction_type,
        })
    }
}

/// The kinds a live-events list can be filtered by.
pub const KINDS: [&str; 4] = ["run_completed", "run_dead_lettered", "notification_delivered", "interaction"];

impl Document for LiveEvent {
    const COLLECTION: &'static str = LIVE_EVENTS;

    fn id(&self) -> String {
        self.event_id.clone()
    }

    /// A tenant's events by time, by kind, by campaign, and a campaign's by kind (the list's filters and the
    /// campaign counts).
    fn indexes() -> Vec<IndexSpec> {
        [
            &["tenant_id", "occurred_ms"][..],
            &["tenant_id", "kind", "occurred_ms"],
            &["tenant_id", "campaign_id", "occurred_ms"],
            &["tenant_id", "campaign_id", "kind"],
        ]
        .map(IndexSpec::ascending)
        .into()
    }
}

/// An hour's counts live in [`LIVE_EVENT_HOURS`] under `<tenant_id>:<hour start>`; a tenant's totals (no hour)
/// in [`LIVE_EVENT_TOTALS`] under the tenant id (`Collection::named` on that collection).
impl Document for LiveCounts {
    const COLLECTION: &'static str = LIVE_EVENT_HOURS;

    fn id(&self) -> String {
        match self.hour_ms {
            Some(hour_ms) => format!("{}:{hour_ms}", self.tenant_id),
            None => self.tenant_id.clone(),
        }
    }

    /// A tenant's hours, summed into its totals.
    fn indexes() -> Vec<IndexSpec> {
        vec![IndexSpec::ascending(&["tenant_id"])]
    }
}
