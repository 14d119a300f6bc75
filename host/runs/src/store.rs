//! [`Runs`]: runs and dead letters over the documents port: storing a batch of runs, listing and reading them,
//! finding the runs whose pending steps are due and claiming one for a while (a lease written by
//! compare-and-replace, so two nodes never advance the same run at once), and the dead letters with their
//! replays.

use std::collections::HashSet;

use crate::config::NodePayloads;
use flowhost_core::collections::{FLOW_DEAD_LETTERS, FLOW_RUNS};
use flowhost_core::ports::{Direction, Filter, IndexSpec, PortError, Ports, Query};
use flowhost_core::stored::{self, Collection, Document};
use serde::Serialize;
use serde_json::json;

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

impl Document for Run {
    const COLLECTION: &'static str = FLOW_RUNS;

    fn id(&self) -> String {
        self.run_id.clone()
    }

    /// Every stored run updates each index of `flow_runs`, and runs are written more than anything else, so the
    /// scheduler's index is sparse: a run that finishes in one go (nearly all) has no `next_due_ms` and skips it.
    /// (The campaigns role reads finished runs by `updated_ms` alone, through an index of its own.)
    fn indexes() -> Vec<IndexSpec> {
        vec![
            // A flow's runs, newest first (`Runs::list`).
            IndexSpec::ascending(&["flow_id", "started_ms"]),
            // The waiting runs whose steps are due (`Runs::due`).
            IndexSpec::ascending(&["status", "next_due_ms"]).sparse(),
            // The retention sweep's deletes (`crate::retention`).
            IndexSpec::ascending(&["status", "updated_ms"]),
            IndexSpec::ascending(&["updated_ms"]),
        ]
    }
}

impl Document for DeadLetter {
    const COLLECTION: &'static str = FLOW_DEAD_LETTERS;

    fn id(&self) -> String {
        self.id.clone()
    }

    fn indexes() -> Vec<IndexSpec> {
        [&["flow_id", "at_ms"][..], &["status", "at_ms"], &["at_ms"]].map(IndexSpec::ascending).into()
    }
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
    runs: Collection<Run>,
    letters: Collection<DeadLetter>,
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
        Runs {
            runs: Collection::new(ports.documents.clone()),
            letters: Collection::new(ports.documents.clone()),
            keep: NodePayloads::All,
        }
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

    /// Creates the indexes the run and dead-letter queries use (idempotent), and drops the full index on the
    /// scheduler's fields that earlier builds kept in place of the sparse one.
    pub async fn ensure_indexes(&self) -> Result<(), RunsError> {
        self.runs.ensure_indexes().await?;
        self.runs.store().drop_index(FLOW_RUNS, &IndexSpec::ascending(&["status", "next_due_ms"])).await?;
        self.letters.ensure_indexes().await?;
        Ok(())
    }

    /// Which of `run_ids` are stored already.
    pub async fn existing(&self, run_ids: &[String]) -> Result<HashSet<String>, RunsError> {
        Ok(self.runs.store().existing(FLOW_RUNS, run_ids).await?)
    }

    /// Stores runs (new or advanced), in one write where the backend allows.
    pub async fn save_all(&self, runs: &[Run]) -> Result<(), RunsError> {
        let docs = runs
            .iter()
            .map(|run| Ok((run.run_id.clone(), self.stored_json(run)?)))
            .collect::<Result<_, RunsError>>()?;
        self.runs.store().upsert_many_json(FLOW_RUNS, docs).await?;
        Ok(())
    }

    pub async fn get(&self, run_id: &str) -> Result<Run, RunsError> {
        self.runs.get(run_id).await?.ok_or_else(|| RunsError::RunNotFound(run_id.to_owned()))
    }

    pub async fn get_versioned(&self, run_id: &str) -> Result<(Run, u64), RunsError> {
        self.runs.get_versioned(run_id).await?.ok_or_else(|| RunsError::RunNotFound(run_id.to_owned()))
    }

    /// Stores a new run; `PortError::Conflict` when its id exists.
    pub async fn insert(&self, run: &Run) -> Result<(), PortError> {
        self.runs.insert(run).await
    }

    /// Replaces a run read at `version`; `false` when another writer changed it meanwhile.
    pub async fn replace(&self, run: &Run, version: u64) -> Result<Option<u64>, RunsError> {
        Ok(self.runs.replace_if_version(&self.stored_form(run), version).await?)
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
        let found = self.runs.query(&query).await?;
        let runs = found.items.iter().map(RunSummary::from).collect();
        Ok(RunPage { runs, total: found.total, page, page_size })
    }

    /// Waiting runs whose earliest pending step is due at `now_ms` and that nobody holds, earliest first.
    pub async fn due(&self, now_ms: i64, limit: u64) -> Result<Vec<Run>, RunsError> {
        let query = Query::new()
            .eq("status", json!(RunStatus::Waiting.as_str()))
            .filter("next_due_ms", Filter::Lte(json!(now_ms)))
            .sort("next_due_ms", Direction::Asc)
            .limit(limit.saturating_mul(4));
        let page = self.runs.query(&query).await?;
        let mut runs = Vec::new();
        for run in page.items {
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
        let mut merged = Vec::with_capacity(letters.len());
        for letter in letters {
            let mut letter = letter.clone();
            // A stored letter that no longer decodes is logged by the read and replaced.
            if let Ok(Some(stored)) = self.letters.get(&letter.id).await {
                let mut replays = stored.replays;
                replays.append(&mut letter.replays);
                letter.replays = replays;
            }
            merged.push(letter);
        }
        self.letters.upsert_many(&merged).await?;
        Ok(())
    }

    pub async fn dead_letter(&self, id: &str) -> Result<(DeadLetter, u64), RunsError> {
        self.letters.get_versioned(id).await?.ok_or_else(|| RunsError::DeadLetterNotFound(id.to_owned()))
    }

    pub async fn replace_dead_letter(&self, letter: &DeadLetter, version: u64) -> Result<bool, RunsError> {
        Ok(self.letters.replace_if_version(letter, version).await?.is_some())
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
            query = query.eq("status", stored::encode(FLOW_DEAD_LETTERS, &status)?);
        }
        let found = self.letters.query(&query).await?;
        Ok((found.items, found.total))
    }

    /// Deletes a flow's runs and dead letters (when the flow is deleted).
    pub async fn forget_flow(&self, flow_id: &str) -> Result<(), RunsError> {
        self.runs.store().delete_where(FLOW_RUNS, "flow_id", &json!(flow_id)).await?;
        self.letters.store().delete_where(FLOW_DEAD_LETTERS, "flow_id", &json!(flow_id)).await?;
        Ok(())
    }
}
