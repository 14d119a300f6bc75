//! The executor: advances a run through its plan from a set of steps (a node to visit with the payload that
//! reaches it) until every branch has ended or waits. It changes the run (node records, pending steps, dead
//! letters) and collects the effects to make durable before the run is stored: outputs and completion events to
//! publish, dead letters to publish and mirror, inbound envelopes to send to external services.
//!
//! Semantics of the node kinds:
//! - a condition passes the payload on when its expression holds; an **else** branch when none of its sibling
//!   conditions with an expression held (an evaluation error, such as a missing field, counts as not holding).
//!   Conditions and mappings evaluate through the node-kinds port (`nodes.rs`: natively or as components, by
//!   `engine.node_kinds`); a node kind that fails retries or dead-letters the step like a call out;
//! - a **rate limit** counts per flow, node and value of `key` (the whole node without a key) in fixed windows
//!   of `window_seconds` aligned to the epoch, in the cache port; the first `limit` of a window pass;
//! - a mapping `select`s (keeps only its targets) or `merge`s (adds them) fields of the payload;
//! - a lookup puts the data source's answer (JSON, or the text when it is not JSON) into `target`;
//! - an output publishes the payload to its topic and passes it on;
//! - an in-process service segment passes the payload on to its action; an action renders its config
//!   (`{{placeholders}}` from the payload; a string that is one placeholder takes the field's value) as its
//!   input, runs with the idempotency key `sha256(run_id + node_id)`, and puts its answer into `result`.
//!
//! A step that calls out (a rate limit's counter, a lookup, an action) and fails with a retryable error waits
//! for its backoff (`engine.retry`: 5 attempts, 2 s, factor 3, 1 min cap by default) as a pending step of the
//! run; a permanent failure, or the last attempt's, dead-letters the step. A skip-forward ends the branch.

use std::time::{Duration, Instant};

use crate::config::RetryPolicy;
use async_trait::async_trait;
use flowhost_core::digest::iso_utc;
use flowhost_core::placeholders::render_value;
use flowhost_core::ports::{OutRecord, Ports};
use flowhost_runtime::{InvocationContext, Outcome};
use serde_json::{Map, Value};
use tracing::{debug, warn};

use crate::call::CallError;
use crate::ids::{idempotency_key, traceparent};
use crate::model::{
    Attempt, CompletionEvent, DeadLetter, DeadLetterStatus, InboundEnvelope, NodeOutcome, NodeRecord, Pending, ReplyTo,
    Run, ServiceReply, WaitReason,
};
use crate::nodes::{CallOrigin, ConditionNode, NodeAnswer, NodeCall, NodeFailure, NodeKinds, NodeRef};
use crate::plan::{FlowPlan, LookupVia, Op, Via};
use flowhost_flows::NodeKind;

/// Header names on published outputs.
pub const HEADER_FLOW_ID: &str = "flowhost-flow-id";
pub const HEADER_RUN_ID: &str = "flowhost-run-id";
pub const HEADER_NODE_ID: &str = "flowhost-node-id";

/// The node-kinds call of `run` at its payload `at`.
fn run_call(run: &Run, at: usize, attempt: u32) -> NodeCall<'_> {
    NodeCall {
        tenant_id: run.tenant_id.as_deref(),
        origin: CallOrigin::Run(&run.run_id),
        attempt,
        payload: &run.payloads[at],
    }
}

/// How the executor reaches services: actions and data sources of in-process components (and, for lookups,
/// external services' HTTP endpoints).
#[async_trait]
pub trait ServiceCalls: Send + Sync {
    /// Runs `action` of `service` (implemented by `component` when known) on `input`.
    async fn invoke(
        &self,
        service: &str,
        component: Option<&str>,
        action: &str,
        context: &InvocationContext,
        input: &str,
    ) -> Result<String, CallError>;

    /// Answers `data_source` of `service` for `params`, asking where `via` says.
    async fn lookup(
        &self,
        service: &str,
        data_source: &str,
        params: &[(String, String)],
        via: &LookupVia,
    ) -> Result<String, CallError>;
}

/// A step: visit `node_id` with the run's payload number `payload` (attempt `attempt` of a node that calls
/// out; `decided` is a condition's answer, computed with its siblings).
#[derive(Debug, Clone)]
pub struct Step {
    pub node_id: String,
    pub payload: usize,
    pub attempt: u32,
    pub decided: Option<bool>,
    /// Why the step waited, when it did (a `Reply` step without a reply timed out).
    pub wait: Option<WaitReason>,
    /// An external service's reply to the step's attempt.
    pub reply: Option<ServiceReply>,
}

impl Step {
    pub fn new(node_id: impl Into<String>, payload: usize, attempt: u32) -> Step {
        Step { node_id: node_id.into(), payload, attempt, decided: None, wait: None, reply: None }
    }
}

/// The NATS subject external services reply on.
pub const REPLY_SUBJECT: &str = "triggers.v2.replies";
/// The Kafka topic external services reply on.
pub const REPLY_TOPIC: &str = "triggers_v2_replies";

/// An inbound envelope to send once the run that waits for its reply is stored.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub via: Via,
    pub run_id: String,
    pub traceparent: String,
    pub body: Vec<u8>,
}

/// What sending to external services needs besides the envelope.
#[derive(Debug, Clone)]
pub struct Outbound {
    /// How long a sent step waits for its reply before it counts as a retryable failure.
    pub reply_timeout: Duration,
    /// The API's public base URL (replies go to `<it>/api/v2/runs/<run_id>/reply`).
    pub reply_url_base: String,
}

/// Where a send goes: the segment, service, action and transport of the action node.
struct SendTarget<'a> {
    segment: &'a str,
    service: &'a str,
    action: &'a str,
    via: &'a Via,
}

/// What a run's advance produced that must become durable (published, sent, mirrored).
#[derive(Debug, Default)]
pub struct Effects {
    pub outputs: Vec<OutRecord>,
    pub completions: Vec<CompletionEvent>,
    pub dead_letters: Vec<DeadLetter>,
    /// Sent after the runs are stored (a reply must find its run waiting).
    pub sends: Vec<Outgoing>,
}

impl Effects {
    pub fn extend(&mut self, other: Effects) {
        self.outputs.extend(other.outputs);
        self.completions.extend(other.completions);
        self.dead_letters.extend(other.dead_letters);
        self.sends.extend(other.sends);
    }
}

/// What the executor needs besides the plan and the run.
pub struct Executor<'a> {
    pub ports: &'a Ports,
    pub services: &'a dyn ServiceCalls,
    /// How condition and mapping nodes evaluate (`engine.node_kinds`).
    pub nodes: &'a dyn NodeKinds,
    pub retry: &'a RetryPolicy,
    pub metrics: &'a crate::RunMetrics,
    pub outbound: &'a Outbound,
}

/// How one node's visit ended.
enum Visit {
    /// Go on to the children with this payload (its number in the run).
    Continue(usize),
    /// The branch ends here.
    Stop(NodeOutcome),
}

impl Executor<'_> {
    fn now_ms(&self) -> i64 {
        self.ports.clock.now_ms()
    }

    /// The delay before attempt `next` (2, 3, ...) of a step.
    pub fn delay_before(&self, next: u32) -> Duration {
        let mut backoff = self.retry.backoff();
        let mut delay = backoff.next_delay();
        for _ in 2..next {
            delay = backoff.next_delay();
        }
        delay
    }

    /// Advances `run` from `steps` until every branch ended or waits; settles its status.
    pub async fn advance(&self, plan: &FlowPlan, run: &mut Run, steps: Vec<Step>, effects: &mut Effects) {
        let mut stack: Vec<Step> = steps.into_iter().rev().collect();
        while let Some(step) = stack.pop() {
            let Some(node) = plan.node(&step.node_id) else {
                warn!(run = %run.run_id, node = %step.node_id, "a step names a node the version does not have");
                continue;
            };
            let started = Instant::now();
            let started_ms = self.now_ms();
            let input = step.payload;
            let visit = self.visit(plan, run, node.id.as_str(), &node.op, step, effects).await;
            let elapsed = started.elapsed();
            let kind = node.op.kind().as_str();
            match visit {
                None => {} // The node recorded itself (a waiting or dead-lettered step).
                Some(Visit::Stop(outcome)) => {
                    self.record(run, node.id.as_str(), kind, input, None, outcome, started_ms, elapsed)
                }
                Some(Visit::Continue(output)) => {
                    self.record(
                        run,
                        node.id.as_str(),
                        kind,
                        input,
                        Some(output),
                        NodeOutcome::Passed,
                        started_ms,
                        elapsed,
                    );
                    let children = self.children(plan, &node.children, run, output).await;
                    stack.extend(children.into_iter().rev());
                }
            }
        }
        run.settle(self.now_ms());
    }

    /// The steps of `children` for `payload`: each condition's answer is computed here, with its siblings, so
    /// an else branch knows whether one of them held. A condition whose node kind failed is left undecided (its
    /// visit evaluates it again and retries or dead-letters it), and so is an else branch beside it.
    async fn children(&self, plan: &FlowPlan, children: &[String], run: &Run, payload_index: usize) -> Vec<Step> {
        let mut any_held = false;
        let mut undecided = false;
        let mut steps = Vec::with_capacity(children.len());
        for child in children.iter().filter_map(|id| plan.node(id)) {
            let decided = match &child.op {
                Op::Condition(Some(condition)) => {
                    match self.condition(plan, &child.id, condition, run, payload_index, 1).await {
                        Ok(held) => {
                            any_held |= held;
                            Some(held)
                        }
                        Err(_) => {
                            undecided = true;
                            None
                        }
                    }
                }
                Op::Condition(None) => (!undecided).then_some(!any_held),
                _ => None,
            };
            steps.push(Step {
                node_id: child.id.clone(),
                payload: payload_index,
                attempt: 1,
                decided,
                wait: None,
                reply: None,
            });
        }
        steps
    }

    /// Whether `condition` (node `node_id`) holds for the run's payload `at`, through the node-kinds port.
    async fn condition(
        &self,
        plan: &FlowPlan,
        node_id: &str,
        condition: &ConditionNode,
        run: &Run,
        at: usize,
        attempt: u32,
    ) -> Result<bool, CallError> {
        let node = NodeRef { flow_id: Some(&plan.flow_id), node_id };
        let call = run_call(run, at, attempt);
        let answer = self.nodes.conditions(node, condition, &[call]).await.pop();
        let held = match answer {
            Some(Ok(held)) => Ok(held),
            // The expression cannot be evaluated on this payload: it does not hold.
            Some(Err(NodeFailure::NoMatch(_))) => Ok(false),
            Some(Err(failure)) => Err(failure.into_call()),
            None => Err(CallError::permanent("condition: the node kind gave no answer")),
        };
        if let Ok(false) = held {
            debug!(node = node_id, "condition does not hold");
        }
        held
    }

    /// Whether the else branch `node_id` holds: none of its sibling conditions with an expression holds (one
    /// that skips forward does not hold; any other failure is the else branch's).
    async fn else_holds(
        &self,
        plan: &FlowPlan,
        node_id: &str,
        run: &Run,
        at: usize,
        attempt: u32,
    ) -> Result<bool, CallError> {
        let siblings =
            plan.nodes.values().find(|n| n.children.iter().any(|c| c == node_id)).map(|parent| &parent.children);
        for sibling in siblings.into_iter().flatten().filter_map(|id| plan.node(id)) {
            if let Op::Condition(Some(condition)) = &sibling.op {
                match self.condition(plan, &sibling.id, condition, run, at, attempt).await {
                    Ok(true) => return Ok(false),
                    Ok(false) => {}
                    Err(failure) if failure.outcome == Outcome::SkipForward => {}
                    Err(failure) => return Err(failure),
                }
            }
        }
        Ok(true)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        run: &mut Run,
        node_id: &str,
        kind: &str,
        input: usize,
        output: Option<usize>,
        outcome: NodeOutcome,
        started_ms: i64,
        elapsed: Duration,
    ) {
        self.metrics.nodes.with_label_values(&[kind, outcome.as_str()]).inc();
        let duration_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        match run.nodes.iter_mut().find(|n| n.node_id == node_id) {
            Some(record) => {
                record.output = output;
                record.outcome = outcome;
                record.duration_us = record.duration_us.saturating_add(duration_us);
            }
            None => run.nodes.push(NodeRecord {
                node_id: node_id.to_owned(),
                kind: kind.to_owned(),
                input,
                output,
                outcome,
                started_ms,
                duration_us,
                attempts: Vec::new(),
                error: None,
            }),
        }
    }

    async fn visit(
        &self,
        plan: &FlowPlan,
        run: &mut Run,
        node_id: &str,
        op: &Op,
        step: Step,
        effects: &mut Effects,
    ) -> Option<Visit> {
        let Step { payload: at, attempt, decided, wait, reply, .. } = step;
        match op {
            Op::Source | Op::Segment { .. } => Some(Visit::Continue(at)),
            Op::Condition(condition) => {
                let held = match (decided, condition) {
                    (Some(held), _) => Ok(held),
                    (None, Some(condition)) => self.condition(plan, node_id, condition, run, at, attempt).await,
                    (None, None) => self.else_holds(plan, node_id, run, at, attempt).await,
                };
                match held {
                    Ok(true) => Some(Visit::Continue(at)),
                    Ok(false) => Some(Visit::Stop(NodeOutcome::NotMatched)),
                    Err(failure) if failure.outcome == Outcome::SkipForward => {
                        Some(Visit::Stop(NodeOutcome::SkipForward))
                    }
                    Err(failure) => {
                        self.failed(plan, run, node_id, "condition", at, attempt, 0, failure, None, effects);
                        None
                    }
                }
            }
            Op::Mapping(mapping) => {
                let node = NodeRef { flow_id: Some(&plan.flow_id), node_id };
                let answer = self.nodes.mappings(node, mapping, &[run_call(run, at, attempt)]).await.pop();
                let answer = match answer {
                    Some(answer) => answer.map_err(NodeFailure::into_call),
                    None => Err(CallError::permanent("mapping: the node kind gave no answer")),
                };
                match answer {
                    Ok(out) => Some(Visit::Continue(run.push_payload(out))),
                    Err(failure) if failure.outcome == Outcome::SkipForward => {
                        Some(Visit::Stop(NodeOutcome::SkipForward))
                    }
                    Err(failure) => {
                        self.failed(plan, run, node_id, "mapping", at, attempt, 0, failure, None, effects);
                        None
                    }
                }
            }
            Op::PluginNode(plugin_node) => {
                let node = NodeRef { flow_id: Some(&plan.flow_id), node_id };
                let started = Instant::now();
                let answer = match plugin_node.config_for(&run.payloads[at]) {
                    Err(message) => Err(CallError::permanent(message)),
                    Ok(config) => {
                        let call = run_call(run, at, attempt);
                        let answer = self.nodes.plugin_nodes(node, plugin_node, &config, &[call]).await.pop();
                        answer.unwrap_or_else(|| Err(CallError::permanent("node-kind: the node kind gave no answer")))
                    }
                };
                let elapsed = started.elapsed();
                let kind = NodeKind::PluginNode.as_str();
                match answer {
                    Ok(NodeAnswer::Continue(None)) => Some(Visit::Continue(at)),
                    Ok(NodeAnswer::Continue(Some(out))) => Some(Visit::Continue(run.push_payload(out))),
                    Ok(NodeAnswer::Stop) => Some(Visit::Stop(NodeOutcome::NotMatched)),
                    Err(failure) if failure.outcome == Outcome::SkipForward => {
                        let message = Some(failure.message.as_str());
                        self.attempt(run, node_id, kind, at, attempt, elapsed, "skip-forward", message);
                        Some(Visit::Stop(NodeOutcome::SkipForward))
                    }
                    Err(failure) => {
                        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
                        let target = Some((&plugin_node.plugin, &plugin_node.kind));
                        self.failed(plan, run, node_id, kind, at, attempt, micros, failure, target, effects);
                        None
                    }
                }
            }
            Op::Output { topic } => {
                let value = serde_json::to_vec(&run.payloads[at]).unwrap_or_default();
                let mut record = OutRecord::new(topic.clone(), value)
                    .with_header(HEADER_FLOW_ID, plan.flow_id.as_bytes().to_vec())
                    .with_header(HEADER_RUN_ID, run.run_id.as_bytes().to_vec())
                    .with_header(HEADER_NODE_ID, node_id.as_bytes().to_vec())
                    .with_header(
                        "traceparent",
                        traceparent(&run.trace_id, &format!("{}/{node_id}", run.run_id)).into_bytes(),
                    );
                if let Some(tenant) = &run.tenant_id {
                    record = record.with_key(tenant.as_bytes().to_vec());
                }
                effects.outputs.push(record);
                Some(Visit::Continue(at))
            }
            Op::RateLimit { limit, window_ms, key } => {
                let value = key.as_ref().and_then(|k| run.payloads[at].get(k)).map(key_text).unwrap_or_default();
                let now = self.now_ms();
                let window = now.div_euclid(i64::try_from(*window_ms).unwrap_or(i64::MAX).max(1));
                let counter = format!("flowhost:rate:{}:{node_id}:{value}:{window}", plan.flow_id);
                let ttl = Duration::from_millis(*window_ms).max(Duration::from_secs(1));
                match self.ports.cache.incr(&counter, ttl).await {
                    Ok(count) if count <= *limit => Some(Visit::Continue(at)),
                    Ok(_) => Some(Visit::Stop(NodeOutcome::RateLimited)),
                    Err(error) => {
                        let failure = CallError::retryable(format!("rate-limit counter: {error}"));
                        self.failed(plan, run, node_id, "rate-limit", at, attempt, 0, failure, None, effects);
                        None
                    }
                }
            }
            Op::Lookup { service, data_source, params, target, via } => {
                let rendered = render_value(&Value::Object(params.clone()), &|name| run.payloads[at].get(name));
                let rendered = match rendered {
                    Ok(Value::Object(rendered)) => rendered,
                    Ok(_) => Map::new(),
                    Err(error) => {
                        let failure = CallError::permanent(format!("params: {error}"));
                        self.failed(
                            plan,
                            run,
                            node_id,
                            "lookup",
                            at,
                            attempt,
                            0,
                            failure,
                            Some((service, data_source)),
                            effects,
                        );
                        return None;
                    }
                };
                let params: Vec<(String, String)> = rendered.iter().map(|(k, v)| (k.clone(), key_text(v))).collect();
                let started = Instant::now();
                let answer = self.services.lookup(service, data_source, &params, via).await;
                let elapsed = started.elapsed();
                match answer {
                    Ok(text) => {
                        self.attempt(run, node_id, "lookup", at, attempt, elapsed, "success", None);
                        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
                        let mut out = run.payloads[at].clone();
                        out.insert(target.clone(), value);
                        Some(Visit::Continue(run.push_payload(out)))
                    }
                    Err(failure) if failure.outcome == Outcome::SkipForward => {
                        self.attempt(
                            run,
                            node_id,
                            "lookup",
                            at,
                            attempt,
                            elapsed,
                            "skip-forward",
                            Some(&failure.message),
                        );
                        Some(Visit::Stop(NodeOutcome::SkipForward))
                    }
                    Err(failure) => {
                        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
                        self.failed(
                            plan,
                            run,
                            node_id,
                            "lookup",
                            at,
                            attempt,
                            micros,
                            failure,
                            Some((service, data_source)),
                            effects,
                        );
                        None
                    }
                }
            }
            Op::Action { service, action, config, component, via, segment } => {
                let started = Instant::now();
                let answer: Result<Value, CallError> = match (via, reply, wait) {
                    (_, Some(reply), _) => reply_answer(reply),
                    (Via::InProcess, None, _) => match render_value(config, &|name| run.payloads[at].get(name)) {
                        Err(error) => Err(CallError::permanent(format!("config: {error}"))),
                        Ok(input) => {
                            let context = InvocationContext {
                                tenant_id: run.tenant_id.clone(),
                                flow_id: Some(plan.flow_id.clone()),
                                run_id: Some(run.run_id.clone()),
                                node_id: Some(node_id.to_owned()),
                                idempotency_key: idempotency_key(&run.run_id, node_id),
                                attempt,
                                smoke_test: false,
                            };
                            let text = serde_json::to_string(&input).unwrap_or_default();
                            self.services
                                .invoke(service, component.as_deref(), action, &context, &text)
                                .await
                                .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text)))
                        }
                    },
                    (_, None, Some(WaitReason::Reply)) => Err(CallError::retryable(format!(
                        "service {service:?} did not reply within {} ms",
                        self.outbound.reply_timeout.as_millis()
                    ))),
                    (via, None, _) => {
                        match render_value(config, &|name| run.payloads[at].get(name)) {
                            Ok(input) => {
                                let target = SendTarget { segment, service, action, via };
                                self.send(plan, run, node_id, &target, at, attempt, input, effects);
                            }
                            Err(error) => {
                                let failure = CallError::permanent(format!("config: {error}"));
                                let target = Some((service, action));
                                self.failed(plan, run, node_id, "action", at, attempt, 0, failure, target, effects);
                            }
                        }
                        return None;
                    }
                };
                let elapsed = started.elapsed();
                let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
                match answer {
                    Ok(result) => {
                        self.attempt(run, node_id, "action", at, attempt, elapsed, "success", None);
                        let passed = NodeOutcome::Passed.as_str();
                        let event =
                            self.completion(plan, run, node_id, "action", passed, Some(attempt), None, Some(micros));
                        effects.completions.push(event);
                        let mut out = run.payloads[at].clone();
                        out.insert(flowhost_flows::ACTION_RESULT_FIELD.to_owned(), result);
                        Some(Visit::Continue(run.push_payload(out)))
                    }
                    Err(failure) if failure.outcome == Outcome::SkipForward => {
                        let message = Some(failure.message.as_str());
                        self.attempt(run, node_id, "action", at, attempt, elapsed, "skip-forward", message);
                        let skipped = NodeOutcome::SkipForward.as_str();
                        let event = self.completion(
                            plan,
                            run,
                            node_id,
                            "action",
                            skipped,
                            Some(attempt),
                            message,
                            Some(micros),
                        );
                        effects.completions.push(event);
                        Some(Visit::Stop(NodeOutcome::SkipForward))
                    }
                    Err(failure) => {
                        let target = Some((service, action));
                        self.failed(plan, run, node_id, "action", at, attempt, micros, failure, target, effects);
                        None
                    }
                }
            }
        }
    }

    /// Sends the action to its external service and leaves the step waiting for the reply (or its timeout).
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        plan: &FlowPlan,
        run: &mut Run,
        node_id: &str,
        target: &SendTarget<'_>,
        at: usize,
        attempt: u32,
        input: Value,
        effects: &mut Effects,
    ) {
        let now = self.now_ms();
        let traceparent = traceparent(&run.trace_id, &format!("{}/{node_id}", run.run_id));
        let envelope = InboundEnvelope {
            envelope_version: 1,
            service: target.service.to_owned(),
            action: target.action.to_owned(),
            node_id: node_id.to_owned(),
            segment_node_id: target.segment.to_owned(),
            flow_id: plan.flow_id.clone(),
            flow_version: plan.version,
            run_id: run.run_id.clone(),
            idempotency_key: idempotency_key(&run.run_id, node_id),
            attempt,
            tenant_id: run.tenant_id.clone(),
            trace_id: run.trace_id.clone(),
            traceparent: traceparent.clone(),
            input,
            payload: run.payloads[at].clone(),
            sent_at: iso_utc(now),
            reply_to: ReplyTo {
                subject: REPLY_SUBJECT.to_owned(),
                topic: REPLY_TOPIC.to_owned(),
                url: format!("{}/api/v2/runs/{}/reply", self.outbound.reply_url_base, run.run_id),
            },
        };
        effects.sends.push(Outgoing {
            via: target.via.clone(),
            run_id: run.run_id.clone(),
            traceparent,
            body: serde_json::to_vec(&envelope).unwrap_or_default(),
        });
        self.attempt(run, node_id, "action", at, attempt, Duration::ZERO, "sent", None);
        if let Some(record) = run.nodes.iter_mut().find(|n| n.node_id == node_id) {
            record.outcome = NodeOutcome::Sent;
        }
        self.metrics.nodes.with_label_values(&["action", NodeOutcome::Sent.as_str()]).inc();
        let sent = NodeOutcome::Sent.as_str();
        effects.completions.push(self.completion(plan, run, node_id, "action", sent, Some(attempt), None, None));
        let timeout = i64::try_from(self.outbound.reply_timeout.as_millis()).unwrap_or(i64::MAX);
        run.pending.push(Pending {
            node_id: node_id.to_owned(),
            payload: at,
            attempt,
            due_ms: now.saturating_add(timeout),
            reason: WaitReason::Reply,
            reply: None,
        });
    }

    /// Appends an attempt to the node's record (creating it).
    #[allow(clippy::too_many_arguments)]
    fn attempt(
        &self,
        run: &mut Run,
        node_id: &str,
        kind: &str,
        payload: usize,
        attempt: u32,
        elapsed: Duration,
        outcome: &str,
        error: Option<&str>,
    ) {
        let at_ms = self.now_ms();
        let duration_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.metrics.attempts.with_label_values(&[kind, outcome]).inc();
        let record = match run.nodes.iter().position(|n| n.node_id == node_id) {
            Some(i) => &mut run.nodes[i],
            None => {
                run.nodes.push(NodeRecord {
                    node_id: node_id.to_owned(),
                    kind: kind.to_owned(),
                    input: payload,
                    output: None,
                    outcome: NodeOutcome::Retrying,
                    started_ms: at_ms,
                    duration_us: 0,
                    attempts: Vec::new(),
                    error: None,
                });
                run.nodes.last_mut().expect("just pushed")
            }
        };
        record.attempts.push(Attempt {
            attempt,
            at_ms,
            duration_us,
            outcome: outcome.to_owned(),
            error: error.map(str::to_owned),
        });
        record.error = error.map(str::to_owned);
    }

    /// A step that failed: retried after its backoff while attempts remain and the failure is retryable, else
    /// dead-lettered (`target`: the service and action or data source, for the dead letter's subject).
    #[allow(clippy::too_many_arguments)]
    fn failed(
        &self,
        plan: &FlowPlan,
        run: &mut Run,
        node_id: &str,
        kind: &str,
        payload: usize,
        attempt: u32,
        micros: u64,
        failure: CallError,
        target: Option<(&String, &String)>,
        effects: &mut Effects,
    ) {
        let elapsed = Duration::from_micros(micros);
        self.attempt(run, node_id, kind, payload, attempt, elapsed, failure.outcome.as_str(), Some(&failure.message));
        let now = self.now_ms();
        let retry = failure.outcome == Outcome::Retryable && attempt < self.retry.max_attempts.max(1);
        let outcome = if retry { NodeOutcome::Retrying } else { NodeOutcome::DeadLettered };
        if let Some(record) = run.nodes.iter_mut().find(|n| n.node_id == node_id) {
            record.outcome = outcome;
            record.output = None;
            record.duration_us = record.duration_us.saturating_add(micros);
        }
        self.metrics.nodes.with_label_values(&[kind, outcome.as_str()]).inc();
        effects.completions.push(self.completion(
            plan,
            run,
            node_id,
            kind,
            outcome.as_str(),
            Some(attempt),
            Some(&failure.message),
            Some(micros),
        ));
        if retry {
            let delay = i64::try_from(self.delay_before(attempt + 1).as_millis()).unwrap_or(i64::MAX);
            run.pending.push(Pending {
                node_id: node_id.to_owned(),
                payload,
                attempt: attempt + 1,
                due_ms: now.saturating_add(delay),
                reason: WaitReason::Retry,
                reply: None,
            });
            return;
        }
        let reason = if failure.outcome == Outcome::Retryable { "exhausted" } else { "permanent" };
        self.metrics.dead_letters.with_label_values(&[reason]).inc();
        let (service, action) = target.map_or((String::new(), kind.to_owned()), |(s, a)| (s.clone(), a.clone()));
        let id = crate::ids::dead_letter_id(&run.run_id, node_id);
        warn!(run = %run.run_id, flow = %plan.flow_id, node = node_id, %service, %action, reason, error = %failure.message, "step dead-lettered");
        if !run.dead_letters.contains(&id) {
            run.dead_letters.push(id.clone());
        }
        effects.dead_letters.push(DeadLetter {
            id,
            run_id: run.run_id.clone(),
            flow_id: plan.flow_id.clone(),
            version: plan.version,
            node_id: node_id.to_owned(),
            service,
            action,
            reason: reason.to_owned(),
            error: failure.message,
            attempts: attempt,
            payload: run.payloads[payload].clone(),
            idempotency_key: idempotency_key(&run.run_id, node_id),
            trace_id: run.trace_id.clone(),
            tenant_id: run.tenant_id.clone(),
            at: iso_utc(now),
            at_ms: now,
            status: DeadLetterStatus::Open,
            replays: Vec::new(),
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn completion(
        &self,
        plan: &FlowPlan,
        run: &Run,
        node_id: &str,
        kind: &str,
        outcome: &str,
        attempt: Option<u32>,
        error: Option<&str>,
        duration_us: Option<u64>,
    ) -> CompletionEvent {
        let now = self.now_ms();
        CompletionEvent {
            kind: "node".to_owned(),
            run_id: run.run_id.clone(),
            flow_id: plan.flow_id.clone(),
            version: plan.version,
            trace_id: run.trace_id.clone(),
            tenant_id: run.tenant_id.clone(),
            node_id: Some(node_id.to_owned()),
            node_kind: Some(kind.to_owned()),
            outcome: outcome.to_owned(),
            attempt,
            error: error.map(str::to_owned),
            duration_us,
            path: Vec::new(),
            at: iso_utc(now),
            at_ms: now,
        }
    }
}

/// The run's completion event for its current status.
pub fn run_completion(run: &Run) -> CompletionEvent {
    CompletionEvent {
        kind: "run".to_owned(),
        run_id: run.run_id.clone(),
        flow_id: run.flow_id.clone(),
        version: run.version,
        trace_id: run.trace_id.clone(),
        tenant_id: run.tenant_id.clone(),
        node_id: None,
        node_kind: None,
        outcome: run.status.as_str().to_owned(),
        attempt: None,
        error: None,
        duration_us: None,
        path: crate::model::RunSummary::from(run).path,
        at: iso_utc(run.updated_ms),
        at_ms: run.updated_ms,
    }
}

/// A service's reply as the answer of an invocation.
fn reply_answer(reply: ServiceReply) -> Result<Value, CallError> {
    let message = || reply.error.clone().unwrap_or_else(|| format!("the service answered {}", reply.outcome));
    let outcome = match reply.outcome.as_str() {
        "success" => return Ok(reply.result.clone().unwrap_or(Value::Null)),
        "skip-forward" => Outcome::SkipForward,
        "retryable" => Outcome::Retryable,
        "permanent" => Outcome::Permanent,
        other => return Err(CallError::permanent(format!("the service answered an unknown outcome {other:?}"))),
    };
    Err(CallError { outcome, message: message() })
}

/// A value as text for a counter key or a query parameter: strings as they are, other JSON as JSON.
fn key_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Steps due at `now_ms` taken out of `run.pending` (the rest stay).
pub fn take_due(run: &mut Run, now_ms: i64) -> Vec<Step> {
    let (due, later): (Vec<Pending>, Vec<Pending>) = run.pending.drain(..).partition(|p| p.due_ms <= now_ms);
    run.pending = later;
    due.into_iter()
        .map(|p| Step { wait: Some(p.reason), reply: p.reply, ..Step::new(p.node_id, p.payload, p.attempt) })
        .collect()
}

/// The steps that start a run: the source node with the event.
pub fn start(plan: &FlowPlan) -> Vec<Step> {
    vec![Step::new(plan.source.clone(), 0, 1)]
}
