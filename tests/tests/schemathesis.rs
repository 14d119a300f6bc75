//! Schemathesis (PyPI; installed by `tests/scripts/servers.sh`) over the OpenAPI document of every socket of a
//! host running every role that serves HTTP, on the embedded defaults and on the real servers: requests made up
//! from each document, valid and invalid, and four checks on every answer: no 5xx, the status and the content
//! type documented, the body valid against the documented schema, and no internals in an error body (driver or
//! runtime text, source paths; `tests/scripts/schemathesis_hooks.py`).
//!
//! The budget is `FLOWHOST_SCHEMATHESIS_EXAMPLES` cases per operation and phase (default 5, what CI runs);
//! a deeper run: `FLOWHOST_SCHEMATHESIS_EXAMPLES=100 bash tests/run.sh -p flowhost-tests --test schemathesis`.
//! `POST /api/v1/components/register` is left out: a registration names an endpoint that the data-source
//! proxy would then call, and made-up names must not be looked up off this machine (the catalog suite tests it).

use std::process::Command;

use flowhost_tests::every_role::EveryRole;
use flowhost_tests::push::{EDITOR_TOKEN, OPS_TOKEN, SOURCE_APP};
use flowhost_tests::{on_both_backends, Backends};

on_both_backends!(schemathesis_finds_nothing);

const CHECKS: [&str; 5] = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "no_internals_in_errors",
];

async fn schemathesis_finds_nothing(backends: Backends) {
    let st = std::env::var("FLOWHOST_TEST_SCHEMATHESIS")
        .expect("FLOWHOST_TEST_SCHEMATHESIS names schemathesis' `st`: run the suite through tests/run.sh");
    let examples = std::env::var("FLOWHOST_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "5".to_owned());
    let hooks = flowhost_tests::cli::repository_root().join("tests/scripts");
    let every = EveryRole::start(backends).await;
    // Each socket as an anonymous caller; the push API also as a platform caller allowed every route and as
    // the editor, so that requests get past authentication.
    let mut runs: Vec<(String, Vec<String>)> = every.sockets.iter().map(|base| (base.clone(), Vec::new())).collect();
    let caller = vec![format!("Authorization: Bearer {OPS_TOKEN}"), format!("X-Source-App: {SOURCE_APP}")];
    runs.push((every.push.clone(), caller));
    runs.push((every.push.clone(), vec![format!("Authorization: Bearer {EDITOR_TOKEN}")]));
    let config = hooks.join("schemathesis.toml");
    let mut failed = Vec::new();
    for (base, headers) in runs {
        let report = tempfile::tempdir().unwrap();
        let run = tokio::task::spawn_blocking({
            let (st, examples, hooks, base, config, headers) =
                (st.clone(), examples.clone(), hooks.clone(), base.clone(), config.clone(), headers.clone());
            let report = report.path().to_path_buf();
            move || {
                Command::new(st)
                    .arg("--config-file")
                    .arg(config)
                    .arg("run")
                    .args(headers.iter().flat_map(|header| ["--header", header.as_str()]))
                    .arg(format!("{base}/openapi.json"))
                    .arg("--checks")
                    .arg(CHECKS.join(","))
                    // One worker: with two, hypothesis parses source in both threads at once, and the Python
                    // the suite installs (3.11.7) can fail such a parse ("AST constructor recursion depth
                    // mismatch", a CPython race): a crash of the tool, not a finding.
                    .args(["--max-examples", &examples, "--seed", "29", "--workers", "1", "--no-color"])
                    .args(["--phases", "examples,coverage,fuzzing", "--request-timeout", "10"])
                    .args(["--exclude-operation-id", "post_api_v1_components_register"])
                    .args(["--generation-database", "none", "--suppress-health-check", "all"])
                    .arg("--report-dir")
                    .arg(&report)
                    // Its own files (a cache of failures) go to the report's folder, not into the checkout.
                    .current_dir(&report)
                    .env("SCHEMATHESIS_HOOKS", "schemathesis_hooks")
                    .env("PYTHONPATH", hooks)
                    .output()
                    .expect("schemathesis runs")
            }
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&run.stdout);
        println!(
            "== schemathesis {base} {} ==\n{stdout}{}",
            header_names(&headers),
            String::from_utf8_lossy(&run.stderr)
        );
        if !run.status.success() {
            failed.push(base);
        }
    }
    every.host.stop().await;
    assert!(failed.is_empty(), "schemathesis found failures on {failed:?} (its output is above)");
}

/// The names of `headers`, never their values (the tokens).
fn header_names(headers: &[String]) -> String {
    headers.iter().filter_map(|header| header.split(':').next()).collect::<Vec<_>>().join(", ")
}
