//! v2 flows as Studio and an operator use them (spec 001: the flow resource, the state table, the v2 routes and
//! validation rules 1-5): one table of drafts, one row per issue code, each checked through
//! `POST /api/v2/flows/validate-draft`, the released-flow validate route and the drift pass, which must agree;
//! release with and without acknowledged warnings, versions, release attempts and the edit lock; a manifest
//! registered through `POST /api/v1/components/register` that breaks a released flow and a later one that fixes
//! it, with the flow broadcast each service receives. Every case runs on the embedded backends and on the real
//! servers.

use std::time::Duration;

use flowhost_core::collections::{FLOWS, FLOW_VERSIONS};
use flowhost_flows::{
    drift, normalize, referenced_services, Dependencies, FlowBody, FlowInput, FlowRecord, FlowStatus, FlowVersion,
    Flows, Issue,
};
use flowhost_tests::{on_both_backends, unique, Backends, TestHost};
use futures::StreamExt;
use serde_json::{json, Value};

on_both_backends!(
    every_issue_code_through_the_route_and_the_drift_pass,
    release_versions_attempts_and_the_edit_lock,
    a_registration_breaks_a_released_flow_and_the_next_fixes_it,
    bad_requests_answer_the_v2_envelope
);

const REGISTER: &str = "/api/v1/components/register";
const VALIDATE_DRAFT: &str = "/api/v2/flows/validate-draft";

fn notifications(version: &str, with_webpush: bool) -> Value {
    let mut actions = vec![json!({"name": "send_inapp", "config_schema": {"type": "object",
        "properties": {"message": {"type": "string"}}}})];
    if with_webpush {
        actions.push(json!({"name": "send_webpush", "config_schema": {"type": "object",
            "properties": {
                "template_id": {"type": "integer"},
                "title": {"type": "string"},
                "urgency": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"}
            },
            "required": ["template_id"]}}));
    }
    json!({
        "service": "notifications",
        "components": [{"id": "sender", "version": version}],
        "actions": actions,
        "service_sources": ["nats", "kafka", "http"],
        "supports_nodes": ["condition", "lookup", "mapping"],
        "data_sources": [
            {"name": "templates", "path": "/data/templates", "params": ["tenant_id"]},
            {"name": "tenants", "path": "/data/tenants", "params": []}
        ],
        "transports": {"http": {"endpoint": "http://127.0.0.1:9"}}
    })
}

fn crm() -> Value {
    json!({
        "service": "crm",
        "components": [{"id": "crm-tags", "version": "1.0.0"}],
        "actions": [{"name": "tag_player", "config_schema": {"type": "object",
            "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}],
        "service_sources": ["kafka"],
        "supports_nodes": ["condition"],
        "transports": {"http": {"endpoint": "http://127.0.0.1:9"}}
    })
}

/// A service offering HTTP without naming its endpoint: nothing can be sent to it over HTTP.
fn mailer() -> Value {
    json!({
        "service": "mailer",
        "components": [{"id": "mailer", "version": "1.0.0"}],
        "actions": [{"name": "tag_player", "config_schema": {"type": "object",
            "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}],
        "service_sources": ["http"],
        "supports_nodes": ["condition"]
    })
}

/// A host with the `deposit` schema, a default output topic for `deposits` and the services registered.
async fn start(backends: Backends) -> TestHost {
    let host = TestHost::start(backends).await;
    let schema = json!({"fields": [
        {"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"},
        {"name": "level", "type": "int"}, {"name": "country", "type": "string"}
    ]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let default = json!({"default_output_topic": "deposits-out"});
    assert_eq!(host.call("PUT", "/api/v1/event-sources/deposits", Some(default)).await.0, 200);
    assert_eq!(host.call("POST", REGISTER, Some(notifications("1.0.0", true))).await.0, 200);
    assert_eq!(host.call("POST", REGISTER, Some(crm())).await.0, 200);
    assert_eq!(host.call("POST", REGISTER, Some(mailer())).await.0, 200);
    host
}

fn node(id: &str, kind: &str, config: Value) -> Value {
    json!({"id": id, "kind": kind, "config": config})
}

fn edge(from: &str, to: &str) -> Value {
    json!({"from": from, "to": to})
}

/// A valid flow touching every node kind: deposits over 100 get a player field, a rate limit, a template
/// looked up, a web push, then a CRM tag and the default output; smaller deposits go to their own topic.
fn base() -> Value {
    json!({
        "nodes": [
            node("src", "source", json!({"event_type": "deposit", "topic": "deposits"})),
            node("big", "condition", json!({"expression": "amount > 100.0"})),
            node("small", "condition", json!({"else": true})),
            node("map", "mapping", json!({"mode": "merge", "fields": [{"source": "player_id", "target": "player"}]})),
            node("rl", "rate-limit", json!({"limit": 1, "window_seconds": 60, "key": "player"})),
            node("tpl", "lookup", json!({"service": "notifications", "data_source": "templates",
                "params": {"tenant_id": "{{tenant_id}}"}, "target": "template"})),
            node("seg", "service-in", json!({"service": "notifications", "transport": "nats"})),
            {"id": "push", "kind": "action", "name": "Web push",
             "config": {"action_ref": "send_webpush", "template_id": "{{level}}", "title": "Hi {{player}}"}},
            node("seg2", "service-in", json!({"service": "crm", "transport": "kafka"})),
            node("tag", "action", json!({"action_ref": "tag_player", "tag": "vip-{{country}}"})),
            node("out", "output-topic", json!({})),
            node("out2", "output-topic", json!({"topic": "small-deposits"})),
        ],
        "edges": [
            edge("src", "big"), edge("src", "small"), edge("big", "map"), edge("map", "rl"), edge("rl", "tpl"),
            edge("tpl", "seg"), edge("seg", "push"), edge("push", "seg2"), edge("seg2", "tag"), edge("tag", "out"),
            edge("small", "out2"),
        ]
    })
}

fn config<'a>(body: &'a mut Value, id: &str) -> &'a mut Value {
    let nodes = body["nodes"].as_array_mut().unwrap();
    &mut nodes.iter_mut().find(|n| n["id"] == id).unwrap_or_else(|| panic!("no node {id}"))["config"]
}

fn add(body: &mut Value, nodes: &[Value], edges: &[Value]) {
    body["nodes"].as_array_mut().unwrap().extend(nodes.iter().cloned());
    body["edges"].as_array_mut().unwrap().extend(edges.iter().cloned());
}

type Mutation = fn(&mut Value, &str);

/// One row: what changes in the base flow, and every issue expected as (code, node, pointer), the first
/// being the row's own code.
struct Row {
    code: &'static str,
    mutate: Mutation,
    expected: &'static [(&'static str, Option<&'static str>, Option<&'static str>)],
}

/// Places the `score` plugin's node kind (`sc`, configured with `config`) after `out2`, leading to an output.
fn scored(body: &mut Value, config: Value) {
    let out = node("out3", "output-topic", json!({"topic": "scored"}));
    add(body, &[node("sc", "node-kind", config), out], &[edge("out2", "sc"), edge("sc", "out3")]);
}

/// The table: one row per issue code. `retarget` (the mutation's second argument) is a Kafka topic that exists.
fn rows() -> Vec<Row> {
    vec![
        Row {
            code: "EMPTY_FLOW",
            mutate: |b, _| *b = json!({"nodes": [], "edges": []}),
            expected: &[("EMPTY_FLOW", None, None)],
        },
        Row {
            code: "NODE_ID_INVALID",
            mutate: |b, _| add(b, &[node(" ", "output-topic", json!({}))], &[]),
            expected: &[("NODE_ID_INVALID", None, None)],
        },
        Row {
            code: "DUPLICATE_NODE_ID",
            mutate: |b, _| add(b, &[node("big", "output-topic", json!({}))], &[]),
            expected: &[("DUPLICATE_NODE_ID", Some("big"), Some("/id"))],
        },
        Row {
            code: "UNKNOWN_NODE_KIND",
            mutate: |b, _| add(b, &[node("tp", "teleport", json!({}))], &[edge("out", "tp")]),
            expected: &[("UNKNOWN_NODE_KIND", Some("tp"), Some("/kind"))],
        },
        Row {
            code: "CONFIG_NOT_OBJECT",
            mutate: |b, _| *config(b, "out2") = json!(["small-deposits"]),
            expected: &[("CONFIG_NOT_OBJECT", Some("out2"), Some("/config"))],
        },
        Row {
            code: "SOURCE_MISSING",
            mutate: |b, _| {
                *b = json!({"nodes": [node("out", "output-topic", json!({"topic": "t"}))], "edges": []});
            },
            expected: &[("SOURCE_MISSING", None, None)],
        },
        Row {
            code: "SOURCE_DUPLICATE",
            mutate: |b, _| {
                add(b, &[node("src2", "source", json!({"event_type": "deposit", "topic": "deposits"}))], &[]);
            },
            expected: &[("SOURCE_DUPLICATE", Some("src2"), None)],
        },
        Row {
            code: "EDGE_UNKNOWN_NODE",
            mutate: |b, _| add(b, &[], &[json!({"id": "e-ghost", "from": "out2", "to": "ghost"})]),
            expected: &[("EDGE_UNKNOWN_NODE", None, None)],
        },
        Row {
            code: "EDGE_INTO_SOURCE",
            mutate: |b, _| add(b, &[], &[edge("out2", "src")]),
            expected: &[("EDGE_INTO_SOURCE", Some("src"), None)],
        },
        Row {
            code: "MULTIPLE_INPUTS",
            mutate: |b, _| add(b, &[], &[edge("small", "map")]),
            expected: &[("MULTIPLE_INPUTS", Some("map"), None)],
        },
        Row {
            code: "CYCLE",
            mutate: |b, _| {
                let step = |id: &str| node(id, "output-topic", json!({"topic": "loop"}));
                add(b, &[step("c1"), step("c2")], &[edge("c1", "c2"), edge("c2", "c1")]);
            },
            expected: &[("CYCLE", Some("c1"), None), ("CYCLE", Some("c2"), None)],
        },
        Row {
            code: "ORPHAN_NODE",
            mutate: |b, _| add(b, &[node("lonely", "output-topic", json!({"topic": "t"}))], &[]),
            expected: &[("ORPHAN_NODE", Some("lonely"), None)],
        },
        Row {
            code: "DEAD_END",
            mutate: |b, _| {
                add(b, &[node("dead", "condition", json!({"expression": "level > 3"}))], &[edge("big", "dead")])
            },
            expected: &[("DEAD_END", Some("dead"), None)],
        },
        Row {
            code: "SOURCE_EVENT_TYPE_MISSING",
            mutate: |b, _| *config(b, "src") = json!({"topic": "deposits"}),
            expected: &[("SOURCE_EVENT_TYPE_MISSING", Some("src"), Some("/config/event_type"))],
        },
        Row {
            code: "SOURCE_ORIGIN_INVALID",
            mutate: |b, _| config(b, "src")["service"] = json!("notifications"),
            expected: &[("SOURCE_ORIGIN_INVALID", Some("src"), Some("/config"))],
        },
        Row {
            // Runs start only from topics: a service source is refused, never a `valid` flow that never runs.
            code: "SOURCE_SERVICE_UNSUPPORTED",
            mutate: |b, _| *config(b, "src") = json!({"event_type": "deposit", "service": "crm"}),
            expected: &[
                ("SOURCE_SERVICE_UNSUPPORTED", Some("src"), Some("/config/service")),
                ("OUTPUT_TOPIC_MISSING", Some("out"), Some("/config/topic")),
            ],
        },
        Row {
            code: "SOURCE_SCHEMA_MISSING",
            mutate: |b, _| config(b, "src")["event_type"] = json!("withdrawal"),
            expected: &[("SOURCE_SCHEMA_MISSING", Some("src"), Some("/config/event_type"))],
        },
        Row {
            code: "CONDITION_EXPRESSION_MISSING",
            mutate: |b, _| *config(b, "big") = json!({}),
            expected: &[("CONDITION_EXPRESSION_MISSING", Some("big"), Some("/config/expression"))],
        },
        Row {
            code: "ELSE_WITH_EXPRESSION",
            mutate: |b, _| config(b, "small")["expression"] = json!("amount > 1.0"),
            expected: &[("ELSE_WITH_EXPRESSION", Some("small"), Some("/config/expression"))],
        },
        Row {
            code: "MULTIPLE_ELSE",
            mutate: |b, _| {
                let other = node("small2", "condition", json!({"else": true}));
                add(
                    b,
                    &[other, node("o3", "output-topic", json!({"topic": "t"}))],
                    &[edge("src", "small2"), edge("small2", "o3")],
                );
            },
            expected: &[("MULTIPLE_ELSE", Some("small2"), Some("/config/else"))],
        },
        Row {
            code: "ELSE_WITHOUT_SIBLINGS",
            mutate: |b, _| {
                let only = node("only", "condition", json!({"else": true}));
                add(
                    b,
                    &[only, node("o3", "output-topic", json!({"topic": "t"}))],
                    &[edge("out2", "only"), edge("only", "o3")],
                );
            },
            expected: &[("ELSE_WITHOUT_SIBLINGS", Some("only"), Some("/config/else"))],
        },
        Row {
            code: "CEL_INVALID",
            mutate: |b, _| config(b, "big")["expression"] = json!("amount > 100"),
            expected: &[("CEL_INVALID", Some("big"), Some("/config/expression"))],
        },
        Row {
            // A select mapping keeps only its targets: `amount` no longer reaches the condition after it.
            code: "CEL_INVALID",
            mutate: |b, _| {
                config(b, "map")["mode"] = json!("select");
                let late = node("late", "condition", json!({"expression": "amount > 1.0"}));
                add(
                    b,
                    &[late, node("o3", "output-topic", json!({"topic": "t"}))],
                    &[edge("map", "late"), edge("late", "o3")],
                );
            },
            expected: &[
                ("CEL_INVALID", Some("late"), Some("/config/expression")),
                ("PLACEHOLDER_UNKNOWN_FIELD", Some("tpl"), Some("/config/params/tenant_id")),
                ("PLACEHOLDER_UNKNOWN_FIELD", Some("push"), Some("/config/template_id")),
                ("PLACEHOLDER_UNKNOWN_FIELD", Some("tag"), Some("/config/tag")),
            ],
        },
        Row {
            code: "RATE_LIMIT_INVALID",
            mutate: |b, _| config(b, "rl")["limit"] = json!(0),
            expected: &[("RATE_LIMIT_INVALID", Some("rl"), Some("/config/limit"))],
        },
        Row {
            code: "MAPPING_INVALID",
            mutate: |b, _| config(b, "map")["mode"] = json!("explode"),
            expected: &[("MAPPING_INVALID", Some("map"), Some("/config/mode"))],
        },
        Row {
            code: "FIELD_UNKNOWN",
            mutate: |b, _| config(b, "rl")["key"] = json!("nobody"),
            expected: &[("FIELD_UNKNOWN", Some("rl"), Some("/config/key"))],
        },
        Row {
            code: "SERVICE_NOT_REGISTERED",
            mutate: |b, _| config(b, "seg")["service"] = json!("ghost"),
            expected: &[("SERVICE_NOT_REGISTERED", Some("seg"), Some("/config/service"))],
        },
        Row {
            code: "TRANSPORT_NOT_OFFERED",
            mutate: |b, _| config(b, "seg2")["transport"] = json!("nats"),
            expected: &[("TRANSPORT_NOT_OFFERED", Some("seg2"), Some("/config/transport"))],
        },
        Row {
            code: "HTTP_ENDPOINT_MISSING",
            mutate: |b, _| *config(b, "seg2") = json!({"service": "mailer", "transport": "http"}),
            expected: &[("HTTP_ENDPOINT_MISSING", Some("seg2"), Some("/config/transport"))],
        },
        Row {
            code: "RETARGET_NOT_KAFKA",
            mutate: |b, retarget| config(b, "seg")["kafka_topic"] = json!(retarget),
            expected: &[("RETARGET_NOT_KAFKA", Some("seg"), Some("/config/kafka_topic"))],
        },
        Row {
            code: "KAFKA_TOPIC_MISSING",
            mutate: |b, _| config(b, "seg2")["kafka_topic"] = json!("no-such-topic-for-flows"),
            expected: &[("KAFKA_TOPIC_MISSING", Some("seg2"), Some("/config/kafka_topic"))],
        },
        Row {
            code: "LOOKUP_INVALID",
            mutate: |b, _| config(b, "tpl")["params"] = json!({"tenant_id": "{{tenant_id}}", "page": "2"}),
            expected: &[("LOOKUP_INVALID", Some("tpl"), Some("/config/params/page"))],
        },
        Row {
            code: "DATA_SOURCE_UNKNOWN",
            mutate: |b, _| config(b, "tpl")["data_source"] = json!("segments"),
            expected: &[("DATA_SOURCE_UNKNOWN", Some("tpl"), Some("/config/data_source"))],
        },
        Row {
            code: "NODE_KIND_NOT_SUPPORTED",
            mutate: |b, _| config(b, "tpl")["service"] = json!("crm"),
            expected: &[
                ("NODE_KIND_NOT_SUPPORTED", Some("tpl"), Some("/config/service")),
                ("DATA_SOURCE_UNKNOWN", Some("tpl"), Some("/config/data_source")),
            ],
        },
        Row {
            code: "ACTION_REF_MISSING",
            mutate: |b, _| *config(b, "tag") = json!({"tag": "vip"}),
            expected: &[("ACTION_REF_MISSING", Some("tag"), Some("/config/action_ref"))],
        },
        Row {
            code: "ACTION_WITHOUT_SEGMENT",
            mutate: |b, _| {
                add(b, &[node("lone", "action", json!({"action_ref": "send_inapp"}))], &[edge("small", "lone")]);
            },
            expected: &[("ACTION_WITHOUT_SEGMENT", Some("lone"), None)],
        },
        Row {
            code: "ACTION_NEEDS_SEGMENT",
            mutate: |b, _| {
                add(b, &[node("again", "action", json!({"action_ref": "send_inapp"}))], &[edge("push", "again")]);
            },
            expected: &[("ACTION_NEEDS_SEGMENT", Some("again"), None)],
        },
        Row {
            // Calling another service's action needs that service's segment first.
            code: "ACTION_NOT_DECLARED",
            mutate: |b, _| *config(b, "tag") = json!({"action_ref": "send_inapp", "message": "hi"}),
            expected: &[("ACTION_NOT_DECLARED", Some("tag"), Some("/config/action_ref"))],
        },
        Row {
            code: "ACTION_CONFIG_INVALID",
            mutate: |b, _| config(b, "push")["urgency"] = json!("whenever"),
            expected: &[("ACTION_CONFIG_INVALID", Some("push"), Some("/config/urgency"))],
        },
        Row {
            code: "NODE_KIND_REF_MISSING",
            mutate: |b, _| scored(b, json!({"plugin": "score"})),
            expected: &[("NODE_KIND_REF_MISSING", Some("sc"), Some("/config/kind"))],
        },
        Row {
            code: "NODE_KIND_NOT_DECLARED",
            mutate: |b, _| scored(b, json!({"plugin": "score", "kind": "rank", "min": 1})),
            expected: &[("NODE_KIND_NOT_DECLARED", Some("sc"), Some("/config/kind"))],
        },
        Row {
            // A missing required property points at the property, where an editor shows it.
            code: "NODE_KIND_CONFIG_INVALID",
            mutate: |b, _| scored(b, json!({"plugin": "score", "kind": "score"})),
            expected: &[("NODE_KIND_CONFIG_INVALID", Some("sc"), Some("/config/min"))],
        },
        Row {
            code: "PLACEHOLDER_INVALID",
            mutate: |b, _| config(b, "push")["title"] = json!("Hi {{player"),
            expected: &[("PLACEHOLDER_INVALID", Some("push"), Some("/config/title"))],
        },
        Row {
            code: "PLACEHOLDER_UNKNOWN_FIELD",
            mutate: |b, _| config(b, "push")["title"] = json!("Hi {{nickname}}"),
            expected: &[("PLACEHOLDER_UNKNOWN_FIELD", Some("push"), Some("/config/title"))],
        },
        Row {
            code: "PLACEHOLDER_TYPE_MISMATCH",
            mutate: |b, _| config(b, "push")["template_id"] = json!("{{country}}"),
            expected: &[("PLACEHOLDER_TYPE_MISMATCH", Some("push"), Some("/config/template_id"))],
        },
        Row {
            code: "SEGMENT_WITHOUT_ACTION",
            mutate: |b, _| {
                add(b, &[node("seg3", "service-in", json!({"service": "notifications"}))], &[edge("out2", "seg3")]);
            },
            expected: &[("SEGMENT_WITHOUT_ACTION", Some("seg3"), None)],
        },
        Row {
            code: "OUTPUT_TOPIC_MISSING",
            mutate: |b, _| config(b, "src")["topic"] = json!("withdrawals"),
            expected: &[("OUTPUT_TOPIC_MISSING", Some("out"), Some("/config/topic"))],
        },
    ]
}

fn issues_of(report: &Value) -> Vec<Issue> {
    serde_json::from_value(report["issues"].clone()).expect("structured issues")
}

fn triples(issues: &[Issue]) -> Vec<(String, Option<String>, Option<String>)> {
    let mut out: Vec<_> = issues.iter().map(|i| (i.code.as_str(), i.node_id.clone(), i.pointer.clone())).collect();
    out.sort();
    out
}

/// What the drift pass records for `body` released as version 1 of a new flow: the flow's `broken_reasons`
/// and `status` after re-validation, and the released-flow validate route's answer.
async fn through_drift(host: &TestHost, flows: &Flows, body: &FlowBody) -> (Vec<Issue>, Value, Value) {
    let id = unique("drift");
    let input = FlowInput { id: Some(id.clone()), body: body.clone(), ..FlowInput::default() };
    let (mut record, _) = flows.create(input, None).await.expect("create");
    // The version as a release would have stored it when its dependencies allowed it.
    let deps = flows.dependencies(body).await.expect("dependencies");
    let normalized = normalize(body, &deps);
    let version = FlowVersion {
        flow_id: id.clone(),
        version: 1,
        services: referenced_services(&normalized),
        body_hash: String::new(),
        body: normalized,
        released_at: "2026-11-24T00:00:00.000Z".into(),
        released_by: "table".into(),
        warnings: vec![],
        acknowledged_warnings: vec![],
        unacknowledged_warnings: vec![],
    };
    let documents = &host.ports.documents;
    documents.insert(FLOW_VERSIONS, &format!("{id}/1"), serde_json::to_value(&version).unwrap()).await.unwrap();
    record.released_version = Some(1);
    record.status = FlowStatus::Valid;
    documents.upsert(FLOWS, &id, serde_json::to_value(&record).unwrap()).await.unwrap();

    let mut deps = Dependencies::load(&host.ports).await.expect("dependencies");
    drift::revalidate(flows, &mut deps, std::slice::from_ref(&id)).await.expect("drift");
    let (status, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
    assert_eq!(status, 200, "{flow}");
    let broken: Vec<Issue> = serde_json::from_value(flow["broken_reasons"].clone()).unwrap();
    let (status, released) = host.call("POST", &format!("/api/v2/flows/{id}/validate"), None).await;
    assert_eq!(status, 200, "{released}");
    (broken, flow["status"].clone(), released)
}

async fn every_issue_code_through_the_route_and_the_drift_pass(backends: Backends) {
    let host = start(backends).await;
    let flows = Flows::new(host.ports.clone());
    let retarget = unique("crm-inbound");
    host.ports.topics.create_topic(&retarget, 1).await.expect("create the retarget topic");
    // A plugin declaring a node kind (`score`) for the node-kind rows.
    let url = host.url("/api/v1/plugins/score/versions/0.1.0");
    let wasm = flowhost_runtime_fixtures::bytes("score");
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload score: {}", response.text().await.unwrap());

    // The base flow is clean, also with its CRM segment retargeted to an existing topic.
    let mut clean = base();
    config(&mut clean, "seg2")["kafka_topic"] = json!(retarget);
    for body in [base(), clean] {
        let (status, report) = host.call("POST", VALIDATE_DRAFT, Some(body)).await;
        assert_eq!(status, 200, "{report}");
        assert_eq!(report, json!({"valid": true, "errors": [], "warnings": [], "issues": []}));
    }

    let mut covered = std::collections::BTreeSet::new();
    for row in rows() {
        let mut body = base();
        (row.mutate)(&mut body, &retarget);
        let (status, report) = host.call("POST", VALIDATE_DRAFT, Some(body.clone())).await;
        assert_eq!(status, 200, "{}: {report}", row.code);
        let issues = issues_of(&report);
        let mut expected: Vec<_> = row
            .expected
            .iter()
            .map(|(code, node, pointer)| (code.to_string(), node.map(str::to_owned), pointer.map(str::to_owned)))
            .collect();
        expected.sort();
        assert_eq!(triples(&issues), expected, "{}: {report:#}", row.code);
        covered.insert(row.code);

        // Each issue names its node in its message, carries the code's severity, and `valid`/`errors` follow
        // the blocking ones.
        for issue in &issues {
            assert_eq!(issue.severity, issue.code.severity(), "{issue:?}");
            if let Some(node) = &issue.node_id {
                assert!(
                    issue.message.contains(&format!("{node:?}")),
                    "{}: message names the node: {issue:?}",
                    row.code
                );
            }
        }
        let blocking: Vec<&Issue> = issues.iter().filter(|i| i.is_blocking()).collect();
        assert_eq!(report["valid"], json!(blocking.is_empty()), "{}", row.code);
        let messages: Vec<&str> = blocking.iter().map(|i| i.message.as_str()).collect();
        assert_eq!(report["errors"], json!(messages), "{}", row.code);

        // The drift pass and the released-flow route agree with draft validation on the same graph.
        let body: FlowBody = serde_json::from_value(body).unwrap();
        let (broken, status, released) = through_drift(&host, &flows, &body).await;
        let blocking: Vec<Issue> = blocking.into_iter().cloned().collect();
        assert_eq!(broken, blocking, "{}: drift's broken_reasons", row.code);
        assert_eq!(status, json!(if blocking.is_empty() { "valid" } else { "invalid" }), "{}", row.code);
        assert_eq!(issues_of(&released), issues, "{}: POST /api/v2/flows/<id>/validate", row.code);
    }
    let every: std::collections::BTreeSet<String> = flowhost_flows::Code::ALL.iter().map(|c| c.as_str()).collect();
    let covered: std::collections::BTreeSet<String> = covered.into_iter().map(str::to_owned).collect();
    assert_eq!(covered, every, "one row per issue code");
    host.stop().await;
}

async fn create(host: &TestHost, body: Value) -> String {
    let (status, created) = host.call("POST", "/api/v2/flows", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

/// A call as the named editor.
async fn call_as(host: &TestHost, user: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = host.http.request(method, host.url(path)).header("x-flowhost-user", user);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn release_versions_attempts_and_the_edit_lock(backends: Backends) {
    let host = start(backends).await;
    let mut body = base();
    body["name"] = json!("Big deposits");
    add(&mut body, &[node("lonely", "output-topic", json!({"topic": "t"}))], &[]);
    let id = create(&host, body).await;
    let (status, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
    assert_eq!((status, flow["status"].clone(), flow["name"].clone()), (200, json!("draft"), json!("Big deposits")));

    // Warnings never block a release (spec 001, validation rule 4): the release records the warnings present
    // and which of them the request acknowledged.
    let release = format!("/api/v2/flows/{id}/release");
    let (status, first) = call_as(&host, "ana", "POST", &release, Some(json!({}))).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!((first["version"].clone(), first["status"].clone()), (json!(1), json!("valid")));
    assert_eq!(first["warnings"][0]["code"], "ORPHAN_NODE", "{first}");
    assert_eq!(
        (first["acknowledged_warnings"].clone(), first["unacknowledged_warnings"].clone()),
        (json!([]), json!(["ORPHAN_NODE"])),
        "{first}"
    );
    let (status, released) =
        call_as(&host, "ana", "POST", &release, Some(json!({"acknowledged_warnings": ["ORPHAN_NODE"]}))).await;
    assert_eq!(status, 200, "{released}");
    assert_eq!((released["version"].clone(), released["status"].clone()), (json!(2), json!("valid")));
    assert_eq!(released["services"], json!(["crm", "notifications"]));
    assert_eq!(
        (released["acknowledged_warnings"].clone(), released["unacknowledged_warnings"].clone()),
        (json!(["ORPHAN_NODE"]), json!([])),
        "{released}"
    );
    let (_, listed_versions) = host.call("GET", &format!("/api/v2/flows/{id}/versions"), None).await;
    assert_eq!(listed_versions[1]["unacknowledged_warnings"], json!(["ORPHAN_NODE"]), "{listed_versions}");
    assert_eq!(listed_versions[0]["acknowledged_warnings"], json!(["ORPHAN_NODE"]), "{listed_versions}");

    // The stored version is normalized: the action's name stripped, defaults written out.
    let (status, version) = host.call("GET", &format!("/api/v2/flows/{id}/versions/2"), None).await;
    assert_eq!(status, 200, "{version}");
    let nodes = version["body"]["nodes"].as_array().unwrap();
    let by_id = |id: &str| nodes.iter().find(|n| n["id"] == id).unwrap().clone();
    assert!(by_id("push").get("name").is_none(), "action names are stripped: {}", by_id("push"));
    assert_eq!(by_id("push")["config"]["urgency"], "normal", "config_schema defaults are filled");
    assert_eq!(by_id("out")["config"]["topic"], "deposits-out", "the source's default output topic");
    assert_eq!(by_id("big")["config"]["else"], false);
    assert_eq!(version["released_by"], "ana");
    assert_eq!(version["released_by_claimed"], true, "X-Flowhost-User is what the caller says, not checked");
    assert_eq!(version["warnings"][0]["code"], "ORPHAN_NODE");
    assert_eq!(version["acknowledged_warnings"], json!(["ORPHAN_NODE"]));

    let (_, listed) = host.call("GET", "/api/v2/flows", None).await;
    let row = listed.as_array().unwrap().iter().find(|f| f["id"] == id.as_str()).unwrap().clone();
    assert_eq!((row["status"].clone(), row["broken_reasons"].clone()), (json!("valid"), json!([])));
    let (_, only_drafts) = host.call("GET", "/api/v2/flows?status=draft", None).await;
    assert!(only_drafts.as_array().unwrap().iter().all(|f| f["id"] != id.as_str()));

    let (_, attempts) = host.call("GET", &format!("/api/v2/flows/{id}/release-attempts"), None).await;
    let outcomes: Vec<&str> = attempts.as_array().unwrap().iter().map(|a| a["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["released", "released"], "{attempts}");
    assert!(attempts
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["by"] == "ana" && !a["issues"].as_array().unwrap().is_empty()));

    // The edit lock: ana holds the draft, bob is told who and until when.
    let lock = format!("/api/v2/flows/{id}/lock");
    let (status, held) = call_as(&host, "ana", "PUT", &lock, Some(json!({"ttl_seconds": 120}))).await;
    assert_eq!(status, 200, "{held}");
    let mut draft = base();
    draft["name"] = json!("Bob's version");
    let (status, locked) = call_as(&host, "bob", "PUT", &format!("/api/v2/flows/{id}"), Some(draft.clone())).await;
    assert_eq!(status, 409, "{locked}");
    assert_eq!(locked["error"]["code"], "FLOW_LOCKED");
    assert_eq!(locked["error"]["details"]["holder"], "ana");
    assert_eq!(locked["error"]["details"]["expires_at"], held["expires_at"]);
    assert_eq!(call_as(&host, "bob", "PUT", &lock, Some(json!({}))).await.0, 409);
    let (status, saved) = call_as(&host, "ana", "PUT", &format!("/api/v2/flows/{id}"), Some(draft)).await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!((saved["draft_changed"].clone(), saved["released_version"].clone()), (json!(true), json!(2)));
    assert_eq!(call_as(&host, "ana", "DELETE", &lock, None).await.0, 204);
    assert_eq!(host.call("GET", &lock, None).await.0, 404);

    // A second release of the edited draft is version 2; versions list newest first.
    let (status, second) = host.call("POST", &release, Some(json!({}))).await;
    assert_eq!((status, second["version"].clone()), (200, json!(3)), "{second}");
    let (_, versions) = host.call("GET", &format!("/api/v2/flows/{id}/versions"), None).await;
    let numbers: Vec<u64> = versions.as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![3, 2, 1]);

    // A blocking issue cannot be acknowledged away.
    let mut broken = base();
    config(&mut broken, "big")["expression"] = json!("amount > 100");
    assert_eq!(host.call("PUT", &format!("/api/v2/flows/{id}"), Some(broken)).await.0, 200);
    let (status, refused) = host.call("POST", &release, Some(json!({"acknowledged_warnings": ["CEL_INVALID"]}))).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "RELEASE_BLOCKED");
    assert_eq!(refused["error"]["details"]["valid"], json!(false));
    let (_, attempts) = host.call("GET", &format!("/api/v2/flows/{id}/release-attempts"), None).await;
    assert_eq!(attempts[0]["outcome"], "blocked", "{attempts}");

    // Deleting through the v1 route removes versions, attempts and the lock with the flow.
    assert_eq!(call_as(&host, "ana", "PUT", &lock, Some(json!({}))).await.0, 200);
    assert_eq!(host.call("DELETE", &format!("/api/v1/flows/{id}"), None).await.0, 204);
    assert_eq!(host.call("GET", &format!("/api/v2/flows/{id}"), None).await.0, 404);
    for collection in [FLOW_VERSIONS, "flow_release_attempts", "flow_service_refs"] {
        let left = host.ports.documents.find(collection, "flow_id", &json!(id)).await.unwrap();
        assert!(left.is_empty(), "{collection} keeps {left:?}");
    }
    assert!(host.ports.documents.get("flow_edit_locks", &id).await.unwrap().is_none());
    host.stop().await;
}

/// Waits until the flow's `status` is `want`.
async fn wait_for_status(host: &TestHost, id: &str, want: &str) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
        if flow["status"] == want {
            return flow;
        }
        assert!(tokio::time::Instant::now() < until, "flow {id} never became {want}: {flow}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_registration_breaks_a_released_flow_and_the_next_fixes_it(backends: Backends) {
    let host = start(backends).await;
    let mut broadcasts = host.ports.subjects.subscribe("triggers.v2.service.notifications.flows").await.unwrap();
    let id = create(&host, base()).await;
    let (status, released) = host.call("POST", &format!("/api/v2/flows/{id}/release"), Some(json!({}))).await;
    assert_eq!(status, 200, "{released}");

    // The release tells the service which released flows target it.
    let message = tokio::time::timeout(Duration::from_secs(10), broadcasts.next()).await.unwrap().unwrap();
    let broadcast: Value = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(broadcast["service"], "notifications");
    let targeting = &broadcast["flows"][0];
    assert_eq!((targeting["flow_id"].as_str(), targeting["status"].as_str()), (Some(id.as_str()), Some("valid")));
    assert_eq!(
        targeting["segments"],
        json!([{"node_id": "seg", "transport": "nats",
        "actions": [{"node_id": "push", "action_ref": "send_webpush"}]}])
    );

    // A new version of the service without send_webpush: the released flow turns invalid.
    assert_eq!(host.call("POST", REGISTER, Some(notifications("1.1.0", false))).await.0, 200);
    let flow = wait_for_status(&host, &id, "invalid").await;
    let reasons = flow["broken_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{flow}");
    assert_eq!(
        (reasons[0]["code"].as_str(), reasons[0]["node_id"].as_str()),
        (Some("ACTION_NOT_DECLARED"), Some("push"))
    );
    let (_, listed) = host.call("GET", "/api/v2/flows?status=invalid", None).await;
    let row = listed.as_array().unwrap().iter().find(|f| f["id"] == id.as_str()).cloned().expect("listed invalid");
    assert_eq!(row["broken_reasons"], flow["broken_reasons"]);
    // The released-flow route gives the same answer, and draft validation of the released graph too.
    let (_, report) = host.call("POST", &format!("/api/v2/flows/{id}/validate"), None).await;
    assert_eq!((report["valid"].clone(), report["issues"].clone()), (json!(false), flow["broken_reasons"].clone()));
    let (_, version) = host.call("GET", &format!("/api/v2/flows/{id}/versions/1"), None).await;
    let (_, draft_report) = host.call("POST", VALIDATE_DRAFT, Some(version["body"].clone())).await;
    assert_eq!(draft_report, report);
    let broadcast = next_broadcast_with_status(&mut broadcasts, "invalid").await;
    assert_eq!(broadcast["flows"][0]["flow_id"], id.as_str());

    // A heartbeat of the same version changes nothing; the next version with the action fixes the flow.
    assert_eq!(host.call("POST", REGISTER, Some(notifications("1.1.0", false))).await.0, 200);
    assert_eq!(host.call("POST", REGISTER, Some(notifications("1.2.0", true))).await.0, 200);
    let flow = wait_for_status(&host, &id, "valid").await;
    assert_eq!(flow["broken_reasons"], json!([]));
    next_broadcast_with_status(&mut broadcasts, "valid").await;

    // Turning the flow off tells the service too; the broadcast route answers the same state.
    let (status, _) = host.call("PUT", &format!("/api/v2/flows/{id}/enabled"), Some(json!({"enabled": false}))).await;
    assert_eq!(status, 200);
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let message = tokio::time::timeout_at(until, broadcasts.next()).await.expect("a broadcast").unwrap();
        let broadcast: Value = serde_json::from_slice(&message.payload).unwrap();
        if broadcast["flows"][0]["enabled"] == false {
            break;
        }
    }
    let (_, current) = host.call("GET", "/api/v2/services/notifications/flows", None).await;
    assert_eq!(
        (current["flows"][0]["enabled"].clone(), current["flows"][0]["status"].clone()),
        (json!(false), json!("valid"))
    );
    host.stop().await;
}

async fn next_broadcast_with_status(stream: &mut flowhost_core::ports::SubjectStream, status: &str) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let message = tokio::time::timeout(left, stream.next()).await.expect("a broadcast").expect("stream open");
        let broadcast: Value = serde_json::from_slice(&message.payload).unwrap();
        if broadcast["flows"][0]["status"] == status {
            return broadcast;
        }
    }
}

async fn bad_requests_answer_the_v2_envelope(backends: Backends) {
    let host = start(backends).await;
    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        ("POST", VALIDATE_DRAFT.into(), Some(json!({"nodes": "many"})), 400, "INVALID_BODY"),
        ("POST", VALIDATE_DRAFT.into(), Some(json!({"nodes": [{"id": "a"}], "edges": []})), 400, "INVALID_BODY"),
        (
            "POST",
            "/api/v2/flows".into(),
            Some(json!({"id": "has space", "nodes": [], "edges": []})),
            400,
            "INVALID_BODY",
        ),
        ("GET", "/api/v2/flows/nope".into(), None, 404, "FLOW_NOT_FOUND"),
        ("GET", "/api/v2/flows?status=sleeping".into(), None, 400, "INVALID_QUERY"),
        ("POST", "/api/v2/flows/nope/validate".into(), None, 404, "FLOW_NOT_FOUND"),
        ("POST", "/api/v2/flows/nope/release".into(), Some(json!({})), 404, "FLOW_NOT_FOUND"),
        ("GET", "/api/v2/flows/nope/versions/x".into(), None, 400, "INVALID_PATH"),
    ];
    for (method, path, body, want, code) in cases {
        let (status, answer) = host.call(method, &path, body).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (want, Some(code)), "{method} {path}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
    }
    // The field of a malformed body is named.
    let (_, answer) =
        host.call("POST", VALIDATE_DRAFT, Some(json!({"nodes": [{"id": "a", "kind": 3}], "edges": []}))).await;
    assert_eq!(answer["error"]["details"]["field"], "nodes[0].kind", "{answer}");
    // A draft that was never released has nothing to validate as released.
    let id = create(&host, base()).await;
    let (status, answer) = host.call("POST", &format!("/api/v2/flows/{id}/validate"), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("FLOW_NOT_RELEASED")), "{answer}");
    // A v1 flow is not a v2 flow.
    let v1 = json!({"name": "v1", "source": {"node_id": "s", "event_type": "deposit", "source_topic": "deposits"},
        "conditions": [], "outputs": [], "edges": []});
    let (status, created) = host.call("POST", "/api/v1/flows", Some(v1)).await;
    assert_eq!(status, 201, "{created}");
    let (status, answer) = host.call("GET", &format!("/api/v2/flows/{}", created["id"].as_str().unwrap()), None).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("NOT_A_V2_FLOW")), "{answer}");
    // The v1 routes list a v2 flow and delete it, but do not edit, validate or compile it.
    let (status, listed) = host.call("GET", "/api/v1/flows", None).await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed.as_array().unwrap().iter().any(|f| f["id"] == id.as_str() && f["status"] == "draft"), "{listed}");
    for (method, path) in [("PUT", format!("/api/v1/flows/{id}")), ("POST", format!("/api/v1/flows/{id}/compile"))] {
        let (status, answer) = host.call(method, &path, Some(json!({"name": "overwritten"}))).await;
        assert_eq!(status, 409, "{method} {path}: {answer}");
        assert!(answer["error"].as_str().unwrap().contains("/api/v2/flows"), "{answer}");
    }
    let (status, _) = host.call("PUT", &format!("/api/v1/flows/{id}/enabled"), Some(json!({"enabled": false}))).await;
    assert_eq!(status, 200);
    let (_, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
    assert_eq!((flow["enabled"].clone(), flow["draft"]["nodes"].as_array().map(Vec::len)), (json!(false), Some(12)));
    // The body schema is served and describes every node kind.
    let (status, schema) = host.call("GET", "/api/v2/flows/schema", None).await;
    assert_eq!(status, 200);
    assert_eq!(schema["properties"]["nodes"]["items"]["properties"]["kind"]["enum"].as_array().unwrap().len(), 9);
    host.stop().await;
}

#[test]
fn the_base_flow_matches_the_published_schema() {
    let validator = jsonschema::validator_for(&flowhost_flows::body_schema()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&base()).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let _: FlowRecord; // The record type is what GET /api/v2/flows/<id> answers.
}
