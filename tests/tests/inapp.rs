//! In-app messages as a bridge and a browser see them (spec 000: `send_inapp` input, result and outcome table):
//! templates, the editor's send route running the `notifications` plugin, the websocket (hello, live messages,
//! resume after a cursor, read frames), the inbox routes, a deactivated channel's skip-forward, two nodes
//! sharing the subjects port, and a Kafka event running a flow to a message on a websocket.

use std::time::Duration;

use flowhost_core::config::Config;
use flowhost_tests::inapp::{connect_token, InAppSocket};
use flowhost_tests::push::{assert_error, editor, platform, EDITOR_TOKEN, OPS_TOKEN, TENANT_A};
use flowhost_tests::{on_both_backends, unique, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(
    a_sent_message_reaches_the_socket_and_the_inbox,
    a_reconnect_resumes_after_its_cursor,
    a_repeated_send_hands_over_the_stored_message,
    a_deactivated_channel_skips_and_bad_tokens_are_refused,
    a_kafka_event_runs_a_flow_to_a_message_on_a_websocket,
    one_client_cannot_exhaust_the_websockets,
    the_language_falls_back_to_the_template_then_the_tenant,
    a_component_built_for_notify_0_1_keeps_working,
);

const SEND: &str = "/api/v1/templates/in-app/send";
const WAIT: Duration = Duration::from_secs(20);

fn configure(config: &mut Config) {
    config.plugins.bundled = true;
    config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50;
}

async fn start_with(backends: Backends, tweak: impl FnOnce(&mut Config)) -> TestHost {
    let host = TestHost::start_configured(backends, None, |config| {
        configure(config);
        tweak(config);
    })
    .await;
    host.wait_ready().await;
    host
}

async fn start(backends: Backends) -> TestHost {
    let host = start_with(backends, |_| {}).await;
    let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(template())).await;
    assert_eq!((status, created["id"].as_i64()), (201, Some(1)), "{created}");
    host
}

/// An in-app template: no target URL needed, a default language.
fn template() -> Value {
    json!({
        "name": "Cashback",
        "placeholders": [{ "name": "amount" }],
        "default_language": "en",
        "contents": {
            "en": { "title": "Cashback", "body": "You got {{amount}} back" },
            "de": { "title": "Cashback", "body": "{{amount}} zurück" }
        }
    })
}

fn send_body(player: i64, amount: &str) -> Value {
    json!({ "tenant_id": TENANT_A, "template_id": 1, "player_id": player, "placeholders": { "amount": amount },
            "vertical": "casino", "category": "promo", "subcategory": "cashback" })
}

async fn send(host: &TestHost, body: Value) -> Value {
    let (status, result) = editor(host, None, "POST", SEND, Some(body)).await;
    assert_eq!(status, 200, "{result}");
    result
}

async fn inbox(host: &TestHost, player: i64, query: &str) -> Value {
    let path = format!("/api/v1/service/inapp/inbox?tenant_id={TENANT_A}&player_id={player}{query}");
    let (status, page) = platform(host, OPS_TOKEN, "GET", &path, None).await;
    assert_eq!(status, 200, "{page}");
    page
}

async fn a_sent_message_reaches_the_socket_and_the_inbox(backends: Backends) {
    let host = start(backends).await;
    let (mut socket, hello) = InAppSocket::connect(&host, TENANT_A, 7, None).await;
    assert_eq!((hello["player_id"].as_i64(), hello["unread"].as_u64()), (Some(7), Some(0)), "{hello}");
    // A second tab of the same player gets it too; another player does not.
    let (mut second, _) = InAppSocket::connect(&host, TENANT_A, 7, None).await;
    let (mut other, _) = InAppSocket::connect(&host, TENANT_A, 8, None).await;

    let result = send(&host, send_body(7, "10 EUR")).await;
    assert_eq!(result["delivered"], true, "{result}");
    let id = result["notification_id"].as_str().unwrap().to_owned();
    for tab in [&mut socket, &mut second] {
        let message = tab.next_message(WAIT).await.expect("the message");
        assert_eq!(message["notification_id"], id.as_str());
        assert_eq!(message["content"]["body"], "You got 10 EUR back", "the default language: {message}");
        assert_eq!(
            (message["vertical"].as_str(), message["category"].as_str(), message["subcategory"].as_str()),
            (Some("casino"), Some("promo"), Some("cashback"))
        );
        assert_eq!(message["status"], "unread");
    }
    assert!(other.next_message(Duration::from_millis(500)).await.is_none(), "another player's socket stays quiet");

    // The stored record and the editor's activity show it with the labels.
    let page = inbox(&host, 7, "").await;
    assert_eq!((page["total"].as_u64(), page["unread"].as_u64()), (Some(1), Some(1)), "{page}");
    assert_eq!(page["items"][0]["subcategory"], "cashback");
    let (status, record) = editor(&host, None, "GET", &format!("/api/v1/webpush/notifications/{id}"), None).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!((record["channel"].as_str(), record["status"].as_str()), (Some("IN_APP"), Some("delivered")));
    assert_eq!(record["content"]["vertical"], "casino");

    // A language asked for explicitly.
    let mut german = send_body(7, "5 EUR");
    german["language_id"] = json!("de");
    let german_id = send(&host, german).await["notification_id"].as_str().unwrap().to_owned();
    let message = socket.next_message(WAIT).await.unwrap();
    assert_eq!(message["content"]["body"], "5 EUR zurück");

    // Read from the socket (a `read` frame) and from the bridge route. The frame carries 199 unknown ids too: about
    // 60 KB, under the 64 KiB a client frame may have and fifteen times the connection's read buffer.
    let mut ids = vec![json!(id)];
    ids.extend((0..199).map(|n| json!(format!("{n:0>300}"))));
    let frame = json!({ "type": "read", "notification_ids": ids });
    assert!((60_000..64 * 1024).contains(&frame.to_string().len()));
    socket.send(&frame).await;
    let answer = socket.next_frame(WAIT).await.unwrap();
    assert_eq!(answer, json!({ "type": "read", "marked": 1 }));
    let body = json!({ "tenant_id": TENANT_A, "player_id": 7, "notification_ids": [german_id, "unknown"] });
    let (status, marked) = platform(&host, OPS_TOKEN, "POST", "/api/v1/service/inapp/inbox/read", Some(body)).await;
    assert_eq!((status, marked), (200, json!({ "marked": 1 })));
    let page = inbox(&host, 7, "&status=read").await;
    assert_eq!((page["total"].as_u64(), page["unread"].as_u64()), (Some(2), Some(0)), "{page}");
    // Another player cannot mark them.
    let body = json!({ "tenant_id": TENANT_A, "player_id": 8, "notification_ids": [id] });
    assert_eq!(platform(&host, OPS_TOKEN, "POST", "/api/v1/service/inapp/inbox/read", Some(body)).await.1["marked"], 0);

    // Unknown template: a permanent failure before anything is stored.
    let mut missing = send_body(7, "1");
    missing["template_id"] = json!(99);
    let response = editor(&host, None, "POST", SEND, Some(missing)).await;
    assert_error(&response, 422, "SEND_FAILED", "unknown in-app template");
    for tab in [socket, second, other] {
        tab.close().await;
    }
    host.stop().await;
}

/// An editor send with an `Idempotency-Key`: the same key is the same run, so the same notification.
async fn send_keyed(host: &TestHost, body: Value, key: &str) -> (u16, Value) {
    let auth = format!("Bearer {EDITOR_TOKEN}");
    let headers = [("authorization", auth.as_str()), ("idempotency-key", key)];
    flowhost_tests::push::send(host, "POST", &host.url(SEND), &headers, Some(body).into()).await
}

/// A repeated step (here the same `Idempotency-Key`) hands the message it stored the first time over again: one
/// inbox entry, the first rendering, also after its template changed or was deleted.
async fn a_repeated_send_hands_over_the_stored_message(backends: Backends) {
    let host = start(backends).await;
    let (mut socket, _) = InAppSocket::connect(&host, TENANT_A, 9, None).await;
    let (status, first) = send_keyed(&host, send_body(9, "10 EUR"), "repeat-1").await;
    assert_eq!((status, first["delivered"].as_bool()), (200, Some(true)), "{first}");
    let id = first["notification_id"].as_str().unwrap().to_owned();
    assert_eq!(socket.next_message(WAIT).await.unwrap()["content"]["body"], "You got 10 EUR back");

    let mut changed = template();
    changed["contents"]["en"]["body"] = json!("Changed: {{amount}}");
    let (status, replaced) = editor(&host, Some(TENANT_A), "PUT", "/api/v1/templates/in-app/1", Some(changed)).await;
    assert_eq!(status, 200, "{replaced}");
    for (step, other_amount) in [("after the template changed", "99 EUR"), ("after the template was deleted", "1 EUR")]
    {
        // A socket drops an id it has had, so a new one (no resume) shows what the repeated step hands over.
        let (mut fresh, _) = InAppSocket::connect(&host, TENANT_A, 9, None).await;
        let (status, again) = send_keyed(&host, send_body(9, other_amount), "repeat-1").await;
        assert_eq!((status, again["delivered"].as_bool()), (200, Some(true)), "{step}: {again}");
        assert_eq!(again["notification_id"], id.as_str(), "{step}");
        let message = fresh.next_message(WAIT).await.expect(step);
        assert_eq!(message["notification_id"], id.as_str(), "{step}");
        assert_eq!(message["content"]["body"], "You got 10 EUR back", "{step}: the first rendering");
        assert!(socket.next_message(Duration::from_millis(200)).await.is_none(), "{step}: the first socket had it");
        fresh.close().await;
        let (status, _) = editor(&host, Some(TENANT_A), "DELETE", "/api/v1/templates/in-app/1", None).await;
        assert!(status == 204 || status == 404, "{step}: {status}");
    }
    let page = inbox(&host, 9, "").await;
    assert_eq!(page["total"].as_u64(), Some(1), "one message for the repeated send: {page}");
    // A new key is a new message, and the template is gone now.
    let response = send_keyed(&host, send_body(9, "2 EUR"), "repeat-2").await;
    assert_error(&response, 422, "SEND_FAILED", "a new send of a deleted template");
    socket.close().await;
    host.stop().await;
}

async fn a_reconnect_resumes_after_its_cursor(backends: Backends) {
    let host = start(backends).await;
    let (mut socket, _) = InAppSocket::connect(&host, TENANT_A, 9, None).await;
    send(&host, send_body(9, "1")).await;
    let first = socket.next_message(WAIT).await.unwrap();
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    socket.close().await;
    // Offline: two messages are sent.
    let second = send(&host, send_body(9, "2")).await["notification_id"].clone();
    let third = send(&host, send_body(9, "3")).await["notification_id"].clone();
    // Reconnecting after the last cursor seen replays exactly the missed ones, oldest first.
    let (mut socket, hello) = InAppSocket::connect(&host, TENANT_A, 9, Some(&cursor)).await;
    assert_eq!(hello["unread"], 3);
    let replayed = [socket.next_message(WAIT).await.unwrap(), socket.next_message(WAIT).await.unwrap()];
    assert_eq!([replayed[0]["notification_id"].clone(), replayed[1]["notification_id"].clone()], [second, third]);
    let resumed = socket.next_frame(WAIT).await.unwrap();
    assert_eq!(resumed, json!({ "type": "resumed", "count": 2, "more": false }));
    // Live messages follow.
    let fourth = send(&host, send_body(9, "4")).await["notification_id"].clone();
    assert_eq!(socket.next_message(WAIT).await.unwrap()["notification_id"], fourth);
    socket.close().await;
    host.stop().await;
}

async fn a_deactivated_channel_skips_and_bad_tokens_are_refused(backends: Backends) {
    let host = start(backends).await;
    let body = json!({ "tenant_id": TENANT_A, "player_id": 11 });
    let deactivate = "/api/v1/service/inapp/subscriptions/deactivate";
    let (status, answer) = platform(&host, OPS_TOKEN, "POST", deactivate, Some(body.clone())).await;
    assert_eq!((status, answer), (200, json!({ "deactivated": true })));
    // Skip-forward: 200 with delivered false, nothing stored.
    let result = send(&host, send_body(11, "1")).await;
    assert_eq!((result["delivered"].as_bool(), result["status"].as_str()), (Some(false), Some("inactive")), "{result}");
    assert_eq!(inbox(&host, 11, "").await["total"], 0);
    let (status, _) = platform(&host, OPS_TOKEN, "POST", "/api/v1/service/inapp/subscriptions", Some(body)).await;
    assert_eq!(status, 200);
    // Active again, with no socket open anywhere: stored in the inbox, not delivered (`delivered` means an open
    // socket took it); the record says `stored`, and the next connect resumes it.
    let result = send(&host, send_body(11, "1")).await;
    assert_eq!(result["delivered"], false, "{result}");
    assert_eq!(inbox(&host, 11, "").await["total"], 1);
    let stored_id = result["notification_id"].as_str().unwrap().to_owned();
    let (status, record) =
        editor(&host, None, "GET", &format!("/api/v1/webpush/notifications/{stored_id}"), None).await;
    assert_eq!((status, record["status"].as_str(), record["delivered"].as_bool()), (200, Some("stored"), Some(false)));
    let (mut socket, _) = InAppSocket::connect(&host, TENANT_A, 11, Some("0")).await;
    assert_eq!(socket.next_message(WAIT).await.expect("resumed")["notification_id"], stored_id.as_str());
    socket.close().await;
    assert_eq!(host.metric("inapp_messages_total{outcome=\"inactive\"}").await, 1.0);
    assert_eq!(host.metric("inapp_messages_total{outcome=\"stored\"}").await, 1.0);

    // The websocket needs a valid connect token.
    let ws = |token: &str| format!("{}/api/v1/inapp/ws?token={token}", host.base_url.replacen("http", "ws", 1));
    let token = connect_token(&host, TENANT_A, 11).await;
    let forged = format!("{}x", &token[..token.len() - 1]);
    for url in [ws(&forged), ws("v1.e30.AAAA"), format!("{}/api/v1/inapp/ws", host.base_url.replacen("http", "ws", 1))]
    {
        let refused = tokio_tungstenite::connect_async(url).await;
        match refused {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => assert_eq!(response.status(), 401),
            other => panic!("not refused: {:?}", other.map(|_| ())),
        }
    }
    // Bridge routes: the caller's tenant scope and the inputs are checked.
    let (status, _) = platform(
        &host,
        flowhost_tests::push::BRIDGE_TOKEN,
        "POST",
        "/api/v1/service/inapp/connect-tokens",
        Some(json!({ "tenant_id": "tenant-b", "player_id": 1 })),
    )
    .await;
    assert_eq!(status, 403, "the bridge is scoped to tenant-a (and not allowed the route)");
    let response = platform(
        &host,
        OPS_TOKEN,
        "POST",
        "/api/v1/service/inapp/connect-tokens",
        Some(json!({ "tenant_id": TENANT_A, "player_id": 0 })),
    )
    .await;
    assert_error(&response, 400, "VALIDATION_ERROR", "player 0");
    let response =
        platform(&host, OPS_TOKEN, "GET", "/api/v1/service/inapp/inbox?tenant_id=tenant-a&player_id=1&limit=0", None)
            .await;
    assert_error(&response, 400, "VALIDATION_ERROR", "limit 0");
    host.stop().await;
}

async fn a_kafka_event_runs_a_flow_to_a_message_on_a_websocket(backends: Backends) {
    let host = start(backends).await;
    let schema = json!({"fields": [{"name": "player_id", "type": "int"}, {"name": "amount", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/cashback", Some(schema)).await.0, 200);
    let source = unique("cashbacks");
    let flow = json!({
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "cashback", "topic": source}},
            {"id": "seg", "kind": "service-in", "config": {"service": "notifications"}},
            {"id": "msg", "kind": "action", "config": {
                "action_ref": "send_inapp", "tenant_id": "{{tenant_id}}", "player_id": "{{player_id}}",
                "template_id": 1, "placeholders": {"amount": "{{amount}}"}, "vertical": "casino"}},
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "msg"}],
    });
    let (status, created) = host.call("POST", "/api/v2/flows", Some(flow)).await;
    assert_eq!((status, created["validation"]["valid"].as_bool()), (201, Some(true)), "{created}");
    let flow_id = created["id"].as_str().unwrap().to_owned();
    let (status, released) = host.call("POST", &format!("/api/v2/flows/{flow_id}/release"), Some(json!({}))).await;
    assert_eq!(status, 200, "{released}");
    let (mut socket, _) = InAppSocket::connect(&host, TENANT_A, 21, None).await;
    let event = json!({"event_type": "cashback", "tenant_id": TENANT_A, "player_id": 21, "amount": "7 EUR"});
    host.publish(&source, &[event]).await;
    let message = socket.next_message(Duration::from_secs(60)).await.expect("the flow's message");
    assert_eq!(message["content"]["body"], "You got 7 EUR back");
    assert_eq!(message["vertical"], "casino");
    socket.close().await;
    host.stop().await;
}

/// Two nodes on the same NATS and MongoDB: a player connected to one receives what the other sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_on_another_node_receives_through_the_subjects_port() {
    let first = start(Backends::Distributed).await;
    let mut config = first.config.clone();
    config.data_dir = tempfile::tempdir().unwrap().keep();
    let second = TestHost::start_with(config).await;
    second.wait_ready().await;
    let (mut socket, _) = InAppSocket::connect(&second, TENANT_A, 31, None).await;
    let result = send(&first, send_body(31, "9 EUR")).await;
    assert_eq!(result["delivered"], true, "the other node's socket took it: {result}");
    let message = socket.next_message(WAIT).await.expect("delivered across nodes");
    assert_eq!(message["notification_id"], result["notification_id"]);
    socket.close().await;
    second.stop().await;
    first.stop().await;
}

/// The websocket URL of `token`.
fn ws_url(host: &TestHost, token: &str) -> String {
    format!("{}/api/v1/inapp/ws?token={token}", host.base_url.replacen("http", "ws", 1))
}

/// The status a refused upgrade answered (`None`: the upgrade succeeded; the socket is dropped).
async fn upgrade_status(url: String) -> Option<u16> {
    match tokio_tungstenite::connect_async(url).await {
        Ok(_) => None,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Some(response.status().as_u16()),
        Err(other) => panic!("the upgrade failed otherwise: {other}"),
    }
}

/// Whether `player`'s next websocket is admitted within `wait` (its earlier one's slot freed, under a cap of
/// one websocket per player).
async fn admitted_within(host: &TestHost, player: i64, wait: Duration) -> bool {
    let until = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < until {
        if upgrade_status(ws_url(host, &connect_token(host, TENANT_A, player).await)).await.is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

/// What one client can hold is bounded: a connect token admits one websocket however many upgrades race with
/// it; a player gets its cap of sockets and no more; a 10 MiB message is refused from its frame header (1009);
/// a client that stops reading is closed once a write has waited its timeout, freeing its slot; and other
/// players connect throughout.
async fn one_client_cannot_exhaust_the_websockets(backends: Backends) {
    let host = start_with(backends, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().max_inapp_connections_per_player = 1
    })
    .await;
    let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(template())).await;
    assert_eq!(status, 201, "{created}");

    // 1,000 upgrades in parallel with one token: one websocket.
    let token = connect_token(&host, TENANT_A, 31).await;
    let attempts = (0..1000).map(|_| tokio::spawn(upgrade_status(ws_url(&host, &token))));
    let mut statuses = std::collections::BTreeMap::<Option<u16>, usize>::new();
    for attempt in futures::future::join_all(attempts).await {
        *statuses.entry(attempt.unwrap()).or_default() += 1;
    }
    assert_eq!(statuses, [(None, 1), (Some(401), 999)].into(), "one upgrade per token");

    // A player's second socket is refused while the first is open (the cap is one here).
    let (first, _) = InAppSocket::connect(&host, TENANT_A, 32, None).await;
    assert_eq!(upgrade_status(ws_url(&host, &connect_token(&host, TENANT_A, 32).await)).await, Some(429));
    first.close().await;
    assert!(admitted_within(&host, 32, Duration::from_secs(10)).await, "the closed socket's slot is free");

    // A 10 MiB message: the connection is closed with 1009 as soon as the frame's header arrives, without
    // waiting for (and buffering) the rest.
    let (mut bomb, _) = InAppSocket::connect(&host, TENANT_A, 33, None).await;
    assert_eq!(bomb.announce_huge_frame(10 << 20).await, Some(1009), "a frame over 64 KiB closes with 1009");
    assert!(admitted_within(&host, 33, Duration::from_secs(10)).await);

    // A client that stops reading: its writes block once the socket buffers are full, and past the write
    // timeout it is closed and its slot is free again (the cap of one would refuse a new socket otherwise).
    let stalled = InAppSocket::connect_not_reading(&host, TENANT_A, 34).await;
    assert_eq!(upgrade_status(ws_url(&host, &connect_token(&host, TENANT_A, 34).await)).await, Some(429), "held");
    // Template 2 carries sixteen placeholders of 2,000 bytes (their limit): 32 KB a message, 6.4 MB in all,
    // more than the socket buffers take (the server's send buffer grows to 4 MB here).
    let names: Vec<String> = (0..16).map(|n| format!("p{n}")).collect();
    let body_text: String = names.iter().map(|name| format!("{{{{{name}}}}}")).collect();
    let wide = json!({ "name": "Wide", "default_language": "en",
        "placeholders": names.iter().map(|name| json!({ "name": name })).collect::<Vec<_>>(),
        "contents": { "en": { "title": "Wide", "body": body_text } } });
    let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(wide)).await;
    assert_eq!((status, created["id"].as_i64()), (201, Some(2)), "{created}");
    let values: serde_json::Map<String, Value> =
        names.iter().map(|name| (name.clone(), json!("x".repeat(2000)))).collect();
    for _ in 0..200 {
        send(&host, json!({ "tenant_id": TENANT_A, "template_id": 2, "player_id": 34, "placeholders": values })).await;
    }
    assert!(admitted_within(&host, 34, Duration::from_secs(30)).await, "the stalled socket's slot was never freed");
    drop(stalled);

    let (other, _) = InAppSocket::connect(&host, TENANT_A, 35, None).await;
    other.close().await;
    host.stop().await;
}

/// `send_inapp` without `language_id` (spec 000: "falls back to the template or tenant default"): the
/// template's `default_language`, else the tenant's (`FLOWHOST_WEBPUSH_TENANT_DEFAULT_LANGUAGES`) when the
/// template has it, else the template's first language. The tenants list shows each tenant's default.
async fn the_language_falls_back_to_the_template_then_the_tenant(backends: Backends) {
    let host = start_with(backends, |config| {
        config
            .section_mut::<flowhost_push_api::PushConfig>()
            .tenant_default_languages
            .insert(TENANT_A.into(), "fr".into());
    })
    .await;
    let contents = json!({ "de": { "title": "T", "body": "deutsch" }, "en": { "title": "T", "body": "english" },
                           "fr": { "title": "T", "body": "français" } });
    let templates = [
        json!({ "name": "Own default", "default_language": "en", "contents": contents }),
        json!({ "name": "Tenant default", "contents": contents }),
        json!({ "name": "Neither", "contents": { "de": contents["de"], "en": contents["en"] } }),
    ];
    for (template, expected) in templates.into_iter().zip(["english", "français", "deutsch"]) {
        let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(template)).await;
        assert_eq!(status, 201, "{created}");
        let body = json!({ "tenant_id": TENANT_A, "template_id": created["id"], "player_id": 5 });
        let id = send(&host, body).await["notification_id"].as_str().unwrap().to_owned();
        let (status, record) = editor(&host, None, "GET", &format!("/api/v1/webpush/notifications/{id}"), None).await;
        assert_eq!(status, 200, "{record}");
        assert_eq!(record["content"]["body"], expected, "{record}");
    }
    let (status, tenants) = editor(&host, None, "GET", "/api/v1/tenants/", None).await;
    assert_eq!(status, 200);
    let row = tenants["tenants"].as_array().unwrap().iter().find(|t| t["tenant_id"] == TENANT_A).unwrap().clone();
    assert_eq!(row["default_language"], "fr", "{tenants}");
    host.stop().await;
}

/// A sender plugin built against `flowhost:notify@0.1.0` (the `notify-legacy` fixture) keeps loading and running
/// beside 0.2.0, and sees the host's newer facts in 0.1.0's terms: a message kept in the inbox with no socket
/// open is `delivered` (0.1.0 promised stored and published), a deactivated channel `inactive`, player 0 outside
/// an editor's send and a disabled channel `invalid`.
async fn a_component_built_for_notify_0_1_keeps_working(backends: Backends) {
    let granted = |config: &mut Config| {
        config.plugins.grants.insert("notify-legacy".into(), vec!["notifications".into()]);
    };
    let host = start_with(backends, granted).await;
    let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(template())).await;
    assert_eq!(status, 201, "{created}");
    let upload = |host: &TestHost| {
        let url = host.url("/api/v1/plugins/notify-legacy/versions/0.1.0");
        let wasm = flowhost_runtime_fixtures::bytes("notify_legacy");
        host.http.put(url).header("content-type", "application/wasm").body(wasm).send()
    };
    let response = upload(&host).await.unwrap();
    assert!(response.status().is_success(), "upload: {}", response.text().await.unwrap());
    let invoke = |player: i64, key: &str| {
        json!({"action": "inapp", "tenant_id": TENANT_A,
               "input": {"tenant_id": TENANT_A, "player_id": player, "template_id": 1, "key": key}})
    };
    let path = "/api/v1/plugins/notify-legacy/invoke";
    let (status, body) = host.call("POST", path, Some(invoke(61, "a"))).await;
    assert_eq!((status, body["output"]["outcome"].as_str()), (200, Some("delivered")), "{body}");
    assert_eq!(inbox(&host, 61, "").await["total"], 1, "stored: no socket was open");
    let deactivate = json!({ "tenant_id": TENANT_A, "player_id": 61 });
    let (status, _) =
        platform(&host, OPS_TOKEN, "POST", "/api/v1/service/inapp/subscriptions/deactivate", Some(deactivate)).await;
    assert_eq!(status, 200);
    let (status, body) = host.call("POST", path, Some(invoke(61, "b"))).await;
    assert_eq!((status, body["output"]["outcome"].as_str()), (200, Some("inactive")), "{body}");
    let (status, body) = host.call("POST", path, Some(invoke(0, "c"))).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("invalid: player_id must be positive"), "{body}");
    host.stop().await;

    let host = start_with(backends, |config| {
        granted(config);
        config.section_mut::<flowhost_push_api::PushConfig>().channels_enabled =
            vec![flowhost_notifications::Channel::WebPush];
    })
    .await;
    assert!(upload(&host).await.unwrap().status().is_success());
    let (status, body) = host.call("POST", path, Some(invoke(62, "d"))).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("invalid: IN_APP is not in FLOWHOST_CHANNELS_ENABLED"), "{body}");
    host.stop().await;
}
