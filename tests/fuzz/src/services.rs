//! `service_envelope` and `service_reply`: the two messages of the v2 service loop as they arrive on a
//! transport (NATS, Kafka or `POST /v2/{service}/inbound` and `POST /api/v2/runs/{run_id}/reply`). The input's
//! first line is the `flowhost-signature` header's value and the rest the body: the signature is checked as a
//! signing deployment checks it, then the body is taken as an unsigned deployment takes it.
//!
//! - `service_envelope`: parsed as the endpoint parses an [`InboundEnvelope`] and handled by the endpoint of the
//!   in-process services (the `noop` component is active, see `context`); the reply it sends back must be one the
//!   reply route takes.
//! - `service_reply`: parsed as a [`ReplyEnvelope`] and accepted onto a run that waits for a reply from node `a`.

use flowhost_core::config::Secret;
use flowhost_core::signing::ServiceSigning;
use flowhost_runs::model::{Pending, Run, RunStatus, SourceRef, WaitReason};
use flowhost_runs::{reply, InboundEnvelope, ReplyEnvelope, Runs};
use serde_json::Map;

use crate::context::{context, NOW_MS};

/// The run every reply is offered to.
const RUN_ID: &str = "0c4d2a71-58e4-4f3a-9a52-3b8f61d0e2aa";

pub fn service_envelope(data: &[u8]) {
    let Some(body) = signed_body(data) else { return };
    let Ok(envelope) = serde_json::from_slice::<InboundEnvelope>(body) else { return };
    let context = context();
    let answer = context.tokio.block_on(context.endpoint.handle(&envelope));
    assert_eq!((&answer.run_id, &answer.node_id), (&envelope.run_id, &envelope.node_id), "{envelope:?}");
    let sent = serde_json::to_vec(&answer).expect("a reply prints");
    match serde_json::from_slice::<ReplyEnvelope>(&sent) {
        Ok(taken) => assert_eq!(taken, answer, "the reply changes on the way"),
        Err(error) => panic!("the reply route refuses the endpoint's reply ({error}): {answer:?}"),
    }
}

pub fn service_reply(data: &[u8]) {
    let Some(body) = signed_body(data) else { return };
    let Ok(answer) = serde_json::from_slice::<ReplyEnvelope>(body) else { return };
    let context = context();
    context.tokio.block_on(async {
        Runs::new(&context.ports).save_all(&[waiting_run()]).await.expect("the waiting run is stored");
        // Refused (an unknown outcome, a key that is not the run's) or ignored is an outcome; a panic is a bug.
        let _ = reply::accept(&context.ports, answer, None).await;
    });
}

/// The body after the signature line, once the signature was checked with a key (a made-up signature is refused;
/// the outcome does not matter, a panic would). `None` when there is no line break.
fn signed_body(data: &[u8]) -> Option<&[u8]> {
    let at = data.iter().position(|&byte| byte == b'\n')?;
    let (signature, body) = (&data[..at], &data[at + 1..]);
    let signing = ServiceSigning::new(Some(&Secret::new("fuzz-service-signing-key-0123456789abcdef")));
    let _ = signing.verify(std::str::from_utf8(signature).ok(), body);
    Some(body)
}

/// A run whose action node `a` waits for its service's reply to attempt 1.
fn waiting_run() -> Run {
    Run {
        run_id: RUN_ID.into(),
        flow_id: "deposits-to-notifications".into(),
        version: 1,
        status: RunStatus::Waiting,
        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
        tenant_id: Some("12".into()),
        source: SourceRef { topic: "deposits".into(), partition: 0, offset: 41 },
        payloads: vec![Map::new()],
        started_at: flowhost_core::digest::iso_utc(NOW_MS),
        started_ms: NOW_MS,
        updated_ms: NOW_MS,
        finished_at: None,
        nodes: Vec::new(),
        pending: vec![Pending {
            node_id: "a".into(),
            payload: 0,
            attempt: 1,
            due_ms: NOW_MS + 30_000,
            reason: WaitReason::Reply,
            reply: None,
        }],
        next_due_ms: Some(NOW_MS + 30_000),
        lease_until_ms: 0,
        dead_letters: Vec::new(),
        replay_of: None,
        node_payloads_dropped: false,
    }
}
