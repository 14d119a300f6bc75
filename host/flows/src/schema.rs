//! The JSON Schema (draft 2020-12) of a v2 flow body, served at `GET /api/v2/flows/schema` and documented in
//! docs/flows.md. It describes the shape of each node kind's `config`; what depends on other data (schemas,
//! manifests, topics) is the validation engine's to say.

use serde_json::{json, Value};

use crate::model::NodeKind;

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

fn config_schema(kind: NodeKind) -> Value {
    let string = json!({ "type": "string", "minLength": 1 });
    match kind {
        NodeKind::Source => json!({
            "type": "object",
            "description": "Where runs start: `event_type` on `topic`, or `event_type` from the external `service` (exactly one of topic and service).",
            "properties": { "event_type": string, "topic": string, "service": string },
            "required": ["event_type"],
        }),
        NodeKind::Condition => json!({
            "type": "object",
            "description": "A CEL `expression` over the fields that reach the node, or an else branch (`else: true`, no expression) that matches when none of its sibling conditions does.",
            "properties": { "expression": { "type": "string" }, "else": { "type": "boolean", "default": false } },
        }),
        NodeKind::RateLimit => object(
            json!({
                "limit": { "type": "integer", "minimum": 1, "description": "Events let through per window and key." },
                "window_seconds": { "type": "integer", "minimum": 1 },
                "key": { "type": "string", "description": "The field whose value keys the counter; absent: one counter for the node." },
            }),
            &["limit", "window_seconds"],
        ),
        NodeKind::Mapping => object(
            json!({
                "mode": { "enum": ["select", "merge"], "default": "select", "description": "`select` keeps only the targets; `merge` adds them to the payload." },
                "fields": { "type": "array", "minItems": 1, "items": object(json!({ "source": string, "target": string }), &["source", "target"]) },
            }),
            &["fields"],
        ),
        NodeKind::Lookup => object(
            json!({
                "service": string,
                "data_source": string,
                "params": { "type": "object", "additionalProperties": { "type": ["string", "number", "boolean"] }, "description": "Query parameters the data source declares; strings may hold {{placeholders}}." },
                "target": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "description": "The payload field that receives the answer." },
            }),
            &["service", "data_source", "target"],
        ),
        NodeKind::OutputTopic => json!({
            "type": "object",
            "description": "Publishes the payload to `topic` (default: the source topic's default output topic) and continues.",
            "properties": { "topic": string },
        }),
        NodeKind::ServiceIn => object(
            json!({
                "service": string,
                "transport": { "enum": ["nats", "kafka", "http", "in-process"], "description": "Default: the first the service's manifest offers (`in-process` for an uploaded component)." },
                "kafka_topic": { "type": "string", "minLength": 1, "description": "Retargets the Kafka transport to this existing topic." },
            }),
            &["service"],
        ),
        NodeKind::Action => json!({
            "type": "object",
            "description": "`action_ref` names an action of the parent service segment's service; every other property is the action's configuration, checked against its `config_schema`. Strings may hold {{placeholders}}; a string that is exactly one placeholder takes the field's type.",
            "properties": { "action_ref": string },
            "required": ["action_ref"],
        }),
        NodeKind::PluginNode => json!({
            "type": "object",
            "description": "A node kind a plugin declares: `kind` of the component `plugin` (`GET /api/v2/node-kinds` lists them); every other property is the kind's configuration, checked against its `config_schema`. Strings may hold {{placeholders}}, rendered per event.",
            "properties": { "plugin": string, "kind": string },
            "required": ["plugin", "kind"],
        }),
    }
}

/// The JSON Schema of a v2 flow body (create, save and validate-draft requests).
pub fn body_schema() -> Value {
    let kinds: Vec<&str> = NodeKind::ALL.iter().map(|k| k.as_str()).collect();
    let per_kind: Vec<Value> = NodeKind::ALL
        .iter()
        .map(|kind| {
            json!({
                "if": { "properties": { "kind": { "const": kind.as_str() } } },
                "then": { "properties": { "config": config_schema(*kind) } },
            })
        })
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://flowhost.dev/schemas/flow-v2.json",
        "title": "Flowhost v2 flow",
        "description": "A v2 flow: a graph of nodes and edges, plus the flow's name. `id` is generated when absent.",
        "type": "object",
        "properties": {
            "id": { "type": "string", "minLength": 1, "maxLength": 128 },
            "name": { "type": "string", "maxLength": 256 },
            "description": { "type": "string", "maxLength": 4096 },
            "enabled": { "type": "boolean", "default": true },
            "campaign": {
                "description": "Campaign metadata: the flow is a campaign of this tenant (absent on save keeps it).",
                "type": "object",
                "properties": {
                    "tenant_id": { "type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9._-]+$" },
                    "offering": { "type": "string", "maxLength": 1024 },
                    "starts_at": { "type": "string", "format": "date-time" },
                    "ends_at": { "type": "string", "format": "date-time" },
                    "archived": { "type": "boolean", "default": false },
                },
                "required": ["tenant_id"],
                "additionalProperties": false,
            },
            "nodes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "minLength": 1, "maxLength": 128 },
                        "kind": { "enum": kinds },
                        "name": { "type": "string", "description": "A label; stripped from action nodes at release." },
                        "config": { "type": "object" },
                        "position": { "description": "Where the editor draws the node; kept, never interpreted." },
                    },
                    "required": ["id", "kind"],
                    "allOf": per_kind,
                },
            },
            "edges": {
                "type": "array",
                "items": object(json!({ "id": { "type": "string" }, "from": { "type": "string" }, "to": { "type": "string" } }), &["from", "to"]),
            },
        },
        "required": ["nodes", "edges"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_a_valid_json_schema() {
        jsonschema::meta::validate(&body_schema()).unwrap();
        let validator = jsonschema::validator_for(&body_schema()).unwrap();
        let bad = json!({"nodes": [{"id": "r", "kind": "rate-limit", "config": {"limit": 0}}], "edges": []});
        assert!(!validator.is_valid(&bad));
    }
}
