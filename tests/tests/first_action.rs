//! The "your first action" walk-through (`examples/first-action/README.md`) as a user follows it: build the
//! example plugin with its build script, then read its manifest and run `welcome_bonus` with the real `flowhost`
//! binary's `plugin manifest` / `plugin invoke`, checking the output, the plugin's log line and every outcome
//! class the walk-through shows. Needs `target/<profile>/flowhost` (built by `tests/run.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn flowhost_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(Path::parent).unwrap().join("flowhost");
    assert!(bin.exists(), "{} is missing: build it with `cargo build -p flowhost` (tests/run.sh does)", bin.display());
    bin
}

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

/// `flowhost plugin ARGS...` from the repository root, with `stdin` as standard input.
fn plugin(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(flowhost_bin())
        .arg("plugin")
        .args(args)
        .current_dir(repository_root())
        // The defaults, pinned: the walk-through shows the plugin's info-level log line.
        .env("FLOWHOST_LOG", "info")
        .env("FLOWHOST_LOG_FORMAT", "text")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
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
    let mut limits: Vec<&str> = schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
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
