//! The support slice: support cases from an optional external source of conversations, per tenant.
//!
//! With `FLOWHOST_CAMPAIGNS_SUPPORT_URL` set, every pass asks it, for each known tenant,
//! `GET <url>?tenant_id=<tenant>&updated_since=<RFC 3339>` (with `Authorization: Bearer
//! <FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN>` when one is set; at most 5 s) and expects
//! `{"cases": [{"id": string, "channel": string, "updated_at": RFC 3339}, ...]}`: the cases changed since the
//! tenant's cursor. Each case is kept in `support_cases` (id `<tenant_id>:<case id>`); `support_cases_total`
//! counts those whose `channel` is `chat` (chat conversations only). A tenant whose request fails counts a
//! failure in its own state and keeps its last count.

use flowhost_core::ports::{Direction, IndexSpec, PortError, Query};
use flowhost_core::stored::{Collection, Document};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::model::instant_ms;
use crate::read_model::ReadModels;
use crate::source::JsonSource;

pub const SUPPORT_CASES: &str = "support_cases";
/// The channel counted by `support_cases_total`.
pub const CHAT: &str = "chat";
/// Cases changed at most this long before a tenant's cursor are asked for again.
const OVERLAP_MS: i64 = 5_000;
/// The largest answer taken (a bigger one is a failure).
const MAX_CASES: usize = 100_000;

#[derive(Debug, Deserialize)]
struct Answer {
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    channel: String,
    updated_at: String,
}

/// A support case as the read model keeps it: enough to count a tenant's cases by channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupportCase {
    pub tenant_id: String,
    pub case_id: String,
    pub channel: String,
    pub updated_at: String,
}

impl Document for SupportCase {
    const COLLECTION: &'static str = SUPPORT_CASES;

    fn id(&self) -> String {
        format!("{}:{}", self.tenant_id, self.case_id)
    }

    fn indexes() -> Vec<IndexSpec> {
        let fields = [("tenant_id".to_owned(), Direction::Asc), ("channel".to_owned(), Direction::Asc)];
        vec![IndexSpec { fields: fields.to_vec(), unique: false, sparse: false }]
    }
}

/// The external source, when one is configured.
#[derive(Debug, Clone)]
pub struct SupportSource(pub JsonSource);

/// Why a tenant's support cases could not be synced (the message is for the log).
#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    #[error("support source: {0}")]
    Source(String),
    #[error("read models: {0}")]
    Store(#[from] PortError),
}

pub async fn ensure_indexes(read_models: &ReadModels) -> Result<(), PortError> {
    Collection::<SupportCase>::ensure_indexes_in(read_models.documents.as_ref()).await
}

impl SupportSource {
    /// Syncs one tenant's cases changed since its cursor; answers the cases written.
    pub async fn sync_tenant(&self, read_models: &ReadModels, tenant: &str) -> Result<usize, SupportError> {
        let cursor_name = format!("support.{tenant}");
        let cursor = read_models.cursor(&cursor_name).await?.and_then(|text| text.parse::<i64>().ok());
        let since = flowhost_core::digest::iso_utc(cursor.map_or(0, |at| at - OVERLAP_MS));
        let answer: Answer = self
            .0
            .get(&[("tenant_id", tenant), ("updated_since", since.as_str())])
            .await
            .map_err(SupportError::Source)?;
        if answer.cases.len() > MAX_CASES {
            return Err(SupportError::Source(format!("more than {MAX_CASES} cases in one answer")));
        }
        let mut newest = cursor;
        let mut cases = Vec::with_capacity(answer.cases.len());
        for case in answer.cases {
            let Some(at) = instant_ms(&case.updated_at) else {
                return Err(SupportError::Source(format!("case {:?} has no RFC 3339 updated_at", case.id)));
            };
            newest = Some(newest.map_or(at, |newest| newest.max(at)));
            let Case { id, channel, updated_at } = case;
            cases.push(SupportCase { tenant_id: tenant.to_owned(), case_id: id, channel, updated_at });
        }
        let written = cases.len();
        Collection::<SupportCase>::new(read_models.documents.clone()).upsert_many(&cases).await?;
        if let Some(newest) = newest {
            read_models.put_cursor(&cursor_name, &newest.to_string()).await?;
        }
        Ok(written)
    }
}

/// The tenant's chat conversations.
pub async fn chat_cases(read_models: &ReadModels, tenant: &str) -> Result<u64, PortError> {
    let query = Query::new().eq("tenant_id", json!(tenant)).eq("channel", json!(CHAT)).limit(1);
    Ok(read_models.documents.query(SUPPORT_CASES, &query).await?.total)
}
