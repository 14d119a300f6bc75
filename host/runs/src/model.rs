//! What a run is, as stored (collection `flow_runs`) and listed: the run, each node's record with its
//! attempts, the steps still to do, and the dead letters of its failed actions (`flow_dead_letters`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Steps wait for their time (an action's retry) or for an external service's reply.
    Waiting,
    /// Every branch ended: passed through, stopped at a condition or rate limit, or skipped forward.
    Completed,
    /// Every branch ended and at least one action failed for good (its dead letter is open).
    DeadLettered,
}

impl RunStatus {
    pub const ALL: [RunStatus; 3] = [RunStatus::Waiting, RunStatus::Completed, RunStatus::DeadLettered];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Waiting => "waiting",
            RunStatus::Completed => "completed",
            RunStatus::DeadLettered => "dead_lettered",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// What happened at a node (bounded: these are metric labels too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeOutcome {
    /// The node did its work and the payload went on.
    Passed,
    /// A condition that did not hold (or an else branch whose sibling held): the branch ends.
    NotMatched,
    /// A rate limit's window was full: the branch ends.
    RateLimited,
    /// The action (or lookup) asked to skip: acknowledged, not forwarded, no dead letter.
    SkipForward,
    /// A retryable failure; the step is retried after its backoff.
    Retrying,
    /// Sent to an external service; the run waits for its reply.
    Sent,
    /// Failed for good (a permanent failure, or retries exhausted): dead-lettered.
    DeadLettered,
}

impl NodeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeOutcome::Passed => "passed",
            NodeOutcome::NotMatched => "not_matched",
            NodeOutcome::RateLimited => "rate_limited",
            NodeOutcome::SkipForward => "skip_forward",
            NodeOutcome::Retrying => "retrying",
            NodeOutcome::Sent => "sent",
            NodeOutcome::DeadLettered => "dead_lettered",
        }
    }
}

/// One attempt of a node that calls out (an action, a lookup).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub at_ms: i64,
    pub duration_us: u64,
    /// `success`, `skip-forward`, `retryable`, `permanent` (the spec's outcome classes).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A node's part of a run. Payloads are numbers into [`Run::payloads`] (a node that passes its payload on
/// unchanged has the same number in and out, so a run stores each payload once); [`Run::view`] shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub node_id: String,
    pub kind: String,
    /// The payload the node received.
    pub input: usize,
    /// What the node passed on (absent when the branch ended here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<usize>,
    pub outcome: NodeOutcome,
    pub started_ms: i64,
    /// Time spent in the node, all attempts together.
    pub duration_us: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a step waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// An action's retry, due at `due_ms`.
    Retry,
    /// An external service's reply; `due_ms` is when to send again if none came.
    Reply,
    /// A dead letter replayed: run again now.
    Replay,
}

/// A step still to do: run `node_id` on `payload` (attempt `attempt`) at or after `due_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub node_id: String,
    /// The payload's number in [`Run::payloads`].
    pub payload: usize,
    pub attempt: u32,
    pub due_ms: i64,
    pub reason: WaitReason,
    /// An external service's answer to the attempt, once it replied (the step is then due at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<ServiceReply>,
}

/// What an external service answered for one action invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceReply {
    /// `success`, `skip-forward`, `retryable` or `permanent`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where an external service answers: a reply on any one of these reaches the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTo {
    /// NATS subject (`triggers.v2.replies`).
    pub subject: String,
    /// Kafka topic (`triggers_v2_replies`).
    pub topic: String,
    /// HTTP URL (`<public base URL>/api/v2/runs/<run_id>/reply`).
    pub url: String,
}

/// What a service segment sends an external service, once per action after it and attempt: the action and
/// its rendered input, the payload, the invocation context and where to reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundEnvelope {
    pub envelope_version: u32,
    pub service: String,
    pub action: String,
    pub node_id: String,
    pub segment_node_id: String,
    pub flow_id: String,
    pub flow_version: u64,
    pub run_id: String,
    pub idempotency_key: String,
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub trace_id: String,
    pub traceparent: String,
    /// The action's configuration rendered with the payload (what an in-process action receives).
    pub input: Value,
    /// The payload that reached the action.
    pub payload: Map<String, Value>,
    pub sent_at: String,
    pub reply_to: ReplyTo,
}

/// An external service's reply to an [`InboundEnvelope`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyEnvelope {
    pub run_id: String,
    pub node_id: String,
    /// The envelope's key: a reply whose key does not match the run and node is refused.
    pub idempotency_key: String,
    /// The attempt answered; a reply to an older attempt than the one waiting is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `success`, `skip-forward`, `retryable` or `permanent`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where the source record of a run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRef {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// A run as stored in `flow_runs` (id: `run_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    pub flow_id: String,
    pub version: u64,
    pub status: RunStatus,
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub source: SourceRef,
    /// Every distinct payload of the run; the first is the source event.
    pub payloads: Vec<Map<String, Value>>,
    pub started_at: String,
    pub started_ms: i64,
    pub updated_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Node records in the order the nodes ran.
    pub nodes: Vec<NodeRecord>,
    #[serde(default)]
    pub pending: Vec<Pending>,
    /// The earliest `due_ms` of `pending` (what the scheduler queries); absent when nothing is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_ms: Option<i64>,
    /// A node holding the run for its pending steps until this time (0: nobody).
    #[serde(default)]
    pub lease_until_ms: i64,
    /// Dead letters of this run (`flow_dead_letters` ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dead_letters: Vec<String>,
    /// The run this one replays (a replay to the latest release starts a new run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// The nodes' inputs and outputs were not kept (`engine.runs.node_payloads`): only the source event is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub node_payloads_dropped: bool,
}

impl Run {
    /// The source event.
    pub fn event(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.payloads.first().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// Adds a payload a node produced; answers its number.
    pub fn push_payload(&mut self, payload: Map<String, Value>) -> usize {
        self.payloads.push(payload);
        self.payloads.len() - 1
    }

    /// The number of `payload`, adding it when the run has no equal one.
    pub fn payload_index(&mut self, payload: &Map<String, Value>) -> usize {
        match self.payloads.iter().position(|p| p == payload) {
            Some(i) => i,
            None => self.push_payload(payload.clone()),
        }
    }

    /// The run as the API shows it: the source `event`, and each node's and pending step's payloads in place
    /// of their numbers. [`PortError::Malformed`](flowhost_core::PortError::Malformed) if a part does not
    /// serialize.
    pub fn view(&self) -> Result<Value, flowhost_core::PortError> {
        use flowhost_core::collections::FLOW_RUNS;
        use flowhost_core::stored::encode;
        let payload = |i: usize| self.payloads.get(i).map_or(Value::Null, |p| Value::Object(p.clone()));
        let mut view = encode(FLOW_RUNS, self)?;
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let mut node = encode(FLOW_RUNS, n)?;
            node["input"] = payload(n.input);
            match n.output {
                Some(o) => node["output"] = payload(o),
                None => drop(node.as_object_mut().map(|m| m.remove("output"))),
            }
            nodes.push(node);
        }
        let mut pending = Vec::with_capacity(self.pending.len());
        for p in &self.pending {
            let mut step = encode(FLOW_RUNS, p)?;
            step["payload"] = payload(p.payload);
            pending.push(step);
        }
        if let Some(object) = view.as_object_mut() {
            object.remove("payloads");
            object.insert("event".to_owned(), Value::Object(self.event().clone()));
            object.insert("nodes".to_owned(), Value::Array(nodes));
            object.insert("pending".to_owned(), Value::Array(pending));
        }
        Ok(view)
    }

    /// The record of `node_id`.
    pub fn node(&self, node_id: &str) -> Option<&NodeRecord> {
        self.nodes.iter().find(|n| n.node_id == node_id)
    }

    /// Sets `status`, `next_due_ms` and `finished_at` from what is pending and dead-lettered.
    /// This run as stored under `keep`: a finished run not to keep its nodes' payloads keeps only its source
    /// event (`None` when it is stored as it is).
    pub fn stored_as(&self, keep: crate::config::NodePayloads) -> Option<Run> {
        use crate::config::NodePayloads;
        let keeps = match keep {
            NodePayloads::All => true,
            NodePayloads::Failed => self.status == RunStatus::DeadLettered,
            NodePayloads::None => false,
        };
        if keeps || !self.pending.is_empty() || self.payloads.len() <= 1 {
            return None;
        }
        let mut trimmed = self.clone();
        trimmed.payloads.truncate(1);
        trimmed.node_payloads_dropped = true;
        Some(trimmed)
    }

    pub fn settle(&mut self, now_ms: i64) {
        self.next_due_ms = self.pending.iter().map(|p| p.due_ms).min();
        self.status = if !self.pending.is_empty() {
            RunStatus::Waiting
        } else if self.dead_letters.is_empty() {
            RunStatus::Completed
        } else {
            RunStatus::DeadLettered
        };
        self.updated_ms = now_ms;
        if self.pending.is_empty() && self.finished_at.is_none() {
            self.finished_at = Some(flowhost_core::digest::iso_utc(now_ms));
        }
        if !self.pending.is_empty() {
            self.finished_at = None;
        }
    }
}

/// What a run list shows per run (the nodes' payloads stay on the run itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: String,
    pub flow_id: String,
    pub version: u64,
    pub status: RunStatus,
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Each node with its outcome, in the order they ran.
    pub path: Vec<PathStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathStep {
    pub node_id: String,
    pub outcome: NodeOutcome,
}

impl From<&Run> for RunSummary {
    fn from(run: &Run) -> Self {
        RunSummary {
            run_id: run.run_id.clone(),
            flow_id: run.flow_id.clone(),
            version: run.version,
            status: run.status,
            trace_id: run.trace_id.clone(),
            tenant_id: run.tenant_id.clone(),
            started_at: run.started_at.clone(),
            finished_at: run.finished_at.clone(),
            path: run.nodes.iter().map(|n| PathStep { node_id: n.node_id.clone(), outcome: n.outcome }).collect(),
        }
    }
}

/// Whether a dead letter still waits for a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetterStatus {
    Open,
    Replayed,
}

impl DeadLetterStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterStatus::Open => "open",
            DeadLetterStatus::Replayed => "replayed",
        }
    }
}

/// Where a replay runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayTarget {
    /// The version the run started on: the same run resumes at the failed node.
    Run,
    /// The flow's latest release: a new run from the source event.
    Latest,
}

/// One replay of a dead letter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    pub at: String,
    pub by: String,
    pub to: ReplayTarget,
    /// The run that continues (the same run, or the new one of the latest release).
    pub run_id: String,
    pub version: u64,
}

/// A terminal action failure (collection `flow_dead_letters`, id from [`crate::ids::dead_letter_id`]), published on
/// `triggers.v2.dlq.<service>.<action>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub id: String,
    pub run_id: String,
    pub flow_id: String,
    pub version: u64,
    pub node_id: String,
    pub service: String,
    pub action: String,
    /// `permanent` (the action said so) or `exhausted` (retryable until the attempts ran out).
    pub reason: String,
    pub error: String,
    pub attempts: u32,
    /// The payload the action node received.
    pub payload: Map<String, Value>,
    pub idempotency_key: String,
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    pub at: String,
    pub at_ms: i64,
    pub status: DeadLetterStatus,
    #[serde(default)]
    pub replays: Vec<Replay>,
}

/// The observability event of node progress and outcomes (topic `engine.completions_topic`), separate from
/// the result payload: one per action attempt, per failed lookup or rate-limit counter, and per run status
/// change (with the path of every node's outcome).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionEvent {
    /// `node` or `run`.
    pub kind: String,
    pub run_id: String,
    pub flow_id: String,
    pub version: u64,
    pub trace_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_kind: Option<String>,
    /// A node's outcome (`passed`, `retrying`, ...) or the run's status (`completed`, ...).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// A run event's path: every node so far with its outcome.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<PathStep>,
    pub at: String,
    pub at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queries filter on the words `as_str` gives: they must be the stored ones.
    #[test]
    fn status_words_are_the_stored_ones() {
        for status in RunStatus::ALL {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        for status in [DeadLetterStatus::Open, DeadLetterStatus::Replayed] {
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
    }
}
