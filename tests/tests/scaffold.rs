//! `flowhost plugin new` to a running action, as a plugin author goes: scaffold a project of each world and
//! language, run its unit tests, build it with `flowhost plugin build`, and run it with the host's runtime
//! (`plugin test`): success with its log line and context, and each failure's outcome class. The Python and
//! JavaScript plugins then run in a running Flowhost, on the embedded defaults and on the real servers: an action
//! placed after its service's segment in a released flow and fed an event, a data source read through the
//! catalog, a node kind evaluated in a released flow. Needs `target/<profile>/flowhost` (built by `tests/run.sh`), the `wasm32-wasip2` target
//! (added by the build when missing), and PyPI and npm (each project's build installs its toolchain).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use flowhost_tests::cli::{flowhost_bin, plugin, repository_root};
use flowhost_tests::{unique, Backends, TestHost};
use serde_json::{json, Value};

/// Scaffolds `name` of `world` into `work`, runs its unit tests and builds it; answers the project and its
/// component. One target directory serves every project, so reruns and later worlds are quick.
fn scaffold(work: &Path, name: &str, world: &str) -> (PathBuf, String) {
    let root = repository_root();
    let project = work.join(name);
    let sdk = format!("{{ path = {:?} }}", root.join("sdk-guest").display().to_string());
    let dir = project.display().to_string();
    let out = plugin(&["new", name, "--world", world, "--dir", &dir, "--sdk", &sdk], None);
    assert!(out.status.success(), "plugin new: {}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout);
    for file in ["Cargo.toml", "src/lib.rs", "build.sh", "README.md", ".gitignore", "example-input.json"] {
        assert!(project.join(file).is_file() && listed.contains(file), "{file} missing: {listed}");
    }
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
    assert!(tests.status.success(), "cargo test of {world}: {}", String::from_utf8_lossy(&tests.stderr));
    let out = plugin(&["build", &dir, "--target-dir", &target.display().to_string()], None);
    assert!(out.status.success(), "plugin build of {world}: {}", String::from_utf8_lossy(&out.stderr));
    let component = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(component.ends_with(&format!("wasm32-wasip2/release/{}.wasm", name.replace('-', "_"))), "{component}");
    (project, component)
}

/// `plugin test COMPONENT --action ACTION --input - --json` with `input` on standard input and `extra`
/// arguments: the exit code and the report.
fn test_call(component: &str, action: &str, input: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec!["test", component, "--action", action, "--input", "-", "--json"];
    args.extend_from_slice(extra);
    let out = plugin(&args, Some(input));
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no report: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

#[test]
fn a_new_action_plugin_builds_tests_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let (project, component) = scaffold(work.path(), "greeter-two", "action");
    // Not over an author's files.
    assert!(!plugin(&["new", "greeter-two", "--dir", &project.display().to_string()], None).status.success());

    let out = plugin(&["manifest", &component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&manifest["id"], &manifest["actions"][0]["name"]), (&json!("greeter-two"), &json!("greet")));
    assert_eq!(manifest["actions"][0]["config_schema"]["required"], json!(["player_id"]));

    // The README's command, as written: the example input from a file.
    let example = project.join("example-input.json").display().to_string();
    let out = plugin(&["test", &component, "--action", "greet", "--input", &example], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.starts_with("outcome   ok\n"), "{text}");
    assert!(text.contains("info  greeted p-1") && text.contains("\"message\": \"Welcome, p-1!\""), "{text}");

    let context = r#"{"tenant_id": "t-1", "run_id": "r-1", "attempt": 2}"#;
    let (code, report) = test_call(&component, "greet", r#"{"player_id": "p-1"}"#, &["--context", context]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["output"], json!({"player_id": "p-1", "message": "Hello, p-1!"}));
    assert_eq!(report["logs"], json!([{"level": "info", "message": "greeted p-1"}]));
    assert!(report["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{report}");

    let (code, report) = test_call(&component, "greet", r#"{"player_id": " "}"#, &[]);
    assert_eq!((code, &report["outcome"]), (Some(1), &json!("permanent")), "{report}");
    assert_eq!(report["error"], "permanent failure: player_id is empty");
    let (code, report) = test_call(&component, "wave", "{}", &[]);
    assert_eq!((code, &report["outcome"]), (Some(1), &json!("permanent")), "{report}");

    // A bad --context is refused before anything runs.
    let out = plugin(&["test", &component, "--action", "greet", "--input", &example, "--context", "{\"x\":1}"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--context"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_new_node_kind_and_service_build_and_run() {
    let work = tempfile::tempdir().unwrap();
    let (project, component) = scaffold(work.path(), "threshold", "node-kind");
    let out = plugin(&["manifest", &component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(manifest["node_kinds"][0]["name"], "threshold");
    let example = std::fs::read_to_string(project.join("example-input.json")).unwrap();
    let (code, report) = test_call(&component, "threshold", &example, &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["output"]["event"], json!({"player_id": "p-1", "amount": 250, "reached": true}));
    let below = r#"{"config": {"field": "amount", "min": 100}, "event": {"amount": 5}}"#;
    assert_eq!(test_call(&component, "threshold", below, &[]).1["output"], json!({"pass": false}));
    let missing = r#"{"config": {"field": "amount", "min": 100}, "event": {"bet": 5}}"#;
    let (code, report) = test_call(&component, "threshold", missing, &[]);
    assert_eq!((code, &report["outcome"]), (Some(1), &json!("skip-forward")), "{report}");

    let (project, component) = scaffold(work.path(), "segments", "service");
    let out = plugin(&["manifest", &component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&manifest["service"], &manifest["data_sources"][0]["name"]), (&json!("segments"), &json!("segments")));
    let example = std::fs::read_to_string(project.join("example-input.json")).unwrap();
    let (code, report) = test_call(&component, "tag", &example, &[]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["logs"][0]["message"], "tagged p-1 as vip");
}

/// Scaffolds `name` in `lang` (Python or JavaScript) and `world` into `work`, runs its unit tests with
/// `unit_tests` and builds it; answers the component.
fn scaffold_interpreted(work: &Path, name: &str, lang: &str, world: &str, unit_tests: &[&str]) -> String {
    let project = work.join(name);
    let dir = project.display().to_string();
    let out = plugin(&["new", name, "--lang", lang, "--world", world, "--dir", &dir], None);
    assert!(out.status.success(), "plugin new: {}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8_lossy(&out.stdout);
    for file in ["build.sh", "README.md", ".gitignore", "example-input.json", "wit/world.wit"] {
        assert!(project.join(file).is_file() && listed.contains(file), "{file} missing: {listed}");
    }
    let tests = Command::new(unit_tests[0]).args(&unit_tests[1..]).current_dir(&project).output().unwrap();
    assert!(
        tests.status.success(),
        "{unit_tests:?}: {}{}",
        String::from_utf8_lossy(&tests.stdout),
        String::from_utf8_lossy(&tests.stderr)
    );
    let out = plugin(&["build", &dir], None);
    assert!(out.status.success(), "plugin build of {lang}: {}", String::from_utf8_lossy(&out.stderr));
    let component = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(component, project.join(format!("build/{name}.wasm")).display().to_string());
    component
}

/// The action world of a Python or JavaScript project: `greet` answers, logs, and classifies its failures; the
/// manifest declares the action's schema and the one capability the world imports.
fn greets_and_classifies(component: &str, id: &str) {
    let out = plugin(&["manifest", component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no manifest: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!((&manifest["id"], &manifest["capabilities"]), (&json!(id), &json!(["log"])));
    assert_eq!(manifest["actions"][0]["config_schema"]["required"], json!(["player_id"]));

    let context = r#"{"tenant_id": "t-1", "attempt": 2}"#;
    let (code, report) = test_call(component, "greet", r#"{"player_id": "p-1"}"#, &["--context", context]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["output"], json!({"player_id": "p-1", "message": "Hello, p-1!"}));
    assert_eq!(report["logs"], json!([{"level": "info", "message": "greeted p-1"}]));
    for bad in [r#"{"player_id": " "}"#, r#"{"player_id": "p-1", "colour": "red"}"#, "[1]", "not json"] {
        let (code, report) = test_call(component, "greet", bad, &[]);
        assert_eq!((code, &report["outcome"]), (Some(1), &json!("permanent")), "{bad}: {report}");
    }
    let (code, report) = test_call(component, "wave", "{}", &[]);
    assert_eq!((code, &report["outcome"]), (Some(1), &json!("permanent")), "{report}");
}

/// The backend sets a built component is uploaded into: the embedded defaults, then the real servers (where a
/// component over 8 MiB is stored in MongoDB as chunks).
const BACKENDS: [Backends; 2] = [Backends::Embedded, Backends::Distributed];

/// Uploads `component` (plugin `id`) into a running Flowhost on `backends` and runs `greet` in a released flow:
/// source -> the plugin's segment -> greet, configured with a placeholder -> output topic.
async fn runs_in_a_released_flow(component: &str, id: &str, backends: Backends) {
    let host = TestHost::start(backends).await;
    host.upload_plugin(id, "0.1.0", std::fs::read(component).unwrap()).await;
    let schema = json!({"fields": [{"name": "player_id", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let (source, out) = (unique("in"), unique("out"));
    let flow_id = host
        .release_flow(json!({
            "nodes": [
                {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
                {"id": "seg", "kind": "service-in", "config": {"service": id}},
                {"id": "greet", "kind": "action",
                 "config": {"action_ref": "greet", "player_id": "{{player_id}}", "greeting": "Welcome"}},
                {"id": "out", "kind": "output-topic", "config": {"topic": out}}
            ],
            "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "greet"}, {"from": "greet", "to": "out"}]
        }))
        .await;
    host.publish(&source, &[json!({"event_type": "deposit", "tenant_id": "casino-1", "player_id": "p-7"})]).await;
    let records = host.read(&out, 1, Duration::from_secs(60)).await;
    assert_eq!(records.len(), 1, "no output on {out}");
    let value: Value = serde_json::from_slice(&records[0].value).unwrap();
    assert_eq!(value["result"], json!({"player_id": "p-7", "message": "Welcome, p-7!"}), "{value}");
    host.completed_runs(&flow_id, 1).await;
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_action_builds_tests_and_runs_in_a_released_flow() {
    let work = tempfile::tempdir().unwrap();
    let component = tokio::task::spawn_blocking({
        let work = work.path().to_owned();
        move || scaffold_interpreted(&work, "greeter-py", "python", "action", &["python3", "-m", "unittest"])
    })
    .await
    .unwrap();
    let size = std::fs::metadata(&component).unwrap().len();
    assert!(size > 8 << 20 && size < 20 << 20, "an interpreter's component, under the 20 MiB default: {size}");
    let checked = component.clone();
    tokio::task::spawn_blocking(move || greets_and_classifies(&checked, "greeter-py")).await.unwrap();
    for backends in BACKENDS {
        runs_in_a_released_flow(&component, "greeter-py", backends).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_action_builds_tests_and_runs_in_a_released_flow() {
    let work = tempfile::tempdir().unwrap();
    let component = tokio::task::spawn_blocking({
        let work = work.path().to_owned();
        move || scaffold_interpreted(&work, "greeter-js", "js", "action", &["npm", "test"])
    })
    .await
    .unwrap();
    let checked = component.clone();
    tokio::task::spawn_blocking(move || greets_and_classifies(&checked, "greeter-js")).await.unwrap();
    for backends in BACKENDS {
        runs_in_a_released_flow(&component, "greeter-js", backends).await;
    }
}

/// A service and a node-kind project of one language, built and uploaded into a running Flowhost on both backend
/// sets: the service's
/// data source answers through the component catalog (as Studio's form reads it), and the node kind runs in a
/// released flow through the batch contract (`prepare` once, `evaluate` per batch): an event at the threshold
/// continues marked `reached`, one below stops.
async fn service_and_node_kind_answer_in_a_running_flowhost(lang: &'static str, unit_tests: &'static [&'static str]) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().to_owned();
    let (service, node_kind) = (format!("segments-{lang}"), format!("threshold-{lang}"));
    let components = tokio::task::spawn_blocking({
        let (service, node_kind) = (service.clone(), node_kind.clone());
        move || {
            let service = scaffold_interpreted(&dir, &service, lang, "service", unit_tests);
            (service, scaffold_interpreted(&dir, &node_kind, lang, "node-kind", unit_tests))
        }
    })
    .await
    .unwrap();
    for backends in BACKENDS {
        answer_in_a_running_flowhost(backends, (&service, &components.0), (&node_kind, &components.1)).await;
    }
}

/// The service's data source answers through the catalog and the node kind runs in a released flow, on
/// `backends`; each is `(plugin id, component)`.
async fn answer_in_a_running_flowhost(
    backends: Backends,
    service_component: (&String, &String),
    node_kind_component: (&String, &String),
) {
    let (service, node_kind) = (service_component.0, node_kind_component.0);
    let host = TestHost::start(backends).await;
    for (id, component) in [service_component, node_kind_component] {
        host.upload_plugin(id, "0.1.0", std::fs::read(component).unwrap()).await;
    }
    let (status, choices) = host.call("GET", &format!("/api/v1/components/{service}/data/segments?q=vi"), None).await;
    assert_eq!((status, choices), (200, json!([{"value": "vip", "label": "VIP"}])));

    let schema = json!({"fields": [{"name": "player_id", "type": "string"}, {"name": "amount", "type": "double"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let (source, out) = (unique("in"), unique("out"));
    let flow_id = host
        .release_flow(json!({
            "nodes": [
                {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
                {"id": "gate", "kind": "node-kind",
                 "config": {"plugin": node_kind, "kind": node_kind, "field": "amount", "min": 100}},
                {"id": "out", "kind": "output-topic", "config": {"topic": out}}
            ],
            "edges": [{"from": "src", "to": "gate"}, {"from": "gate", "to": "out"}]
        }))
        .await;
    let deposit = |player: &str, amount: f64| json!({"event_type": "deposit", "tenant_id": "casino-1", "player_id": player, "amount": amount});
    host.publish(&source, &[deposit("p-low", 5.0), deposit("p-high", 250.0)]).await;
    let records = host.read(&out, 1, Duration::from_secs(60)).await;
    let value: Value = serde_json::from_slice(&records[0].value).unwrap();
    assert_eq!((&value["player_id"], &value["reached"]), (&json!("p-high"), &json!(true)), "{value}");
    // Both runs complete; the one below the threshold ends at the gate.
    let page = host.completed_runs(&flow_id, 2).await;
    let mut gates: Vec<Value> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            run["path"].as_array().unwrap().iter().find(|step| step["node_id"] == "gate").unwrap()["outcome"].clone()
        })
        .collect();
    gates.sort_by_key(Value::to_string);
    assert_eq!(gates, [json!("not_matched"), json!("passed")], "{page}");
    host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_service_and_node_kind_answer_in_a_running_flowhost() {
    service_and_node_kind_answer_in_a_running_flowhost("python", &["python3", "-m", "unittest"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_javascript_service_and_node_kind_answer_in_a_running_flowhost() {
    service_and_node_kind_answer_in_a_running_flowhost("js", &["npm", "test"]).await;
}

/// `plugin test` of a projector: the record (`--input`) projected onto the state (`--state`, a file, or `-`).
fn project_call(component: &str, project: &Path, state: Option<&str>) -> (Option<i32>, Value) {
    let input = project.join("example-input.json").display().to_string();
    let mut args = vec!["test", component, "--input", &input, "--json"];
    if state.is_some() {
        args.extend_from_slice(&["--state", "-"]);
    }
    let out = plugin(&args, state);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("no report: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

/// The projector template of one language: a visit counted onto the example state, the same record again a
/// duplicate, a record that cannot be right rejected for good (the presence role dead-letters it), a state the
/// projection cannot read retried, and `--action` refused.
fn projects_and_classifies(component: &str, project: &Path) {
    let out = plugin(&["manifest", component], None);
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(manifest["capabilities"], json!(["log"]), "{manifest}");
    let state = std::fs::read_to_string(project.join("example-state.json")).unwrap();
    let (code, report) = project_call(component, project, Some(&state));
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        (&report["output"]["outcome"], &report["output"]["document"]["sites"]["34"]["visits"]),
        (&json!("applied"), &json!(3))
    );
    assert_eq!(report["logs"], json!([{"level": "debug", "message": "projected: applied"}]));
    let document = report["output"]["document"].to_string();
    let (_, report) = project_call(component, project, Some(&document));
    assert_eq!(report["output"], json!({"outcome": "duplicate"}));
    let (_, report) = project_call(component, project, None);
    assert_eq!(report["output"]["document"]["sites"]["34"]["visits"], 1, "a new key");

    let mut bad: Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("example-input.json")).unwrap()).unwrap();
    bad["value"] = json!("not json");
    let out = plugin(&["test", component, "--input", "-", "--json"], Some(&bad.to_string()));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.code(), &report["outcome"]), (Some(1), &json!("permanent")), "{report}");
    assert!(report["error"].as_str().unwrap().contains("malformed_json: "), "{report}");
    let (code, report) = project_call(component, project, Some("[]"));
    assert_eq!((code, &report["outcome"]), (Some(1), &json!("retryable")), "{report}");

    let out = plugin(&["test", component, "--action", "project", "--input", "-"], Some("{}"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a projector"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_new_projector_builds_and_projects_in_every_language() {
    let work = tempfile::tempdir().unwrap();
    let (project, component) = scaffold(work.path(), "visits-rs", "projector");
    projects_and_classifies(&component, &project);
    let component =
        scaffold_interpreted(work.path(), "visits-py", "python", "projector", &["python3", "-m", "unittest"]);
    projects_and_classifies(&component, &work.path().join("visits-py"));
    let component = scaffold_interpreted(work.path(), "visits-js", "js", "projector", &["npm", "test"]);
    projects_and_classifies(&component, &work.path().join("visits-js"));
}

/// The ten-minute walk (`examples/plugin-walk/walk.sh`), which times each step from `plugin new` to the first run
/// in a released flow, completes in every language. Its timings are printed, never asserted: they are the
/// closing figures of the issue, not a test that a slow machine fails.
#[test]
fn the_timed_walk_completes_in_every_language() {
    for lang in ["rust", "python", "js"] {
        let out = Command::new("bash")
            .arg(repository_root().join("examples/plugin-walk/walk.sh"))
            .arg(lang)
            .arg(flowhost_bin())
            // The walk's cargo builds for itself, cold, as an author's first build does.
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        println!("{report}");
        assert!(out.status.success(), "the walk in {lang}:\n{report}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(report.contains("\"message\":\"Hello, p-1!\""), "the action's output in the flow's: {report}");
    }
}
