//! External services' replies: whichever channel a reply comes on (the NATS subject `triggers.v2.replies`, the
//! Kafka topic `triggers_v2_replies`, or `POST /api/v2/runs/<run_id>/reply`), [`accept`] records it on the step
//! waiting for it and makes the step due at once; the runner's scheduler then advances the run from there, as
//! if an in-process action had answered. A reply is checked against the run: its idempotency key must be the
//! run's and node's, and a reply for a step that no longer waits (answered already, timed out and sent again,
//! the run gone) is ignored, so a service may deliver a reply more than once.

use flowhost_core::ports::Ports;
use serde::Serialize;

use crate::ids::idempotency_key;
use crate::model::{ReplyEnvelope, ServiceReply, WaitReason};
use crate::store::{Runs, RunsError};

/// The subject a node publishes on after accepting a reply, so schedulers advance the run at once instead of
/// on their next tick.
pub const DUE_SUBJECT: &str = "flowhost.runs.due";

const OUTCOMES: [&str; 4] = ["success", "skip-forward", "retryable", "permanent"];
const WRITE_ATTEMPTS: usize = 5;

/// What became of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Accepted {
    /// Recorded; the run goes on from it.
    Accepted,
    /// No step waits for it (a duplicate, a late reply to an attempt sent again, a run no longer there).
    Ignored,
}

impl Accepted {
    pub fn as_str(self) -> &'static str {
        match self {
            Accepted::Accepted => "accepted",
            Accepted::Ignored => "ignored",
        }
    }
}

/// Records `reply` on the run it answers (see the module documentation). `Invalid` when the reply itself is
/// wrong (an unknown outcome, a key that is not the run's and node's).
pub async fn accept(ports: &Ports, reply: ReplyEnvelope) -> Result<Accepted, RunsError> {
    if !OUTCOMES.contains(&reply.outcome.as_str()) {
        return Err(RunsError::Invalid {
            field: "outcome".into(),
            message: format!("{:?} is not one of {}", reply.outcome, OUTCOMES.join(", ")),
        });
    }
    if reply.idempotency_key != idempotency_key(&reply.run_id, &reply.node_id) {
        return Err(RunsError::Invalid {
            field: "idempotency_key".into(),
            message: "is not the key of this run and node".into(),
        });
    }
    let runs = Runs::new(ports);
    for _ in 0..WRITE_ATTEMPTS {
        let (mut run, version) = match runs.get_versioned(&reply.run_id).await {
            Ok(found) => found,
            Err(RunsError::RunNotFound(_)) => return Ok(Accepted::Ignored),
            Err(error) => return Err(error),
        };
        let now = ports.clock.now_ms();
        let Some(step) = run.pending.iter_mut().find(|p| {
            p.node_id == reply.node_id
                && p.reason == WaitReason::Reply
                && p.reply.is_none()
                && reply.attempt.is_none_or(|a| a == p.attempt)
        }) else {
            return Ok(Accepted::Ignored);
        };
        step.reply = Some(ServiceReply {
            outcome: reply.outcome.clone(),
            result: reply.result.clone(),
            error: reply.error.clone(),
        });
        step.due_ms = now;
        run.settle(now);
        if runs.replace(&run, version).await?.is_some() {
            if let Err(error) = ports.subjects.publish(DUE_SUBJECT, b"{}".to_vec()).await {
                tracing::debug!(%error, "could not signal a due run; the scheduler finds it on its tick");
            }
            return Ok(Accepted::Accepted);
        }
    }
    Err(RunsError::Conflict(format!("run {:?} kept changing while recording a reply", reply.run_id)))
}
