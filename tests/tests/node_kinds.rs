//! Plugin node kinds in v2 flows, as a plugin author and a flow author see them: the `score` fixture (a node
//! kind that drops low scores and adds a `score` field) uploaded and listed by `GET /api/v2/node-kinds`; a flow
//! placing it validated against the declaration (its `config_schema`, the plugin and kind named, the field it
//! adds type-checked downstream); released and run, in batches, with the invocation context; a new version of
//! the plugin changing what released flows run without a restart; an answer outside the declaration dead-
//! lettered; and a version that drops the kind drifting the flow to `invalid`. Every case runs on the embedded
//! backends and on the real servers.

use std::time::Duration;

use flowhost_tests::{eventually, on_both_backends, unique, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(
    a_declared_node_kind_is_listed_and_checked_by_validation,
    a_plugin_node_kind_runs_in_released_flows_swaps_and_drifts
);

async fn start(backends: Backends) -> TestHost {
    let host = TestHost::start_configured(backends, None, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50
    })
    .await;
    let schema = json!({"fields": [
        {"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}
    ]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    host
}

/// Uploads (and so activates) version `version` of the `score` plugin from fixture `fixture`.
async fn upload_score(host: &TestHost, fixture: &str, version: &str) {
    let url = host.url(&format!("/api/v1/plugins/score/versions/{version}"));
    let wasm = flowhost_runtime_fixtures::bytes(fixture);
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload score {version}: {}", response.text().await.unwrap());
}

fn node(id: &str, kind: &str, config: Value) -> Value {
    json!({"id": id, "kind": kind, "config": config})
}

fn edge(from: &str, to: &str) -> Value {
    json!({"from": from, "to": to})
}

/// source -> `score` node configured with `score_config` -> condition `expression` -> output `out`.
fn scored_flow(source: &str, out: &str, score_config: Value, expression: &str) -> Value {
    let mut config = json!({"plugin": "score", "kind": "score"});
    config.as_object_mut().unwrap().extend(score_config.as_object().unwrap().clone());
    json!({
        "nodes": [
            node("src", "source", json!({"event_type": "deposit", "topic": source})),
            node("score", "node-kind", config),
            node("high", "condition", json!({"expression": expression})),
            node("out", "output-topic", json!({"topic": out})),
        ],
        "edges": [edge("src", "score"), edge("score", "high"), edge("high", "out")]
    })
}

/// The codes and pointers of a validation report's issues.
async fn issues(host: &TestHost, body: Value) -> Vec<(String, String)> {
    let (status, report) = host.call("POST", "/api/v2/flows/validate-draft", Some(body)).await;
    assert_eq!(status, 200, "{report}");
    let issues = report["issues"].as_array().unwrap();
    issues
        .iter()
        .map(|i| (i["code"].as_str().unwrap().to_owned(), i["pointer"].as_str().unwrap_or("").to_owned()))
        .collect()
}

async fn a_declared_node_kind_is_listed_and_checked_by_validation(backends: Backends) {
    let host = start(backends).await;
    let (status, kinds) = host.call("GET", "/api/v2/node-kinds", None).await;
    assert_eq!((status, kinds.clone()), (200, json!([])), "nothing declares a node kind yet");
    let flow = scored_flow("deposits", "out", json!({"min": 10}), "score >= 10.0");
    assert_eq!(
        issues(&host, flow.clone()).await,
        vec![("NODE_KIND_NOT_DECLARED".into(), "/config/plugin".into())],
        "one issue: what an undeclared kind adds is unknown, so the nodes after it are not type-checked"
    );

    upload_score(&host, "score", "0.1.0").await;
    let (status, kinds) = host.call("GET", "/api/v2/node-kinds", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        kinds,
        json!([{
            "plugin": "score", "service": "score", "version": "0.1.0", "name": "score",
            "description": "Scores a deposit; drops low scores",
            "config_schema": {"type": "object", "additionalProperties": false, "required": ["min"],
                              "properties": {"field": {"type": "string"}, "min": {"type": "number"}}},
            "answers": ["continue", "stop"], "adds_fields": {"score": "double"}
        }])
    );
    assert_eq!(issues(&host, flow.clone()).await, vec![], "placed, configured, and `score` reaches the condition");

    let mut wrong_type = flow.clone();
    wrong_type["nodes"][1]["config"]["min"] = json!("ten");
    wrong_type["nodes"][1]["config"]["extra"] = json!(true);
    let found = issues(&host, wrong_type).await;
    assert!(found.contains(&("NODE_KIND_CONFIG_INVALID".into(), "/config/min".into())), "{found:?}");
    assert!(found.iter().filter(|(code, _)| code == "NODE_KIND_CONFIG_INVALID").count() == 2, "{found:?}");

    let mut placeholder = flow.clone();
    placeholder["nodes"][1]["config"]["field"] = json!("{{wager}}");
    assert_eq!(
        issues(&host, placeholder).await,
        vec![("PLACEHOLDER_UNKNOWN_FIELD".into(), "/config/field".into())],
        "placeholders follow the action rules"
    );
    let mut typed_placeholder = flow.clone();
    typed_placeholder["nodes"][1]["config"]["min"] = json!("{{player_id}}");
    assert_eq!(
        issues(&host, typed_placeholder).await,
        vec![("PLACEHOLDER_TYPE_MISMATCH".into(), "/config/min".into())],
        "a whole-value placeholder takes its field's type"
    );

    let mut unknown_kind = flow.clone();
    unknown_kind["nodes"][1]["config"]["kind"] = json!("rank");
    assert_eq!(issues(&host, unknown_kind).await, vec![("NODE_KIND_NOT_DECLARED".into(), "/config/kind".into())]);
    let mut no_kind = flow.clone();
    no_kind["nodes"][1]["config"].as_object_mut().unwrap().remove("kind");
    assert_eq!(issues(&host, no_kind).await, vec![("NODE_KIND_REF_MISSING".into(), "/config/kind".into())]);

    let without_score = scored_flow("deposits", "out", json!({"min": 10}), "bonus >= 10.0");
    let found = issues(&host, without_score).await;
    assert_eq!(found, vec![("CEL_INVALID".into(), "/config/expression".into())], "only declared fields are added");
    host.stop().await;
}

async fn a_plugin_node_kind_runs_in_released_flows_swaps_and_drifts(backends: Backends) {
    let host = start(backends).await;
    upload_score(&host, "score", "0.1.0").await;
    let (source, out) = (unique("deposits"), unique("scored"));
    let id = host.release_flow(scored_flow(&source, &out, json!({"min": 10}), "score >= 10.0")).await;

    // 0.1.0 scores amount / 10: 250 goes on with score 25; 50 (score 5) stops at the node.
    let deposit = |amount: f64, player: &str| json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": amount, "player_id": player});
    host.publish(&source, &[deposit(250.0, "high-roller"), deposit(50.0, "small")]).await;
    let outputs = host.read(&out, 1, Duration::from_secs(60)).await;
    let scored: Value = serde_json::from_slice(&outputs[0].value).unwrap();
    assert_eq!((scored["score"].as_f64(), scored["player_id"].as_str()), (Some(25.0), Some("high-roller")), "{scored}");
    let runs = eventually("both runs completed", 30, || async {
        let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs?page_size=50"), None).await;
        let runs = page["runs"].as_array().cloned().unwrap_or_default();
        (runs.iter().filter(|r| r["status"] == "completed").count() == 2).then_some(runs)
    })
    .await;
    assert!(
        runs.iter().any(|r| r["path"]
            == json!([{"node_id": "src", "outcome": "passed"}, {"node_id": "score", "outcome": "not_matched"}])),
        "the low score stops at the node: {runs:#?}"
    );
    let run_id = runs.iter().find(|r| r["path"].as_array().unwrap().len() == 4).unwrap()["run_id"].as_str().unwrap();
    let (_, run) = host.call("GET", &format!("/api/v2/runs/{run_id}"), None).await;
    let record = run["nodes"].as_array().unwrap().iter().find(|n| n["node_id"] == "score").unwrap().clone();
    assert_eq!((record["kind"].as_str(), record["outcome"].as_str()), (Some("node-kind"), Some("passed")), "{record}");
    let calls = host.metric("flowhost_plugin_invocations_total{plugin=\"score\",result=\"ok\"}").await;
    assert!(calls > 0.0, "the score component evaluated the node");

    // 0.2.0 scores amount / 5: activating it changes what the released flow runs, without a restart.
    upload_score(&host, "score_v2", "0.2.0").await;
    host.publish(&source, &[deposit(250.0, "after-the-swap")]).await;
    let outputs = host.read(&out, 2, Duration::from_secs(60)).await;
    let scored: Value = serde_json::from_slice(&outputs[1].value).unwrap();
    assert_eq!(
        (scored["score"].as_f64(), scored["player_id"].as_str()),
        (Some(50.0), Some("after-the-swap")),
        "{scored}"
    );

    // A deposit without its amount: the guest fails permanently, an answer `score` does not declare (it answers
    // only continue or stop), so the step is dead-lettered with a message naming the undeclared answer.
    host.publish(&source, &[json!({"event_type": "deposit", "tenant_id": "casino-1", "player_id": "no-amount"})]).await;
    let letters = eventually("the dead letter", 30, || async {
        let (_, page) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={id}"), None).await;
        let letters = page["dead_letters"].as_array().cloned().unwrap_or_default();
        (!letters.is_empty()).then_some(letters)
    })
    .await;
    let letter = letters[0].to_string();
    assert!(letter.contains("score") && letter.contains("does not declare"), "{letter}");

    // 0.3.0 renames the kind: the released flow drifts to invalid, naming the node.
    upload_score(&host, "score_v3", "0.3.0").await;
    let flow = eventually("the flow drifted", 30, || async {
        let (_, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
        (flow["status"] == "invalid").then_some(flow)
    })
    .await;
    let reasons = flow["broken_reasons"].to_string();
    assert!(reasons.contains("NODE_KIND_NOT_DECLARED") && reasons.contains("\"score\""), "{reasons}");
    let (_, kinds) = host.call("GET", "/api/v2/node-kinds", None).await;
    assert_eq!(kinds[0]["name"], "rank", "{kinds}");
    host.stop().await;
}
