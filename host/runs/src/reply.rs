//! External services' replies: whichever channel a reply comes on (the NATS subject `triggers.v2.replies`, the
//! Kafka topic `triggers_v2_replies`, or `POST /api/v2/runs/<run_id>/reply`), [`accept`] records it on the step
//! waiting for it and makes the step due at once; the runner's scheduler then advances the run from there, as
//! if an in-process action had answered. A reply is checked against the run: its idempotency key must be the
//! run's and node's, and a reply for a step that no longer waits (answered already, timed out and sent again,
//! the run gone) is ignored, so a service may deliver a reply more than once.
//!
//! With `engine.dedup_ttl_ms` (default 60 s; 0 turns it off) a reply taken once is remembered in the cache port
//! (Redis when configured, resolved in the spec's order: `FLOWHOST_REDIS_URL`, its `_SECRET_NAME`, then host and
//! password composition with `FLOWHOST_REDIS_DB`) for that long, so a storm of redeliveries is answered
//! `ignored` without reading the run. Correctness never depends on it: a reply is remembered only after it was
//! taken, and without the cache the run's own state ignores duplicates the same way.

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
pub async fn accept(
    ports: &Ports,
    reply: ReplyEnvelope,
    dedup: Option<std::time::Duration>,
) -> Result<Accepted, RunsError> {
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
    let key = format!(
        "flowhost:reply:{}:{}:{}:{}",
        reply.run_id,
        reply.node_id,
        reply.attempt.map_or_else(|| "any".to_owned(), |a| a.to_string()),
        reply.outcome
    );
    if let Some(ttl) = dedup {
        if let Ok(Some(_)) = ports.cache.get(&key).await {
            return Ok(Accepted::Ignored);
        }
        let accepted = record(ports, &reply).await?;
        if let Err(error) = ports.cache.set(&key, b"1".to_vec(), Some(ttl)).await {
            tracing::debug!(%error, "could not remember a reply; duplicates are still ignored by the run");
        }
        return Ok(accepted);
    }
    record(ports, &reply).await
}

/// Records `reply` on the step waiting for it.
async fn record(ports: &Ports, reply: &ReplyEnvelope) -> Result<Accepted, RunsError> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use flowhost_core::ManualClock;
    use serde_json::{json, Map};

    use super::*;
    use crate::model::{Pending, Run, RunStatus, SourceRef};

    fn waiting_run() -> Run {
        Run {
            run_id: "r1".into(),
            flow_id: "f".into(),
            version: 1,
            status: RunStatus::Waiting,
            trace_id: "t".into(),
            tenant_id: None,
            source: SourceRef { topic: "s".into(), partition: 0, offset: 0 },
            payloads: vec![Map::new()],
            started_at: String::new(),
            started_ms: 0,
            updated_ms: 0,
            finished_at: None,
            nodes: Vec::new(),
            pending: vec![Pending {
                node_id: "a".into(),
                payload: 0,
                attempt: 1,
                due_ms: 99,
                reason: WaitReason::Reply,
                reply: None,
            }],
            next_due_ms: Some(99),
            lease_until_ms: 0,
            dead_letters: Vec::new(),
            replay_of: None,
            node_payloads_dropped: false,
        }
    }

    fn reply() -> ReplyEnvelope {
        serde_json::from_value(json!({"run_id": "r1", "node_id": "a", "idempotency_key": idempotency_key("r1", "a"),
            "attempt": 1, "outcome": "success", "result": {"ok": true}}))
        .unwrap()
    }

    #[tokio::test]
    async fn a_reply_storm_is_ignored_from_the_cache_and_duplicates_by_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000));
        let ports = flowhost_embedded::EmbeddedStore::open(dir.path(), 1, clock.clone()).unwrap().ports(clock);
        let runs = Runs::new(&ports);
        runs.save_all(&[waiting_run()]).await.unwrap();
        let dedup = Some(Duration::from_secs(60));
        assert_eq!(accept(&ports, reply(), dedup).await.unwrap(), Accepted::Accepted);
        let stored = runs.get("r1").await.unwrap();
        assert_eq!(stored.pending[0].reply.as_ref().map(|r| r.outcome.as_str()), Some("success"));
        assert_eq!(stored.pending[0].due_ms, 1_000, "due at once");

        // The step waits again (as if the reply had not been taken): the cache still answers the same reply.
        runs.save_all(&[waiting_run()]).await.unwrap();
        assert_eq!(accept(&ports, reply(), dedup).await.unwrap(), Accepted::Ignored, "remembered");
        // Without the cache, the run decides: waiting, so taken; then taken already, so ignored.
        assert_eq!(accept(&ports, reply(), None).await.unwrap(), Accepted::Accepted);
        assert_eq!(accept(&ports, reply(), None).await.unwrap(), Accepted::Ignored);

        let mut forged = reply();
        forged.idempotency_key = "x".into();
        assert!(matches!(accept(&ports, forged, None).await, Err(RunsError::Invalid { .. })));
        let mut odd = reply();
        odd.outcome = "maybe".into();
        assert!(matches!(accept(&ports, odd, None).await, Err(RunsError::Invalid { .. })));
    }
}
