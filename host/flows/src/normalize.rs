//! Release normalization: what a released version stores. Action node `name`s are stripped (an action's
//! identity is `config.action_ref`), and every default is written out so the version runs the same whatever
//! the defaults become later:
//!
//! - an edge without an id gets `{from}->{to}`;
//! - a condition gets `else: false` when it does not say;
//! - a mapping gets `mode: "select"`;
//! - a service segment gets its transport (the first the service offers) when it names none;
//! - an output-topic node gets its source topic's default output topic when it names none;
//! - an action's config gets the `default` of every property its `config_schema` declares and the config
//!   lacks (nested objects included).
//!
//! Validation of a normalized body reports what validation of the body reported: the drift pass validates
//! normalized bodies, draft validation the bodies as written, and the two agree.

use serde_json::{json, Map, Value};

use crate::deps::Dependencies;
use crate::model::{FlowBody, NodeKind};
use crate::validate::config_str;

/// The normalized form of `body` (see the module documentation).
pub fn normalize(body: &FlowBody, deps: &Dependencies) -> FlowBody {
    let mut body = body.clone();
    let source_topic = body
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::Source.as_str())
        .and_then(|n| config_str(&n.config, "topic"))
        .map(str::to_owned);
    for edge in &mut body.edges {
        if edge.id.is_empty() {
            edge.id = format!("{}->{}", edge.from, edge.to);
        }
    }
    // Each action's service: the segment its one incoming path passes last.
    let parents: std::collections::HashMap<String, String> =
        body.edges.iter().map(|e| (e.to.clone(), e.from.clone())).collect();
    let segment_service = |node_id: &str, body: &FlowBody| -> Option<String> {
        let mut at = parents.get(node_id)?;
        for _ in 0..body.nodes.len() {
            let node = body.nodes.iter().find(|n| &n.id == at)?;
            if node.kind == NodeKind::ServiceIn.as_str() {
                return config_str(&node.config, "service").map(str::to_owned);
            }
            at = parents.get(at)?;
        }
        None
    };
    let services: Vec<Option<String>> = body.nodes.iter().map(|n| segment_service(&n.id, &body)).collect();
    for (node, service) in body.nodes.iter_mut().zip(services) {
        let Some(kind) = NodeKind::parse(&node.kind) else { continue };
        let Some(config) = node.config.as_object_mut() else { continue };
        match kind {
            NodeKind::Condition => {
                config.entry("else").or_insert(json!(false));
            }
            NodeKind::Mapping => {
                config.entry("mode").or_insert(json!("select"));
            }
            NodeKind::ServiceIn => {
                let offered = config
                    .get("service")
                    .and_then(Value::as_str)
                    .and_then(|s| deps.services.get(s))
                    .and_then(|s| s.transports().into_iter().next());
                if let (None, Some(transport)) = (config.get("transport").and_then(Value::as_str), offered) {
                    config.insert("transport".to_owned(), json!(transport));
                }
            }
            NodeKind::OutputTopic => {
                let missing = config.get("topic").and_then(Value::as_str).is_none_or(|t| t.trim().is_empty());
                if let (true, Some(default)) =
                    (missing, source_topic.as_ref().and_then(|t| deps.output_defaults.get(t)))
                {
                    config.insert("topic".to_owned(), json!(default));
                }
            }
            NodeKind::Action => {
                node.name = None;
                let schema = config
                    .get("action_ref")
                    .and_then(Value::as_str)
                    .zip(service.as_ref().and_then(|s| deps.services.get(s)))
                    .and_then(|(action, service)| service.action(action))
                    .and_then(|action| action.config_schema.as_ref());
                if let Some(schema) = schema {
                    fill_defaults(config, schema);
                }
            }
            NodeKind::PluginNode => {
                let declared = config
                    .get("plugin")
                    .and_then(Value::as_str)
                    .zip(config.get("kind").and_then(Value::as_str))
                    .and_then(|(plugin, kind)| deps.node_kind(plugin, kind).ok())
                    .map(|(_, declaration)| declaration.config_schema.clone());
                if let Some(schema) = declared {
                    fill_defaults(config, &schema);
                }
            }
            NodeKind::Source | NodeKind::RateLimit | NodeKind::Lookup => {}
        }
    }
    body
}

/// Writes each declared property's `default` that `object` lacks, descending into nested objects.
fn fill_defaults(object: &mut Map<String, Value>, schema: &Value) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
    for (name, property) in properties {
        match object.get_mut(name) {
            None => {
                if let Some(default) = property.get("default") {
                    object.insert(name.clone(), default.clone());
                }
            }
            Some(Value::Object(inner)) => fill_defaults(inner, property),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_nested_defaults_without_overwriting() {
        let schema = json!({"properties": {
            "ttl": {"type": "integer", "default": 60},
            "urgency": {"type": "string", "default": "normal"},
            "options": {"type": "object", "properties": {"silent": {"type": "boolean", "default": false}}}
        }});
        let mut config = json!({"urgency": "high", "options": {}}).as_object().unwrap().clone();
        fill_defaults(&mut config, &schema);
        assert_eq!(Value::Object(config), json!({"ttl": 60, "urgency": "high", "options": {"silent": false}}));
    }
}
