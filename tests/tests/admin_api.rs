//! The administration API v1 as an integrator sees it: every route with the statuses, bodies and `{ error }`
//! envelope of spec 001, on the embedded backends and on MongoDB/Kafka/NATS/Redis.

use flowhost_tests::{on_both_backends, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(
    health_and_metrics,
    rules_crud,
    rule_validation_errors,
    tenant_overrides,
    event_sources,
    schemas,
    expression_validation,
    flows_compile_lifecycle,
    errors_use_the_envelope,
);

fn assert_envelope(status: u16, body: &Value, expected: u16, context: &str) {
    assert_eq!(status, expected, "{context}: {body}");
    assert!(body["error"].as_str().is_some_and(|m| !m.is_empty()), "{context}: no error message in {body}");
}

fn deposit_rule(id: Option<&str>, expression: &str) -> Value {
    let mut rule = json!({
        "name": "Big deposits",
        "source": {"type": "kafka", "topic": "deposits"},
        "conditions": {"event_type": "deposit", "expression": expression},
        "output_topic": "big-deposits"
    });
    if let Some(id) = id {
        rule["id"] = json!(id);
    }
    rule
}

async fn put_deposit_schema(host: &TestHost) {
    let (status, _) = host
        .call(
            "PUT",
            "/api/v1/schemas/deposit",
            Some(json!({"fields": [
                {"name": "amount", "type": "double"},
                {"name": "count", "type": "int"},
                {"name": "game", "type": "string"},
                {"name": "vip", "type": "bool"}
            ]})),
        )
        .await;
    assert_eq!(status, 200);
}

async fn health_and_metrics(backends: Backends) {
    let host = TestHost::start(backends).await;
    assert_eq!(host.call("GET", "/health", None).await, (200, json!({"status": "ok"})));
    let text = host.http.get(host.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for metric in [
        "flowhost_engine_events_consumed_total",
        "flowhost_engine_events_matched_total",
        "flowhost_engine_events_published_total",
        "flowhost_engine_rule_cache_reloads_total",
    ] {
        assert!(text.contains(metric), "{metric} missing from /metrics");
    }
    host.stop().await;
}

async fn rules_crud(backends: Backends) {
    let host = TestHost::start(backends).await;
    put_deposit_schema(&host).await;

    let (status, created) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(None, "amount > 100.0"))).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 36, "a UUID is generated: {id}");
    assert_eq!(created["enabled"], true);

    let (status, _) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(Some("r1"), "amount > 1.0"))).await;
    assert_eq!(status, 201);
    let (status, body) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(Some("r1"), "amount > 2.0"))).await;
    assert_envelope(status, &body, 409, "duplicate id");

    let (status, list) = host.call("GET", "/api/v1/triggers", None).await;
    assert_eq!(status, 200);
    let ids: Vec<&str> = list.as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"r1") && ids.contains(&id.as_str()), "{ids:?}");

    let (status, body) = host.call("GET", "/api/v1/triggers/r1", None).await;
    assert_eq!((status, body["conditions"]["expression"].as_str()), (200, Some("amount > 1.0")));
    let (status, body) = host.call("GET", "/api/v1/triggers/nope", None).await;
    assert_envelope(status, &body, 404, "unknown rule");

    // The path id wins over the body id.
    let (status, body) = host.call("PUT", "/api/v1/triggers/r1", Some(deposit_rule(Some("other"), "count >= 3"))).await;
    assert_eq!((status, body["id"].as_str()), (200, Some("r1")), "{body}");
    let (_, body) = host.call("GET", "/api/v1/triggers/r1", None).await;
    assert_eq!(body["conditions"]["expression"], "count >= 3");
    let (status, body) = host.call("GET", "/api/v1/triggers/other", None).await;
    assert_envelope(status, &body, 404, "body id must not create a rule");
    let (status, body) = host.call("PUT", "/api/v1/triggers/nope", Some(deposit_rule(None, "true"))).await;
    assert_envelope(status, &body, 404, "update of unknown rule");

    let (status, body) = host.call("PUT", "/api/v1/triggers/r1/enabled", Some(json!({"enabled": false}))).await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));
    let (_, body) = host.call("GET", "/api/v1/triggers/r1", None).await;
    assert_eq!(body["enabled"], false);
    let (status, body) = host.call("PUT", "/api/v1/triggers/nope/enabled", Some(json!({"enabled": true}))).await;
    assert_envelope(status, &body, 404, "enable unknown rule");
    let (status, body) = host.call("PUT", "/api/v1/triggers/r1/enabled", Some(json!({"enabled": "no"}))).await;
    assert_envelope(status, &body, 400, "enabled must be a boolean");

    let (status, body) = host.call("DELETE", "/api/v1/triggers/r1", None).await;
    assert_eq!((status, body), (204, Value::Null));
    let (status, body) = host.call("DELETE", "/api/v1/triggers/r1", None).await;
    assert_envelope(status, &body, 404, "second delete");
    host.stop().await;
}

async fn rule_validation_errors(backends: Backends) {
    let host = TestHost::start(backends).await;
    put_deposit_schema(&host).await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut rule = deposit_rule(None, "amount > 100.0");
        f(&mut rule);
        rule
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("syntax", deposit_rule(None, "amount >"), "syntax"),
        ("unknown field", deposit_rule(None, "balance > 1.0"), "balance"),
        ("type mismatch", deposit_rule(None, "game == 1"), "type mismatch"),
        ("int literal vs double", deposit_rule(None, "amount > 100"), "100.0"),
        ("non-boolean", deposit_rule(None, "count + 1"), "bool"),
        ("empty expression", deposit_rule(None, ""), "empty"),
        ("unknown source type", with(&|r| r["source"]["type"] = json!("rabbitmq")), "rabbitmq"),
        ("missing conditions", with(&|r| drop(r.as_object_mut().unwrap().remove("conditions"))), "conditions"),
        ("wrong type", with(&|r| r["enabled"] = json!("yes")), "enabled"),
        ("bad output topic", with(&|r| r["output_topic"] = json!("has space")), "output_topic"),
        ("empty event type", with(&|r| r["conditions"]["event_type"] = json!("")), "event_type"),
        (
            "unknown mapping mode",
            with(&|r| r["output_mapping"] = json!({"mode": "rename", "fields": [{"source": "a", "target": "b"}]})),
            "rename",
        ),
        (
            "empty mapping",
            with(&|r| r["output_mapping"] = json!({"mode": "select", "fields": []})),
            "invalid output mapping",
        ),
        (
            "duplicate mapping target",
            with(&|r| {
                r["output_mapping"] = json!({"mode": "select", "fields": [
                    {"source": "a", "target": "x"}, {"source": "b", "target": "x"}]})
            }),
            "more than once",
        ),
    ];
    for (name, body, needle) in cases {
        for (method, path) in [("POST", "/api/v1/triggers"), ("PUT", "/api/v1/triggers/existing")] {
            if method == "PUT" {
                host.call("POST", "/api/v1/triggers", Some(deposit_rule(Some("existing"), "true"))).await;
            }
            let (status, response) = host.call(method, path, Some(body.clone())).await;
            assert_envelope(status, &response, 400, name);
            let message = response["error"].as_str().unwrap();
            assert!(message.contains(needle), "{name}: {message:?} lacks {needle:?}");
        }
    }
    let (status, body) = host.call_raw("POST", "/api/v1/triggers", b"{not json".to_vec()).await;
    assert_envelope(status, &body, 400, "malformed JSON");

    // Without a schema for the event type, only syntax is checked.
    let mut rule = deposit_rule(None, "level >= 3");
    rule["conditions"]["event_type"] = json!("login");
    assert_eq!(host.call("POST", "/api/v1/triggers", Some(rule)).await.0, 201);
    host.stop().await;
}

async fn tenant_overrides(backends: Backends) {
    let host = TestHost::start(backends).await;
    host.call("POST", "/api/v1/triggers", Some(deposit_rule(Some("r"), "true"))).await;
    let ok = json!({"status": "ok"});
    assert_eq!(
        host.call("PUT", "/api/v1/triggers/r/tenants/t1", Some(json!({"enabled": false}))).await,
        (200, ok.clone())
    );
    // POST is an alias; the path tenant wins over the body's.
    assert_eq!(
        host.call("POST", "/api/v1/triggers/r/tenants/t2", Some(json!({"tenant_id": "zzz", "enabled": true}))).await,
        (200, ok.clone())
    );
    // Omitting `enabled` keeps the prior value.
    assert_eq!(host.call("PUT", "/api/v1/triggers/r/tenants/t1", Some(json!({}))).await, (200, ok.clone()));
    let (status, list) = host.call("GET", "/api/v1/triggers/r/tenants", None).await;
    assert_eq!(status, 200);
    let mut list = list.as_array().unwrap().clone();
    list.sort_by_key(|o| o["tenant_id"].as_str().unwrap().to_owned());
    assert_eq!(list, vec![json!({"tenant_id": "t1", "enabled": false}), json!({"tenant_id": "t2", "enabled": true})]);
    let (status, body) = host.call("PUT", "/api/v1/triggers/nope/tenants/t1", Some(json!({"enabled": true}))).await;
    assert_envelope(status, &body, 404, "override on unknown rule");
    let (status, body) = host.call("PUT", "/api/v1/triggers/r/tenants/t1", Some(json!({"enabled": 1}))).await;
    assert_envelope(status, &body, 400, "enabled must be a boolean");
    // Deleting the rule removes its overrides.
    host.call("DELETE", "/api/v1/triggers/r", None).await;
    host.call("POST", "/api/v1/triggers", Some(deposit_rule(Some("r"), "true"))).await;
    assert_eq!(host.call("GET", "/api/v1/triggers/r/tenants", None).await, (200, json!([])));
    host.stop().await;
}

async fn event_sources(backends: Backends) {
    let host = TestHost::start(backends).await;
    for body in [json!({}), json!({"default_output_topic": "   "}), json!({"default_output_topic": 5})] {
        let (status, response) = host.call("PUT", "/api/v1/event-sources/deposits", Some(body.clone())).await;
        assert_envelope(status, &response, 400, &body.to_string());
    }
    let (status, body) = host
        .call(
            "PUT",
            "/api/v1/event-sources/deposits",
            Some(json!({"default_output_topic": " deposit-out ", "description": "d"})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"source_topic": "deposits", "default_output_topic": "deposit-out", "description": "d"}));
    assert_eq!(host.call("GET", "/api/v1/event-sources/deposits", None).await, (200, body.clone()));
    assert_eq!(host.call("GET", "/api/v1/event-sources", None).await, (200, json!([body])));
    let (status, response) = host.call("GET", "/api/v1/event-sources/none", None).await;
    assert_envelope(status, &response, 404, "unknown source");
    host.stop().await;
}

async fn schemas(backends: Backends) {
    let host = TestHost::start(backends).await;
    let bad = [
        json!({"fields": []}),
        json!({}),
        json!({"fields": [{"name": "a", "type": "float"}]}),
        json!({"fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "bool"}]}),
        json!({"fields": [{"name": "a b", "type": "int"}]}),
    ];
    for body in bad {
        let (status, response) = host.call("PUT", "/api/v1/schemas/login", Some(body.clone())).await;
        assert_envelope(status, &response, 400, &body.to_string());
    }
    let schema = json!({"event_type": "login", "fields": [{"name": "level", "type": "int"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/login", Some(schema.clone())).await, (200, schema.clone()));
    assert_eq!(host.call("GET", "/api/v1/schemas/login", None).await, (200, schema.clone()));
    assert_eq!(host.call("GET", "/api/v1/schemas", None).await, (200, json!([schema])));
    assert_eq!(host.call("DELETE", "/api/v1/schemas/login", None).await, (200, json!({"status": "deleted"})));
    let (status, body) = host.call("GET", "/api/v1/schemas/login", None).await;
    assert_envelope(status, &body, 404, "deleted schema");
    let (status, body) = host.call("DELETE", "/api/v1/schemas/login", None).await;
    assert_envelope(status, &body, 404, "second delete");
    host.stop().await;
}

async fn expression_validation(backends: Backends) {
    let host = TestHost::start(backends).await;
    put_deposit_schema(&host).await;
    let path = "/api/v1/validate/expression";
    let (status, body) = host.call("POST", path, Some(json!({"expression": "true"}))).await;
    assert_envelope(status, &body, 400, "missing event_type");
    let (status, body) = host.call("POST", path, Some(json!({"event_type": "nope", "expression": "true"}))).await;
    assert_envelope(status, &body, 400, "event type without schema");
    assert_eq!(
        host.call("POST", path, Some(json!({"event_type": "deposit", "expression": "amount > 1.0 && vip"}))).await,
        (200, json!({"valid": true, "errors": []}))
    );
    let (status, body) =
        host.call("POST", path, Some(json!({"event_type": "deposit", "expression": "count * 2"}))).await;
    assert_eq!((status, body["valid"].clone()), (200, json!(false)));
    assert!(body["errors"][0].as_str().unwrap().contains("bool"), "{body}");

    // The extension libraries are in the type checker: their use validates, their misuse is refused at save time.
    let extended = "game.lowerAscii() in ['slots', 'poker'] && math.greatest(count, 2) > 2 \
                    && sets.contains(['a', 'b'], [game]) && optional.of(amount).orValue(0.0) > 1.0";
    assert_eq!(
        host.call("POST", path, Some(json!({"event_type": "deposit", "expression": extended}))).await,
        (200, json!({"valid": true, "errors": []}))
    );
    let (status, body) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(None, extended))).await;
    assert_eq!(status, 201, "{body}");
    for misuse in ["game.lowerAscii(1) == 'x'", "math.greatest(game, 1) > 0", "lists.range('3').size() > 0"] {
        let (status, body) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(None, misuse))).await;
        assert_envelope(status, &body, 400, misuse);
        assert!(body["error"].as_str().unwrap().contains("type mismatch"), "{misuse}: {body}");
    }
    // The environment's limits: a source nested past them is refused with a message, never a crash.
    let nested = format!("{}vip{}", "(".repeat(5000), ")".repeat(5000));
    let (status, body) = host.call("POST", path, Some(json!({"event_type": "deposit", "expression": nested}))).await;
    assert_eq!((status, body["valid"].clone()), (200, json!(false)));
    assert!(body["errors"][0].as_str().unwrap().contains("nests"), "{body}");
    let chain = vec!["count"; 200].join(" + ") + " > 0";
    let (status, body) = host.call("POST", "/api/v1/triggers", Some(deposit_rule(None, &chain))).await;
    assert_envelope(status, &body, 400, "a 200-term chain");

    // The catalog Studio completes from is the same environment.
    let (status, catalog) = host.call("GET", "/api/v2/cel/functions", None).await;
    assert_eq!(status, 200);
    let names: Vec<&str> =
        catalog["functions"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    for name in [
        "size",
        "lowerAscii",
        "format",
        "math.greatest",
        "sets.contains",
        "lists.range",
        "base64.encode",
        "all",
        "cidr",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert_eq!(catalog["limits"]["max_depth"], flowhost_cel::MAX_DEPTH);
    host.stop().await;
}

fn branching_flow() -> Value {
    json!({
        "id": "f1",
        "name": "VIP routing",
        "source": {"node_id": "src", "event_type": "deposit", "source_topic": "deposits"},
        "conditions": [
            {"node_id": "big", "label": "Big", "expression": "amount > 100.0"},
            {"node_id": "rest", "label": "Else", "is_else": true}
        ],
        "outputs": [
            {"node_id": "vip", "label": "VIP", "output_topic": "vip"},
            {"node_id": "std", "label": "Standard", "output_topic": "standard"}
        ],
        "edges": [
            {"id": "e1", "from": "src", "to": "big"},
            {"id": "e2", "from": "src", "to": "rest"},
            {"id": "e3", "from": "big", "to": "vip"},
            {"id": "e4", "from": "rest", "to": "std"}
        ]
    })
}

async fn flows_compile_lifecycle(backends: Backends) {
    let host = TestHost::start(backends).await;
    put_deposit_schema(&host).await;

    let (status, created) = host.call("POST", "/api/v1/flows", Some(json!({"name": "empty"}))).await;
    assert_eq!((status, created["status"].as_str()), (201, Some("draft")), "{created}");
    assert_eq!(created["id"].as_str().unwrap().len(), 36);
    let (status, body) =
        host.call("POST", &format!("/api/v1/flows/{}/validate", created["id"].as_str().unwrap()), None).await;
    assert_eq!((status, body), (200, json!({"valid": false, "errors": ["flow has no source node"]})));

    let (status, _) = host.call("POST", "/api/v1/flows", Some(branching_flow())).await;
    assert_eq!(status, 201);
    let (status, body) = host.call("POST", "/api/v1/flows", Some(branching_flow())).await;
    assert_envelope(status, &body, 409, "duplicate flow id");
    assert_eq!(host.call("POST", "/api/v1/flows/f1/validate", None).await, (200, json!({"valid": true, "errors": []})));

    let compiled = json!({"status": "compiled", "rule_ids": ["flow_f1_big_vip", "flow_f1_rest_std"], "rule_count": 2});
    assert_eq!(host.call("POST", "/api/v1/flows/f1/compile", None).await, (200, compiled.clone()));
    assert_eq!(host.call("POST", "/api/v1/flows/f1/compile", None).await, (200, compiled), "idempotent");
    let (_, flow) = host.call("GET", "/api/v1/flows/f1", None).await;
    assert_eq!(flow["status"], "active");
    let (_, rule) = host.call("GET", "/api/v1/triggers/flow_f1_rest_std", None).await;
    assert_eq!(rule["conditions"]["expression"], "(!(amount > 100.0))");
    assert_eq!(rule["flow_id"], "f1");

    // Rules managed by a flow are edited through the flow.
    let (status, body) = host.call("PUT", "/api/v1/triggers/flow_f1_big_vip", Some(deposit_rule(None, "true"))).await;
    assert_envelope(status, &body, 409, "update managed rule");
    let (status, body) = host.call("DELETE", "/api/v1/triggers/flow_f1_big_vip", None).await;
    assert_envelope(status, &body, 409, "delete managed rule");

    // The enabled toggle propagates.
    let (status, _) = host.call("PUT", "/api/v1/flows/f1/enabled", Some(json!({"enabled": false}))).await;
    assert_eq!(status, 200);
    for id in ["flow_f1_big_vip", "flow_f1_rest_std"] {
        let (_, rule) = host.call("GET", &format!("/api/v1/triggers/{id}"), None).await;
        assert_eq!(rule["enabled"], false, "{id}");
    }

    // A recompile after an edit removes the stale rule; the path id wins on PUT.
    let mut edited = branching_flow();
    edited["id"] = json!("ignored");
    edited["conditions"] = json!([{"node_id": "big", "label": "Big", "expression": "amount > 500.0"}]);
    edited["outputs"] = json!([{"node_id": "vip", "label": "VIP", "output_topic": "vip"}]);
    edited["edges"] = json!([{"id": "e1", "from": "src", "to": "big"}, {"id": "e3", "from": "big", "to": "vip"}]);
    let (status, body) = host.call("PUT", "/api/v1/flows/f1", Some(edited)).await;
    assert_eq!((status, body["id"].as_str()), (200, Some("f1")));
    assert_eq!(
        host.call("POST", "/api/v1/flows/f1/compile", None).await,
        (200, json!({"status": "compiled", "rule_ids": ["flow_f1_big_vip"], "rule_count": 1}))
    );
    let (status, _) = host.call("GET", "/api/v1/triggers/flow_f1_rest_std", None).await;
    assert_eq!(status, 404, "stale compiled rule removed");

    // Compile failures: structure and CEL against the schema, naming the node.
    let mut broken = branching_flow();
    broken["id"] = json!("f2");
    broken["outputs"][1]["output_topic"] = json!("");
    host.call("POST", "/api/v1/flows", Some(broken)).await;
    let (status, body) = host.call("POST", "/api/v1/flows/f2/compile", None).await;
    assert_envelope(status, &body, 400, "structural failure");
    assert!(body["error"].as_str().unwrap().contains("output node \"std\": missing output_topic"), "{body}");
    let mut bad_cel = branching_flow();
    bad_cel["id"] = json!("f3");
    bad_cel["conditions"][0]["expression"] = json!("balance > 1.0");
    host.call("POST", "/api/v1/flows", Some(bad_cel)).await;
    let (status, body) = host.call("POST", "/api/v1/flows/f3/compile", None).await;
    assert_envelope(status, &body, 400, "CEL failure");
    assert!(body["error"].as_str().unwrap().contains("condition node \"big\""), "{body}");
    let (_, flow) = host.call("GET", "/api/v1/flows/f3", None).await;
    assert_eq!(flow["status"], "draft", "a failed compile leaves the status unchanged");

    for (method, path) in [
        ("GET", "/api/v1/flows/nope"),
        ("POST", "/api/v1/flows/nope/compile"),
        ("POST", "/api/v1/flows/nope/validate"),
        ("DELETE", "/api/v1/flows/nope"),
    ] {
        let (status, body) = host.call(method, path, None).await;
        assert_envelope(status, &body, 404, path);
    }

    // Delete cascades to compiled rules.
    assert_eq!(host.call("DELETE", "/api/v1/flows/f1", None).await.0, 204);
    assert_eq!(host.call("GET", "/api/v1/triggers/flow_f1_big_vip", None).await.0, 404);
    let (_, flows) = host.call("GET", "/api/v1/flows", None).await;
    let ids: Vec<&str> = flows.as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&"f1") && ids.contains(&"f2"), "{ids:?}");
    host.stop().await;
}

async fn errors_use_the_envelope(backends: Backends) {
    let host = TestHost::start(backends).await;
    let (status, body) = host.call("GET", "/api/v1/nothing-here", None).await;
    assert_envelope(status, &body, 404, "unknown route");
    let (status, body) = host.call("PATCH", "/api/v1/triggers", None).await;
    assert_envelope(status, &body, 405, "wrong method");
    let oversized = format!("{{\"name\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let (status, body) = host.call_raw("POST", "/api/v1/flows", oversized.into_bytes()).await;
    assert_envelope(status, &body, 413, "oversized body");
    host.stop().await;
}
