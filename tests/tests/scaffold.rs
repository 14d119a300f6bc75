//! `flowhost plugin new` to a running action, as a plugin author goes: scaffold a project, run its unit tests,
//! build it with `flowhost plugin build`, and run its action with the host's runtime (`plugin invoke`), success
//! and a permanent failure. Needs `target/<profile>/flowhost` (built by `tests/run.sh`) and the `wasm32-wasip2`
//! target (added by the build when missing).

use std::process::Command;

use flowhost_tests::cli::{plugin, repository_root};
use serde_json::{json, Value};

#[test]
fn a_new_plugin_builds_tests_and_runs() {
    let root = repository_root();
    let work = tempfile::tempdir().unwrap();
    let project = work.path().join("greeter-two");
    let sdk = format!("{{ path = {:?} }}", root.join("sdk-guest").display().to_string());
    let dir = project.display().to_string();
    let out = plugin(&["new", "greeter-two", "--dir", &dir, "--sdk", &sdk], None);
    assert!(out.status.success(), "plugin new: {}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout);
    for file in ["Cargo.toml", "src/lib.rs", "build.sh", "README.md", ".gitignore"] {
        assert!(project.join(file).is_file() && listed.contains(file), "{file} missing: {listed}");
    }
    // Not over an author's files.
    assert!(!plugin(&["new", "greeter-two", "--dir", &dir], None).status.success());

    // The template's unit tests pass as written (one shared target directory keeps reruns quick).
    let target = root.join("target/scaffold");
    let tests = Command::new("cargo")
        .args(["test", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(tests.status.success(), "cargo test: {}", String::from_utf8_lossy(&tests.stderr));

    let out = plugin(&["build", &dir, "--target-dir", &target.display().to_string()], None);
    assert!(out.status.success(), "plugin build: {}", String::from_utf8_lossy(&out.stderr));
    let component = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(component.ends_with("wasm32-wasip2/release/greeter_two.wasm"), "{component}");

    let out = plugin(&["manifest", &component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&manifest["id"], &manifest["actions"][0]["name"]), (&json!("greeter-two"), &json!("greet")));
    assert_eq!(manifest["actions"][0]["config_schema"]["required"], json!(["player_id"]));

    let out = plugin(&["invoke", &component, "greet", r#"{"player_id": "p-1", "greeting": "Welcome"}"#], None);
    assert!(out.status.success(), "invoke: {}", String::from_utf8_lossy(&out.stderr));
    let output: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(output, json!({"player_id": "p-1", "message": "Welcome, p-1!"}));
    assert!(String::from_utf8_lossy(&out.stderr).contains("greeted p-1"), "the log line");

    let out = plugin(&["invoke", &component, "greet", r#"{"player_id": " "}"#], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("permanent"), "{}", String::from_utf8_lossy(&out.stderr));
}
