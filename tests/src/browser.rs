//! Browser sessions: one scenario of `tests/browser/studio.mjs` (headless Chromium driven by playwright-core)
//! against a running host.

use std::process::Stdio;
use std::time::Duration;

use crate::cli::repository_root;
use crate::TestHost;

/// Runs one scenario of `tests/browser/studio.mjs` against `host`, with `env` (see the script's header); its
/// screenshot is kept.
pub async fn studio_session(host: &TestHost, scenario: &str, env: &[(&str, &str)]) {
    let root = repository_root();
    let artifacts = root.join("target/test-artifacts/browser");
    std::fs::create_dir_all(&artifacts).unwrap();
    let run = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/studio.mjs"))
        .args([&host.base_url, &artifacts.display().to_string(), scenario])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), run).await.expect("the session ends").unwrap();
    let lines = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success() && lines.lines().last() == Some("DONE"), "{scenario}:\n{lines}");
    assert!(artifacts.join(format!("studio-{scenario}.png")).exists(), "the screenshot is kept");
}
