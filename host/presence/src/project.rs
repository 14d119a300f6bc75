//! One record through the projection: the host side of the `presence` projector plugin. The host reads the
//! player's document (with its store version), asks the plugin what the record makes of it, and writes the answer
//! by compare-and-replace on the version it read, so two replicas and the sweep never overwrite a newer state: a
//! lost race reads again and projects again. A no-op writes nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{DocumentStore, PortError, Record};
use flowhost_core::Clock;
use flowhost_runtime::{InvokeError, Plugin};
use serde::Deserialize;
use serde_json::{json, Value};

/// The collection of player documents.
pub const COLLECTION: &str = "presence_state";
/// Compare-and-replace attempts before the record counts as a transient failure (retried with the partition).
const MAX_RACES: usize = 16;

/// What happened to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projected {
    /// The document was written (created or replaced); `went_offline` sites were online before and are not now.
    Written { went_offline: usize },
    /// Nothing to write: `duplicate`, `stale_time`, `stale_close` or `unchanged`.
    NoOp(String),
    /// The record is permanently invalid: dead-letter it with this bounded code.
    Rejected { code: String, detail: String },
}

/// Why a record could not be projected now (the partition retries it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Transient {
    #[error("document store: {0}")]
    Documents(PortError),
    #[error("projector: {0}")]
    Projector(String),
}

/// Where the projector comes from: the active `presence` plugin (hot-swappable) or a fixed one in tests.
pub type ProjectorSource = Arc<dyn Fn() -> Option<Plugin> + Send + Sync>;

#[derive(Deserialize)]
struct Output {
    outcome: String,
    #[serde(default)]
    document: Option<Value>,
}

#[derive(Clone)]
pub struct Projection {
    pub documents: Arc<dyn DocumentStore>,
    pub projector: ProjectorSource,
    pub clock: Arc<dyn Clock>,
    pub expiry_seconds: u64,
    /// Every document operation's bound (`PRESENCE_DOCDB_TIMEOUT_MS`).
    pub timeout: Duration,
}

/// A bounded error code: what the projector reported when it looks like one, else a catch-all.
fn bounded(code: &str) -> String {
    let valid = !code.is_empty() && code.len() <= 40 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if valid { code } else { "rejected" }.to_owned()
}

/// The player's document id from the envelope, when it has one (`<tenant_id>:<user_id>`).
fn document_id(value: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Envelope {
        body: Body,
    }
    #[derive(Deserialize)]
    struct Body {
        tenant_id: String,
        user: User,
    }
    #[derive(Deserialize)]
    struct User {
        user_id: String,
    }
    let envelope: Envelope = serde_json::from_str(value).ok()?;
    let ids = [&envelope.body.tenant_id, &envelope.body.user.user_id];
    let decimal = |id: &&String| !id.is_empty() && id.len() <= 19 && id.bytes().all(|b| b.is_ascii_digit());
    ids.iter().all(decimal).then(|| format!("{}:{}", envelope.body.tenant_id, envelope.body.user.user_id))
}

impl Projection {
    /// A document operation within the timeout; a late answer is a transient failure.
    async fn documents_op<T>(&self, op: impl Future<Output = Result<T, PortError>>) -> Result<T, PortError> {
        tokio::time::timeout(self.timeout, op)
            .await
            .map_err(|_| PortError::Timeout(format!("no answer within {} ms", self.timeout.as_millis())))?
    }

    fn projector(&self) -> Result<Plugin, Transient> {
        (self.projector)().ok_or_else(|| Transient::Projector("no active presence projector".to_owned()))
    }

    /// Asks the projector; a rejection becomes `Err(Ok(..))`, a failure of the call `Err(Err(..))`.
    async fn ask(&self, state: Option<&Value>, input: &Value) -> Result<Output, Result<Projected, Transient>> {
        let projector = self.projector().map_err(Err)?;
        let state = state.map(Value::to_string);
        match projector.project(state.as_deref(), &input.to_string()).await {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| Err(Transient::Projector(format!("the projector answered something else: {e}")))),
            Err(InvokeError::Permanent(message)) => {
                let (code, detail) = message.split_once(": ").unwrap_or(("rejected", message.as_str()));
                Err(Ok(Projected::Rejected { code: bounded(code), detail: detail.to_owned() }))
            }
            // A deterministic failure of the guest on this record would repeat forever: dead-letter it.
            Err(error @ (InvokeError::Trap(_) | InvokeError::OutOfFuel | InvokeError::MemoryLimit(_))) => {
                Err(Ok(Projected::Rejected { code: "projector_failed".to_owned(), detail: error.to_string() }))
            }
            Err(error) => Err(Err(Transient::Projector(error.to_string()))),
        }
    }

    /// Projects one broker record onto its player's document.
    pub async fn record(&self, record: &Record) -> Result<Projected, Transient> {
        let Ok(value) = std::str::from_utf8(&record.value) else {
            return Ok(Projected::Rejected {
                code: "malformed_json".to_owned(),
                detail: "the value is not UTF-8".to_owned(),
            });
        };
        let input = json!({
            "kind": "record", "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "value": value, "now": iso_utc(self.clock.now_ms()), "expiry_seconds": self.expiry_seconds,
        });
        let Some(id) = document_id(value) else {
            // Not addressable: the projector names what is wrong with it.
            return match self.ask(None, &input).await {
                Ok(_) => {
                    Ok(Projected::Rejected { code: "invalid_user_id".to_owned(), detail: "no player id".to_owned() })
                }
                Err(answer) => answer,
            };
        };
        self.apply(&id, &input).await
    }

    /// Takes the due sites of document `id` offline (the sweep).
    pub async fn expire(&self, id: &str) -> Result<Projected, Transient> {
        let input = json!({ "kind": "expire", "now": iso_utc(self.clock.now_ms()) });
        self.apply(id, &input).await
    }

    /// Read, project, compare-and-replace; a lost race starts again from the newer document.
    async fn apply(&self, id: &str, input: &Value) -> Result<Projected, Transient> {
        for _ in 0..MAX_RACES {
            let stored =
                self.documents_op(self.documents.get_versioned(COLLECTION, id)).await.map_err(Transient::Documents)?;
            let output = match self.ask(stored.as_ref().map(|s| &s.body), input).await {
                Ok(output) => output,
                Err(answer) => return answer,
            };
            let Some(mut document) = output.document.filter(|_| output.outcome == "applied") else {
                return Ok(Projected::NoOp(bounded(&output.outcome)));
            };
            let written_document = document.clone();
            let written = match &stored {
                Some(stored) => {
                    document["version"] = json!(stored.version + 1);
                    self.documents_op(self.documents.replace_if_version(COLLECTION, id, stored.version, document))
                        .await
                        .map_err(Transient::Documents)?
                        .is_some()
                }
                None => {
                    document["version"] = json!(1);
                    match self.documents_op(self.documents.insert(COLLECTION, id, document)).await {
                        Ok(()) => true,
                        Err(PortError::Conflict(_)) => false,
                        Err(error) => return Err(Transient::Documents(error)),
                    }
                }
            };
            if written {
                let online = |body: Option<&Value>| {
                    body.and_then(|b| b.get("sites")).and_then(Value::as_array).map_or(0, |sites| {
                        sites.iter().filter(|site| site.get("state").and_then(Value::as_str) == Some("online")).count()
                    })
                };
                let before = online(stored.as_ref().map(|s| &s.body));
                let after = online(Some(&written_document));
                return Ok(Projected::Written { went_offline: before.saturating_sub(after) });
            }
        }
        Err(Transient::Documents(PortError::Unavailable(format!(
            "{MAX_RACES} lost compare-and-replace races on one document"
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_ids_come_from_the_trusted_body() {
        let envelope = json!({"body": {"tenant_id": "12", "user": {"user_id": "501"}}}).to_string();
        assert_eq!(document_id(&envelope).as_deref(), Some("12:501"));
        for bad in [json!({"body": {"tenant_id": "1:2", "user": {"user_id": "501"}}}), json!({"body": {}}), json!([])] {
            assert_eq!(document_id(&bad.to_string()), None, "{bad}");
        }
        assert_eq!(bounded("invalid_action"), "invalid_action");
        assert_eq!(bounded("Invalid Action!"), "rejected");
    }
}
