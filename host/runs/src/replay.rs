//! Replaying dead letters. To the run's own version, the run resumes at the failed node with the payload it
//! had there (attempt 1 again, the same idempotency key); to the latest release, a new run of that version
//! starts from the original source event (its id derived from the dead letter and the replay's number, so a
//! retried request does not start two). Either way the step is pending and due now: the runner's scheduler
//! advances it. The dead letter is marked `replayed` with who, when, where to and which run continues.

use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{PortError, Ports};
use flowhost_flows::{FlowError, Flows, NodeKind};

use crate::ids;
use crate::model::{DeadLetterStatus, Pending, Replay, ReplayTarget, Run, RunStatus, WaitReason};
use crate::store::{Runs, RunsError};

const WRITE_ATTEMPTS: usize = 5;

/// Replays the dead letter `id` to `to` as `by`.
pub async fn replay(ports: &Ports, id: &str, to: ReplayTarget, by: &str) -> Result<Replay, RunsError> {
    let runs = Runs::new(ports);
    let (mut letter, letter_version) = runs.dead_letter(id).await?;
    if letter.status == DeadLetterStatus::Replayed {
        return Err(RunsError::Conflict(format!("dead letter {id:?} was replayed already")));
    }
    let now = ports.clock.now_ms();
    let replay = match to {
        ReplayTarget::Run => {
            let mut resumed = None;
            for _ in 0..WRITE_ATTEMPTS {
                let (mut run, version) = runs.get_versioned(&letter.run_id).await?;
                run.dead_letters.retain(|l| l != id);
                run.pending.retain(|p| p.node_id != letter.node_id);
                let payload = run.payload_index(&letter.payload);
                run.pending.push(Pending {
                    node_id: letter.node_id.clone(),
                    payload,
                    attempt: 1,
                    due_ms: now,
                    reason: WaitReason::Replay,
                    reply: None,
                });
                run.settle(now);
                if runs.replace(&run, version).await?.is_some() {
                    resumed = Some(run);
                    break;
                }
            }
            let run = resumed.ok_or_else(|| RunsError::Conflict(format!("run {:?} kept changing", letter.run_id)))?;
            Replay { at: iso_utc(now), by: by.to_owned(), to, run_id: run.run_id, version: run.version }
        }
        ReplayTarget::Latest => {
            let flows = Flows::new(ports.clone());
            let flow = flows.get(&letter.flow_id).await.map_err(flow_error)?;
            let number = flow
                .released_version
                .ok_or_else(|| RunsError::Conflict(format!("flow {:?} has no released version", letter.flow_id)))?;
            let version = flows.version(&letter.flow_id, number).await.map_err(flow_error)?;
            let source = version
                .body
                .nodes
                .iter()
                .find(|n| n.kind == NodeKind::Source.as_str())
                .map(|n| n.id.clone())
                .ok_or_else(|| {
                    RunsError::Conflict(format!("version {number} of flow {:?} has no source", letter.flow_id))
                })?;
            let original = runs.get(&letter.run_id).await?;
            let run = Run {
                run_id: ids::replay_run_id(id, letter.replays.len()),
                flow_id: letter.flow_id.clone(),
                version: number,
                status: RunStatus::Waiting,
                trace_id: original.trace_id.clone(),
                tenant_id: original.tenant_id.clone(),
                source: original.source.clone(),
                payloads: vec![original.event().clone()],
                started_at: iso_utc(now),
                started_ms: now,
                updated_ms: now,
                finished_at: None,
                nodes: Vec::new(),
                pending: vec![Pending {
                    node_id: source,
                    payload: 0,
                    attempt: 1,
                    due_ms: now,
                    reason: WaitReason::Replay,
                    reply: None,
                }],
                next_due_ms: Some(now),
                lease_until_ms: 0,
                dead_letters: Vec::new(),
                replay_of: Some(original.run_id.clone()),
                node_payloads_dropped: false,
            };
            match runs.insert(&run).await {
                Ok(()) => {}
                Err(PortError::Conflict(_)) => {
                    return Err(RunsError::Conflict(format!("dead letter {id:?} is being replayed already")))
                }
                Err(error) => return Err(error.into()),
            }
            Replay { at: iso_utc(now), by: by.to_owned(), to, run_id: run.run_id, version: number }
        }
    };
    letter.status = DeadLetterStatus::Replayed;
    letter.replays.push(replay.clone());
    if !runs.replace_dead_letter(&letter, letter_version).await? {
        // Replayed by someone else meanwhile: both replays stand (the step is idempotent), the record says one.
        tracing::warn!(dead_letter = id, "the dead letter changed while replaying it");
    }
    tracing::info!(dead_letter = id, run = %replay.run_id, to = ?to, by, "dead letter replayed");
    Ok(replay)
}

fn flow_error(error: FlowError) -> RunsError {
    match error {
        FlowError::Storage(error) => RunsError::Storage(error),
        other => RunsError::Conflict(other.to_string()),
    }
}
