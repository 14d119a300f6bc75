//! A released flow version compiled for running: expressions compiled once against the fields that reach their
//! node, each node's children in the order a run visits them, each action resolved to the component that
//! implements it. [`Plans`] holds every runnable flow (released, enabled and `valid`) indexed by source topic
//! and event type; the runner reloads it on the admin API's change signal and on a tick.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use flowhost_core::collections::FLOWS;
use flowhost_core::ports::{Ports, Query};
use flowhost_expr::Expression;
use flowhost_flows::model::API_VERSION;
use flowhost_flows::{node_fields, Dependencies, FlowRecord, FlowStatus, Flows, NodeKind};
use serde_json::{json, Map, Value};
use tracing::warn;

use crate::nodes::{ConditionNode, MappingNode, PluginNode};

/// What one node does when a run reaches it.
#[derive(Debug, Clone)]
pub enum Op {
    Source,
    /// `None`: an else branch.
    Condition(Option<Arc<ConditionNode>>),
    RateLimit {
        limit: i64,
        window_ms: u64,
        key: Option<String>,
    },
    Mapping(Arc<MappingNode>),
    Lookup {
        service: String,
        data_source: String,
        params: Map<String, Value>,
        target: String,
        via: LookupVia,
    },
    Output {
        topic: String,
    },
    Segment {
        service: String,
        transport: String,
        kafka_topic: Option<String>,
        in_process: bool,
    },
    Action {
        service: String,
        action: String,
        config: Value,
        component: Option<String>,
        via: Via,
        /// The parent segment's node id.
        segment: String,
    },
    /// A node kind a plugin declares, evaluated by its component.
    PluginNode(Arc<PluginNode>),
}

/// Where a lookup asks: the service's component in this process, its HTTP endpoint (the data source's
/// `path` under `transports.http.endpoint`, as the catalog's proxy does), or, without an endpoint, a NATS
/// request on `triggers.v2.service.<service>.data.<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupVia {
    InProcess,
    Http { url: String },
    Nats { subject: String },
}

/// How an action reaches its service: in this process, or over a transport to an external service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    InProcess,
    /// `triggers.v2.<service>.inbound`.
    Nats {
        subject: String,
    },
    /// `triggers_v2_<service>_inbound`, or the segment's retarget (which must exist; it is never created).
    Kafka {
        topic: String,
        retarget: bool,
    },
    /// `<transports.http.endpoint>/v2/<service>/inbound`.
    Http {
        url: String,
    },
}

impl Via {
    /// A transport name for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Via::InProcess => "in-process",
            Via::Nats { .. } => "nats",
            Via::Kafka { .. } => "kafka",
            Via::Http { .. } => "http",
        }
    }
}

impl Op {
    pub fn kind(&self) -> NodeKind {
        match self {
            Op::Source => NodeKind::Source,
            Op::Condition(_) => NodeKind::Condition,
            Op::RateLimit { .. } => NodeKind::RateLimit,
            Op::Mapping(_) => NodeKind::Mapping,
            Op::Lookup { .. } => NodeKind::Lookup,
            Op::Output { .. } => NodeKind::OutputTopic,
            Op::Segment { .. } => NodeKind::ServiceIn,
            Op::Action { .. } => NodeKind::Action,
            Op::PluginNode(_) => NodeKind::PluginNode,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PlanNode {
    pub id: String,
    pub op: Op,
    /// Children in visiting order: condition children with an expression first, then an else branch, then
    /// the rest.
    pub children: Vec<String>,
}

/// A runnable released version of a flow.
#[derive(Debug, Clone)]
pub struct FlowPlan {
    pub flow_id: String,
    pub version: u64,
    pub topic: String,
    pub event_type: String,
    pub source: String,
    pub nodes: HashMap<String, PlanNode>,
}

impl FlowPlan {
    pub fn node(&self, id: &str) -> Option<&PlanNode> {
        self.nodes.get(id)
    }

    /// Compiles a released `version` of `flow_id` (its body normalized at release) against `deps`.
    pub fn compile(
        flow_id: &str,
        version: &flowhost_flows::FlowVersion,
        deps: &Dependencies,
    ) -> Result<FlowPlan, String> {
        let body = &version.body;
        let fields = node_fields(body, deps);
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for edge in &body.edges {
            children.entry(edge.from.as_str()).or_default().push(edge.to.as_str());
        }
        let mut nodes = HashMap::new();
        let mut source = None;
        let parents: HashMap<&str, &str> = body.edges.iter().map(|e| (e.to.as_str(), e.from.as_str())).collect();
        for node in &body.nodes {
            let kind = NodeKind::parse(&node.kind).ok_or_else(|| format!("node {:?}: unknown kind", node.id))?;
            let config = &node.config;
            let text = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
            let op = match kind {
                NodeKind::Source => {
                    source = Some((node.id.clone(), text("topic"), text("event_type")));
                    Op::Source
                }
                NodeKind::Condition => {
                    if config.get("else").and_then(Value::as_bool).unwrap_or(false) {
                        Op::Condition(None)
                    } else {
                        let expression = text("expression").unwrap_or_default();
                        let compiled = match fields.get(&node.id) {
                            Some(fields) => Expression::compile_fields(&expression, fields, &node.id),
                            None => Expression::compile(&expression, None),
                        }
                        .map_err(|errors| format!("node {:?}: {}", node.id, errors.join("; ")))?;
                        Op::Condition(Some(Arc::new(ConditionNode::new(&expression, compiled))))
                    }
                }
                NodeKind::RateLimit => Op::RateLimit {
                    limit: config.get("limit").and_then(Value::as_i64).unwrap_or(1),
                    window_ms: config.get("window_seconds").and_then(Value::as_u64).unwrap_or(1).saturating_mul(1000),
                    key: text("key"),
                },
                NodeKind::Mapping => Op::Mapping(Arc::new(MappingNode::new(
                    text("mode").as_deref() == Some("merge"),
                    config
                        .get("fields")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|f| {
                            Some((f.get("source")?.as_str()?.to_owned(), f.get("target")?.as_str()?.to_owned()))
                        })
                        .collect(),
                ))),
                NodeKind::Lookup => {
                    let service = text("service").unwrap_or_default();
                    let data_source = text("data_source").unwrap_or_default();
                    let via = match deps.services.get(&service) {
                        Some(active) if active.in_process() => LookupVia::InProcess,
                        Some(active) => {
                            let path = active.data_source(&data_source).map(|d| d.path.clone());
                            let endpoint = active.components.iter().find_map(|c| c.endpoint().map(str::to_owned));
                            match (endpoint, path) {
                                (Some(endpoint), Some(path)) => {
                                    LookupVia::Http { url: format!("{}{path}", endpoint.trim_end_matches('/')) }
                                }
                                _ => LookupVia::Nats {
                                    subject: format!("triggers.v2.service.{service}.data.{data_source}"),
                                },
                            }
                        }
                        None => return Err(format!("lookup {:?}: service {service:?} is not registered", node.id)),
                    };
                    Op::Lookup {
                        service,
                        data_source,
                        params: config.get("params").and_then(Value::as_object).cloned().unwrap_or_default(),
                        target: text("target").unwrap_or_default(),
                        via,
                    }
                }
                NodeKind::OutputTopic => Op::Output { topic: text("topic").unwrap_or_default() },
                NodeKind::ServiceIn => {
                    let service = text("service").unwrap_or_default();
                    let transport = text("transport").unwrap_or_default();
                    Op::Segment {
                        in_process: transport == flowhost_flows::IN_PROCESS,
                        service,
                        transport,
                        kafka_topic: text("kafka_topic"),
                    }
                }
                NodeKind::PluginNode => {
                    let (plugin, kind) = (text("plugin").unwrap_or_default(), text("kind").unwrap_or_default());
                    let (_, declaration) = deps
                        .node_kind(&plugin, &kind)
                        .map_err(|missing| format!("node {:?}: {}", node.id, missing.message))?;
                    let mut settings = config.as_object().cloned().unwrap_or_default();
                    settings.remove("plugin");
                    settings.remove("kind");
                    Op::PluginNode(Arc::new(PluginNode::new(
                        plugin,
                        kind,
                        Value::Object(settings),
                        declaration.answers.clone(),
                    )))
                }
                NodeKind::Action => {
                    let segment = segment_of(body, &parents, &node.id)
                        .ok_or_else(|| format!("action node {:?} has no service segment", node.id))?;
                    let setting = |key: &str| segment.config.get(key).and_then(Value::as_str).map(str::to_owned);
                    let service = setting("service").unwrap_or_default();
                    let via = match setting("transport").as_deref() {
                        None | Some(flowhost_flows::IN_PROCESS) => Via::InProcess,
                        Some("nats") => Via::Nats { subject: format!("triggers.v2.{service}.inbound") },
                        Some("kafka") => match setting("kafka_topic") {
                            Some(topic) => Via::Kafka { topic, retarget: true },
                            None => Via::Kafka { topic: format!("triggers_v2_{service}_inbound"), retarget: false },
                        },
                        Some("http") => {
                            let active = deps.services.get(&service);
                            let endpoint =
                                active.and_then(|s| s.components.iter().find_map(|c| c.endpoint().map(str::to_owned)));
                            match endpoint {
                                Some(endpoint) => Via::Http {
                                    url: format!("{}/v2/{service}/inbound", endpoint.trim_end_matches('/')),
                                },
                                // A service running in this deployment is served by Flowhost itself, under its
                                // own public base URL (the executor puts it in front).
                                None if active.is_some_and(|s| s.in_process()) => {
                                    Via::Http { url: format!("/v2/{service}/inbound") }
                                }
                                None => return Err(format!("service {service:?} has no transports.http.endpoint")),
                            }
                        }
                        Some(other) => return Err(format!("segment {:?}: unknown transport {other:?}", segment.id)),
                    };
                    let action = text("action_ref").unwrap_or_default();
                    let component = deps.services.get(&service).and_then(|s| {
                        s.components
                            .iter()
                            .find(|c| c.actions.iter().any(|a| a.name == action))
                            .map(|c| c.component_id.clone())
                    });
                    let mut settings = config.as_object().cloned().unwrap_or_default();
                    settings.remove("action_ref");
                    Op::Action {
                        service,
                        action,
                        config: Value::Object(settings),
                        component,
                        via,
                        segment: segment.id.clone(),
                    }
                }
            };
            let mut kids: Vec<&str> = children.get(node.id.as_str()).cloned().unwrap_or_default();
            let rank = |id: &&str| match body.nodes.iter().find(|n| n.id == *id) {
                Some(n) if n.kind == NodeKind::Condition.as_str() => {
                    usize::from(n.config.get("else").and_then(Value::as_bool).unwrap_or(false))
                }
                _ => 2,
            };
            kids.sort_by_key(rank);
            let children = kids.into_iter().map(str::to_owned).collect();
            nodes.insert(node.id.clone(), PlanNode { id: node.id.clone(), op, children });
        }
        let (source, topic, event_type) = source.ok_or("the flow has no source")?;
        let topic = topic.ok_or("the source names no topic (runs from a service source start over its inbound)")?;
        Ok(FlowPlan {
            flow_id: flow_id.to_owned(),
            version: version.version,
            topic,
            event_type: event_type.unwrap_or_default(),
            source,
            nodes,
        })
    }
}

/// The node ids of a v1 rule's plan ([`FlowPlan::for_rule`]).
pub mod rule_nodes {
    pub const SOURCE: &str = "source";
    pub const CONDITION: &str = "condition";
    pub const MAPPING: &str = "mapping";
    pub const OUTPUT: &str = "output";
}

impl FlowPlan {
    /// A v1 rule as a flow plan: `source -> condition -> mapping? -> output?` (the mapping when the rule maps
    /// its output, the output when it or its source topic names one). The condition is compiled by the caller
    /// (the rule engine keeps compiled expressions across reloads); the plan is named by the rule's flow when it
    /// has one, else by the rule.
    pub fn for_rule(
        rule: &flowhost_core::model::Rule,
        condition: Arc<ConditionNode>,
        mapping: Option<Arc<MappingNode>>,
        output_topic: Option<&str>,
    ) -> FlowPlan {
        use rule_nodes::{CONDITION, MAPPING, OUTPUT, SOURCE};
        let mut order: Vec<(&str, Op)> = vec![(SOURCE, Op::Source), (CONDITION, Op::Condition(Some(condition)))];
        // A mapping only matters for an output.
        if let (Some(mapping), Some(topic)) = (mapping, output_topic) {
            order.push((MAPPING, Op::Mapping(mapping)));
            order.push((OUTPUT, Op::Output { topic: topic.to_owned() }));
        } else if let Some(topic) = output_topic {
            order.push((OUTPUT, Op::Output { topic: topic.to_owned() }));
        }
        let next: Vec<Vec<String>> = (0..order.len())
            .map(|i| order.get(i + 1).map(|(id, _)| vec![(*id).to_owned()]).unwrap_or_default())
            .collect();
        let nodes = order
            .into_iter()
            .zip(next)
            .map(|((id, op), children)| (id.to_owned(), PlanNode { id: id.to_owned(), op, children }))
            .collect();
        FlowPlan {
            flow_id: rule.flow_id.clone().unwrap_or_else(|| rule.id.clone()),
            version: 0,
            topic: rule.source.topic.clone(),
            event_type: rule.conditions.event_type.clone(),
            source: SOURCE.to_owned(),
            nodes,
        }
    }
}

impl FlowPlan {
    /// The nodes after the source, in order, of a plan in which every node has at most one child (a rule's
    /// plan); `None` for a plan that branches.
    pub fn chain(&self) -> Option<Vec<&PlanNode>> {
        let mut chain = Vec::new();
        let mut at = self.node(&self.source)?;
        loop {
            match at.children.as_slice() {
                [] => return Some(chain),
                [next] if chain.len() < self.nodes.len() => {
                    at = self.node(next)?;
                    chain.push(at);
                }
                _ => return None,
            }
        }
    }
}

/// The nearest segment before `node_id`.
fn segment_of<'a>(
    body: &'a flowhost_flows::FlowBody,
    parents: &HashMap<&str, &str>,
    node_id: &str,
) -> Option<&'a flowhost_flows::Node> {
    let mut at = *parents.get(node_id)?;
    for _ in 0..body.nodes.len() {
        let node = body.nodes.iter().find(|n| n.id == at)?;
        if node.kind == NodeKind::ServiceIn.as_str() {
            return Some(node);
        }
        at = parents.get(at)?;
    }
    None
}

/// Every runnable flow, indexed by source topic and event type.
#[derive(Debug, Default)]
pub struct Plans {
    /// By source topic, then event type (looked up per record without building a key).
    by_source: HashMap<String, HashMap<String, Vec<Arc<FlowPlan>>>>,
    by_flow: HashMap<String, Arc<FlowPlan>>,
    /// Retarget topics that do not exist, with the flows that need them: their source topics are not consumed.
    pub missing_topics: Vec<(String, String)>,
    /// The source topics of those flows: not consumed at all (for rules neither), so nothing is lost.
    blocked: BTreeSet<String>,
    /// The topics some runnable flow starts from.
    sources: std::collections::HashSet<String>,
}

impl Plans {
    /// Loads every released, enabled and `valid` v2 flow.
    pub async fn load(ports: &Ports) -> Result<Plans, flowhost_flows::FlowError> {
        let flows = Flows::new(ports.clone());
        let query = Query::new()
            .eq("api_version", json!(API_VERSION))
            .eq("status", json!(FlowStatus::Valid))
            .eq("enabled", json!(true));
        let page = ports.documents.query(FLOWS, &query).await?;
        let records: Vec<FlowRecord> =
            page.items.into_iter().filter_map(|doc| serde_json::from_value(doc).ok()).collect();
        let mut deps = Dependencies::load(ports).await?;
        let mut plans = Plans::default();
        for record in records {
            let Some(number) = record.released_version else { continue };
            let version = flows.version(&record.id, number).await?;
            let retargets = flowhost_flows::retarget_topics(&version.body);
            deps.check_topics(ports.topics.as_ref(), retargets.clone()).await;
            let missing: Vec<String> = retargets.into_iter().filter(|t| deps.topics.get(t) != Some(&true)).collect();
            match FlowPlan::compile(&record.id, &version, &deps) {
                Ok(plan) => {
                    let plan = Arc::new(plan);
                    plans.by_flow.insert(record.id.clone(), plan.clone());
                    if !missing.is_empty() {
                        // Fails closed: the flow's source is not consumed until its retarget topic exists (the
                        // runner logs the change).
                        plans.missing_topics.extend(missing.into_iter().map(|t| (record.id.clone(), t)));
                        continue;
                    }
                    plans
                        .by_source
                        .entry(plan.topic.clone())
                        .or_default()
                        .entry(plan.event_type.clone())
                        .or_default()
                        .push(plan);
                }
                Err(problem) => warn!(flow = %record.id, number, %problem, "a released flow cannot run"),
            }
        }
        // A topic blocked by one flow is blocked for all: its records are not consumed, so none are lost.
        let blocked: BTreeSet<String> = plans
            .missing_topics
            .iter()
            .filter_map(|(flow, _)| plans.by_flow.get(flow))
            .map(|p| p.topic.clone())
            .collect();
        plans.by_source.retain(|topic, _| !blocked.contains(topic));
        plans.blocked = blocked;
        plans.sources = plans.by_source.keys().cloned().collect();
        Ok(plans)
    }

    /// The flows an event of `event_type` on `topic` starts.
    pub fn matching(&self, topic: &str, event_type: &str) -> &[Arc<FlowPlan>] {
        self.by_source.get(topic).and_then(|types| types.get(event_type)).map_or(&[], Vec::as_slice)
    }

    /// The plan of a flow at a version, when that is the version loaded (a replay to the run's version of an
    /// older one compiles it on demand).
    pub fn flow(&self, flow_id: &str) -> Option<&Arc<FlowPlan>> {
        self.by_flow.get(flow_id)
    }

    /// The source topics to consume.
    pub fn source_topics(&self) -> BTreeSet<String> {
        self.sources.iter().cloned().collect()
    }

    /// Whether some runnable flow starts from `topic`.
    pub fn reads(&self, topic: &str) -> bool {
        self.sources.contains(topic)
    }

    /// The source topics of every loaded flow, blocked ones included.
    pub fn flow_topics(&self) -> BTreeSet<String> {
        self.by_flow.values().map(|plan| plan.topic.clone()).collect()
    }

    /// The source topics of flows whose retarget topic is missing: no one may consume them.
    pub fn blocked_topics(&self) -> BTreeSet<String> {
        self.blocked.clone()
    }

    pub fn len(&self) -> usize {
        self.by_flow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_flow.is_empty()
    }
}
