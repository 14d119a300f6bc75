//! The first-party node-kind components `condition` and `mapping` (`plugins/condition`, `plugins/mapping`) run by
//! the runtime: `condition` decides exactly as the host's native `flowhost_expr::Expression` (same result, same
//! error message) over a table of expressions and events; `mapping` maps as the engine's `select` output mapping
//! (`flowhost_runs::nodes::MappingNode::apply`, which v1 rules and v2 flows share) and a v2 mapping node's `merge` (its expectations written out here); bad configuration is a permanent
//! failure naming the problem; and each manifest's `config_schema` is a usable JSON Schema that agrees with what
//! the component accepts.

use flowhost_expr::Expression;
use flowhost_runtime::{
    BatchContext, Capability, InvokeError, NodeEvent, PackageVersion, Plugin, Runtime, RuntimeConfig,
};
use flowhost_runtime_fixtures as fixtures;
use serde_json::{json, Map, Value};

async fn load(name: &str) -> Plugin {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    runtime.load(&fixtures::bytes(name), &Capability::ALL).await.unwrap_or_else(|error| panic!("load {name}: {error}"))
}

async fn invoke(plugin: &Plugin, action: &str, input: &Value) -> Result<Value, InvokeError> {
    let output = plugin.invoke(action, &input.to_string()).await?;
    Ok(serde_json::from_str(&output).expect("the runtime checked the output is JSON"))
}

/// The table both ways of running a condition are held to (`flowhost_runtime_fixtures::conformance`).
const EXPRESSIONS: &[&str] = fixtures::conformance::EXPRESSIONS;

fn events() -> Vec<Map<String, Value>> {
    fixtures::conformance::events()
}

#[tokio::test]
async fn condition_decides_as_the_native_expression() {
    let condition = load("condition").await;
    let (mut passed, mut failed) = (0, 0);
    for source in EXPRESSIONS {
        let native = Expression::compile(source, None).unwrap_or_else(|errors| panic!("{source:?}: {errors:?}"));
        for event in events() {
            let input = json!({"config": {"expression": source}, "event": event});
            let wasm = invoke(&condition, "condition", &input).await;
            let expected = match native.evaluate(&event) {
                Ok(pass) => {
                    passed += 1;
                    Ok(json!({ "pass": pass }))
                }
                Err(error) => {
                    failed += 1;
                    Err(InvokeError::Permanent(error.to_string()))
                }
            };
            assert_eq!(wasm, expected, "{source:?} over {}", Value::Object(event));
        }
    }
    // The table exercises both outcomes, so a component that always errs (or never does) cannot pass.
    assert!(passed > 50 && failed > 20, "{passed} evaluated, {failed} failed");
}

#[tokio::test]
async fn the_benchmark_rule_passes_and_a_missing_field_fails_like_the_host() {
    let condition = load("condition").await;
    let rule = "amount > 100.0 && count >= 2 && game == 'slots' && !vip";
    let event = json!({"amount": 250.0, "count": 3, "game": "slots", "vip": false});
    let input = json!({"config": {"expression": rule}, "event": event});
    assert_eq!(invoke(&condition, "condition", &input).await, Ok(json!({"pass": true})));
    let input = json!({"config": {"expression": rule}, "event": {"amount": 250.0, "count": 1}});
    assert_eq!(invoke(&condition, "condition", &input).await, Ok(json!({"pass": false})), "&& short-circuits");

    let input = json!({"config": {"expression": "level >= 3"}, "event": {"amount": 1}});
    let error = invoke(&condition, "condition", &input).await.unwrap_err();
    let InvokeError::Permanent(message) = &error else { panic!("{error:?}") };
    assert!(message.starts_with("expression evaluation failed: ") && message.contains("level"), "{message}");
    let input = json!({"config": {"expression": "count + 1"}, "event": {"count": 1}});
    assert_eq!(
        invoke(&condition, "condition", &input).await,
        Err(InvokeError::Permanent("expression evaluation failed: result is not a bool: 2".into()))
    );
}

#[tokio::test]
async fn an_invalid_expression_is_permanent_with_the_hosts_message() {
    let condition = load("condition").await;
    let nested = format!("{}count{} > 1", "(".repeat(40), ")".repeat(40));
    for source in ["amount >", "", "   ", "(count", "game == 'slots", "a ++ b", "amount > 1 &&& vip", &nested] {
        let errors = Expression::compile(source, None).err().unwrap_or_else(|| panic!("{source:?} compiles"));
        let input = json!({"config": {"expression": source}, "event": {"amount": 1}});
        assert_eq!(
            invoke(&condition, "condition", &input).await,
            Err(InvokeError::Permanent(format!("invalid expression: {}", errors.join("; ")))),
            "{source:?}"
        );
    }
    assert_eq!(
        invoke(&condition, "condition", &json!({"config": {"expression": ""}, "event": {}})).await,
        Err(InvokeError::Permanent("invalid expression: expression is empty".into()))
    );
}

#[tokio::test]
async fn bad_condition_input_is_permanent_and_named() {
    let condition = load("condition").await;
    let cases = [
        (json!({"config": {}, "event": {}}), "invalid config: missing field `expression`"),
        (json!({"config": {"expression": 1}, "event": {}}), "invalid config: invalid type: integer `1`"),
        (json!({"config": {"expression": "true", "mode": "x"}, "event": {}}), "invalid config: unknown field `mode`"),
        (json!({"config": {"expression": "true"}}), "invalid input for condition: missing field `event`"),
        (json!({"config": {"expression": "true"}, "event": [1]}), "invalid event: invalid type"),
    ];
    for (input, expected) in cases {
        let error = invoke(&condition, "condition", &input).await.unwrap_err();
        let InvokeError::Permanent(message) = &error else { panic!("{input}: {error:?}") };
        assert!(message.starts_with(expected), "{input}: {message:?} does not start with {expected:?}");
    }
}

#[tokio::test]
async fn mapping_selects_and_renames_like_the_engine() {
    let mapping = load("mapping").await;
    let event = json!({"player": "p-1", "amount": 12.5, "tags": ["a"], "meta": {"level": 2}, "note": null});
    let field = |source: &str, target: &str| json!({"source": source, "target": target});
    let cases = [
        // Only the listed fields, renamed; the rest of the event is dropped.
        (vec![field("player", "who"), field("amount", "amount")], json!({"who": "p-1", "amount": 12.5})),
        // A source the event lacks is left out, not written as null.
        (vec![field("missing", "x"), field("player", "p")], json!({"p": "p-1"})),
        (vec![field("missing", "x")], json!({})),
        // A present null is copied; nested values are copied whole.
        (
            vec![field("note", "n"), field("meta", "m"), field("tags", "t")],
            json!({"n": null, "m": {"level": 2}, "t": ["a"]}),
        ),
        // One source to two targets; two fields swapped.
        (vec![field("player", "a"), field("player", "b")], json!({"a": "p-1", "b": "p-1"})),
        (vec![field("player", "amount"), field("amount", "player")], json!({"amount": "p-1", "player": 12.5})),
    ];
    for (fields, expected) in cases {
        let input = json!({"config": {"mode": "select", "fields": fields}, "event": event});
        assert_eq!(invoke(&mapping, "mapping", &input).await, Ok(json!({ "event": expected })), "{fields:?}");
    }
    let input = json!({"config": {"mode": "select", "fields": [field("a", "b")]}, "event": {}});
    assert_eq!(invoke(&mapping, "mapping", &input).await, Ok(json!({"event": {}})));
    // `merge` keeps the event's fields and adds (or overwrites) the targets, as a v2 mapping node does.
    let merged = [
        (
            vec![field("player", "who")],
            json!({"player": "p-1", "amount": 12.5, "tags": ["a"], "meta": {"level": 2}, "note": null, "who": "p-1"}),
        ),
        (
            vec![field("missing", "x"), field("amount", "player")],
            json!({"player": 12.5, "amount": 12.5, "tags": ["a"], "meta": {"level": 2}, "note": null}),
        ),
    ];
    for (fields, expected) in merged {
        let input = json!({"config": {"mode": "merge", "fields": fields}, "event": event});
        assert_eq!(invoke(&mapping, "mapping", &input).await, Ok(json!({ "event": expected })), "{fields:?}");
    }
}

/// Configs the mapping refuses, with the start of its message; `true` where the manifest's schema refuses it too
/// (a target mapped twice is beyond JSON Schema).
fn bad_mapping_configs() -> Vec<(Value, &'static str, bool)> {
    vec![
        (
            json!({"mode": "upsert", "fields": [{"source": "a", "target": "b"}]}),
            "invalid config: unknown variant `upsert`",
            true,
        ),
        (json!({"fields": [{"source": "a", "target": "b"}]}), "invalid config: missing field `mode`", true),
        (json!({"mode": "select"}), "invalid config: missing field `fields`", true),
        (json!({"mode": "select", "fields": []}), "invalid config: fields must not be empty", true),
        (
            json!({"mode": "select", "fields": {"a": "b"}}),
            "invalid config: invalid type: map, expected a sequence",
            true,
        ),
        (json!({"mode": "select", "fields": [{"source": "a"}]}), "invalid config: missing field `target`", true),
        (
            json!({"mode": "select", "fields": [{"source": "a", "target": "b"}, {"source": "", "target": "c"}]}),
            "invalid config: fields[1]: source and target must not be empty",
            true,
        ),
        (
            json!({"mode": "select", "fields": [{"source": "a", "target": "  "}]}),
            "invalid config: fields[0]: source and target must not be empty",
            true,
        ),
        (
            json!({"mode": "select", "fields": [{"source": "a", "target": "x"}, {"source": "b", "target": "x"}]}),
            "invalid config: fields[1]: target \"x\" is mapped more than once",
            false,
        ),
        (
            json!({"mode": "select", "fields": [{"source": "a", "target": "b", "default": 1}]}),
            "invalid config: unknown field `default`",
            true,
        ),
        (
            json!({"mode": "select", "fields": [{"source": "a", "target": "b"}], "strict": true}),
            "invalid config: unknown field `strict`",
            true,
        ),
        (json!("select"), "invalid config: invalid type: string", true),
    ]
}

#[tokio::test]
async fn bad_mapping_config_is_permanent_and_named() {
    let mapping = load("mapping").await;
    for (config, expected, _) in bad_mapping_configs() {
        let input = json!({"config": config, "event": {"a": 1}});
        let error = invoke(&mapping, "mapping", &input).await.unwrap_err();
        let InvokeError::Permanent(message) = &error else { panic!("{config}: {error:?}") };
        assert!(message.starts_with(expected), "{config}: {message:?} does not start with {expected:?}");
    }
    let error = invoke(&mapping, "mapping", &json!({"config": {"mode": "select", "fields": []}})).await.unwrap_err();
    assert!(matches!(&error, InvokeError::Permanent(m) if m.contains("missing field `event`")), "{error:?}");
}

/// The action's `config_schema`, checked as the component catalog checks it at registration (meta-schema, then
/// compiled), and compiled to validate configs.
fn config_validator(plugin: &Plugin, id: &str, version: &str) -> jsonschema::Validator {
    let manifest = plugin.manifest();
    assert_eq!((manifest.id.as_str(), manifest.version.as_str()), (id, version));
    assert_eq!(manifest.actions.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), [id]);
    assert!(plugin.capabilities().is_empty(), "{id} needs no capability");
    let schema = manifest.actions[0].config_schema.as_ref().unwrap_or_else(|| panic!("{id}: no config_schema"));
    jsonschema::meta::validate(schema).unwrap_or_else(|error| panic!("{id}: invalid config_schema: {error}"));
    jsonschema::validator_for(schema).unwrap_or_else(|error| panic!("{id}: unusable config_schema: {error}"))
}

#[tokio::test]
async fn config_schemas_are_valid_and_agree_with_the_components() {
    let condition = config_validator(&load("condition").await, "condition", "0.2.0");
    assert!(condition.is_valid(&json!({"expression": "amount > 100.0"})));
    for bad in [
        json!({}),
        json!({"expression": ""}),
        json!({"expression": " "}),
        json!({"expression": 1}),
        json!({"expression": "true", "mode": "x"}),
    ] {
        assert!(!condition.is_valid(&bad), "the condition schema accepts {bad}");
    }

    let mapping = config_validator(&load("mapping").await, "mapping", "0.3.0");
    assert!(mapping.is_valid(&json!({"mode": "select", "fields": [{"source": "a", "target": "b"}]})));
    assert!(mapping.is_valid(&json!({"mode": "merge", "fields": [{"source": "a", "target": "b"}]})));
    for (config, _, schema_refuses) in bad_mapping_configs() {
        assert_eq!(!mapping.is_valid(&config), schema_refuses, "the mapping schema on {config}");
    }
}

fn node_events(events: &[Map<String, Value>]) -> Vec<NodeEvent> {
    events
        .iter()
        .enumerate()
        .map(|(offset, event)| NodeEvent {
            idempotency_key: format!("in/0/{offset}/r"),
            event: Value::Object(event.clone()).to_string(),
            ..NodeEvent::default()
        })
        .collect()
}

/// The batch contract: one `prepare` and one `evaluate` of every event in one instance give, event by event,
/// what the native expression gives.
#[tokio::test]
async fn condition_batches_decide_as_the_native_expression() {
    let condition = load("condition").await;
    assert!(condition.evaluates_batches());
    assert_eq!(condition.package_version(), PackageVersion::V0_2);
    let events = events();
    for source in EXPRESSIONS {
        let native = Expression::compile(source, None).unwrap();
        let config = json!({ "expression": source }).to_string();
        let results = condition.evaluate("condition", &config, &batch_context(), node_events(&events)).await;
        assert_eq!(results.len(), events.len(), "{source:?}: one result per event");
        for (result, event) in results.into_iter().zip(&events) {
            let expected = match native.evaluate(event) {
                Ok(pass) => Ok(json!({ "pass": pass }).to_string()),
                Err(error) => Err(InvokeError::Permanent(error.to_string())),
            };
            assert_eq!(result, expected, "{source:?} over {}", Value::Object(event.clone()));
        }
    }
}

#[tokio::test]
async fn a_refused_configuration_fails_every_event_of_the_batch_and_an_empty_batch_runs_nothing() {
    let condition = load("condition").await;
    let events = node_events(&events());
    let results =
        condition.evaluate("condition", r#"{"expression": "amount >"}"#, &batch_context(), events.clone()).await;
    assert_eq!(results.len(), events.len());
    for result in results {
        let Err(InvokeError::Permanent(message)) = result else { panic!("{result:?}") };
        assert!(message.starts_with("invalid expression: syntax error"), "{message}");
    }
    assert!(condition
        .evaluate("condition", r#"{"expression": "true"}"#, &batch_context(), Vec::new())
        .await
        .is_empty());
    let unknown = condition.evaluate("mapping", "{}", &batch_context(), events[..1].to_vec()).await;
    assert_eq!(unknown, vec![Err(InvokeError::UnknownAction("mapping".into()))]);
}

/// A trap in the middle of a batch fails that event alone: the batch is evaluated again event by event.
#[tokio::test]
async fn a_trapping_event_fails_alone_in_its_batch() {
    let trap = load("trap").await;
    let events: Vec<Map<String, Value>> = [json!({"n": 1}), json!({"panic": true}), json!({"n": 3})]
        .into_iter()
        .map(|event| event.as_object().unwrap().clone())
        .collect();
    let mut events = node_events(&events);
    events[2].tenant_id = Some("12".into());
    events[2].attempt = 3;
    let results = trap.evaluate("condition", "{}", &batch_context(), events).await;
    let answer =
        |result: &Result<String, InvokeError>| -> Value { serde_json::from_str(result.as_ref().unwrap()).unwrap() };
    // Each event got the batch's context and its own fields.
    let first = answer(&results[0]);
    assert_eq!(
        (&first["pass"], &first["node_id"], &first["idempotency_key"]),
        (&json!(true), &json!("r"), &json!("in/0/0/r"))
    );
    assert_eq!((&first["tenant_id"], &first["attempt"]), (&Value::Null, &json!(1)), "attempt 0 is read as 1");
    assert!(first["deadline_ms"].as_u64().unwrap() > 1_700_000_000_000);
    assert!(matches!(&results[1], Err(InvokeError::Trap(_))), "{:?}", results[1]);
    let third = answer(&results[2]);
    assert_eq!(
        (&third["tenant_id"], &third["attempt"], &third["idempotency_key"]),
        (&json!("12"), &json!(3), &json!("in/0/2/r"))
    );
}

/// A component of the released `flowhost:plugin@0.1.0` keeps loading and running: its actions are invoked as
/// before, and its node kind is evaluated one event per instance.
#[tokio::test]
async fn a_0_1_0_component_keeps_loading_and_its_node_kind_runs_per_event() {
    let legacy = load("legacy").await;
    assert_eq!(legacy.package_version(), PackageVersion::V0_1);
    assert!(!legacy.evaluates_batches());
    assert_eq!(legacy.invoke("echo", r#"{"a":1}"#).await, Ok(r#"{"a":1}"#.into()));
    let events: Vec<Map<String, Value>> = [json!({"amount": 5}), json!({"amount": 50}), json!({})]
        .into_iter()
        .map(|e| e.as_object().unwrap().clone())
        .collect();
    let results = legacy.evaluate("threshold", r#"{"min": 10}"#, &batch_context(), node_events(&events)).await;
    assert_eq!(results[0], Ok(r#"{"pass":false}"#.into()));
    assert_eq!(results[1], Ok(r#"{"pass":true}"#.into()));
    assert_eq!(results[2], Err(InvokeError::Permanent("event.amount is a number".into())));
}

/// The batch context of a rule `r` outside any flow.
fn batch_context() -> BatchContext {
    BatchContext { flow_id: None, node_id: Some("r".into()) }
}
