//! The optional external campaign source: campaigns that live outside Flowhost, listed beside the flows'
//! campaigns with `campaign_origin` `external`.
//!
//! With `FLOWHOST_CAMPAIGNS_EXTERNAL_URL` set, every pass of the campaigns slice asks
//! `GET <url>?updated_since=<RFC 3339>` (with `Authorization: Bearer <FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN>` when one
//! is set; at most 5 s) and expects `{"campaigns": [...]}`: every campaign changed since the cursor (minus a few
//! seconds of overlap; the first request asks since the epoch), each
//!
//! | Field | |
//! |---|---|
//! | `id` | 1 to 128 letters, digits, `-`, `_` or `.`; its campaign id is `external:<id>` |
//! | `tenant_id` | 1 to 64 letters, digits, `-`, `_` or `.` |
//! | `name` | string |
//! | `state` | `draft`, `active` or `paused` |
//! | `updated_at` | RFC 3339; the cursor follows it |
//! | `created_at`, `starts_at`, `ends_at` | RFC 3339, optional |
//! | `description`, `offering` | strings, optional |
//! | `archived` | boolean, optional (false) |
//! | `deleted` | boolean, optional: `true` removes the campaign |
//!
//! Other fields are ignored. One malformed campaign fails the whole answer (nothing of it is applied, the slice
//! counts a failure and keeps what it had), so a source's error never half-applies. A campaign the source stops
//! listing without `deleted: true` stays: the source is incremental.

use serde::Deserialize;

use crate::model::{instant_ms, CampaignDoc, ExternalState, Origin, UiStatus};
use crate::source::JsonSource;
use flowhost_core::model::{is_slug, MAX_FLOW_ID_LEN, MAX_TENANT_ID_LEN};

/// The prefix of an external campaign's id.
pub const PREFIX: &str = "external:";
/// How far before its cursor the source is asked again.
pub const OVERLAP_MS: i64 = 5_000;
/// The most campaigns one answer may carry.
const MAX_CAMPAIGNS: usize = 100_000;

#[derive(Debug, Deserialize)]
struct Answer {
    campaigns: Vec<ExternalCampaign>,
}

#[derive(Debug, Deserialize)]
struct ExternalCampaign {
    id: String,
    tenant_id: String,
    #[serde(default)]
    name: String,
    state: ExternalState,
    updated_at: String,
    created_at: Option<String>,
    starts_at: Option<String>,
    ends_at: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    offering: String,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    deleted: bool,
}

/// What one answer says: each campaign's id and its row (`None`: deleted), and the newest `updated_at`.
#[derive(Debug, Default)]
pub struct ExternalChanges {
    pub campaigns: Vec<(String, Option<CampaignDoc>)>,
    pub newest_ms: Option<i64>,
}

/// Whether `campaign_id` names an external campaign (`external:<id>`).
pub fn is_external_id(campaign_id: &str) -> bool {
    campaign_id.strip_prefix(PREFIX).is_some_and(|id| is_slug(id, MAX_FLOW_ID_LEN))
}

#[derive(Debug, Clone)]
pub struct ExternalSource(pub JsonSource);

impl ExternalSource {
    /// The campaigns changed since `cursor_ms` (milliseconds; `None`: since the epoch), as rows at `now_ms`.
    pub async fn changes(&self, cursor_ms: Option<i64>, now_ms: i64) -> Result<ExternalChanges, String> {
        let since = flowhost_core::digest::iso_utc(cursor_ms.map_or(0, |at| at - OVERLAP_MS));
        let answer: Answer = self.0.get(&[("updated_since", since.as_str())]).await?;
        decode(answer, now_ms)
    }
}

fn decode(answer: Answer, now_ms: i64) -> Result<ExternalChanges, String> {
    if answer.campaigns.len() > MAX_CAMPAIGNS {
        return Err(format!("more than {MAX_CAMPAIGNS} campaigns in one answer"));
    }
    let mut changes = ExternalChanges::default();
    for campaign in answer.campaigns {
        let id = &campaign.id;
        if !is_slug(id, MAX_FLOW_ID_LEN) {
            return Err(format!("campaign id {id:?} is not 1 to 128 letters, digits, '-', '_' or '.'"));
        }
        if !is_slug(&campaign.tenant_id, MAX_TENANT_ID_LEN) {
            return Err(format!("campaign {id:?}: tenant_id is not 1 to 64 letters, digits, '-', '_' or '.'"));
        }
        let updated_ms = instant_ms(&campaign.updated_at)
            .ok_or_else(|| format!("campaign {id:?}: updated_at is not an RFC 3339 instant"))?;
        for (field, value) in
            [("created_at", &campaign.created_at), ("starts_at", &campaign.starts_at), ("ends_at", &campaign.ends_at)]
        {
            if value.as_deref().is_some_and(|text| instant_ms(text).is_none()) {
                return Err(format!("campaign {id:?}: {field} is not an RFC 3339 instant"));
            }
        }
        changes.newest_ms = Some(changes.newest_ms.map_or(updated_ms, |newest| newest.max(updated_ms)));
        let campaign_id = format!("{PREFIX}{id}");
        if campaign.deleted {
            changes.campaigns.push((campaign_id, None));
            continue;
        }
        let mut row = CampaignDoc {
            campaign_id: campaign_id.clone(),
            tenant_id: campaign.tenant_id,
            name: campaign.name,
            campaign_origin: Origin::External,
            ui_status: UiStatus::Suggestions,
            flow_status: None,
            external_state: Some(campaign.state),
            enabled: campaign.state == ExternalState::Active,
            released_version: None,
            starts_at: campaign.starts_at,
            ends_at: campaign.ends_at,
            archived: campaign.archived,
            description: campaign.description,
            offering: campaign.offering,
            broken_reasons: Vec::new(),
            created_at: campaign.created_at.unwrap_or_else(|| campaign.updated_at.clone()),
            updated_at: campaign.updated_at,
            players_engaged: 0,
            deliveries: 0,
            interactions: 0,
        };
        row.ui_status = row.status_at(now_ms);
        changes.campaigns.push((campaign_id, Some(row)));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(campaigns: serde_json::Value) -> Answer {
        serde_json::from_value(json!({ "campaigns": campaigns })).unwrap()
    }

    #[test]
    fn campaigns_become_rows_and_tombstones() {
        let now = instant_ms("2026-11-25T00:00:00Z").unwrap();
        let changes = decode(
            answer(json!([
                {"id": "spring", "tenant_id": "7", "name": "Spring", "state": "active",
                 "updated_at": "2026-11-20T00:00:00Z", "ends_at": "2026-12-01T00:00:00Z", "extra": 1},
                {"id": "old", "tenant_id": "7", "name": "Old", "state": "paused",
                 "updated_at": "2026-11-21T00:00:00Z", "ends_at": "2026-11-01T00:00:00Z"},
                {"id": "gone", "tenant_id": "7", "state": "draft", "updated_at": "2026-11-22T00:00:00Z", "deleted": true},
            ])),
            now,
        )
        .unwrap();
        assert_eq!(changes.newest_ms, instant_ms("2026-11-22T00:00:00Z"));
        let (id, row) = &changes.campaigns[0];
        let row = row.as_ref().unwrap();
        assert_eq!(
            (id.as_str(), row.campaign_origin, row.ui_status),
            ("external:spring", Origin::External, UiStatus::Running)
        );
        assert_eq!(row.created_at, "2026-11-20T00:00:00Z", "created_at defaults to updated_at");
        assert_eq!(changes.campaigns[1].1.as_ref().unwrap().ui_status, UiStatus::Ended);
        assert_eq!(changes.campaigns[2], ("external:gone".to_owned(), None));
        assert!(is_external_id("external:spring") && !is_external_id("spring") && !is_external_id("external:a:b"));
    }

    #[test]
    fn one_malformed_campaign_fails_the_answer() {
        let now = 0;
        for bad in [
            json!({"id": "a:b", "tenant_id": "7", "state": "active", "updated_at": "2026-11-20T00:00:00Z"}),
            json!({"id": "a", "tenant_id": "", "state": "active", "updated_at": "2026-11-20T00:00:00Z"}),
            json!({"id": "a", "tenant_id": "7", "state": "active", "updated_at": "yesterday"}),
            json!({"id": "a", "tenant_id": "7", "state": "active", "updated_at": "2026-11-20T00:00:00Z", "ends_at": "soon"}),
        ] {
            let good = json!({"id": "ok", "tenant_id": "7", "state": "active", "updated_at": "2026-11-20T00:00:00Z"});
            assert!(decode(answer(json!([good, bad.clone()])), now).is_err(), "{bad}");
        }
        let unknown_state = serde_json::from_value::<Answer>(
            json!({"campaigns": [{"id": "a", "tenant_id": "7", "state": "running", "updated_at": "2026-11-20T00:00:00Z"}]}),
        );
        assert!(unknown_state.is_err(), "an unknown state is a malformed answer");
    }
}
