//! The "your first action" walk-through (`examples/first-action/README.md`) as a user follows it: build the
//! example plugin with its build script, then read its manifest and run `welcome_bonus` with the real `flowhost`
//! binary's `plugin manifest` / `plugin invoke`, checking the output, the plugin's log line and every outcome
//! class the walk-through shows; then its second half: upload the component into a running Flowhost, call it
//! like Studio's "test this node", publish a new version, roll back, and see a changed version refused.
//! Needs `target/<profile>/flowhost` (built by `tests/run.sh`).

use std::process::Command;
use std::sync::OnceLock;

use flowhost_tests::cli::{plugin, repository_root};
use flowhost_tests::{Backends, TestHost};
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
