//! The browser kit (`examples/web-push-kit`) in headless Chromium (spec 000, "Browser-side rules" and the bridge
//! contract): the bridge stores a subscription for its session's player, Flowhost delivers a real push to the
//! local HTTPS push service, which decrypts it; that payload is handed to the kit's service worker through the
//! DevTools protocol; the worker shows it and reports `displayed` with its interaction token, which Flowhost
//! verifies and records. The page's in-app websocket shows a message sent afterwards, and the bridge's click
//! handoff redirects only to its allowlist. A screenshot is kept in `target/test-artifacts/browser/`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use flowhost_tests::cli::repository_root;
use flowhost_tests::push::{editor, OPS_TOKEN, TENANT_A};
use flowhost_tests::push_service::PushService;
use flowhost_tests::{Backends, TestHost};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const PLAYER: i64 = 42;

/// Starts `node <script> <args>` and answers its stdout lines; stderr goes to the test's output.
fn node(script: &PathBuf, args: &[&str], env: &[(&str, String)]) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut command = Command::new("node");
    command.arg(script).args(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("node (Node.js) must be installed");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>, expected: &str) -> String {
    let line = tokio::time::timeout(Duration::from_secs(90), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("no {expected} within 90 s"))
        .unwrap()
        .unwrap_or_else(|| panic!("the process ended before {expected}"));
    assert!(line.starts_with(expected), "expected {expected}, got {line:?}");
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_worker_shows_a_push_and_reports_displayed() {
    let service = PushService::start().await;
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        config.plugins.bundled = true;
        config.push.push_service_hosts = Some("127.0.0.1".into());
        config.push.ssl_cert_file = Some(service.ca_path.display().to_string());
    })
    .await;
    host.wait_ready().await;
    let template = json!({"name": "Bonus", "target_url": "https://casino.example/lobby", "tag": "bonus",
        "contents": {"en": {"title": "Your bonus is here", "body": "50 free spins"}}});
    assert_eq!(editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(template)).await.0, 201);
    let inapp = json!({"name": "Hello", "contents": {"en": {"title": "Welcome back", "body": "A gift awaits"}}});
    assert_eq!(editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(inapp)).await.0, 201);

    // The bridge: the caller token stays on its side; the session is player 42 of tenant-a.
    let root = repository_root();
    let (_bridge, mut bridge_lines) = node(
        &root.join("examples/web-push-kit/bridge.mjs"),
        &[],
        &[
            ("FLOWHOST_URL", host.base_url.clone()),
            ("PUSH_PLATFORM_TOKEN", OPS_TOKEN.to_owned()),
            ("SOURCE_APP", "casino-web".to_owned()),
            ("BRIDGE_PORT", "0".to_owned()),
            ("WEBPUSH_ALLOWED_TARGET_HOSTS", "casino.example".to_owned()),
            ("DEMO_TENANT_ID", TENANT_A.to_owned()),
            ("DEMO_PLAYER_ID", PLAYER.to_string()),
        ],
    );
    let port = next_line(&mut bridge_lines, "LISTENING").await.trim_start_matches("LISTENING ").to_owned();
    let bridge = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

    // The browser hands the bridge only endpoint and keys (a subscription the local push service answers).
    let subscription = service.subscribe(&[201], None).await;
    let body = json!({"endpoint": subscription.endpoint, "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
                      "tenant_id": "another-tenant", "player_id": 999});
    let stored = http.post(format!("{bridge}/api/push/subscriptions")).json(&body).send().await.unwrap();
    assert_eq!(stored.status().as_u16(), 201);
    let stored: Value = stored.json().await.unwrap();
    assert_eq!(
        (stored["tenant_id"].as_str(), stored["player_id"].as_i64()),
        (Some(TENANT_A), Some(PLAYER)),
        "the session wins"
    );
    let config: Value = http.get(format!("{bridge}/api/push/config")).send().await.unwrap().json().await.unwrap();
    assert_eq!(config["payload_version"], "v1", "{config}");

    // Flowhost delivers; the push service decrypts; that exact payload goes to the worker.
    let send = json!({"tenant_id": TENANT_A, "player_id": PLAYER, "template_id": 1, "language_enabled_id": "en"});
    let (status, result) = editor(&host, None, "POST", "/api/v1/webpush/send", Some(send)).await;
    assert_eq!((status, result["delivered"].as_bool()), (200, Some(true)), "{result}");
    let notification_id = result["notification_id"].as_str().unwrap().to_owned();
    let payload = service.received(&subscription).await[0]["payload"].clone();
    let dir = tempfile::tempdir().unwrap();
    let payload_file = dir.path().join("payload.json");
    std::fs::write(&payload_file, payload.to_string()).unwrap();
    let artifacts = root.join("target/test-artifacts/browser");
    std::fs::create_dir_all(&artifacts).unwrap();

    let (_browser, mut browser_lines) = node(
        &root.join("tests/browser/push_kit.mjs"),
        &[&bridge, &payload_file.display().to_string(), &artifacts.display().to_string()],
        &[],
    );
    next_line(&mut browser_lines, "READY").await;
    next_line(&mut browser_lines, "PUSHED").await;

    // The worker reported `displayed` through the bridge with the payload's token: Flowhost recorded it.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let record = loop {
        let path = format!("/api/v1/webpush/notifications/{notification_id}");
        let (_, record) = editor(&host, None, "GET", &path, None).await;
        if record["events"].as_array().is_some_and(|events| !events.is_empty()) {
            break record;
        }
        assert!(tokio::time::Instant::now() < until, "no displayed event: {record}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let event = &record["events"][0];
    assert_eq!(event["event_type"], "displayed", "{record}");
    assert_eq!(event["delivery_id"], payload["delivery_id"]);

    // An in-app message reaches the page's websocket.
    let inapp = json!({"tenant_id": TENANT_A, "template_id": 1, "player_id": PLAYER});
    assert_eq!(editor(&host, None, "POST", "/api/v1/templates/in-app/send", Some(inapp)).await.0, 200);
    let shown = next_line(&mut browser_lines, "INAPP").await;
    assert_eq!(shown, "INAPP Welcome back: A gift awaits");
    next_line(&mut browser_lines, "DONE").await;
    assert!(artifacts.join("push-kit.png").exists(), "the screenshot is kept");

    // The click handoff records `clicked` and redirects to an allowed host only.
    let click = |target: &str| {
        let mut url = reqwest::Url::parse(&format!("{bridge}/api/push/click")).unwrap();
        url.query_pairs_mut()
            .append_pair("target", target)
            .append_pair("delivery_id", payload["delivery_id"].as_str().unwrap())
            .append_pair("notification_id", &notification_id)
            .append_pair("interaction_token", payload["interaction_token"].as_str().unwrap())
            .append_pair("action_id", "play");
        url
    };
    let redirected = http.get(click("https://casino.example/lobby")).send().await.unwrap();
    assert_eq!(redirected.status().as_u16(), 307);
    assert_eq!(redirected.headers()["location"], "https://casino.example/lobby");
    let refused = http.get(click("https://evil.example/phish")).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let (_, record) =
        editor(&host, None, "GET", &format!("/api/v1/webpush/notifications/{notification_id}"), None).await;
    let clicked: Vec<&Value> =
        record["events"].as_array().unwrap().iter().filter(|e| e["event_type"] == "clicked").collect();
    assert_eq!(clicked.len(), 1, "{record}");
    assert_eq!(clicked[0]["action_id"], "play");
    host.stop().await;
}
