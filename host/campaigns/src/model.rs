//! What a campaign is: a v2 flow carrying campaign metadata (`campaign` on the flow: its tenant, offering,
//! start and end, archived), edited with the flow, with `campaign_origin` `flow`; or a campaign of the optional
//! external campaign source (see [`crate::external`]), with `campaign_origin` `external` and a campaign id
//! `external:<its id>` (flow ids never contain `:`, so the two never collide). The `ui_status` bucket, first
//! match wins:
//!
//! 1. `ended`: archived, or its end has passed;
//! 2. `suggestions`: never released (a draft); for an external campaign, its state `draft`;
//! 3. `paused`: released but disabled, or invalid (its released version has `broken_reasons`); for an external
//!    campaign, its state `paused`;
//! 4. `running`: released, enabled and valid; for an external campaign, its state `active`.

use flowhost_flows::FlowRecord;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UiStatus {
    Suggestions,
    Running,
    Paused,
    Ended,
}

impl UiStatus {
    pub const ALL: [UiStatus; 4] = [UiStatus::Suggestions, UiStatus::Running, UiStatus::Paused, UiStatus::Ended];

    pub fn as_str(self) -> &'static str {
        match self {
            UiStatus::Suggestions => "suggestions",
            UiStatus::Running => "running",
            UiStatus::Paused => "paused",
            UiStatus::Ended => "ended",
        }
    }

    pub fn parse(text: &str) -> Option<UiStatus> {
        UiStatus::ALL.into_iter().find(|status| status.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Flow,
    External,
}

impl Origin {
    pub const ALL: [Origin; 2] = [Origin::Flow, Origin::External];

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Flow => "flow",
            Origin::External => "external",
        }
    }

    pub fn parse(text: &str) -> Option<Origin> {
        Origin::ALL.into_iter().find(|origin| origin.as_str() == text)
    }
}

/// An external campaign's own state (what the source says; `ui_status` is derived from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExternalState {
    Draft,
    Active,
    Paused,
}

/// Milliseconds since the epoch of an RFC 3339 instant.
pub fn instant_ms(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|at| at.timestamp_millis())
}

/// One campaign as the read model keeps it (collection `campaign_rows`, id `<tenant_id>:<campaign_id>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignDoc {
    pub campaign_id: String,
    pub tenant_id: String,
    pub name: String,
    pub campaign_origin: Origin,
    pub ui_status: UiStatus,
    /// The flow's own status (`draft`, `valid`, `invalid`); `None` for an external campaign.
    pub flow_status: Option<String>,
    /// An external campaign's state; `None` for a flow.
    #[serde(default)]
    pub external_state: Option<ExternalState>,
    pub enabled: bool,
    pub released_version: Option<u64>,
    pub starts_at: Option<String>,
    pub ends_at: Option<String>,
    pub archived: bool,
    pub description: String,
    pub offering: String,
    pub broken_reasons: Vec<Value>,
    pub created_at: String,
    pub updated_at: String,
    /// Distinct players with a delivered notification or an interaction from the campaign's runs.
    #[serde(default)]
    pub players_engaged: u64,
    #[serde(default)]
    pub deliveries: u64,
    #[serde(default)]
    pub interactions: u64,
}

impl CampaignDoc {
    /// The campaign of a v2 flow, as of `now_ms`; `None` when the flow carries no campaign metadata.
    pub fn from_flow(flow: &FlowRecord, now_ms: i64) -> Option<CampaignDoc> {
        let campaign = flow.campaign.as_ref()?;
        let mut doc = CampaignDoc {
            campaign_id: flow.id.clone(),
            tenant_id: campaign.tenant_id.clone(),
            name: flow.name.clone(),
            campaign_origin: Origin::Flow,
            ui_status: UiStatus::Suggestions,
            flow_status: Some(serde_json::to_value(flow.status).ok()?.as_str()?.to_owned()),
            external_state: None,
            enabled: flow.enabled,
            released_version: flow.released_version,
            starts_at: campaign.starts_at.clone(),
            ends_at: campaign.ends_at.clone(),
            archived: campaign.archived,
            description: flow.description.clone(),
            offering: campaign.offering.clone(),
            broken_reasons: flow.broken_reasons.iter().filter_map(|issue| serde_json::to_value(issue).ok()).collect(),
            created_at: flow.created_at.clone(),
            updated_at: flow.updated_at.clone(),
            players_engaged: 0,
            deliveries: 0,
            interactions: 0,
        };
        doc.ui_status = doc.status_at(now_ms);
        Some(doc)
    }

    /// The bucket at `now_ms` (see the module documentation).
    pub fn status_at(&self, now_ms: i64) -> UiStatus {
        let ended = self.ends_at.as_deref().and_then(instant_ms).is_some_and(|end| end <= now_ms);
        if self.archived || ended {
            return UiStatus::Ended;
        }
        if let Some(state) = self.external_state {
            return match state {
                ExternalState::Draft => UiStatus::Suggestions,
                ExternalState::Paused => UiStatus::Paused,
                ExternalState::Active => UiStatus::Running,
            };
        }
        if self.released_version.is_none() {
            UiStatus::Suggestions
        } else if !self.enabled || self.flow_status.as_deref() == Some("invalid") {
            UiStatus::Paused
        } else {
            UiStatus::Running
        }
    }

    /// The document id: `<tenant_id>:<campaign_id>`.
    pub fn id(&self) -> String {
        format!("{}:{}", self.tenant_id, self.campaign_id)
    }

    /// A list row: metadata only.
    pub fn row(&self) -> Value {
        json!({
            "campaign_id": self.campaign_id,
            "tenant_id": self.tenant_id,
            "name": self.name,
            "campaign_origin": self.campaign_origin,
            "ui_status": self.ui_status,
            "flow_status": self.flow_status,
            "external_state": self.external_state,
            "enabled": self.enabled,
            "released_version": self.released_version,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "archived": self.archived,
            "broken_reasons_count": self.broken_reasons.len(),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        })
    }

    /// The detail object: the row's fields plus `description`, `offering`, `players_engaged` and the
    /// `broken_reasons` themselves.
    pub fn detail(&self) -> Value {
        let mut detail = self.row();
        detail["description"] = json!(self.description);
        detail["offering"] = json!(self.offering);
        detail["players_engaged"] = json!(self.players_engaged);
        detail["deliveries"] = json!(self.deliveries);
        detail["interactions"] = json!(self.interactions);
        detail["broken_reasons"] = json!(self.broken_reasons);
        detail
    }
}

/// A released, enabled, valid flow campaign `welcome` of tenant `7` ending 2026-12-01 (for tests).
#[cfg(test)]
pub(crate) fn sample_doc() -> CampaignDoc {
    CampaignDoc {
        campaign_id: "welcome".into(),
        tenant_id: "7".into(),
        name: "Welcome".into(),
        campaign_origin: Origin::Flow,
        ui_status: UiStatus::Suggestions,
        flow_status: Some("valid".into()),
        external_state: None,
        enabled: true,
        released_version: Some(1),
        starts_at: None,
        ends_at: Some("2026-12-01T00:00:00Z".into()),
        archived: false,
        description: String::new(),
        offering: String::new(),
        broken_reasons: Vec::new(),
        created_at: String::new(),
        updated_at: String::new(),
        players_engaged: 0,
        deliveries: 0,
        interactions: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> CampaignDoc {
        sample_doc()
    }

    #[test]
    fn buckets_follow_their_order() {
        let before_end = instant_ms("2026-11-30T00:00:00Z").unwrap();
        let after_end = instant_ms("2026-12-01T00:00:00Z").unwrap();
        let running = doc();
        assert_eq!(running.status_at(before_end), UiStatus::Running);
        assert_eq!(running.status_at(after_end), UiStatus::Ended, "the end instant itself is past");
        let draft = CampaignDoc { released_version: None, flow_status: Some("draft".into()), ..doc() };
        assert_eq!(draft.status_at(before_end), UiStatus::Suggestions);
        assert_eq!(draft.status_at(after_end), UiStatus::Ended, "ended wins over suggestions");
        assert_eq!(CampaignDoc { enabled: false, ..doc() }.status_at(before_end), UiStatus::Paused);
        let invalid = CampaignDoc { flow_status: Some("invalid".into()), ..doc() };
        assert_eq!(invalid.status_at(before_end), UiStatus::Paused);
        assert_eq!(CampaignDoc { archived: true, ..doc() }.status_at(before_end), UiStatus::Ended);
        assert_eq!(CampaignDoc { ends_at: None, ..doc() }.status_at(after_end), UiStatus::Running);

        let external = |state| CampaignDoc {
            campaign_origin: Origin::External,
            flow_status: None,
            external_state: Some(state),
            released_version: None,
            enabled: state == ExternalState::Active,
            ..doc()
        };
        assert_eq!(external(ExternalState::Draft).status_at(before_end), UiStatus::Suggestions);
        assert_eq!(external(ExternalState::Active).status_at(before_end), UiStatus::Running);
        assert_eq!(external(ExternalState::Paused).status_at(before_end), UiStatus::Paused);
        assert_eq!(external(ExternalState::Active).status_at(after_end), UiStatus::Ended);
    }

    #[test]
    fn rows_carry_metadata_only_and_details_add_the_rest() {
        let row = doc().row();
        assert_eq!(row["campaign_origin"], "flow");
        assert_eq!(row["ui_status"], "suggestions");
        for detail_only in ["description", "offering", "players_engaged", "applied_filters"] {
            assert!(row.get(detail_only).is_none(), "{detail_only}");
        }
        let detail = doc().detail();
        for field in ["campaign_id", "campaign_origin", "ui_status", "description", "offering", "players_engaged"] {
            assert!(detail.get(field).is_some(), "{field}");
        }
        assert!(detail.get("applied_filters").is_none());
    }
}
