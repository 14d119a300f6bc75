//! The flow broadcast: what a service learns about the released flows that target it.
//!
//! Published on `triggers.v2.service.<service>.flows` whenever a released flow that references the service
//! changes (release, enable or disable, drift status, deletion), and answered on request on the same subject
//! (a service sends any payload to it as a request when it starts, see [`serve_requests`]). A broadcast is the
//! whole current state for that service, never a delta, so a lost or repeated one is harmless:
//!
//! ```json
//! { "service": "notifications", "emitted_at": "2026-11-24T10:00:00.000Z",
//!   "flows": [ { "flow_id": "f1", "version": 3, "status": "valid", "enabled": true,
//!                "segments": [ { "node_id": "svc", "transport": "kafka", "kafka_topic": "crm.inbound",
//!                                "actions": [ { "node_id": "push", "action_ref": "send_webpush" } ] } ] } ] }
//! ```
//!
//! `flows` lists every released flow referencing the service (segments, lookups or a service source), with the
//! segments of that service in it; `kafka_topic` appears only on a retargeted segment.

use std::collections::HashMap;

use flowhost_core::digest::iso_utc;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::model::{FlowBody, FlowRecord, FlowStatus, FlowVersion, NodeKind};
use crate::validate::config_str;
use crate::{FlowError, Flows};

/// The subject of `service`'s flow broadcasts.
pub fn subject(service: &str) -> String {
    format!("triggers.v2.service.{service}.flows")
}

/// What a service is told (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowBroadcast {
    pub service: String,
    pub emitted_at: String,
    pub flows: Vec<TargetingFlow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetingFlow {
    pub flow_id: String,
    pub version: u64,
    pub status: FlowStatus,
    pub enabled: bool,
    pub segments: Vec<Segment>,
}

/// One service segment of the service in a released flow, with the actions it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub node_id: String,
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_topic: Option<String>,
    pub actions: Vec<SegmentAction>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentAction {
    pub node_id: String,
    pub action_ref: String,
}

/// The segments of `service` in a (normalized) body, each with the actions directly after it.
pub fn segments_of(body: &FlowBody, service: &str) -> Vec<Segment> {
    let kinds: HashMap<&str, &crate::model::Node> = body.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    body.nodes
        .iter()
        .filter(|n| n.kind == NodeKind::ServiceIn.as_str() && config_str(&n.config, "service") == Some(service))
        .map(|segment| Segment {
            node_id: segment.id.clone(),
            transport: config_str(&segment.config, "transport").unwrap_or_default().to_owned(),
            kafka_topic: config_str(&segment.config, "kafka_topic").map(str::to_owned),
            actions: body
                .edges
                .iter()
                .filter(|e| e.from == segment.id)
                .filter_map(|e| kinds.get(e.to.as_str()))
                .filter(|n| n.kind == NodeKind::Action.as_str())
                .map(|n| SegmentAction {
                    node_id: n.id.clone(),
                    action_ref: config_str(&n.config, "action_ref").unwrap_or_default().to_owned(),
                })
                .collect(),
        })
        .collect()
}

/// What `flow_service_refs` keeps per (service, released flow): the flow's entry in the service's broadcast,
/// so a broadcast is one query however many flows target the service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRef {
    pub service: String,
    pub flow_id: String,
    pub version: u64,
    pub status: FlowStatus,
    pub enabled: bool,
    pub segments: Vec<Segment>,
}

impl ServiceRef {
    /// One row per service `version` references.
    pub(crate) fn of(flow: &FlowRecord, version: &FlowVersion) -> Vec<ServiceRef> {
        version
            .services
            .iter()
            .map(|service| ServiceRef {
                service: service.clone(),
                flow_id: flow.id.clone(),
                version: version.version,
                status: flow.status,
                enabled: flow.enabled,
                segments: segments_of(&version.body, service),
            })
            .collect()
    }
}

/// The current broadcast of `service`.
pub async fn current(flows: &Flows, service: &str) -> Result<FlowBroadcast, FlowError> {
    let targeting = flows
        .service_refs(service)
        .await?
        .into_iter()
        .map(|row| TargetingFlow {
            flow_id: row.flow_id,
            version: row.version,
            status: row.status,
            enabled: row.enabled,
            segments: row.segments,
        })
        .collect();
    Ok(FlowBroadcast {
        service: service.to_owned(),
        emitted_at: iso_utc(flows.ports().clock.now_ms()),
        flows: targeting,
    })
}

pub(crate) async fn publish(flows: &Flows, service: &str) -> Result<(), FlowError> {
    let broadcast = current(flows, service).await?;
    let payload = serde_json::to_vec(&broadcast).unwrap_or_default();
    let signed = flows.ports().signing.headers(&payload);
    flows.ports().subjects.publish_with_headers(&subject(service), signed, payload).await?;
    Ok(())
}

/// Answers requests on `triggers.v2.service.*.flows` with the service's current broadcast, until `shutdown`
/// (never returning earlier: a role task that returns stops the process).
pub async fn serve_requests(flows: Flows, shutdown: CancellationToken) {
    let subjects = flows.ports().subjects.clone();
    let pattern = "triggers.v2.service.*.flows";
    let Some(mut requests) = flowhost_core::ports::subscribe_until_done(
        subjects.as_ref(),
        pattern,
        Some("flowhost-flow-broadcast"),
        &shutdown,
    )
    .await
    else {
        return;
    };
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return,
            message = requests.next() => match message {
                Some(m) => m,
                None => {
                    warn!("the flow broadcast request subscription ended; requests go unanswered");
                    shutdown.cancelled().await;
                    return;
                }
            },
        };
        let Some(reply) = message.reply.clone() else { continue };
        let signature = message.header(flowhost_core::signing::SIGNATURE_HEADER);
        if let Err(error) = flows.ports().signing.verify(signature, &message.payload) {
            warn!(subject = %message.subject, %error, "a flow broadcast request was refused");
            continue;
        }
        let service = message
            .subject
            .strip_prefix("triggers.v2.service.")
            .and_then(|rest| rest.strip_suffix(".flows"))
            .unwrap_or_default()
            .to_owned();
        let payload = match current(&flows, &service).await {
            Ok(broadcast) => serde_json::to_vec(&broadcast).unwrap_or_default(),
            Err(error) => {
                warn!(%service, %error, "could not answer a flow broadcast request");
                serde_json::to_vec(&Value::Null).unwrap_or_default()
            }
        };
        let signed = flows.ports().signing.headers(&payload);
        if let Err(error) = subjects.respond_with_headers(&reply, signed, payload).await {
            warn!(%service, %error, "could not reply to a flow broadcast request");
        }
    }
}
