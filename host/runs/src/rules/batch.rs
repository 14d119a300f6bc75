//! A consumed batch through the rules' plans, recorded in no run: parse, match, then each rule's plan walked a
//! node at a time over every event it applies to (one node-kinds call per rule and node per batch), and the
//! records to publish. With the native node kinds it is free of I/O, so it is benchmarked and tested without
//! any backend.
//!
//! How a rule reads its nodes' answers is the v1 contract (docs/admin-api.md, "Events"): a condition that
//! cannot be evaluated does not match (an `eval` error); skip-forward skips the rule (a condition) or lets the
//! event through unmapped (a mapping); a retryable failure retries that record alone; a permanent one
//! dead-letters it; an unavailable node kind stops the batch, which the caller processes again later.

use std::sync::Arc;

use flowhost_core::envelope::Event;
use flowhost_core::ports::{OutRecord, Record};
use serde_json::{Map, Value};
use tracing::{debug, warn};

use super::{CompiledRule, EngineMetrics, RuleSet};
use crate::nodes::{CallOrigin, NativeNodes, NodeCall, NodeFailure, NodeKinds, NodeRef};
use crate::plan::{Op, PlanNode};

/// Header naming the rule that produced an output.
pub const RULE_ID_HEADER: &str = "flowhost-rule-id";
/// Headers on an invalid record: where it came from and why it was moved.
pub const SOURCE_TOPIC_HEADER: &str = "flowhost-source-topic";
pub const SOURCE_PARTITION_HEADER: &str = "flowhost-source-partition";
pub const SOURCE_OFFSET_HEADER: &str = "flowhost-source-offset";
pub const INVALID_REASON_HEADER: &str = "flowhost-invalid-reason";
/// Headers on a dead-lettered record (besides the source headers and the rule id): why (`permanent` or
/// `exhausted`), the failure's message, and how many attempts were made.
pub const DEAD_LETTER_REASON_HEADER: &str = "flowhost-dead-letter-reason";
pub const DEAD_LETTER_CAUSE_HEADER: &str = "flowhost-dead-letter-cause";
pub const ATTEMPTS_HEADER: &str = "flowhost-attempts";

/// What one batch produces.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Rule outputs, moved invalid records and dead-lettered records, in input order.
    pub records: Vec<OutRecord>,
    /// How many of `records` are moved invalid records.
    pub invalid: u64,
    /// How many of `records` are dead letters.
    pub dead_letters: u64,
    /// Records a node asked to retry: nothing of them is in `records`; the caller retries each on its own.
    pub retries: Vec<RetryRecord>,
}

/// A record to process again: which rule's node asked, and why.
#[derive(Debug, Clone)]
pub struct RetryRecord {
    pub record: Record,
    pub rule_id: String,
    pub cause: String,
}

/// Where records go besides the rules' outputs.
#[derive(Debug, Clone, Copy)]
pub struct Destinations<'a> {
    /// Records that are not events.
    pub invalid: &'a str,
    /// Records a node failed on for good, or whose retries ran out.
    pub dead_letters: &'a str,
}

impl Destinations<'_> {
    /// For tests and benchmarks: both destinations the same topic.
    pub fn only(topic: &str) -> Destinations<'_> {
        Destinations { invalid: topic, dead_letters: topic }
    }
}

/// Matches every record of `batch` against `rules` with the native node kinds.
pub fn process_batch(rules: &RuleSet, batch: &[Record], invalid_topic: &str, metrics: &EngineMetrics) -> BatchOutcome {
    let processing = process_batch_with(rules, batch, Destinations::only(invalid_topic), metrics, &NativeNodes, 1);
    match futures::FutureExt::now_or_never(processing) {
        Some(Ok(outcome)) => outcome,
        // The native node kinds never wait and are always available.
        Some(Err(_)) | None => unreachable!("the native node kinds answer at once"),
    }
}

/// Where one (record, rule) pair is in the rule's plan.
#[derive(Debug)]
enum Step {
    /// Still walking; the payload a mapping made, if one did.
    Walking(Option<Map<String, Value>>),
    Output(OutRecord),
    Nothing,
    Failed(NodeFailure),
}

/// The events of a batch one rule applies to, and where each is in the rule's plan.
struct RuleBatch<'r> {
    rule: &'r CompiledRule,
    /// The plan's nodes after the source.
    chain: Vec<&'r PlanNode>,
    /// Indices into the batch, in order.
    members: Vec<usize>,
    steps: Vec<Step>,
}

/// Matches every record of `batch` against `rules`, walking each rule's plan with `nodes` a node at a time over
/// the whole batch; `attempt` is the how-manieth time these records are processed (for the dead-letter
/// headers). A record is all or nothing: its outputs are kept only when every rule matching it ran, so a
/// retried record never publishes twice. A [`NodeFailure::Unavailable`] stops the batch: the caller processes
/// all of it again later.
pub async fn process_batch_with(
    rules: &RuleSet,
    batch: &[Record],
    to: Destinations<'_>,
    metrics: &EngineMetrics,
    nodes: &dyn NodeKinds,
    attempt: u32,
) -> Result<BatchOutcome, NodeFailure> {
    metrics.consumed.inc_by(batch.len() as u64);
    let events: Vec<Result<Event, flowhost_core::envelope::EnvelopeError>> =
        batch.iter().map(|record| Event::parse(&record.value)).collect();

    // Which rules apply to which events: one group per rule, and per record its (group, position) pairs in the
    // rules' order.
    let mut groups: Vec<RuleBatch<'_>> = Vec::new();
    // Keyed by the rule's address (as a number: a pointer is not `Send`), unique while `rules` is borrowed.
    let mut group_of: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut matched: Vec<Vec<(usize, usize)>> = vec![Vec::new(); batch.len()];
    for (index, (record, event)) in batch.iter().zip(&events).enumerate() {
        let Ok(event) = event else { continue };
        for rule in rules.matching(&record.topic, &event.event_type) {
            if !rule.enabled_for(event.tenant_id.as_deref()) {
                metrics.skipped.with_label_values(&["tenant_disabled"]).inc();
                continue;
            }
            let group = *group_of.entry(Arc::as_ptr(rule) as usize).or_insert_with(|| {
                // A rule's plan never branches (`FlowPlan::for_rule`).
                let chain = rule.plan.chain().unwrap_or_default();
                groups.push(RuleBatch { rule, chain, members: Vec::new(), steps: Vec::new() });
                groups.len() - 1
            });
            matched[index].push((group, groups[group].members.len()));
            groups[group].members.push(index);
            groups[group].steps.push(Step::Walking(None));
        }
    }

    let longest = groups.iter().map(|group| group.chain.len()).max().unwrap_or(0);
    for depth in 0..longest {
        // Every rule's node at this depth over its events at once: a node kind that runs elsewhere (wasm, on
        // the runtime's worker threads) evaluates the rules of a batch in parallel.
        let answers = futures::future::join_all(
            groups.iter().map(|group| evaluate(group, depth, batch, &events, nodes, attempt)),
        )
        .await;
        for (group, answers) in groups.iter_mut().zip(answers) {
            apply(group, depth, answers, batch, metrics);
        }
    }
    for group in &mut groups {
        for (position, step) in group.steps.iter_mut().enumerate() {
            if let Step::Walking(_) = step {
                // The plan ended without an output: the rule and its source topic name none.
                metrics.skipped.with_label_values(&["no_output_topic"]).inc();
                warn!(rule_id = %group.rule.rule.id, source_topic = %batch[group.members[position]].topic,
                      "rule matched but has no output_topic and its source topic has no default; skipped");
                *step = Step::Nothing;
            }
        }
    }

    let mut outcome = BatchOutcome::default();
    for (index, record) in batch.iter().enumerate() {
        if let Err(error) = &events[index] {
            metrics.invalid.with_label_values(&[error.reason()]).inc();
            warn!(topic = %record.topic, partition = record.partition, offset = record.offset, %error,
                  invalid_topic = to.invalid, "record is not an event; moved to the invalid-events topic");
            outcome.records.push(invalid_record(record, to.invalid, error.reason()));
            outcome.invalid += 1;
            continue;
        }
        let mut outputs = Vec::new();
        let mut failed = None;
        for &(group, position) in &matched[index] {
            let group = &mut groups[group];
            match std::mem::replace(&mut group.steps[position], Step::Nothing) {
                Step::Output(output) => outputs.push(output),
                Step::Nothing | Step::Walking(_) => {}
                Step::Failed(failure) => {
                    failed = Some((group.rule.rule.id.clone(), failure));
                    break;
                }
            }
        }
        match failed {
            None => outcome.records.extend(outputs),
            Some((rule_id, NodeFailure::Retryable(cause))) => {
                debug!(%rule_id, offset = record.offset, %cause, "a node asks to retry this record");
                outcome.retries.push(RetryRecord { record: record.clone(), rule_id, cause });
            }
            Some((rule_id, NodeFailure::Permanent(cause))) => {
                warn!(%rule_id, topic = %record.topic, partition = record.partition, offset = record.offset, %cause,
                      "a node failed on this record for good; moved to the dead-letter topic");
                metrics.dead_letters.with_label_values(&["permanent"]).inc();
                outcome.records.push(dead_letter(record, to.dead_letters, &rule_id, "permanent", &cause, attempt));
                outcome.dead_letters += 1;
            }
            Some((_, unavailable)) => return Err(unavailable),
        }
    }
    Ok(outcome)
}

/// What the node at `depth` of `group`'s plan answers for its members still walking: per member, `None` for one
/// not evaluated (done already, or the node needs no call).
enum Answers {
    None,
    Conditions(Vec<Option<Result<bool, NodeFailure>>>),
    Mappings(Vec<Option<Result<Map<String, Value>, NodeFailure>>>),
}

/// Calls the node at `depth` of `group`'s plan over its members still walking.
async fn evaluate(
    group: &RuleBatch<'_>,
    depth: usize,
    batch: &[Record],
    events: &[Result<Event, flowhost_core::envelope::EnvelopeError>],
    nodes: &dyn NodeKinds,
    attempt: u32,
) -> Answers {
    let Some(node) = group.chain.get(depth) else { return Answers::None };
    let walking: Vec<usize> =
        (0..group.members.len()).filter(|&position| matches!(group.steps[position], Step::Walking(_))).collect();
    if walking.is_empty() {
        return Answers::None;
    }
    let rule = &group.rule.rule;
    // As the v1 engine named it: the rule's flow, when it has one, and the rule as the node.
    let at = NodeRef { flow_id: rule.flow_id.as_deref(), node_id: &rule.id };
    let calls: Vec<NodeCall<'_>> = walking
        .iter()
        .map(|&position| {
            let index = group.members[position];
            let event = events[index].as_ref().expect("grouped records are events");
            let payload = match &group.steps[position] {
                Step::Walking(Some(mapped)) => mapped,
                _ => &event.fields,
            };
            NodeCall {
                tenant_id: event.tenant_id.as_deref(),
                origin: CallOrigin::Record(&batch[index]),
                attempt,
                payload,
            }
        })
        .collect();
    match &node.op {
        Op::Condition(Some(condition)) => {
            Answers::Conditions(spread(group.members.len(), &walking, nodes.conditions(at, condition, &calls).await))
        }
        Op::Mapping(mapping) => {
            Answers::Mappings(spread(group.members.len(), &walking, nodes.mappings(at, mapping, &calls).await))
        }
        _ => Answers::None,
    }
}

/// `answers` of the members at `walking` (positions), spread over all `members` positions.
fn spread<T>(members: usize, walking: &[usize], answers: Vec<T>) -> Vec<Option<T>> {
    let mut all: Vec<Option<T>> = (0..members).map(|_| None).collect();
    for (position, answer) in walking.iter().zip(answers) {
        all[*position] = Some(answer);
    }
    all
}

/// Moves `group`'s members past the node at `depth`, by its answers.
fn apply(group: &mut RuleBatch<'_>, depth: usize, mut answers: Answers, batch: &[Record], metrics: &EngineMetrics) {
    let Some(node) = group.chain.get(depth) else { return };
    let rule = group.rule;
    for (position, step) in group.steps.iter_mut().enumerate() {
        let Step::Walking(mapped) = step else { continue };
        let record = &batch[group.members[position]];
        let next = match (&node.op, &mut answers) {
            (Op::Condition(_), Answers::Conditions(all)) => match all[position].take() {
                Some(Ok(true)) => {
                    metrics.matched.inc();
                    continue;
                }
                Some(Ok(false)) | None => Step::Nothing,
                Some(Err(NodeFailure::NoMatch(error))) => {
                    metrics.errors.with_label_values(&["eval"]).inc();
                    debug!(rule_id = %rule.rule.id, offset = record.offset, %error, "expression did not evaluate; no match");
                    Step::Nothing
                }
                Some(Err(NodeFailure::SkipForward(reason))) => {
                    metrics.skipped.with_label_values(&["skip_forward"]).inc();
                    debug!(rule_id = %rule.rule.id, offset = record.offset, %reason, "condition skipped; rule not applied");
                    Step::Nothing
                }
                Some(Err(failure)) => Step::Failed(failure),
            },
            (Op::Mapping(_), Answers::Mappings(all)) => match all[position].take() {
                Some(Ok(payload)) => Step::Walking(Some(payload)),
                None => continue,
                Some(Err(NodeFailure::SkipForward(_))) => {
                    metrics.skipped.with_label_values(&["skip_forward"]).inc();
                    continue;
                }
                Some(Err(NodeFailure::NoMatch(error))) => {
                    metrics.errors.with_label_values(&["mapping"]).inc();
                    warn!(rule_id = %rule.rule.id, offset = record.offset, %error, "output mapping failed; no output");
                    Step::Nothing
                }
                Some(Err(failure)) => Step::Failed(failure),
            },
            (Op::Output { topic }, _) => {
                let value = match mapped.take() {
                    Some(payload) => serde_json::to_vec(&payload).unwrap_or_default(),
                    None => record.value.clone(),
                };
                Step::Output(OutRecord {
                    topic: topic.clone(),
                    key: record.key.clone(),
                    value,
                    headers: vec![flowhost_core::ports::Header {
                        key: RULE_ID_HEADER.to_owned(),
                        value: rule.rule.id.as_bytes().to_vec(),
                    }],
                })
            }
            _ => continue,
        };
        *step = next;
    }
}

/// The dead letter of `record`: its key and value unchanged, headers naming where it came from, the rule whose
/// node failed, why, and after how many attempts.
pub fn dead_letter(record: &Record, topic: &str, rule_id: &str, reason: &str, cause: &str, attempts: u32) -> OutRecord {
    // A guest's message could be large; the header keeps enough to diagnose.
    let cause: String = cause.chars().take(512).collect();
    let mut out = OutRecord::new(topic, record.value.clone());
    out.key = record.key.clone();
    out.with_header(SOURCE_TOPIC_HEADER, record.topic.as_bytes())
        .with_header(SOURCE_PARTITION_HEADER, record.partition.to_string())
        .with_header(SOURCE_OFFSET_HEADER, record.offset.to_string())
        .with_header(RULE_ID_HEADER, rule_id)
        .with_header(DEAD_LETTER_REASON_HEADER, reason)
        .with_header(DEAD_LETTER_CAUSE_HEADER, cause)
        .with_header(ATTEMPTS_HEADER, attempts.to_string())
}

fn invalid_record(record: &Record, topic: &str, reason: &str) -> OutRecord {
    OutRecord::new(topic, record.value.clone())
        .with_header(SOURCE_TOPIC_HEADER, record.topic.as_bytes())
        .with_header(SOURCE_PARTITION_HEADER, record.partition.to_string())
        .with_header(SOURCE_OFFSET_HEADER, record.offset.to_string())
        .with_header(INVALID_REASON_HEADER, reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::ExpressionMemo;
    use flowhost_core::model::*;
    use serde_json::json;

    fn rule(id: &str, expression: &str, output: &str) -> Rule {
        Rule {
            id: id.into(),
            name: id.into(),
            source: RuleSource { kind: SourceType::Kafka, topic: "in".into() },
            conditions: RuleConditions { event_type: "deposit".into(), expression: expression.into() },
            output_topic: output.into(),
            output_mapping: None,
            enabled: true,
            flow_id: None,
        }
    }

    fn record(offset: i64, value: Value) -> Record {
        Record {
            topic: "in".into(),
            partition: 0,
            offset,
            key: Some(b"k".to_vec()),
            value: value.to_string().into_bytes(),
            headers: vec![],
            timestamp_ms: 0,
        }
    }

    fn schema() -> EventSchema {
        EventSchema {
            event_type: "deposit".into(),
            fields: vec![
                SchemaField { name: "amount".into(), kind: FieldType::Double },
                SchemaField { name: "player".into(), kind: FieldType::String },
            ],
        }
    }

    #[test]
    fn matches_maps_overrides_and_defaults() {
        let mut mapped = rule("mapped", "amount > 100.0", "");
        mapped.output_mapping = Some(OutputMapping {
            mode: MappingMode::Select,
            fields: vec![FieldMapping { source: "player".into(), target: "who".into() }],
        });
        let mut disabled = rule("off", "true", "never");
        disabled.enabled = false;
        let rules =
            vec![rule("big", "amount > 100.0", "big"), mapped, disabled, rule("small", "amount < 10.0", "small")];
        let overrides = vec![TenantOverride { rule_id: "big".into(), tenant_id: "t2".into(), enabled: Some(false) }];
        let sources = vec![EventSource {
            source_topic: "in".into(),
            default_output_topic: "default-out".into(),
            description: None,
        }];
        let set = RuleSet::build(rules, overrides, sources, vec![schema()], &mut ExpressionMemo::default());
        assert_eq!(set.len(), 3);

        let batch = vec![
            record(0, json!({"event_type": "deposit", "tenant_id": "t1", "amount": 150.0, "player": "p1"})),
            record(1, json!({"event_type": "deposit", "tenant_id": "t2", "amount": 150.0, "player": "p2"})),
            record(2, json!({"event_type": "withdrawal", "amount": 150.0})),
            Record { value: b"not json".to_vec(), ..record(3, json!({})) },
        ];
        let metrics = EngineMetrics::unregistered();
        let outcome = process_batch(&set, &batch, "invalid", &metrics);
        let summary: Vec<(String, String)> =
            outcome.records.iter().map(|r| (r.topic.clone(), String::from_utf8(r.value.clone()).unwrap())).collect();
        assert_eq!(summary[0].0, "big");
        assert_eq!(summary[1], ("default-out".to_owned(), r#"{"who":"p1"}"#.to_owned()));
        assert_eq!(summary[2], ("default-out".to_owned(), r#"{"who":"p2"}"#.to_owned()), "t2 only loses rule big");
        assert_eq!(summary[3], ("invalid".to_owned(), "not json".to_owned()));
        assert_eq!(summary.len(), 4);
        assert_eq!(outcome.invalid, 1);
        assert_eq!(
            outcome.records[3].headers.iter().find(|h| h.key == INVALID_REASON_HEADER).unwrap().value,
            b"not_json"
        );
        assert_eq!(outcome.records[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(metrics.matched.get(), 3);
        assert_eq!(metrics.skipped.with_label_values(&["tenant_disabled"]).get(), 1);
    }

    #[test]
    fn no_output_topic_is_skipped_and_counted() {
        let set = RuleSet::build(vec![rule("r", "true", "")], vec![], vec![], vec![], &mut ExpressionMemo::default());
        let metrics = EngineMetrics::unregistered();
        let outcome = process_batch(&set, &[record(0, json!({"event_type": "deposit"}))], "invalid", &metrics);
        assert!(outcome.records.is_empty());
        assert_eq!(metrics.skipped.with_label_values(&["no_output_topic"]).get(), 1);
    }

    #[test]
    fn a_rule_is_a_flow_plan_of_source_condition_mapping_output() {
        use crate::plan::{rule_nodes, Op};
        let mut mapped = rule("mapped", "amount > 1.0", "out");
        mapped.output_mapping = Some(OutputMapping {
            mode: MappingMode::Select,
            fields: vec![FieldMapping { source: "player".into(), target: "who".into() }],
        });
        let set = RuleSet::build(vec![mapped], vec![], vec![], vec![schema()], &mut ExpressionMemo::default());
        let compiled = &set.matching("in", "deposit")[0];
        let plan = &compiled.plan;
        assert_eq!((plan.flow_id.as_str(), plan.topic.as_str(), plan.event_type.as_str()), ("mapped", "in", "deposit"));
        let walk: Vec<(&str, &[String])> =
            [rule_nodes::SOURCE, rule_nodes::CONDITION, rule_nodes::MAPPING, rule_nodes::OUTPUT]
                .iter()
                .map(|id| (*id, plan.node(id).unwrap().children.as_slice()))
                .collect();
        assert_eq!(
            walk,
            vec![
                ("source", &["condition".to_owned()][..]),
                ("condition", &["mapping".to_owned()][..]),
                ("mapping", &["output".to_owned()][..]),
                ("output", &[][..]),
            ]
        );
        assert!(matches!(&plan.node(rule_nodes::CONDITION).unwrap().op, Op::Condition(Some(_))));
        assert!(matches!(&plan.node(rule_nodes::OUTPUT).unwrap().op, Op::Output { topic } if topic == "out"));
        let unmapped =
            RuleSet::build(vec![rule("r", "true", "")], vec![], vec![], vec![], &mut ExpressionMemo::default());
        let plan = &unmapped.matching("in", "deposit")[0].plan;
        assert_eq!(plan.nodes.len(), 2, "no mapping, and no output topic anywhere: {plan:?}");
    }

    #[test]
    fn expressions_are_compiled_once_across_reloads() {
        let mut memo = ExpressionMemo::default();
        let first = RuleSet::build(vec![rule("r", "amount > 1.0", "o")], vec![], vec![], vec![schema()], &mut memo);
        let second = RuleSet::build(vec![rule("r", "amount > 1.0", "o")], vec![], vec![], vec![schema()], &mut memo);
        let condition = |set: &RuleSet| match &set.matching("in", "deposit")[0].plan.node("condition").unwrap().op {
            crate::plan::Op::Condition(Some(condition)) => condition.clone(),
            other => panic!("{other:?}"),
        };
        assert!(std::sync::Arc::ptr_eq(&condition(&first), &condition(&second)));
        let bad = RuleSet::build(vec![rule("r", "nope > 1.0", "o")], vec![], vec![], vec![schema()], &mut memo);
        assert!(bad.is_empty());
        assert_eq!(bad.problems().count(), 1);
    }
}
