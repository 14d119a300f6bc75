//! [`Runs`]: runs and dead letters over the documents port: storing a batch of runs, listing and reading them,
//! finding the runs whose pending steps are due and claiming one for a while (a lease written by
//! compare-and-replace, so two nodes never advance the same run at once), and the dead letters with their
//! replays.

use std::collections::HashSet;

use flowhost_core::collections::{FLOW_DEAD_LETTERS, FLOW_RUNS};
use flowhost_core::config::NodePayloads;
use flowhost_core::ports::{Direction, DocumentStore, Filter, IndexSpec, PortError, Ports, Query, Versioned};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::model::{DeadLetter, DeadLetterStatus, Run, RunStatus, RunSummary};

/// Runs on one page of a list at most.
pub const MAX_PAGE_SIZE: u64 = 200;

/// Why a run operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error("run {0:?} not found")]
    RunNotFound(String),
    #[error("dead letter {0:?} not found")]
    DeadLetterNotFound(String),
    /// A request is wrong: the field and why.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The dead letter cannot be replayed as asked (already replayed, flow gone, ...).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Storage(#[from] PortError),
}

fn decode<T: DeserializeOwned>(collection: &str, doc: Value) -> Result<T, RunsError> {
    serde_json::from_value(doc).map_err(|error| {
        tracing::error!(collection, %error, "a stored document does not parse");
        RunsError::Storage(PortError::Backend(format!("a stored {collection} document does not parse")))
    })
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A page of runs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
}

/// Runs and dead letters (see the module documentation).
#[derive(Clone)]
pub struct Runs {
    documents: std::sync::Arc<dyn DocumentStore>,
    /// Which finished runs it stores with their nodes' payloads ([`Run::stored_as`]).
    keep: NodePayloads,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs").finish_non_exhaustive()
    }
}

impl Runs {
    /// Runs over `ports`, storing every run whole.
    pub fn new(ports: &Ports) -> Runs {
        Runs { documents: ports.documents.clone(), keep: NodePayloads::All }
    }

    /// These runs, storing finished runs' node payloads only as `keep` says (`engine.runs.node_payloads`).
    pub fn keeping(mut self, keep: NodePayloads) -> Runs {
        self.keep = keep;
        self
    }

    /// `run` as this store keeps it: trimmed of its nodes' payloads when [`Run::stored_as`] says so.
    fn stored_form<'a>(&self, run: &'a Run) -> std::borrow::Cow<'a, Run> {
        run.stored_as(self.keep).map_or(std::borrow::Cow::Borrowed(run), std::borrow::Cow::Owned)
    }

    /// `run` as this store writes it, as JSON text serialized once (see `DocumentStore::upsert_many_json`).
    fn stored_json(&self, run: &Run) -> Result<String, RunsError> {
        serde_json::to_string(&*self.stored_form(run))
            .map_err(|error| RunsError::Storage(PortError::Invalid(format!("run {}: {error}", run.run_id))))
    }

    /// Creates the indexes the run queries use (idempotent).
    ///
    /// Every stored run updates each index of `flow_runs`, and runs are written more than anything else, so the
    /// scheduler's index is sparse: a run that finishes in one go (nearly all) has no `next_due_ms` and skips it.
    /// The full index earlier builds kept in its place is dropped. (The campaigns role reads finished runs by
    /// `updated_ms` alone, through an index of its own.)
    pub async fn ensure_indexes(&self) -> Result<(), RunsError> {
        let documents = self.documents.as_ref();
        let runs = [
            // A flow's runs, newest first (`Runs::list`).
            IndexSpec::ascending(&["flow_id", "started_ms"]),
            // The waiting runs whose steps are due (`Runs::due`).
            IndexSpec::ascending(&["status", "next_due_ms"]).sparse(),
            // The retention sweep's deletes (`crate::retention`).
            IndexSpec::ascending(&["status", "updated_ms"]),
            IndexSpec::ascending(&["updated_ms"]),
        ];
        for index in &runs {
            documents.ensure_index(FLOW_RUNS, index).await?;
        }
        documents.drop_index(FLOW_RUNS, &IndexSpec::ascending(&["status", "next_due_ms"])).await?;
        for fields in [&["flow_id", "at_ms"][..], &["status", "at_ms"], &["at_ms"]] {
            documents.ensure_index(FLOW_DEAD_LETTERS, &IndexSpec::ascending(fields)).await?;
        }
        Ok(())
    }

    /// Which of `run_ids` are stored already.
    pub async fn existing(&self, run_ids: &[String]) -> Result<HashSet<String>, RunsError> {
        Ok(self.documents.existing(FLOW_RUNS, run_ids).await?)
    }

    /// Stores runs (new or advanced), in one write where the backend allows.
    pub async fn save_all(&self, runs: &[Run]) -> Result<(), RunsError> {
        let docs = runs
            .iter()
            .map(|run| Ok((run.run_id.clone(), self.stored_json(run)?)))
            .collect::<Result<_, RunsError>>()?;
        self.documents.upsert_many_json(FLOW_RUNS, docs).await?;
        Ok(())
    }

    pub async fn get(&self, run_id: &str) -> Result<Run, RunsError> {
        let doc = self.documents.get(FLOW_RUNS, run_id).await?;
        doc.map(|doc| decode(FLOW_RUNS, doc)).transpose()?.ok_or_else(|| RunsError::RunNotFound(run_id.to_owned()))
    }

    pub async fn get_versioned(&self, run_id: &str) -> Result<(Run, u64), RunsError> {
        let Versioned { version, body } = self
            .documents
            .get_versioned(FLOW_RUNS, run_id)
            .await?
            .ok_or_else(|| RunsError::RunNotFound(run_id.to_owned()))?;
        Ok((decode(FLOW_RUNS, body)?, version))
    }

    /// Replaces a run read at `version`; `false` when another writer changed it meanwhile.
    pub async fn replace(&self, run: &Run, version: u64) -> Result<Option<u64>, RunsError> {
        Ok(self.documents.replace_if_version(FLOW_RUNS, &run.run_id, version, encode(&*self.stored_form(run))).await?)
    }

    /// The runs of a flow, newest first, `page` (1-based) of `page_size`, optionally only those in `status`.
    pub async fn list(
        &self,
        flow_id: &str,
        status: Option<RunStatus>,
        page: u64,
        page_size: u64,
    ) -> Result<RunPage, RunsError> {
        if page == 0 {
            return Err(RunsError::Invalid { field: "page".into(), message: "pages start at 1".into() });
        }
        if page_size == 0 || page_size > MAX_PAGE_SIZE {
            return Err(RunsError::Invalid {
                field: "page_size".into(),
                message: format!("must be between 1 and {MAX_PAGE_SIZE}"),
            });
        }
        let mut query = Query::new()
            .eq("flow_id", json!(flow_id))
            .sort("started_ms", Direction::Desc)
            .limit(page_size)
            .offset((page - 1).saturating_mul(page_size));
        if let Some(status) = status {
            query = query.eq("status", json!(status.as_str()));
        }
        let found = self.documents.query(FLOW_RUNS, &query).await?;
        let runs = found
            .items
            .into_iter()
            .map(|doc| decode::<Run>(FLOW_RUNS, doc).map(|run| RunSummary::from(&run)))
            .collect::<Result<_, _>>()?;
        Ok(RunPage { runs, total: found.total, page, page_size })
    }

    /// Waiting runs whose earliest pending step is due at `now_ms` and that nobody holds, earliest first.
    pub async fn due(&self, now_ms: i64, limit: u64) -> Result<Vec<Run>, RunsError> {
        let query = Query::new()
            .eq("status", json!(RunStatus::Waiting.as_str()))
            .filter("next_due_ms", Filter::Lte(json!(now_ms)))
            .sort("next_due_ms", Direction::Asc)
            .limit(limit.saturating_mul(4));
        let page = self.documents.query(FLOW_RUNS, &query).await?;
        let mut runs = Vec::new();
        for doc in page.items {
            let run: Run = decode(FLOW_RUNS, doc)?;
            if run.lease_until_ms <= now_ms {
                runs.push(run);
            }
            if runs.len() as u64 >= limit {
                break;
            }
        }
        Ok(runs)
    }

    /// Takes the run for its pending steps until `until_ms`, unless someone else holds it or it changed:
    /// answers the run as claimed and its stored version.
    pub async fn claim(&self, run_id: &str, now_ms: i64, until_ms: i64) -> Result<Option<(Run, u64)>, RunsError> {
        let (mut run, version) = match self.get_versioned(run_id).await {
            Ok(found) => found,
            Err(RunsError::RunNotFound(_)) => return Ok(None),
            Err(error) => return Err(error),
        };
        if run.lease_until_ms > now_ms || run.status != RunStatus::Waiting {
            return Ok(None);
        }
        run.lease_until_ms = until_ms;
        Ok(self.replace(&run, version).await?.map(|version| (run, version)))
    }

    /// Stores dead letters: new ones, the same again after a redelivery, or a step that failed again after a
    /// replay (open again, its earlier replays kept).
    pub async fn save_dead_letters(&self, letters: &[DeadLetter]) -> Result<(), RunsError> {
        let mut docs = Vec::with_capacity(letters.len());
        for letter in letters {
            let mut letter = letter.clone();
            if let Some(stored) = self.documents.get(FLOW_DEAD_LETTERS, &letter.id).await? {
                if let Ok(stored) = serde_json::from_value::<DeadLetter>(stored) {
                    let mut replays = stored.replays;
                    replays.append(&mut letter.replays);
                    letter.replays = replays;
                }
            }
            docs.push((letter.id.clone(), encode(&letter)));
        }
        self.documents.upsert_many(FLOW_DEAD_LETTERS, docs).await?;
        Ok(())
    }

    pub async fn dead_letter(&self, id: &str) -> Result<(DeadLetter, u64), RunsError> {
        let Versioned { version, body } = self
            .documents
            .get_versioned(FLOW_DEAD_LETTERS, id)
            .await?
            .ok_or_else(|| RunsError::DeadLetterNotFound(id.to_owned()))?;
        Ok((decode(FLOW_DEAD_LETTERS, body)?, version))
    }

    pub async fn replace_dead_letter(&self, letter: &DeadLetter, version: u64) -> Result<bool, RunsError> {
        Ok(self.documents.replace_if_version(FLOW_DEAD_LETTERS, &letter.id, version, encode(letter)).await?.is_some())
    }

    /// Dead letters, newest first, optionally of one flow and in one status.
    pub async fn dead_letters(
        &self,
        flow_id: Option<&str>,
        status: Option<DeadLetterStatus>,
        page: u64,
        page_size: u64,
    ) -> Result<(Vec<DeadLetter>, u64), RunsError> {
        if page == 0 || page_size == 0 || page_size > MAX_PAGE_SIZE {
            return Err(RunsError::Invalid {
                field: "page".into(),
                message: format!("page starts at 1; page_size is 1 to {MAX_PAGE_SIZE}"),
            });
        }
        let mut query =
            Query::new().sort("at_ms", Direction::Desc).limit(page_size).offset((page - 1).saturating_mul(page_size));
        if let Some(flow_id) = flow_id {
            query = query.eq("flow_id", json!(flow_id));
        }
        if let Some(status) = status {
            query = query.eq("status", encode(&status));
        }
        let found = self.documents.query(FLOW_DEAD_LETTERS, &query).await?;
        let letters = found.items.into_iter().map(|doc| decode(FLOW_DEAD_LETTERS, doc)).collect::<Result<_, _>>()?;
        Ok((letters, found.total))
    }

    /// Deletes a flow's runs and dead letters (when the flow is deleted).
    pub async fn forget_flow(&self, flow_id: &str) -> Result<(), RunsError> {
        self.documents.delete_where(FLOW_RUNS, "flow_id", &json!(flow_id)).await?;
        self.documents.delete_where(FLOW_DEAD_LETTERS, "flow_id", &json!(flow_id)).await?;
        Ok(())
    }
}
