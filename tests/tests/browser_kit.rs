//! The browser kit (`examples/web-push-kit`) in headless Chromium (spec 000, "Browser-side rules" and the bridge
//! contract): the bridge stores a subscription for its session's player; the page, clicked, subscribes with
//! the config it fetched at load (no request between the click and `subscribe`); Flowhost delivers two real
//! pushes (one with a tag, one without tag, icon or badge) to the local HTTPS push service, which decrypts them;
//! each payload is handed to the kit's service worker through the DevTools protocol; the worker shows it and
//! reports `displayed` with its interaction token, which Flowhost verifies and records. The page's in-app
//! websocket goes to the bridge, which proxies it to Flowhost, and shows a message sent afterwards. Through the
//! bridge too: a semantic `opened` event is recorded for the session's player whatever the body says, CORS
//! answers only configured origins, the socket refuses foreign origins and guests, and the click handoff
//! redirects only to its allowlist. A screenshot is kept in `target/test-artifacts/browser/`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use flowhost_tests::cli::repository_root;
use flowhost_tests::push::{editor, OPS_TOKEN, TENANT_A};
use flowhost_tests::push_service::PushService;
use flowhost_tests::{Backends, TestHost};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

const PLAYER: i64 = 42;
/// The product's other origins (`ALLOWED_ORIGINS`); the page itself is served by the bridge.
const ALLOWED_ORIGIN: &str = "https://www.casino.example";
const FOREIGN_ORIGIN: &str = "https://evil.example";

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

/// The JSON after the line's `PREFIX `.
async fn next_json(lines: &mut Lines<BufReader<ChildStdout>>, prefix: &str) -> Value {
    let line = next_line(lines, prefix).await;
    serde_json::from_str(line[prefix.len()..].trim_start()).unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

/// Starts the kit's bridge for `host` with the session `player` (0: no signed-in player); answers its URL.
async fn bridge(host: &TestHost, player: i64) -> (Child, String) {
    let (child, mut lines) = node(
        &repository_root().join("examples/web-push-kit/bridge.mjs"),
        &[],
        &[
            ("FLOWHOST_URL", host.base_url.clone()),
            ("PUSH_PLATFORM_TOKEN", OPS_TOKEN.to_owned()),
            ("SOURCE_APP", "casino-web".to_owned()),
            ("BRIDGE_PORT", "0".to_owned()),
            ("WEBPUSH_ALLOWED_TARGET_HOSTS", "casino.example".to_owned()),
            ("ALLOWED_ORIGINS", format!("https://casino.example,{ALLOWED_ORIGIN}")),
            ("DEMO_TENANT_ID", TENANT_A.to_owned()),
            ("DEMO_PLAYER_ID", player.to_string()),
        ],
    );
    let port = next_line(&mut lines, "LISTENING").await.trim_start_matches("LISTENING ").to_owned();
    (child, format!("http://127.0.0.1:{port}"))
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the bridge's in-app socket as a page of `origin` would: the socket, or the status it was refused with.
async fn open_socket(bridge: &str, origin: Option<&str>) -> Result<Socket, u16> {
    let mut request = format!("{}/api/inapp/socket", bridge.replacen("http", "ws", 1)).into_client_request().unwrap();
    if let Some(origin) = origin {
        request.headers_mut().insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tungstenite::Error::Http(response)) => Err(response.status().as_u16()),
        Err(error) => panic!("the bridge's socket: {error}"),
    }
}

/// The next JSON frame that is not a `ping`.
async fn next_frame(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket is open")
            .expect("a frame");
        if let Message::Text(text) = message {
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["type"] != "ping" {
                return frame;
            }
        }
    }
}

/// The notification record once `check` holds for its events (30 s at most).
async fn record_when(host: &TestHost, notification_id: &str, check: impl Fn(&[Value]) -> bool) -> Value {
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let path = format!("/api/v1/webpush/notifications/{notification_id}");
        let (_, record) = editor(host, None, "GET", &path, None).await;
        if record["events"].as_array().is_some_and(|events| check(events)) {
            return record;
        }
        assert!(tokio::time::Instant::now() < until, "not recorded: {record}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_worker_shows_a_push_and_reports_displayed() {
    let service = PushService::start().await;
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        config.plugins.bundled = true;
        config.section_mut::<flowhost_push_api::PushConfig>().push_service_hosts = Some("127.0.0.1".into());
        config.section_mut::<flowhost_push_api::PushConfig>().ssl_cert_file =
            Some(service.ca_path.display().to_string());
    })
    .await;
    host.wait_ready().await;
    let mut templates = Vec::new();
    for template in [
        json!({"name": "Bonus", "target_url": "https://casino.example/lobby", "tag": "bonus",
               "contents": {"en": {"title": "Your bonus is here", "body": "50 free spins"}}}),
        // No tag, icon or badge, and an action without an icon: none of them may reach showNotification.
        json!({"name": "Spins", "target_url": "https://casino.example/spins",
               "actions": [{"id": "play", "label": "Play now", "target_url": "https://casino.example/play"}],
               "contents": {"en": {"title": "Your spins expire today", "body": "Use them before midnight"}}}),
    ] {
        let (status, created) =
            editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(template)).await;
        assert_eq!(status, 201, "{created}");
        templates.push(created["id"].as_i64().unwrap());
    }
    let inapp = json!({"name": "Hello", "contents": {"en": {"title": "Welcome back", "body": "A gift awaits"}}});
    assert_eq!(editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(inapp)).await.0, 201);

    // The bridge: the caller token stays on its side; the session is player 42 of tenant-a.
    let root = repository_root();
    let (_bridge, bridge_url) = bridge(&host, PLAYER).await;
    let port = bridge_url.rsplit(':').next().unwrap().to_owned();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

    // The browser hands the bridge only endpoint and keys (a subscription the local push service answers).
    let subscription = service.subscribe(&[201], None).await;
    let keys = json!({"p256dh": subscription.p256dh, "auth": subscription.auth});
    let body =
        json!({"endpoint": subscription.endpoint, "keys": keys, "tenant_id": "another-tenant", "player_id": 999});
    let stored = http.post(format!("{bridge_url}/api/push/subscriptions")).json(&body).send().await.unwrap();
    assert_eq!(stored.status().as_u16(), 201);
    let stored: Value = stored.json().await.unwrap();
    assert_eq!(
        (stored["tenant_id"].as_str(), stored["player_id"].as_i64()),
        (Some(TENANT_A), Some(PLAYER)),
        "the session wins"
    );
    let config: Value = http.get(format!("{bridge_url}/api/push/config")).send().await.unwrap().json().await.unwrap();
    assert_eq!(config["payload_version"], "v1", "{config}");

    // Flowhost delivers both; the push service decrypts; those payloads go to the worker.
    let mut notifications = Vec::new();
    for template_id in &templates {
        let send = json!({"tenant_id": TENANT_A, "player_id": PLAYER, "template_id": template_id, "language_enabled_id": "en"});
        let (status, result) = editor(&host, None, "POST", "/api/v1/webpush/send", Some(send)).await;
        assert_eq!((status, result["delivered"].as_bool()), (200, Some(true)), "{result}");
        notifications.push(result["notification_id"].as_str().unwrap().to_owned());
    }
    let received = service.received(&subscription).await;
    let payloads: Vec<Value> = notifications
        .iter()
        .map(|id| {
            let found = received.iter().find(|push| push["payload"]["data"]["notification_id"] == id.as_str());
            found.unwrap_or_else(|| panic!("no push of {id}: {received:?}"))["payload"].clone()
        })
        .collect();
    for field in ["tag", "icon", "badge"] {
        assert!(payloads[1].get(field).is_none(), "the second payload has no {field}: {}", payloads[1]);
    }
    // The other forms of an absent field: null and empty, which a worker must not pass on either.
    let mut handed = payloads.clone();
    handed[1]["icon"] = Value::Null;
    handed[1]["badge"] = json!("");
    handed[1]["image"] = json!("");
    let dir = tempfile::tempdir().unwrap();
    let input_file = dir.path().join("input.json");
    let input = json!({"payloads": handed, "subscription": {"endpoint": subscription.endpoint, "keys": keys}});
    std::fs::write(&input_file, input.to_string()).unwrap();
    let artifacts = root.join("target/test-artifacts/browser");
    std::fs::create_dir_all(&artifacts).unwrap();

    let (_browser, mut browser_lines) = node(
        &root.join("tests/browser/push_kit.mjs"),
        &[&bridge_url, &input_file.display().to_string(), &artifacts.display().to_string()],
        &[],
    );
    next_line(&mut browser_lines, "READY").await;

    // The page's in-app socket is the bridge's: the browser never sees Flowhost.
    let sockets = next_json(&mut browser_lines, "SOCKET").await;
    let bridge_socket = format!("ws://127.0.0.1:{port}/api/inapp/socket");
    assert_eq!(sockets["page"], bridge_socket, "{sockets}");
    assert!(sockets["opened"].as_array().unwrap().iter().all(|url| url == &json!(bridge_socket)), "{sockets}");

    // The click subscribes with the config fetched at load: nothing but the subscription's hand-over is requested.
    let subscribed = next_json(&mut browser_lines, "SUBSCRIBED").await;
    let calls = subscribed["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{subscribed}");
    assert_eq!(calls[0]["userVisibleOnly"], true);
    assert_eq!(calls[0]["applicationServerKey"], config["public_key"]);
    assert_eq!(calls[0]["userActivation"], true, "subscribe runs within the click's activation");
    assert_eq!(subscribed["requests"], json!(["POST /api/push/subscriptions"]), "{subscribed}");
    assert_eq!(subscribed["status"], "Notifications are on.");

    // The worker showed both; the second with no tag, icon, badge or image, and an action without an icon.
    let first = next_json(&mut browser_lines, "PUSHED").await;
    assert_eq!((first["title"].as_str(), first["tag"].as_str()), (Some("Your bonus is here"), Some("bonus")));
    let second = next_json(&mut browser_lines, "PUSHED").await;
    assert_eq!(second["title"], "Your spins expire today", "{second}");
    let absent = ["tag", "icon", "badge", "image"].map(|field| second[field].as_str());
    assert_eq!(absent, [Some(""); 4], "nothing passed, nothing loaded: {second}");
    let action = &second["actions"][0];
    assert_eq!(
        (action["action"].as_str(), action["title"].as_str(), action["icon"].as_str()),
        (Some("play"), Some("Play now"), Some("")),
        "{second}"
    );

    // Each worker report went through the bridge with its payload's token: Flowhost recorded both.
    for (notification_id, payload) in notifications.iter().zip(&payloads) {
        let record = record_when(&host, notification_id, |events| !events.is_empty()).await;
        let event = &record["events"][0];
        assert_eq!(event["event_type"], "displayed", "{record}");
        assert_eq!(event["delivery_id"], payload["delivery_id"]);
    }

    // An in-app message reaches the page's websocket, through the bridge.
    let inapp = json!({"tenant_id": TENANT_A, "template_id": 1, "player_id": PLAYER});
    let (status, sent) = editor(&host, None, "POST", "/api/v1/templates/in-app/send", Some(inapp)).await;
    assert_eq!(status, 200, "{sent}");
    let shown = next_line(&mut browser_lines, "INAPP").await;
    assert_eq!(shown, "INAPP Welcome back: A gift awaits");
    next_line(&mut browser_lines, "DONE").await;
    assert!(artifacts.join("push-kit.png").exists(), "the screenshot is kept");

    // The proxied socket carries frames both ways: the session's player, and a `read` frame answered.
    let mut socket = open_socket(&bridge_url, Some(ALLOWED_ORIGIN)).await.expect("an allowed origin's socket");
    let hello = next_frame(&mut socket).await;
    assert_eq!((hello["type"].as_str(), hello["player_id"].as_i64()), (Some("hello"), Some(PLAYER)), "{hello}");
    let read = json!({"type": "read", "notification_ids": [sent["notification_id"]]});
    socket.send(Message::Text(read.to_string().into())).await.unwrap();
    assert_eq!(next_frame(&mut socket).await, json!({"type": "read", "marked": 1}));
    drop(socket);
    assert_eq!(open_socket(&bridge_url, Some(FOREIGN_ORIGIN)).await.err(), Some(403), "a foreign page's socket");

    // A semantic event: the identity is the session's, not the body's.
    let opened = json!({"delivery_id": payloads[0]["delivery_id"], "notification_id": notifications[0],
                        "event_type": "opened", "tenant_id": "another-tenant", "player_id": 999});
    let answer = http.post(format!("{bridge_url}/api/push/semantic")).json(&opened).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    let record =
        record_when(&host, &notifications[0], |events| events.iter().any(|e| e["event_type"] == "opened")).await;
    let event = record["events"].as_array().unwrap().iter().find(|e| e["event_type"] == "opened").unwrap();
    assert_eq!(
        (event["source"].as_str(), event["tenant_id"].as_str(), event["player_id"].as_i64()),
        (Some("semantic"), Some(TENANT_A), Some(PLAYER)),
        "{record}"
    );
    assert!(event["event_id"].as_str().is_some_and(|id| id.len() == 36), "the bridge named it: {event}");

    // CORS on the browser-events route: configured origins only, never `*`.
    for (origin, allowed) in [("https://casino.example", true), (ALLOWED_ORIGIN, true), (FOREIGN_ORIGIN, false)] {
        let events = format!("{bridge_url}/api/push/events");
        let preflight = http
            .request(reqwest::Method::OPTIONS, &events)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
            .await
            .unwrap();
        let post = http.post(&events).header("origin", origin).json(&json!({})).send().await.unwrap();
        assert_eq!(preflight.status().as_u16(), 204);
        for answer in [&preflight, &post] {
            let headers = answer.headers();
            let acao = headers.get("access-control-allow-origin").map(|v| v.to_str().unwrap());
            assert_eq!(acao, allowed.then_some(origin), "{origin}: {headers:?}");
            assert_eq!(headers.get("vary").is_some_and(|v| v == "origin"), allowed, "{origin}: {headers:?}");
        }
    }

    // Without a signed-in player: no semantic event and no socket.
    let (_guest_bridge, guest) = bridge(&host, 0).await;
    let answer = http.post(format!("{guest}/api/push/semantic")).json(&opened).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    assert_eq!(open_socket(&guest, None).await.err(), Some(401), "a guest's socket");

    // The click handoff records `clicked` and redirects to an allowed host only.
    let notification_id = &notifications[0];
    let click = |target: &str| {
        let mut url = reqwest::Url::parse(&format!("{bridge_url}/api/push/click")).unwrap();
        url.query_pairs_mut()
            .append_pair("target", target)
            .append_pair("delivery_id", payloads[0]["delivery_id"].as_str().unwrap())
            .append_pair("notification_id", notification_id)
            .append_pair("interaction_token", payloads[0]["interaction_token"].as_str().unwrap())
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
