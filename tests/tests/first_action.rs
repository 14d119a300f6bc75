//! The "your first action" walk-through (`examples/first-action/README.md`) as a user follows it: build the
//! example plugin with its build script, then read its manifest and run `welcome_bonus` with the real `flowhost`
//! binary's `plugin manifest` / `plugin invoke`, checking the output, the plugin's log line and every outcome
//! class the walk-through shows; then its second half: upload the component into a running Flowhost, call it
//! like Studio's "test this node", publish a new version, roll back, and see a changed version refused; then
//! step 6, the action in a released flow with each outcome class and a dead letter replayed after a fix, over the
//! API and in Studio (headless Chromium). Needs `target/<profile>/flowhost` (built by `tests/run.sh`).

use std::process::Command;
use std::sync::OnceLock;

use flowhost_tests::cli::{plugin, repository_root};
use flowhost_tests::{on_both_backends, Backends, TestHost};
use serde_json::{json, Value};

/// Builds the example with `bash examples/first-action/build.sh` (once per test process; cargo skips the work
/// when nothing changed) and returns the component's path, relative to the repository root as in the README.
fn component() -> &'static str {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let output = Command::new("bash")
            .arg("examples/first-action/build.sh")
            .current_dir(repository_root())
            .output()
            .expect("run bash examples/first-action/build.sh");
        assert!(
            output.status.success(),
            "bash examples/first-action/build.sh failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    });
    "target/examples/wasm32-wasip2/release/first_action.wasm"
}

/// `plugin invoke <component> welcome_bonus <input>`: the output (exit 0) or the standard error (exit 1).
fn welcome_bonus(input: &str) -> Result<(Value, String), String> {
    let out = plugin(&["invoke", component(), "welcome_bonus", input], None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(0) => Ok((serde_json::from_slice(&out.stdout).expect("the output is JSON"), stderr)),
        Some(1) => {
            assert!(out.stdout.is_empty(), "a failure prints no output: {}", String::from_utf8_lossy(&out.stdout));
            Err(stderr)
        }
        code => panic!("plugin invoke exited with {code:?}: {stderr}"),
    }
}

#[test]
fn manifest_shows_the_action_its_schema_and_the_log_capability() {
    let out = plugin(&["manifest", component()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((manifest["id"].as_str(), manifest["version"].as_str()), (Some("first-action"), Some("0.1.0")));
    assert_eq!(manifest["capabilities"], json!(["log"]));
    let action = &manifest["actions"][0];
    assert_eq!(action["name"], "welcome_bonus");
    let schema = &action["config_schema"];
    assert_eq!(schema["type"], "object");
    // The schema is the input's contract: the event's fields (placeholders in a flow) and the limits.
    assert_eq!(schema["required"], json!(["player_id", "deposit", "currency"]));
    let mut fields: Vec<&str> = schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["currency", "deposit", "limits", "player_id"]);
    let limits = &schema["properties"]["limits"]["properties"];
    let mut limits: Vec<&str> = limits.as_object().unwrap().keys().map(String::as_str).collect();
    limits.sort_unstable();
    assert_eq!(limits, ["currencies", "match_percent", "max_bonus", "min_deposit"]);
}

#[test]
fn a_deposit_gets_a_bonus_and_the_plugin_logs_it() {
    let (output, stderr) = welcome_bonus(r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "EUR"}"#).unwrap();
    assert_eq!(
        output,
        json!({
            "player_id": "p-1001", "deposit": 120.0, "currency": "EUR", "bonus": 100.0,
            "message": "Welcome! We matched your deposit of 120.00 EUR with a 100.00 EUR bonus."
        })
    );
    let line = stderr.lines().find(|line| line.contains("welcome bonus 100.00 EUR for a deposit of 120.00 EUR"));
    let line = line.unwrap_or_else(|| panic!("the plugin's log line is shown: {stderr}"));
    assert!(line.contains("INFO") && line.contains("\"first-action@0.1.0\""), "tagged with the plugin: {line}");

    // The limits in the input change the offer.
    let input = r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "EUR",
                    "limits": {"match_percent": 50, "max_bonus": 200}}"#;
    assert_eq!(welcome_bonus(input).unwrap().0["bonus"], 60.0);

    // Below the minimum: success, no bonus, a hint.
    let (output, _) = welcome_bonus(r#"{"player_id": "p-1001", "deposit": 5.0, "currency": "EUR"}"#).unwrap();
    assert_eq!(
        (&output["bonus"], &output["message"]),
        (&json!(0.0), &json!("Deposit at least 10.00 EUR to get your welcome bonus."))
    );

    // The input may come on standard input instead.
    let out = plugin(
        &["invoke", component(), "welcome_bonus"],
        Some("{\"player_id\": \"p-1002\", \"deposit\": 40, \"currency\": \"USD\"}\n"),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let output: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&output["player_id"], &output["bonus"]), (&json!("p-1002"), &json!(40.0)));
}

/// Each failure exits 1 and prints its outcome class, as the walk-through shows.
#[test]
fn each_failure_shows_its_outcome_class() {
    let cases = [
        (
            r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "JPY"}"#,
            "flowhost: skip forward: no welcome bonus in JPY (offered in EUR, USD, GBP)",
        ),
        (
            r#"{"player_id": "p-1001", "currency": "EUR"}"#,
            "flowhost: permanent failure: invalid input for welcome_bonus: missing field `deposit`",
        ),
        (
            r#"{"player_id": "p-1001", "deposit": -5, "currency": "EUR"}"#,
            "flowhost: permanent failure: deposit must be a positive amount, got -5",
        ),
        (
            r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "EUR", "limits": {"max_bonnus": 50}}"#,
            "flowhost: permanent failure: invalid input for welcome_bonus: unknown field `max_bonnus`",
        ),
    ];
    for (input, expected) in cases {
        let stderr = welcome_bonus(input).expect_err(input);
        assert!(stderr.lines().any(|line| line.starts_with(expected)), "{input}: expected {expected:?} in {stderr}");
        assert!(!stderr.contains("for a deposit of"), "{input}: nothing decided, nothing logged: {stderr}");
    }

    // An action the manifest does not declare: the host refuses it before running the guest.
    let out = plugin(&["invoke", component(), "welcome", "{}"], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("flowhost: unknown action \"welcome\""), "{stderr}");
}

/// "Load it into a running Flowhost": `plugin upload`, `plugin list`, `plugin call`, `plugin activate` against
/// a running server, and the 409 for other bytes under a stored version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_it_into_a_running_flowhost() {
    let host = TestHost::start(Backends::Embedded).await;
    let server = host.base_url.clone();
    let cli = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            plugin(&args, None)
        })
    };
    let args = |words: &[&str]| -> Vec<String> {
        words.iter().map(|w| w.to_string()).chain(["--server".to_owned(), server.clone()]).collect()
    };

    let out = cli(args(&["upload", component()])).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let uploaded: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&uploaded["id"], &uploaded["version"], &uploaded["active"]),
        (&json!("first-action"), &json!("0.1.0"), &json!(true))
    );

    let input = r#"{"player_id": "p-1001", "deposit": 120.0, "currency": "EUR"}"#;
    let out = cli(args(&["call", "first-action", "welcome_bonus", input])).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let called: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&called["plugin"], &called["version"]), (&json!("first-action"), &json!("0.1.0")));
    assert_eq!(called["output"]["bonus"], 100.0);
    assert!(called["duration_us"].as_u64().is_some(), "{called}");

    // A failure shows its outcome class and exits 1.
    let out =
        cli(args(&["call", "first-action", "welcome_bonus", r#"{"player_id": "p", "deposit": 1, "currency": "JPY"}"#]))
            .await
            .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let failed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(failed["outcome"], "skip-forward", "{failed}");

    let out = cli(args(&["list"])).await.unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ours = listed.as_array().unwrap().iter().find(|p| p["id"] == "first-action").expect("listed");
    assert_eq!(ours["active_version"], "0.1.0");

    // Other bytes under the stored version: refused, the stored one stays.
    let mut changed = std::fs::read(repository_root().join(component())).unwrap();
    changed.extend_from_slice(&[0, 6, 5, b'e', b'x', b't', b'r', b'a']);
    let dir = tempfile::tempdir().unwrap();
    let changed_path = dir.path().join("first_action.wasm");
    std::fs::write(&changed_path, changed).unwrap();
    let out = cli(args(&["upload", changed_path.to_str().unwrap()])).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("409"), "{}", String::from_utf8_lossy(&out.stderr));

    let out = cli(args(&["activate", "first-action", "0.1.0"])).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli(args(&["activate", "first-action", "9.9.9"])).await.unwrap();
    assert_eq!(out.status.code(), Some(1), "an unknown version is refused");
    host.stop().await;
}

/// The walk-through's fix for deposits sent as text: version 0.2.0 of the example, whose `deposit` also takes a
/// string holding a number. Built from a copy of the example (its own target directory, so the 0.1.0 component
/// the other tests read stays as it is); answers the path of the component, copied into `work`.
fn build_the_fix(work: &std::path::Path) -> String {
    let root = repository_root();
    let project = work.join("first-action");
    std::fs::create_dir_all(project.join("src")).unwrap();
    let example = root.join("examples/first-action");
    let cargo = std::fs::read_to_string(example.join("Cargo.toml")).unwrap();
    let sdk = format!("flowhost-sdk-guest = {{ path = {:?} }}", root.join("sdk-guest").display().to_string());
    let cargo = cargo
        .replacen("version = \"0.1.0\"", "version = \"0.2.0\"", 1)
        .replace("flowhost-sdk-guest = { path = \"../../sdk-guest\" }", &sdk);
    std::fs::write(project.join("Cargo.toml"), cargo).unwrap();
    std::fs::copy(example.join("src/lib.rs"), project.join("src/lib.rs")).unwrap();
    let bonus = std::fs::read_to_string(example.join("src/bonus.rs")).unwrap();
    let field = "    pub deposit: f64,\n";
    assert!(bonus.contains(field), "the example's deposit field moved: update this test and the README");
    let fixed = bonus.replacen(field, &format!("    #[serde(deserialize_with = \"amount\")]\n{field}"), 1)
        + r#"
/// A deposit as a number, or as a string holding one (some producers send amounts as text).
fn amount<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Amount {
        Number(f64),
        Text(String),
    }
    match Amount::deserialize(deserializer)? {
        Amount::Number(amount) => Ok(amount),
        Amount::Text(text) => text.trim().parse().map_err(serde::de::Error::custom),
    }
}
"#;
    std::fs::write(project.join("src/bonus.rs"), fixed).unwrap();
    // One build at a time into the shared target directory, each copied out before the next overwrites it.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let target = root.join("target/first-action-fix").display().to_string();
    let out = plugin(&["build", &project.display().to_string(), "--target-dir", &target], None);
    assert!(out.status.success(), "building the fix: {}", String::from_utf8_lossy(&out.stderr));
    let component = work.join("first_action-0.2.0.wasm");
    std::fs::copy(String::from_utf8_lossy(&out.stdout).trim(), &component).unwrap();
    component.display().to_string()
}

/// The `deposit` schema step 6 declares.
async fn deposit_schema(host: &TestHost) {
    let schema = json!({"fields": [
        {"name": "player_id", "type": "string"}, {"name": "amount", "type": "double"}, {"name": "currency", "type": "string"}
    ]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
}

/// Step 6's deposits: one that gets a bonus, one in JPY (skip forward), one sent as text (permanent until the fix).
fn three_deposits() -> [Value; 3] {
    let deposit = |player: &str, amount: Value, currency: &str| json!({"event_type": "deposit", "tenant_id": "casino-1", "player_id": player, "amount": amount, "currency": currency});
    [deposit("p-1", json!(120.0), "EUR"), deposit("p-2", json!(120.0), "JPY"), deposit("p-3", json!("80.00"), "EUR")]
}

/// The first two records on `out`, each as `[player_id, bonus]`.
async fn bonuses(host: &TestHost, out: &str) -> Vec<Value> {
    let records = host.read(out, 2, std::time::Duration::from_secs(60)).await;
    records
        .iter()
        .map(|record| serde_json::from_slice::<Value>(&record.value).unwrap())
        .map(|value| json!([value["player_id"], value["result"]["bonus"]]))
        .collect()
}

/// The run of `flow_id` for `player`'s event, once it reached `status`: the listing's summary (with its `path`).
async fn run_of(host: &TestHost, flow_id: &str, player: &str, status: &str) -> Value {
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, page) =
            host.call("GET", &format!("/api/v2/flows/{flow_id}/runs?status={status}&page_size=100"), None).await;
        for run in page["runs"].as_array().into_iter().flatten() {
            let (_, detail) =
                host.call("GET", &format!("/api/v2/runs/{}", run["run_id"].as_str().unwrap()), None).await;
            if detail["event"]["player_id"] == player {
                return run.clone();
            }
        }
        assert!(tokio::time::Instant::now() < until, "no {status} run for {player}: {page:#}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The outcome of `node` on the run's path.
fn outcome(run: &Value, node: &str) -> Value {
    let step = run["path"].as_array().and_then(|path| path.iter().find(|step| step["node_id"] == node));
    step.map_or(Value::Null, |step| step["outcome"].clone())
}

on_both_backends!(in_a_released_flow_each_outcome_class_and_a_replay_after_a_fix);

/// "Put it in a flow": the action after its service's segment, configured with the event's fields as
/// placeholders; a deposit gets its bonus on the output topic, a deposit in JPY skips the node, and a deposit sent
/// as text fails for good (a dead letter) until version 0.2.0 accepts it and the dead letter is replayed.
async fn in_a_released_flow_each_outcome_class_and_a_replay_after_a_fix(backends: Backends) {
    let work = tempfile::tempdir().unwrap();
    let fix = tokio::task::spawn_blocking({
        let work = work.path().to_owned();
        move || build_the_fix(&work)
    });
    let host = TestHost::start(backends).await;
    let upload = |path: String, version: &'static str| {
        let wasm = std::fs::read(repository_root().join(path)).unwrap();
        host.upload_plugin("first-action", version, wasm)
    };
    upload(component().to_owned(), "0.1.0").await;
    deposit_schema(&host).await;
    let (source, out) = (flowhost_tests::unique("deposits"), flowhost_tests::unique("bonuses"));
    let flow_id = host
        .release_flow(json!({
            "name": "Welcome bonus",
            "nodes": [
                {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
                {"id": "seg", "kind": "service-in", "config": {"service": "first-action"}},
                {"id": "bonus", "kind": "action", "config": {"action_ref": "welcome_bonus",
                    "player_id": "{{player_id}}", "deposit": "{{amount}}", "currency": "{{currency}}",
                    "limits": {"max_bonus": 50}}},
                {"id": "out", "kind": "output-topic", "config": {"topic": out}}
            ],
            "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "bonus"}, {"from": "bonus", "to": "out"}]
        }))
        .await;
    host.publish(&source, &three_deposits()).await;

    // Success: the bonus (capped by the node's limit) reaches the output.
    let run = run_of(&host, &flow_id, "p-1", "completed").await;
    assert_eq!(outcome(&run, "bonus"), "passed", "{run:#}");
    // Skip forward: the branch ends there, acknowledged; nothing is published and nothing dead-lettered.
    let run = run_of(&host, &flow_id, "p-2", "completed").await;
    assert_eq!(outcome(&run, "bonus"), "skip_forward", "{run:#}");
    // Permanent: a deposit sent as text does not decode, and the step is dead-lettered.
    let run = run_of(&host, &flow_id, "p-3", "dead_lettered").await;
    assert_eq!(outcome(&run, "bonus"), "dead_lettered", "{run:#}");
    let (_, letters) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={flow_id}&status=open"), None).await;
    assert_eq!(letters["total"], 1, "{letters:#}");
    let letter = &letters["dead_letters"][0];
    assert_eq!((&letter["reason"], &letter["run_id"]), (&json!("permanent"), &run["run_id"]), "{letter:#}");
    assert!(letter["error"].as_str().unwrap_or_default().contains("invalid type: string"), "{letter:#}");

    // The fix: 0.2.0 takes amounts as text; uploaded, it is active at once, and the replay resumes the run.
    upload(fix.await.unwrap(), "0.2.0").await;
    let id = letter["id"].as_str().unwrap();
    let (status, replay) = host.call("POST", &format!("/api/v2/dead-letters/{id}/replay"), Some(json!({}))).await;
    assert_eq!(status, 200, "{replay:#}");
    let run = run_of(&host, &flow_id, "p-3", "completed").await;
    assert_eq!(outcome(&run, "bonus"), "passed", "{run:#}");

    assert_eq!(bonuses(&host, &out).await, [json!(["p-1", 50.0]), json!(["p-3", 50.0])]);
    let (_, letters) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={flow_id}&status=replayed"), None).await;
    assert_eq!(letters["total"], 1, "{letters:#}");
    host.stop().await;
}

/// Step 6 as its reader does it, in Studio (headless Chromium, the `first-action` scenario of
/// `tests/browser/studio.mjs`): upload, place after the segment, configure in the schema form, release; the
/// test publishes a deposit, one in JPY and one sent as text once the flow is released; Studio shows the bonus
/// and each outcome on the graph, and replays the dead letter once the fix is uploaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_part_in_studio_in_chromium() {
    let work = tempfile::tempdir().unwrap();
    let fix = tokio::task::spawn_blocking({
        let work = work.path().to_owned();
        move || build_the_fix(&work)
    })
    .await
    .unwrap();
    let wasm = work.path().join("wasm");
    std::fs::create_dir_all(&wasm).unwrap();
    std::fs::copy(repository_root().join(component()), wasm.join("first-action-0.1.0.wasm")).unwrap();
    std::fs::copy(fix, wasm.join("first-action-0.2.0.wasm")).unwrap();
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50
    })
    .await;
    deposit_schema(&host).await;
    let (source, out) = (flowhost_tests::unique("deposits"), flowhost_tests::unique("bonuses"));
    let publisher = async {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(170);
        loop {
            let (_, flow) = host.call("GET", "/api/v2/flows/welcome-bonus", None).await;
            if flow["released_version"] == 1 {
                break;
            }
            assert!(tokio::time::Instant::now() < until, "Studio never released the flow: {flow}");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        host.publish(&source, &three_deposits()).await;
    };
    let env = [
        ("STUDIO_WASM_DIR", wasm.to_str().unwrap()),
        ("STUDIO_SOURCE_TOPIC", source.as_str()),
        ("STUDIO_OUTPUT_TOPIC", out.as_str()),
    ];
    tokio::join!(flowhost_tests::browser::studio_session(&host, "first-action", &env), publisher);

    let bonuses = bonuses(&host, &out).await;
    assert_eq!(bonuses, [json!(["p-1", 100.0]), json!(["p-3", 80.0])], "the bonus, then the replayed run's");
    host.stop().await;
}
