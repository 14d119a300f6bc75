//! Records through the projection: the host side of the `presence` projector plugin. The host reads the player's
//! document (with its store version), asks the plugin what each of the player's records makes of it in order,
//! and writes the result by compare-and-replace on the version it read, so two replicas and the sweep never
//! overwrite a newer state: a lost race reads again and projects again. A no-op writes nothing.
//!
//! A batch (one partition's records, or the sweep's due documents) is read with one query, folded per player
//! (a player's records one after the other, players in parallel on the runtime's threads) and written with one
//! batch of compare-and-writes (one transaction on the embedded store). Only the documents that lost a race go
//! through the single-document path again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{DocumentStore, IndexSpec, PortError, Record, Versioned, VersionedWrite};
use flowhost_core::stored::Document;
use flowhost_core::Clock;
use flowhost_runtime::{InvokeError, Plugin};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The collection of player documents.
pub const COLLECTION: &str = "presence_state";

/// A player's presence document as the projector plugin writes it. The plugin owns its shape (spec 002 part B),
/// so the host keeps it whole and only names its collection, its id (`<tenant_id>:<player_id>`) and the indexes
/// its queries need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PresenceState(pub Value);

impl Document for PresenceState {
    const COLLECTION: &'static str = COLLECTION;

    fn id(&self) -> String {
        let field = |name: &str| match &self.0[name] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        format!("{}:{}", field("tenant_id"), field("player_id"))
    }

    /// The spec's two indexes, and the one the sweep's query uses on every backend.
    fn indexes() -> Vec<IndexSpec> {
        let index = |fields: &[&str], unique| IndexSpec { unique, ..IndexSpec::ascending(fields) };
        vec![
            index(&["tenant_id", "player_id"], true),
            index(&["sites.state", "sites.expires_at"], false),
            index(&["state", "next_expiry"], false),
        ]
    }
}
/// Compare-and-replace attempts before the record counts as a transient failure (retried with the partition).
const MAX_RACES: usize = 16;
/// The fewest groups a fold task takes (smaller batches are folded on one task).
const FOLDS_PER_TASK: usize = 16;

pub use flowhost_presence_codes::VALIDATION_CODES;

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

/// What the projector is asked about one record (the `presence` plugin's input), written straight to JSON.
#[derive(Serialize)]
#[serde(tag = "kind", rename = "record")]
struct RecordInput<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    /// The record's bytes as text.
    value: &'a str,
    now: &'a str,
    expiry_seconds: u64,
}

/// What the projector is asked about a document the sweep found due.
#[derive(Serialize)]
#[serde(tag = "kind", rename = "expire")]
struct ExpireInput<'a> {
    now: &'a str,
}

/// A projector input as JSON text.
fn input_text(input: &impl Serialize) -> String {
    serde_json::to_string(input).expect("a projector input is JSON")
}

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

/// A bounded no-op outcome: what the projector reported when it looks like one, else a catch-all.
fn bounded(code: &str) -> String {
    let valid = !code.is_empty() && code.len() <= 40 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if valid { code } else { "rejected" }.to_owned()
}

/// What the projector's answer to a call that failed means for the record (spec 002, "Errors": only a
/// validator's invalid-record error is permanent; any other error is transient and retries the partition).
pub fn classify(error: InvokeError) -> Result<Projected, Transient> {
    match error {
        InvokeError::Permanent(message) => match message.split_once(": ") {
            Some((code, detail)) if VALIDATION_CODES.contains(&code) => {
                Ok(Projected::Rejected { code: code.to_owned(), detail: detail.to_owned() })
            }
            // `bad_state`, `bad_request`, `bad_output` or a code the spec does not know: the plugin's fault or the
            // stored document's, not the record's.
            _ => Err(Transient::Projector(format!("the projector failed: {message}"))),
        },
        // A trap, fuel or memory exhaustion: a bad plugin version fails every record alike, so dead-lettering
        // would throw valid events away. The partition blocks until a good version is active.
        error => Err(Transient::Projector(error.to_string())),
    }
}

/// The player's document id from the envelope, when it has one (`<tenant_id>:<user_id>`). Public for the fuzz
/// targets (`tests/fuzz`), which feed it the envelopes they make up.
///
/// Read as the projector reads the envelope (a JSON value and pointers into it, a repeated key's last value
/// winning), so both see the same player in any bytes: a typed read refused an envelope with a repeated key
/// that the projector applies, and the record was dead-lettered as `invalid_user_id`. Only the objects on the
/// way to the two ids are read into maps (of raw values, the last of a repeated key winning); the rest of the
/// envelope is checked and skipped, not built.
pub fn document_id(value: &str) -> Option<String> {
    let envelope = object(value)?;
    let body = object(envelope.get("body")?.get())?;
    let id = |object: &Object, field: &str| {
        let id: String = serde_json::from_str(object.get(field)?.get()).ok()?;
        (!id.is_empty() && id.len() <= 19 && id.bytes().all(|b| b.is_ascii_digit())).then_some(id)
    };
    let user = object(body.get("user")?.get())?;
    Some(format!("{}:{}", id(&body, "tenant_id")?, id(&user, "user_id")?))
}

/// A JSON object's members as raw values, a repeated key's last value winning.
type Object<'a> = HashMap<String, &'a serde_json::value::RawValue>;

/// `text` read as a JSON object; `None` for any other JSON value or for text that is not JSON.
fn object(text: &str) -> Option<Object<'_>> {
    serde_json::from_str(text).ok()
}

/// What the projector made of one player's inputs, folded one after the other onto the stored document.
struct Fold {
    outcomes: Vec<Result<Projected, Transient>>,
    /// The document to write, when at least one input applied.
    document: Option<Value>,
}

/// One player's inputs and where their outcomes go in the batch.
struct Group {
    id: String,
    /// The projector's inputs, as JSON text.
    inputs: Vec<String>,
    slots: Vec<usize>,
}

/// Sites of a document that are online.
fn online(body: Option<&Value>) -> usize {
    body.and_then(|b| b.get("sites")).and_then(Value::as_array).map_or(0, |sites| {
        sites.iter().filter(|site| site.get("state").and_then(Value::as_str) == Some("online")).count()
    })
}

/// The compare-and-write of `document` over what was read: the next version, or a creation.
fn write_of(id: &str, stored: Option<&Versioned>, mut document: Value) -> VersionedWrite {
    let expected = stored.map(|stored| stored.version);
    document["version"] = json!(expected.map_or(1, |version| version + 1));
    VersionedWrite { id: id.to_owned(), expected, doc: document }
}

fn failed(count: usize, error: &Transient) -> Vec<Result<Projected, Transient>> {
    vec![Err(error.clone()); count]
}

impl Projection {
    /// A document operation within the timeout; a late answer is a transient failure.
    async fn documents_op<T>(&self, op: impl Future<Output = Result<T, PortError>>) -> Result<T, Transient> {
        tokio::time::timeout(self.timeout, op)
            .await
            .map_err(|_| PortError::Timeout(format!("no answer within {} ms", self.timeout.as_millis())))
            .and_then(|answer| answer)
            .map_err(Transient::Documents)
    }

    fn projector(&self) -> Result<Plugin, Transient> {
        (self.projector)().ok_or_else(|| Transient::Projector("no active presence projector".to_owned()))
    }

    /// Asks the projector; a rejection becomes `Err(Ok(..))`, a failure of the call `Err(Err(..))`.
    async fn ask(&self, state: Option<&Value>, input: &str) -> Result<Output, Result<Projected, Transient>> {
        let projector = self.projector().map_err(Err)?;
        let state = state.map(Value::to_string);
        match projector.project(state.as_deref(), input).await {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| Err(Transient::Projector(format!("the projector answered something else: {e}")))),
            Err(error) => Err(classify(error)),
        }
    }

    /// Projects a partition's records, in order per player; one outcome per record, in the records' order.
    pub async fn records(&self, records: &[&Record]) -> Vec<Result<Projected, Transient>> {
        let now = iso_utc(self.clock.now_ms());
        let mut outcomes: Vec<Option<Result<Projected, Transient>>> = vec![None; records.len()];
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of: HashMap<String, usize> = HashMap::new();
        for (slot, record) in records.iter().enumerate() {
            let Ok(value) = std::str::from_utf8(&record.value) else {
                outcomes[slot] = Some(Ok(Projected::Rejected {
                    code: "malformed_json".to_owned(),
                    detail: "the value is not UTF-8".to_owned(),
                }));
                continue;
            };
            let input = input_text(&RecordInput {
                topic: &record.topic,
                partition: record.partition,
                offset: record.offset,
                value,
                now: &now,
                expiry_seconds: self.expiry_seconds,
            });
            let Some(id) = document_id(value) else {
                // Not addressable: the projector names what is wrong with it.
                outcomes[slot] = Some(match self.ask(None, &input).await {
                    Ok(_) => Ok(Projected::Rejected {
                        code: "invalid_user_id".to_owned(),
                        detail: "no player id".to_owned(),
                    }),
                    Err(answer) => answer,
                });
                continue;
            };
            let index = *group_of.entry(id.clone()).or_insert_with(|| {
                groups.push(Group { id, inputs: Vec::new(), slots: Vec::new() });
                groups.len() - 1
            });
            groups[index].inputs.push(input);
            groups[index].slots.push(slot);
        }
        let slots: Vec<Vec<usize>> = groups.iter().map(|group| group.slots.clone()).collect();
        for (group_outcomes, group_slots) in self.project_groups(groups).await.into_iter().zip(slots) {
            for (outcome, slot) in group_outcomes.into_iter().zip(group_slots) {
                outcomes[slot] = Some(outcome);
            }
        }
        outcomes.into_iter().map(|outcome| outcome.expect("every record has an outcome")).collect()
    }

    /// Takes the due sites of the documents `ids` offline; one outcome per id, in order.
    pub async fn expire_many(&self, ids: Vec<String>) -> Vec<Result<Projected, Transient>> {
        let input = input_text(&ExpireInput { now: &iso_utc(self.clock.now_ms()) });
        let groups = ids.into_iter().map(|id| Group { id, inputs: vec![input.clone()], slots: Vec::new() }).collect();
        self.project_groups(groups).await.into_iter().flatten().collect()
    }

    /// Each group's outcomes: one read for all, the folds in parallel, one batch of writes; a group whose write
    /// lost a race goes through [`Projection::apply`].
    async fn project_groups(&self, groups: Vec<Group>) -> Vec<Vec<Result<Projected, Transient>>> {
        if groups.is_empty() {
            return Vec::new();
        }
        let ids: Vec<String> = groups.iter().map(|group| group.id.clone()).collect();
        let mut stored = match self.documents_op(self.documents.get_many_versioned(COLLECTION, &ids)).await {
            Ok(stored) => stored,
            Err(error) => return groups.iter().map(|group| failed(group.inputs.len(), &error)).collect(),
        };
        let reads: Vec<(Group, Option<Versioned>)> =
            groups.into_iter().map(|group| (stored.remove(&group.id), group)).map(|(s, g)| (g, s)).collect();
        let folded = self.fold_parallel(reads).await;
        let writes: Vec<VersionedWrite> = folded
            .iter()
            .filter_map(|(group, stored, fold)| {
                fold.document.clone().map(|document| write_of(&group.id, stored.as_ref(), document))
            })
            .collect();
        let mut written = match self.documents_op(self.documents.write_many_if_version(COLLECTION, writes)).await {
            Ok(written) => written.into_iter(),
            Err(error) => {
                return folded
                    .into_iter()
                    .map(|(group, _, fold)| match fold.document {
                        Some(_) => failed(group.inputs.len(), &error),
                        None => fold.outcomes,
                    })
                    .collect();
            }
        };
        let mut outcomes = Vec::with_capacity(folded.len());
        for (group, _, fold) in folded {
            let lost_race = fold.document.is_some() && written.next().flatten().is_none();
            outcomes.push(if lost_race { self.apply(&group.id, &group.inputs).await } else { fold.outcomes });
        }
        outcomes
    }

    /// The folds of the groups, spread over the runtime's worker threads (the projector is CPU work).
    async fn fold_parallel(&self, reads: Vec<(Group, Option<Versioned>)>) -> Vec<(Group, Option<Versioned>, Fold)> {
        // The runtime's worker count: read from memory, where `available_parallelism` reads cgroup files (a
        // system call per batch in the drain's profile).
        let threads = tokio::runtime::Handle::current().metrics().num_workers().max(1);
        let per_task = reads.len().div_ceil(threads).max(FOLDS_PER_TASK);
        let mut tasks = Vec::new();
        let mut reads = reads.into_iter().peekable();
        while reads.peek().is_some() {
            let chunk: Vec<(Group, Option<Versioned>)> = reads.by_ref().take(per_task).collect();
            // What is left of the chunk should its task fail: the groups' ids and sizes.
            let sizes: Vec<(String, usize)> =
                chunk.iter().map(|(group, _)| (group.id.clone(), group.inputs.len())).collect();
            let projection = self.clone();
            let task = tokio::spawn(async move {
                let mut folded = Vec::with_capacity(chunk.len());
                for (group, stored) in chunk {
                    let fold = projection.fold(stored.as_ref(), &group.inputs).await;
                    folded.push((group, stored, fold));
                }
                folded
            });
            tasks.push((sizes, task));
        }
        let mut folded = Vec::new();
        for (sizes, task) in tasks {
            match task.await {
                Ok(chunk) => folded.extend(chunk),
                Err(error) => {
                    // Nothing of the chunk is written; its records are retried with their partition.
                    let error = Transient::Projector(format!("the fold task failed: {error}"));
                    folded.extend(sizes.into_iter().map(|(id, count)| {
                        let group = Group { id, inputs: Vec::new(), slots: Vec::new() };
                        (group, None, Fold { outcomes: failed(count, &error), document: None })
                    }));
                }
            }
        }
        folded
    }

    /// Asks the projector about each input in order, each on the state the previous ones left.
    async fn fold(&self, stored: Option<&Versioned>, inputs: &[String]) -> Fold {
        let mut state: Option<Value> = stored.map(|stored| stored.body.clone());
        let mut changed = false;
        let mut outcomes = Vec::with_capacity(inputs.len());
        for (index, input) in inputs.iter().enumerate() {
            match self.ask(state.as_ref(), input).await {
                Ok(output) => match output.document.filter(|_| output.outcome == "applied") {
                    Some(document) => {
                        let went_offline = online(state.as_ref()).saturating_sub(online(Some(&document)));
                        state = Some(document);
                        changed = true;
                        outcomes.push(Ok(Projected::Written { went_offline }));
                    }
                    None => outcomes.push(Ok(Projected::NoOp(bounded(&output.outcome)))),
                },
                Err(Ok(rejected)) => outcomes.push(Ok(rejected)),
                Err(Err(transient)) => {
                    // The rest waits: a player's records apply in order.
                    outcomes.extend(failed(inputs.len() - index, &transient));
                    break;
                }
            }
        }
        Fold { outcomes, document: state.filter(|_| changed) }
    }

    /// Read, fold, compare-and-write one document; a lost race starts again from the newer document.
    async fn apply(&self, id: &str, inputs: &[String]) -> Vec<Result<Projected, Transient>> {
        for _ in 0..MAX_RACES {
            let stored = match self.documents_op(self.documents.get_versioned(COLLECTION, id)).await {
                Ok(stored) => stored,
                Err(error) => return failed(inputs.len(), &error),
            };
            let fold = self.fold(stored.as_ref(), inputs).await;
            let Some(document) = fold.document else { return fold.outcomes };
            let write = vec![write_of(id, stored.as_ref(), document)];
            match self.documents_op(self.documents.write_many_if_version(COLLECTION, write)).await {
                Ok(written) if written.first().is_some_and(Option::is_some) => return fold.outcomes,
                Ok(_) => continue,
                Err(error) => return failed(inputs.len(), &error),
            }
        }
        let error = PortError::Unavailable(format!("{MAX_RACES} lost compare-and-replace races on one document"));
        failed(inputs.len(), &Transient::Documents(error))
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
        // A repeated key reads as the projector reads it, the last value winning
        // (tests/fuzz/regressions/presence_envelope/).
        let repeated = r#"{"body": {"tenant_id": "7"}, "body": {"tenant_id": "12", "user": {"user_id": "501"}}}"#;
        assert_eq!(document_id(repeated).as_deref(), Some("12:501"));
        assert_eq!(bounded("duplicate"), "duplicate");
        assert_eq!(bounded("Invalid Action!"), "rejected");
    }

    /// The inputs are the `presence` plugin's input format (its `projection::Input`), written without a
    /// `Value` in between.
    #[test]
    fn inputs_are_the_projectors_format() {
        let record = RecordInput {
            topic: "t",
            partition: 2,
            offset: 9,
            value: "{\"a\":\"\u{e9}\"}",
            now: "2026-01-01T00:00:00.000Z",
            expiry_seconds: 120,
        };
        let expected = json!({"kind": "record", "topic": "t", "partition": 2, "offset": 9, "value": "{\"a\":\"\u{e9}\"}",
            "now": "2026-01-01T00:00:00.000Z", "expiry_seconds": 120});
        assert_eq!(serde_json::from_str::<Value>(&input_text(&record)).unwrap(), expected);
        let expire = input_text(&ExpireInput { now: "2026-01-01T00:00:00.000Z" });
        assert_eq!(
            serde_json::from_str::<Value>(&expire).unwrap(),
            json!({"kind": "expire", "now": "2026-01-01T00:00:00.000Z"})
        );
    }

    #[test]
    fn only_the_validators_errors_are_permanent() {
        for code in VALIDATION_CODES {
            let answer = classify(InvokeError::Permanent(format!("{code}: why")));
            assert_eq!(answer, Ok(Projected::Rejected { code: code.to_owned(), detail: "why".to_owned() }));
        }
        // What a bad plugin version does to valid events blocks the partition: never a dead letter.
        for error in [
            InvokeError::Trap("unreachable".to_owned()),
            InvokeError::OutOfFuel,
            InvokeError::MemoryLimit(1 << 20),
            InvokeError::Timeout(5000),
            InvokeError::Retryable("bad_state: the document belongs to another player".to_owned()),
            InvokeError::Permanent("bad_state: expected value at line 1".to_owned()),
            InvokeError::Permanent("bad_output: key must be a string".to_owned()),
            InvokeError::Permanent("bad_request: missing field `kind`".to_owned()),
            InvokeError::Permanent("no_such_code: from a plugin the spec does not know".to_owned()),
            InvokeError::Permanent("invalid_action".to_owned()),
        ] {
            let shown = error.to_string();
            assert!(matches!(classify(error), Err(Transient::Projector(_))), "{shown} must retry the partition");
        }
    }
}
