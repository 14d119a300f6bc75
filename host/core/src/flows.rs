//! Structural validation of v1 flows and their compilation into rules.
//!
//! A v1 flow is a tree rooted at its source node: edges lead from the source to condition nodes, from
//! conditions to further conditions or to outputs, and from the source straight to outputs. Every path from
//! the source to an output becomes one rule:
//!
//! - the rule's expression is the conjunction of the conditions on the path (`true` for a direct edge);
//! - an **else branch** (`is_else: true`) stands for "none of my sibling conditions matched": its expression
//!   is the negation of every non-else condition that shares its parent node (`true` when it has none);
//! - the rule id is `flow_{flowID}_{condNodeID}_{outNodeID}` with the last condition on the path (the source
//!   node's id for a direct edge), so recompiling yields the same ids.
//!
//! A condition has exactly one incoming edge, so a path is identified by its last condition and its output.

use std::collections::{HashMap, HashSet};

use crate::model::{Flow, FlowCondition, Rule, RuleConditions, RuleSource, SourceType};

#[derive(Clone, Copy)]
enum Node<'a> {
    Source,
    Condition(&'a FlowCondition),
    Output(usize),
}

/// Structural problems of a flow, each naming the node or edge concerned. Empty when the flow can compile.
pub fn validate(flow: &Flow) -> Vec<String> {
    match plan(flow) {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    }
}

/// The rules a flow compiles to, or its structural problems.
pub fn compile(flow: &Flow) -> Result<Vec<CompiledRule>, Vec<String>> {
    plan(flow)
}

/// A rule produced by compile, with the condition node it came from (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledRule {
    pub rule: Rule,
    pub condition_node: String,
}

/// The deterministic id of the rule compiled for the path ending in `cond_node` -> `out_node`.
pub fn compiled_rule_id(flow_id: &str, cond_node: &str, out_node: &str) -> String {
    format!("flow_{flow_id}_{cond_node}_{out_node}")
}

fn plan(flow: &Flow) -> Result<Vec<CompiledRule>, Vec<String>> {
    let mut errors = Vec::new();
    let Some(source) = &flow.source else {
        return Err(vec!["flow has no source node".to_owned()]);
    };
    if source.node_id.trim().is_empty() {
        errors.push("source node: missing node_id".to_owned());
    }
    if source.event_type.trim().is_empty() {
        errors.push(format!("source node {:?}: missing event_type", source.node_id));
    }
    if source.source_topic.trim().is_empty() {
        errors.push(format!("source node {:?}: missing source_topic", source.node_id));
    }

    let mut nodes: HashMap<&str, Node> = HashMap::new();
    nodes.insert(source.node_id.as_str(), Node::Source);
    let duplicate = |id: &str, errors: &mut Vec<String>| {
        errors.push(format!("node id {id:?} is used by more than one node"));
    };
    for condition in &flow.conditions {
        if nodes.insert(condition.node_id.as_str(), Node::Condition(condition)).is_some() {
            duplicate(&condition.node_id, &mut errors);
        }
        let has_expression = condition.expression.as_deref().is_some_and(|e| !e.trim().is_empty());
        if condition.is_else && has_expression {
            errors.push(format!(
                "condition node {:?}: an else branch takes no expression (it matches when its siblings do not)",
                condition.node_id
            ));
        } else if !condition.is_else && !has_expression {
            errors.push(format!("condition node {:?}: missing expression", condition.node_id));
        }
    }
    for (index, output) in flow.outputs.iter().enumerate() {
        if nodes.insert(output.node_id.as_str(), Node::Output(index)).is_some() {
            duplicate(&output.node_id, &mut errors);
        }
        if output.output_topic.trim().is_empty() {
            errors.push(format!("output node {:?}: missing output_topic", output.node_id));
        }
    }

    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut incoming: HashMap<&str, usize> = HashMap::new();
    for edge in &flow.edges {
        let label = if edge.id.is_empty() { format!("{}->{}", edge.from, edge.to) } else { edge.id.clone() };
        let (Some(from), Some(to)) = (nodes.get(edge.from.as_str()), nodes.get(edge.to.as_str())) else {
            for end in [&edge.from, &edge.to] {
                if !nodes.contains_key(end.as_str()) {
                    errors.push(format!("edge {label:?}: unknown node {end:?}"));
                }
            }
            continue;
        };
        if matches!(from, Node::Output(_)) {
            errors.push(format!("edge {label:?}: output node {:?} cannot have outgoing edges", edge.from));
            continue;
        }
        if matches!(to, Node::Source) {
            errors.push(format!("edge {label:?}: the source node {:?} cannot have incoming edges", edge.to));
            continue;
        }
        children.entry(edge.from.as_str()).or_default().push(edge.to.as_str());
        *incoming.entry(edge.to.as_str()).or_default() += 1;
    }
    for condition in &flow.conditions {
        if incoming.get(condition.node_id.as_str()).copied().unwrap_or(0) > 1 {
            errors.push(format!("condition node {:?}: has more than one incoming edge", condition.node_id));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // Walk from the source; each reached output yields one rule.
    let mut rules = Vec::new();
    let mut reached: HashSet<&str> = HashSet::new();
    let mut stack: Vec<(&str, Vec<String>)> = vec![(source.node_id.as_str(), Vec::new())];
    while let Some((node_id, path)) = stack.pop() {
        if !reached.insert(node_id) && !matches!(nodes[node_id], Node::Output(_)) {
            continue;
        }
        let siblings = children.get(node_id).cloned().unwrap_or_default();
        let else_branches: Vec<&str> =
            siblings.iter().copied().filter(|id| matches!(nodes[id], Node::Condition(c) if c.is_else)).collect();
        if else_branches.len() > 1 {
            errors.push(format!("node {node_id:?}: has more than one else branch ({})", else_branches.join(", ")));
        }
        for child in siblings {
            match nodes[child] {
                Node::Source => {}
                Node::Condition(condition) => {
                    let mut path = path.clone();
                    path.push(condition_expression(condition, &children[node_id], &nodes));
                    stack.push((child, path));
                }
                Node::Output(index) => {
                    reached.insert(child);
                    let output = &flow.outputs[index];
                    let expression = if path.is_empty() { "true".to_owned() } else { path.join(" && ") };
                    let condition_node = node_id.to_owned();
                    let label = match nodes[node_id] {
                        Node::Condition(c) if !c.label.is_empty() => c.label.as_str(),
                        _ => node_id,
                    };
                    rules.push(CompiledRule {
                        rule: Rule {
                            id: compiled_rule_id(&flow.id, node_id, &output.node_id),
                            name: format!("{}: {} -> {}", flow.name, label, output_label(output)),
                            source: RuleSource { kind: SourceType::Kafka, topic: source.source_topic.clone() },
                            conditions: RuleConditions { event_type: source.event_type.clone(), expression },
                            output_topic: output.output_topic.clone(),
                            output_mapping: None,
                            enabled: flow.enabled,
                            flow_id: Some(flow.id.clone()),
                        },
                        condition_node,
                    });
                }
            }
        }
    }
    for condition in &flow.conditions {
        if !reached.contains(condition.node_id.as_str()) {
            errors.push(format!("condition node {:?}: not connected to the source", condition.node_id));
        }
    }
    for output in &flow.outputs {
        if !reached.contains(output.node_id.as_str()) {
            errors.push(format!("output node {:?}: not connected to the source", output.node_id));
        }
    }
    if errors.is_empty() && rules.is_empty() {
        errors.push("flow has no path from the source to an output".to_owned());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    rules.sort_by(|a, b| a.rule.id.cmp(&b.rule.id));
    Ok(rules)
}

fn output_label(output: &crate::model::FlowOutput) -> &str {
    if output.label.is_empty() {
        &output.node_id
    } else {
        &output.label
    }
}

fn condition_expression(condition: &FlowCondition, siblings: &[&str], nodes: &HashMap<&str, Node>) -> String {
    if !condition.is_else {
        return format!("({})", condition.expression.as_deref().unwrap_or_default().trim());
    }
    let negated: Vec<String> = siblings
        .iter()
        .filter_map(|id| match nodes[id] {
            Node::Condition(c) if !c.is_else => {
                Some(format!("!({})", c.expression.as_deref().unwrap_or_default().trim()))
            }
            _ => None,
        })
        .collect();
    if negated.is_empty() {
        "(true)".to_owned()
    } else {
        format!("({})", negated.join(" && "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flow(value: serde_json::Value) -> Flow {
        serde_json::from_value(value).unwrap()
    }

    fn branching() -> Flow {
        flow(json!({
            "id": "f1", "name": "vip",
            "source": {"node_id": "src", "event_type": "deposit", "source_topic": "deposits"},
            "conditions": [
                {"node_id": "big", "label": "big", "expression": "amount > 100.0"},
                {"node_id": "other", "label": "other", "is_else": true}
            ],
            "outputs": [
                {"node_id": "o1", "label": "vip", "output_topic": "vip"},
                {"node_id": "o2", "label": "rest", "output_topic": "rest"}
            ],
            "edges": [
                {"id": "e1", "from": "src", "to": "big"},
                {"id": "e2", "from": "src", "to": "other"},
                {"id": "e3", "from": "big", "to": "o1"},
                {"id": "e4", "from": "other", "to": "o2"}
            ]
        }))
    }

    #[test]
    fn compiles_each_path_with_deterministic_ids_and_else_as_negation() {
        let rules = compile(&branching()).unwrap();
        let summary: Vec<(String, String, String)> = rules
            .iter()
            .map(|r| (r.rule.id.clone(), r.rule.conditions.expression.clone(), r.rule.output_topic.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("flow_f1_big_o1".into(), "(amount > 100.0)".into(), "vip".into()),
                ("flow_f1_other_o2".into(), "(!(amount > 100.0))".into(), "rest".into()),
            ]
        );
        assert!(rules.iter().all(|r| r.rule.flow_id.as_deref() == Some("f1")));
        assert_eq!(compile(&branching()).unwrap(), rules, "compile is deterministic");
    }

    #[test]
    fn chained_conditions_are_conjoined_and_direct_edges_are_unconditional() {
        let rules = compile(&flow(json!({
            "id": "f",
            "source": {"node_id": "s", "event_type": "e", "source_topic": "t"},
            "conditions": [
                {"node_id": "a", "expression": "x > 1"},
                {"node_id": "b", "expression": "y == 'z'"}
            ],
            "outputs": [{"node_id": "o", "output_topic": "out"}, {"node_id": "all", "output_topic": "all"}],
            "edges": [
                {"from": "s", "to": "a"}, {"from": "a", "to": "b"}, {"from": "b", "to": "o"},
                {"from": "s", "to": "all"}
            ]
        })))
        .unwrap();
        let ids: Vec<(&str, &str)> =
            rules.iter().map(|r| (r.rule.id.as_str(), r.rule.conditions.expression.as_str())).collect();
        assert_eq!(ids, vec![("flow_f_b_o", "(x > 1) && (y == 'z')"), ("flow_f_s_all", "true")]);
    }

    #[test]
    fn validation_messages_name_the_node() {
        let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
            (json!({}), vec!["flow has no source node"]),
            (
                json!({"source": {"node_id": "s"}, "outputs": [{"node_id": "o"}], "edges": [{"from": "s", "to": "o"}]}),
                vec![
                    "source node \"s\": missing event_type",
                    "source node \"s\": missing source_topic",
                    "output node \"o\": missing output_topic",
                ],
            ),
            (
                json!({"source": {"node_id": "s", "event_type": "e", "source_topic": "t"},
                       "conditions": [{"node_id": "c"}],
                       "outputs": [{"node_id": "o", "output_topic": "x"}],
                       "edges": [{"id": "e1", "from": "s", "to": "c"}, {"id": "e2", "from": "c", "to": "nope"}]}),
                vec!["condition node \"c\": missing expression", "edge \"e2\": unknown node \"nope\""],
            ),
            (
                json!({"source": {"node_id": "s", "event_type": "e", "source_topic": "t"},
                       "conditions": [{"node_id": "c", "expression": "true"}],
                       "outputs": [{"node_id": "o", "output_topic": "x"}],
                       "edges": [{"from": "c", "to": "o"}]}),
                vec![
                    "condition node \"c\": not connected to the source",
                    "output node \"o\": not connected to the source",
                ],
            ),
            (
                json!({"source": {"node_id": "s", "event_type": "e", "source_topic": "t"},
                       "conditions": [{"node_id": "a", "is_else": true}, {"node_id": "b", "is_else": true}],
                       "outputs": [{"node_id": "o", "output_topic": "x"}],
                       "edges": [{"from": "s", "to": "a"}, {"from": "s", "to": "b"}, {"from": "a", "to": "o"}]}),
                vec!["node \"s\": has more than one else branch (a, b)"],
            ),
            (
                json!({"source": {"node_id": "s", "event_type": "e", "source_topic": "t"}}),
                vec!["flow has no path from the source to an output"],
            ),
        ];
        for (body, expected) in cases {
            let errors = validate(&flow(body.clone()));
            assert_eq!(errors, expected, "for {body}");
        }
    }
}
