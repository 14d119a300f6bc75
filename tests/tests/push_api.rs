//! The web-push service's API as a bridge, an editor and an operator see it: the five push-platform routes with
//! the caller policy, subscriptions, interaction tokens and events, the editor routes (tenants, templates,
//! preview, activity, notification records, send), the health of a broken policy, and retention on an injected
//! clock; every case on the embedded backends and on MongoDB/Kafka/NATS/Redis.
//!
//! tidy: over the line budget: one acceptance suite for one part of the specification, its routes in order.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::collections::{WEBPUSH_ACTIVITY, WEBPUSH_EVENTS, WEBPUSH_SUBSCRIPTIONS, WEBPUSH_TEMPLATES};
use flowhost_core::config::Secret;
use flowhost_core::{Clock, ManualClock, SystemClock};
use flowhost_notifications::records::{retention, store_activity, NotificationActivity};
use flowhost_notifications::token::{mint, InteractionClaims};
use flowhost_notifications::Channel;
use flowhost_tests::process::free_port;
use flowhost_tests::push::{
    assert_error, callers_json, detail_fields, editor, platform, send, subscription, Body, BRIDGE_TOKEN,
    CONFIG_ONLY_TOKEN, DASHBOARD_TOKEN, EDITOR_TOKEN, INTERACTION_SECRET, INTERACTION_SECRET_PREVIOUS, OPS_TOKEN,
    SOURCE_APP, TENANT_A, TENANT_B,
};
use flowhost_tests::{on_both_backends, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(
    client_config,
    unconfigured_environment,
    caller_policy_rejections,
    bad_policy_fails_health_not_the_start,
    separate_listener,
    subscriptions_lifecycle,
    validation_errors,
    browser_events_and_tokens,
    semantic_events,
    editor_auth_and_tenants,
    templates_crud,
    template_preview,
    activity_and_notifications,
    send_routes,
    retention_expires_activity_and_events,
    storage_failures_answer_internal_error,
    interaction_events_keep_the_30_day_ttl,
);

const CLIENT_CONFIG: &str = "/api/v1/webpush/client-config";
const SUBSCRIPTIONS: &str = "/api/v1/service/webpush/subscriptions";
const DEACTIVATE: &str = "/api/v1/service/webpush/subscriptions/deactivate";
const BROWSER: &str = "/api/v1/service/webpush/events/browser";
const SEMANTIC: &str = "/api/v1/service/webpush/events/semantic";
const TEMPLATES: &str = "/api/v1/templates/web-push/";
const DAY_MS: i64 = 24 * 3600 * 1000;

/// A policy case: name, headers, method, path, body, expected status and code.
type PolicyCase<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, &'a str, Option<Value>, u16, &'a str);
/// A send case: selected tenant, body, expected status, code and the field the details must name.
type SendCase<'a> = (Option<&'a str>, Value, u16, &'a str, Option<&'a str>);

/// A host running only the admin and push-api roles (the engine is not under test here).
async fn push_host(backends: Backends) -> TestHost {
    push_host_with(backends, None, |_| {}).await
}

async fn push_host_with(
    backends: Backends,
    clock: Option<Arc<dyn Clock>>,
    configure: impl FnOnce(&mut flowhost_core::config::Config),
) -> TestHost {
    TestHost::start_configured(backends, clock, |config| {
        config.roles = vec!["admin".to_owned(), "push-api".to_owned()];
        configure(config);
    })
    .await
}

fn endpoint(name: &str) -> String {
    format!("https://push.example.net/send/{name}-{}", uuid_like())
}

fn uuid_like() -> String {
    flowhost_tests::unique("e")
}

fn claims(tenant: &str, player: i64, notification: &str, delivery: &str, expires_at_ms: i64) -> InteractionClaims {
    InteractionClaims {
        tenant_id: tenant.into(),
        player_id: player,
        notification_id: notification.into(),
        delivery_id: delivery.into(),
        expires_at_ms,
    }
}

fn browser_event(token: &str, notification: &str, delivery: &str, event_id: &str, event_type: &str) -> Value {
    json!({
        "event_id": event_id,
        "delivery_id": delivery,
        "notification_id": notification,
        "interaction_token": token,
        "event_type": event_type,
        "endpoint": null,
        "occurred_at": "2026-03-01T10:00:00Z",
        "metadata": { "visible": true }
    })
}

fn semantic_event(tenant: &str, player: i64, event_id: &str, event_type: &str) -> Value {
    json!({
        "event_id": event_id,
        "delivery_id": "d-1",
        "notification_id": "n-1",
        "event_type": event_type,
        "tenant_id": tenant,
        "player_id": player,
        "occurred_at": "2026-03-01T10:00:00+01:00",
        "metadata": { "screen": "inbox" }
    })
}

fn welcome_template() -> Value {
    json!({
        "name": "Welcome",
        "description": "first deposit follow-up",
        "placeholders": [{ "name": "first_name", "default": "friend" }, { "name": "game" }],
        "icon": "https://cdn.casino.example/icon.png",
        "badge": "https://cdn.casino.example/badge.png",
        "target_url": "https://casino.example/play/{{game}}",
        "tag": "welcome",
        "require_interaction": true,
        "renotify": true,
        "actions": [{ "id": "play", "label": "Play {{game}}", "target_url": "https://www.casino.example/{{game}}" }],
        "contents": {
            "en": { "title": "Hi {{first_name}}", "body": "Try {{game}} now" },
            "de": { "title": "Hallo {{first_name}}", "body": "Jetzt {{game}}", "target_url": "https://casino.example/de" }
        }
    })
}

async fn stored_events(host: &TestHost, notification: &str) -> Vec<Value> {
    host.ports.documents.find(WEBPUSH_EVENTS, "notification_id", &json!(notification)).await.expect("find events")
}

async fn client_config(backends: Backends) {
    let host = push_host(backends).await;
    assert_eq!(host.call("GET", "/health", None).await, (200, json!({ "status": "ok" })));
    let (_, ready) = host.call("GET", "/ready", None).await;
    assert_eq!(ready.get("warnings"), None, "the target hosts are restricted: {ready}");
    let public_key = host.config.section::<flowhost_push_api::PushConfig>().vapid_public_key.clone().unwrap();
    for token in [BRIDGE_TOKEN, OPS_TOKEN, CONFIG_ONLY_TOKEN] {
        // The bridge is limited to tenant-a: tenant scope is not checked on this route.
        let response = platform(&host, token, "GET", CLIENT_CONFIG, None).await;
        assert_eq!(response, (200, json!({ "public_key": public_key, "payload_version": "v1" })), "{token}");
    }
    host.stop().await;

    // Dry run and a temporary (auto) VAPID pair: not ready, and the reasons say why.
    let host = push_host_with(backends, None, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().dry_run = true;
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_public_key = None;
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_private_key = None;
        config.section_mut::<flowhost_push_api::PushConfig>().allow_auto_vapid = true;
    })
    .await;
    let response = platform(&host, BRIDGE_TOKEN, "GET", CLIENT_CONFIG, None).await;
    let details = assert_error(&response, 503, "PUSH_ENV_NOT_READY", "dry run + auto VAPID");
    let reasons = details["reasons"].to_string();
    assert!(reasons.contains("WEB_PUSH_DRY_RUN") && reasons.contains("temporary"), "{reasons}");
    host.stop().await;

    // Dry run alone also keeps it not ready.
    let host =
        push_host_with(backends, None, |config| config.section_mut::<flowhost_push_api::PushConfig>().dry_run = true)
            .await;
    let response = platform(&host, BRIDGE_TOKEN, "GET", CLIENT_CONFIG, None).await;
    let details = assert_error(&response, 503, "PUSH_ENV_NOT_READY", "dry run");
    assert_eq!(details["reasons"], json!(["WEB_PUSH_DRY_RUN is true"]));
    host.stop().await;
}

/// No VAPID pair, no interaction secret, no editor token, web push not among the channels.
async fn unconfigured_environment(backends: Backends) {
    let host = push_host_with(backends, None, |config| {
        let push = config.section_mut::<flowhost_push_api::PushConfig>();
        push.vapid_public_key = None;
        push.vapid_private_key = None;
        push.interaction_token_secret = None;
        push.interaction_token_secret_previous = None;
        push.editor_token = None;
        push.channels_enabled = vec![Channel::InApp];
        push.allowed_target_hosts = Vec::new();
    })
    .await;
    // Any https host in a rendered target_url: allowed, and named on /ready (and logged at start).
    let (_, ready) = host.call("GET", "/ready", None).await;
    assert_eq!(ready["warnings"], json!(["FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS"]), "{ready}");
    let response = platform(&host, BRIDGE_TOKEN, "GET", CLIENT_CONFIG, None).await;
    let details = assert_error(&response, 503, "PUSH_ENV_NOT_READY", "no VAPID");
    let reasons = details["reasons"].to_string();
    assert!(reasons.contains("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY"), "{reasons}");
    assert!(!reasons.contains("CHANNELS_ENABLED"), "a disabled channel is the send path's answer: {reasons}");

    // A browser event cannot be verified without the interaction secret.
    let token = mint(b"anything", &claims(TENANT_A, 1, "n", "d", i64::MAX));
    let response =
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&token, "n", "d", "e", "displayed"))).await;
    assert_error(&response, 503, "PUSH_ENV_NOT_READY", "no interaction secret");

    // Editor routes need the editor token configured.
    let response = editor(&host, None, "GET", "/api/v1/tenants/", None).await;
    assert_error(&response, 503, "EDITOR_TOKEN_NOT_CONFIGURED", "no editor token");
    // The rest works: subscriptions do not need the delivery environment, and /health is fine.
    let response =
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 7, &endpoint("u")))).await;
    assert_eq!(response.0, 201, "{}", response.1);
    assert_eq!(host.call("GET", "/health", None).await.0, 200);
    host.stop().await;
}

async fn caller_policy_rejections(backends: Backends) {
    let host = push_host(backends).await;
    let a_sub = subscription(TENANT_A, 42, &endpoint("a"));
    let b_sub = subscription(TENANT_B, 42, &endpoint("b"));
    let b_deactivate = json!({ "tenant_id": TENANT_B, "player_id": 42, "endpoint": "https://push.example.net/x" });
    let b_semantic = semantic_event(TENANT_B, 42, "s-1", "opened");
    let (bridge, config_only, editor_auth) =
        (format!("Bearer {BRIDGE_TOKEN}"), format!("Bearer {CONFIG_ONLY_TOKEN}"), format!("Bearer {EDITOR_TOKEN}"));
    let cases: Vec<PolicyCase> = vec![
        ("no token", vec![("x-source-app", SOURCE_APP)], "GET", CLIENT_CONFIG, None, 401, "UNAUTHORIZED"),
        (
            "no token, bad body",
            vec![("x-source-app", SOURCE_APP)],
            "POST",
            SUBSCRIPTIONS,
            Some(json!({})),
            401,
            "UNAUTHORIZED",
        ),
        (
            "unknown token",
            vec![("authorization", "Bearer nope"), ("x-source-app", SOURCE_APP)],
            "POST",
            SUBSCRIPTIONS,
            Some(a_sub.clone()),
            401,
            "UNAUTHORIZED",
        ),
        (
            "token prefix",
            vec![("authorization", "Bearer bridge-token"), ("x-source-app", SOURCE_APP)],
            "GET",
            CLIENT_CONFIG,
            None,
            401,
            "UNAUTHORIZED",
        ),
        (
            "basic scheme",
            vec![("authorization", "Basic YnJpZGdl"), ("x-source-app", SOURCE_APP)],
            "GET",
            CLIENT_CONFIG,
            None,
            401,
            "UNAUTHORIZED",
        ),
        (
            "editor token is no caller token",
            vec![("authorization", editor_auth.as_str()), ("x-source-app", SOURCE_APP)],
            "GET",
            CLIENT_CONFIG,
            None,
            401,
            "UNAUTHORIZED",
        ),
        (
            "route not allowed",
            vec![("authorization", config_only.as_str()), ("x-source-app", SOURCE_APP)],
            "POST",
            SUBSCRIPTIONS,
            Some(a_sub.clone()),
            403,
            "FORBIDDEN",
        ),
        (
            "route not allowed, events",
            vec![("authorization", config_only.as_str()), ("x-source-app", SOURCE_APP)],
            "POST",
            SEMANTIC,
            Some(semantic_event(TENANT_A, 1, "x", "read")),
            403,
            "FORBIDDEN",
        ),
        ("source app missing", vec![("authorization", bridge.as_str())], "GET", CLIENT_CONFIG, None, 403, "FORBIDDEN"),
        (
            "source app blank",
            vec![("authorization", bridge.as_str()), ("x-source-app", " ")],
            "GET",
            CLIENT_CONFIG,
            None,
            403,
            "FORBIDDEN",
        ),
        (
            "source app not allowed",
            vec![("authorization", bridge.as_str()), ("x-source-app", "other-app")],
            "POST",
            SUBSCRIPTIONS,
            Some(a_sub.clone()),
            403,
            "FORBIDDEN",
        ),
        (
            "source app is case-sensitive",
            vec![("authorization", bridge.as_str()), ("x-source-app", "Casino-Web")],
            "GET",
            CLIENT_CONFIG,
            None,
            403,
            "FORBIDDEN",
        ),
        (
            "tenant not allowed: subscribe",
            vec![("authorization", bridge.as_str()), ("x-source-app", SOURCE_APP)],
            "POST",
            SUBSCRIPTIONS,
            Some(b_sub.clone()),
            403,
            "FORBIDDEN",
        ),
        (
            "tenant not allowed: deactivate",
            vec![("authorization", bridge.as_str()), ("x-source-app", SOURCE_APP)],
            "POST",
            DEACTIVATE,
            Some(b_deactivate),
            403,
            "FORBIDDEN",
        ),
        (
            "tenant not allowed: semantic",
            vec![("authorization", bridge.as_str()), ("x-source-app", SOURCE_APP)],
            "POST",
            SEMANTIC,
            Some(b_semantic.clone()),
            403,
            "FORBIDDEN",
        ),
    ];
    for (name, headers, method, path, body, status, code) in cases {
        let response = send(&host, method, &host.url(path), &headers, body.into()).await;
        assert_error(&response, status, code, name);
    }
    // Nothing was stored by the refused calls.
    let stored = host.ports.documents.list(WEBPUSH_SUBSCRIPTIONS).await.unwrap();
    assert!(stored.is_empty(), "refused calls stored {stored:?}");
    assert!(stored_events(&host, "n-1").await.is_empty());

    // The same calls pass for a caller allowed everywhere.
    let response = platform(&host, OPS_TOKEN, "POST", SUBSCRIPTIONS, Some(b_sub)).await;
    assert_eq!(response.0, 201, "{}", response.1);
    let response = platform(&host, OPS_TOKEN, "POST", SEMANTIC, Some(b_semantic)).await;
    assert_eq!(response, (202, json!({ "status": "accepted" })));
    // Another source app is fine for a `*` caller.
    let ops = format!("Bearer {OPS_TOKEN}");
    let response =
        send(&host, "GET", &host.url(CLIENT_CONFIG), &[("authorization", &ops), ("x-source-app", "x")], Body::None)
            .await;
    assert_eq!(response.0, 200);
    host.stop().await;
}

async fn bad_policy_fails_health_not_the_start(backends: Backends) {
    let unknown_route =
        callers_json().replace("POST /api/v1/service/webpush/events/semantic", "POST /api/v1/webpush/events");
    let cases = [
        ("unknown route", unknown_route),
        ("malformed JSON", "{\"callers\": [".to_owned()),
        ("misspelt field", callers_json().replace("tenant_ids", "tenant_id")),
        (
            "lower-case method",
            callers_json().replace("GET /api/v1/webpush/client-config", "get /api/v1/webpush/client-config"),
        ),
    ];
    for (name, policy) in cases {
        let host = push_host_with(backends, None, |config| {
            config.section_mut::<flowhost_push_api::PushConfig>().callers_json = Some(Secret::new(policy))
        })
        .await;
        let health = host.call("GET", "/health", None).await;
        assert_eq!(health, (503, json!({ "status": "unavailable", "failing": ["push_caller_policy"] })), "{name}");
        for token in [BRIDGE_TOKEN, OPS_TOKEN] {
            let response = platform(&host, token, "GET", CLIENT_CONFIG, None).await;
            assert_error(&response, 503, "CALLER_POLICY_INVALID", name);
            let response =
                platform(&host, token, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 1, &endpoint("x")))).await;
            assert_error(&response, 503, "CALLER_POLICY_INVALID", name);
        }
        // The process runs: the admin API and the editor routes answer.
        assert_eq!(host.call("GET", "/api/v1/triggers", None).await.0, 200, "{name}");
        assert_eq!(editor(&host, None, "GET", "/api/v1/tenants/", None).await.0, 200, "{name}");
        host.stop().await;
    }
}

/// Waits until `serve` has bound the separate push listener.
async fn wait_for_listener(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on the push port {port}");
}

async fn separate_listener(backends: Backends) {
    let port = free_port();
    let host = push_host_with(backends, None, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().listen = Some(format!("127.0.0.1:{port}"))
    })
    .await;
    let push_url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let auth = format!("Bearer {BRIDGE_TOKEN}");
    let headers = [("authorization", auth.as_str()), ("x-source-app", SOURCE_APP)];
    wait_for_listener(port).await;
    let response = send(&host, "GET", &push_url(CLIENT_CONFIG), &headers, Body::None).await;
    assert_eq!(response.0, 200, "{}", response.1);
    assert_eq!(send(&host, "GET", &push_url("/health"), &[], Body::None).await, (200, json!({ "status": "ok" })));
    let response = send(&host, "GET", &push_url("/api/v1/nothing"), &[], Body::None).await;
    assert_error(&response, 404, "NOT_FOUND", "unknown route on the push listener");
    // The admin listener no longer serves the push routes, but still the admin API.
    let response = platform(&host, BRIDGE_TOKEN, "GET", CLIENT_CONFIG, None).await;
    assert_eq!(response.0, 404, "{}", response.1);
    assert_eq!(host.call("GET", "/api/v1/triggers", None).await.0, 200);
    host.stop().await;

    // With a broken policy both listeners' /health answer 503.
    let port = free_port();
    let host = push_host_with(backends, None, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().listen = Some(format!("127.0.0.1:{port}"));
        config.section_mut::<flowhost_push_api::PushConfig>().callers_json = Some(Secret::new("[]"));
    })
    .await;
    wait_for_listener(port).await;
    let health = send(&host, "GET", &format!("http://127.0.0.1:{port}/health"), &[], Body::None).await;
    assert_eq!(health.0, 503, "{}", health.1);
    assert_eq!(host.call("GET", "/health", None).await.0, 503);
    host.stop().await;
}

async fn subscriptions_lifecycle(backends: Backends) {
    let host = push_host(backends).await;
    let docs = host.ports.documents.clone();
    let first = endpoint("first");

    let (status, created) =
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 42, &first))).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_owned();
    assert_eq!(id.len(), 64, "{created}");
    let created_at = created["created_at"].as_str().expect("created_at").to_owned();
    assert!(chrono_like(&created_at), "ISO 8601 UTC: {created_at}");
    assert_eq!(
        created,
        json!({ "id": id, "tenant_id": TENANT_A, "player_id": 42, "endpoint": first, "platform": "web", "created_at": created_at })
    );
    let stored = docs.get(WEBPUSH_SUBSCRIPTIONS, &id).await.unwrap().expect("stored");
    assert_eq!(stored["status"], "active");
    assert_eq!(stored["user_identity"], "tenant-a_42", "storage identity <tenant_id>_<player_id>");
    assert_eq!(stored["keys"]["auth"], "tBHItJI5svbpez7KI4CCXg");
    assert_eq!((stored["caller_id"].as_str(), stored["source_app"].as_str()), (Some("bridge"), Some(SOURCE_APP)));
    let by_identity = |identity: &str| {
        let docs = docs.clone();
        let identity = identity.to_owned();
        async move { docs.find(WEBPUSH_SUBSCRIPTIONS, "user_identity", &json!(identity)).await.unwrap() }
    };
    assert_eq!(by_identity("tenant-a_42").await.len(), 1);

    // Deactivate needs the exact tuple.
    for (name, body) in [
        ("other player", json!({ "tenant_id": TENANT_A, "player_id": 43, "endpoint": first })),
        ("other endpoint", json!({ "tenant_id": TENANT_A, "player_id": 42, "endpoint": endpoint("other") })),
        (
            "endpoint differs in case",
            json!({ "tenant_id": TENANT_A, "player_id": 42, "endpoint": first.to_uppercase() }),
        ),
    ] {
        let response = platform(&host, BRIDGE_TOKEN, "POST", DEACTIVATE, Some(body)).await;
        assert_eq!(response, (200, json!({ "deactivated": false })), "{name}");
    }
    let ops_mismatch = json!({ "tenant_id": TENANT_B, "player_id": 42, "endpoint": first });
    let response = platform(&host, OPS_TOKEN, "POST", DEACTIVATE, Some(ops_mismatch)).await;
    assert_eq!(response, (200, json!({ "deactivated": false })), "another tenant's tuple never matches");
    assert_eq!(docs.get(WEBPUSH_SUBSCRIPTIONS, &id).await.unwrap().unwrap()["status"], "active");

    let exact = json!({ "tenant_id": TENANT_A, "player_id": 42, "endpoint": first });
    let response = platform(&host, BRIDGE_TOKEN, "POST", DEACTIVATE, Some(exact.clone())).await;
    assert_eq!(response, (200, json!({ "deactivated": true })));
    let stored = docs.get(WEBPUSH_SUBSCRIPTIONS, &id).await.unwrap().unwrap();
    assert_eq!(stored["status"], "deactivated");
    assert!(stored["deactivated_at"].is_string());
    // Repeating it is idempotent.
    let response = platform(&host, BRIDGE_TOKEN, "POST", DEACTIVATE, Some(exact)).await;
    assert_eq!(response, (200, json!({ "deactivated": true })));

    // Re-subscribing the endpoint reactivates it, keeping id and creation time, with the new keys.
    let mut again = subscription(TENANT_A, 42, &first);
    again["keys"]["auth"] = json!("AAAAAAAAAAAAAAAAAAAAAA");
    let (status, body) = platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(again)).await;
    assert_eq!(
        (status, body["id"].as_str(), body["created_at"].as_str()),
        (201, Some(id.as_str()), Some(created_at.as_str()))
    );
    let stored = docs.get(WEBPUSH_SUBSCRIPTIONS, &id).await.unwrap().unwrap();
    assert_eq!(
        (stored["status"].as_str(), stored["keys"]["auth"].as_str()),
        (Some("active"), Some("AAAAAAAAAAAAAAAAAAAAAA"))
    );

    // A second browser of the same player is a second subscription.
    let second = endpoint("second");
    let (status, body) =
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 42, &second))).await;
    assert_eq!(status, 201);
    assert_ne!(body["id"], json!(id));
    assert_eq!(by_identity("tenant-a_42").await.len(), 2);

    // The endpoint moves when another player of the same tenant subscribes it (same browser, new login).
    let (status, _) =
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 43, &first))).await;
    assert_eq!(status, 201);
    assert_eq!(by_identity("tenant-a_42").await.len(), 1);
    assert_eq!(by_identity("tenant-a_43").await.len(), 1);

    // Cross-tenant: an endpoint held by tenant-b cannot be taken over by a caller limited to tenant-a.
    let foreign = endpoint("foreign");
    let (status, _) =
        platform(&host, OPS_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_B, 5, &foreign))).await;
    assert_eq!(status, 201);
    let response =
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 5, &foreign))).await;
    assert_error(&response, 403, "FORBIDDEN", "taking over another tenant's endpoint");
    assert_eq!(by_identity("tenant-b_5").await.len(), 1);
    assert!(by_identity("tenant-a_5").await.is_empty());

    // Player 0 is the dashboard's smoke-test identity: refused for the bridge, accepted for the dashboard caller.
    let smoke = endpoint("smoke");
    let response = platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 0, &smoke))).await;
    assert_eq!(
        detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", "player 0 by the bridge")),
        ["player_id"]
    );
    let (status, body) =
        platform(&host, DASHBOARD_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 0, &smoke))).await;
    assert_eq!((status, body["player_id"].as_i64()), (201, Some(0)));
    let response = platform(
        &host,
        DASHBOARD_TOKEN,
        "POST",
        DEACTIVATE,
        Some(json!({ "tenant_id": TENANT_A, "player_id": 0, "endpoint": smoke })),
    )
    .await;
    assert_eq!(response, (200, json!({ "deactivated": true })));

    // Optional fields: platform defaults to web; user_agent may be left out.
    let mut minimal = subscription(TENANT_A, 9, &endpoint("minimal"));
    minimal
        .as_object_mut()
        .unwrap()
        .retain(|k, _| ["tenant_id", "player_id", "endpoint", "keys"].contains(&k.as_str()));
    let (status, body) = platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(minimal)).await;
    assert_eq!((status, body["platform"].as_str()), (201, Some("web")));
    host.stop().await;
}

fn chrono_like(value: &str) -> bool {
    value.len() == 24 && value.ends_with('Z') && value.as_bytes()[10] == b'T'
}

/// Applies `edit` to a copy of `body`: set a field (`Some`) or remove it (`None`); dotted paths reach into
/// `keys`.
fn with(body: &Value, field: &str, value: Option<Value>) -> Value {
    let mut body = body.clone();
    let (target, name) = match field.split_once('.') {
        Some((outer, inner)) => (&mut body[outer], inner),
        None => (&mut body, field),
    };
    match value {
        Some(value) => target[name] = value,
        None => {
            target.as_object_mut().unwrap().remove(name);
        }
    }
    body
}

async fn validation_errors(backends: Backends) {
    let host = push_host(backends).await;
    let sub = subscription(TENANT_A, 42, &endpoint("v"));
    let deactivate = json!({ "tenant_id": TENANT_A, "player_id": 42, "endpoint": "https://push.example.net/x" });
    let token = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-1", "d-1", i64::MAX / 2));
    let browser = browser_event(&token, "n-1", "d-1", "e-1", "displayed");
    let semantic = semantic_event(TENANT_A, 42, "s-1", "opened");
    let cases: Vec<(&str, &Value, &str, Option<Value>, &str)> = vec![
        (SUBSCRIPTIONS, &sub, "tenant_id", None, "tenant_id"),
        (SUBSCRIPTIONS, &sub, "tenant_id", Some(json!("")), "tenant_id"),
        (SUBSCRIPTIONS, &sub, "tenant_id", Some(json!(7)), "tenant_id"),
        (SUBSCRIPTIONS, &sub, "player_id", None, "player_id"),
        (SUBSCRIPTIONS, &sub, "player_id", Some(json!(0)), "player_id"),
        (SUBSCRIPTIONS, &sub, "player_id", Some(json!(-1)), "player_id"),
        (SUBSCRIPTIONS, &sub, "player_id", Some(json!("42")), "player_id"),
        (SUBSCRIPTIONS, &sub, "player_id", Some(json!(4.5)), "player_id"),
        (SUBSCRIPTIONS, &sub, "endpoint", None, "endpoint"),
        (SUBSCRIPTIONS, &sub, "endpoint", Some(json!("http://push.example.net/x")), "endpoint"),
        (SUBSCRIPTIONS, &sub, "endpoint", Some(json!("not a url")), "endpoint"),
        (SUBSCRIPTIONS, &sub, "keys", None, "keys"),
        (SUBSCRIPTIONS, &sub, "keys", Some(json!("k")), "keys"),
        (SUBSCRIPTIONS, &sub, "keys.p256dh", None, "keys.p256dh"),
        (SUBSCRIPTIONS, &sub, "keys.p256dh", Some(json!("not+base64/url")), "keys.p256dh"),
        (SUBSCRIPTIONS, &sub, "keys.p256dh", Some(json!("AAAA")), "keys.p256dh"),
        (SUBSCRIPTIONS, &sub, "keys.auth", None, "keys.auth"),
        (SUBSCRIPTIONS, &sub, "keys.auth", Some(json!("AAAA")), "keys.auth"),
        (SUBSCRIPTIONS, &sub, "platform", Some(json!("android")), "platform"),
        (SUBSCRIPTIONS, &sub, "user_agent", Some(json!(5)), "user_agent"),
        (DEACTIVATE, &deactivate, "tenant_id", None, "tenant_id"),
        (DEACTIVATE, &deactivate, "player_id", Some(json!(0)), "player_id"),
        (DEACTIVATE, &deactivate, "endpoint", None, "endpoint"),
        (BROWSER, &browser, "event_id", None, "event_id"),
        (BROWSER, &browser, "delivery_id", None, "delivery_id"),
        (BROWSER, &browser, "notification_id", None, "notification_id"),
        (BROWSER, &browser, "interaction_token", None, "interaction_token"),
        (BROWSER, &browser, "event_type", None, "event_type"),
        (BROWSER, &browser, "event_type", Some(json!("opened")), "event_type"),
        (BROWSER, &browser, "event_type", Some(json!("DISPLAYED")), "event_type"),
        (BROWSER, &browser, "occurred_at", None, "occurred_at"),
        (BROWSER, &browser, "occurred_at", Some(json!("yesterday")), "occurred_at"),
        (BROWSER, &browser, "occurred_at", Some(json!("2026-03-01T10:00:00")), "occurred_at"),
        (BROWSER, &browser, "action_id", Some(json!("play")), "action_id"),
        (BROWSER, &browser, "metadata", Some(json!([1])), "metadata"),
        (BROWSER, &browser, "endpoint", Some(json!(5)), "endpoint"),
        (SEMANTIC, &semantic, "event_type", Some(json!("clicked")), "event_type"),
        (SEMANTIC, &semantic, "event_type", None, "event_type"),
        (SEMANTIC, &semantic, "tenant_id", None, "tenant_id"),
        (SEMANTIC, &semantic, "player_id", None, "player_id"),
        (SEMANTIC, &semantic, "player_id", Some(json!(0)), "player_id"),
        (SEMANTIC, &semantic, "player_id", Some(json!(-7)), "player_id"),
        (SEMANTIC, &semantic, "occurred_at", None, "occurred_at"),
        (SEMANTIC, &semantic, "event_id", Some(json!("")), "event_id"),
    ];
    for (path, base, field, value, expected) in cases {
        let body = with(base, field, value.clone());
        let context = format!("{path} {field}={value:?}");
        let response = platform(&host, OPS_TOKEN, "POST", path, Some(body)).await;
        let details = assert_error(&response, 400, "VALIDATION_ERROR", &context);
        assert_eq!(detail_fields(&details), [expected], "{context}: {details}");
    }
    // Several problems at once are all named.
    let response =
        platform(&host, OPS_TOKEN, "POST", SEMANTIC, Some(json!({ "event_type": "x", "player_id": 0 }))).await;
    let fields = detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", "many"));
    for field in ["event_id", "delivery_id", "notification_id", "occurred_at", "event_type", "tenant_id", "player_id"] {
        assert!(fields.iter().any(|f| f == field), "{field} not in {fields:?}");
    }
    // Malformed, empty and non-object bodies.
    let auth = format!("Bearer {OPS_TOKEN}");
    let headers = [("authorization", auth.as_str()), ("x-source-app", SOURCE_APP)];
    for raw in [&b"{\"tenant_id\": "[..], b"", b"[1, 2]", b"\"text\""] {
        for path in [SUBSCRIPTIONS, DEACTIVATE, BROWSER, SEMANTIC] {
            let response = send(&host, "POST", &host.url(path), &headers, Body::Raw(raw.to_vec())).await;
            let details = assert_error(&response, 400, "VALIDATION_ERROR", &format!("{path} {raw:?}"));
            assert_eq!(detail_fields(&details), ["body"]);
        }
    }
    // Past the body limit: 413 with the envelope.
    let big = json!({ "tenant_id": "x".repeat(host.config.api.max_body_bytes + 1) });
    let response = platform(&host, OPS_TOKEN, "POST", SUBSCRIPTIONS, Some(big)).await;
    assert_error(&response, 413, "PAYLOAD_TOO_LARGE", "body limit");
    // Wrong method on a push route: 405 with the envelope.
    let response = platform(&host, OPS_TOKEN, "GET", SUBSCRIPTIONS, None).await;
    assert_error(&response, 405, "METHOD_NOT_ALLOWED", "GET on a POST route");

    assert!(host.ports.documents.list(WEBPUSH_SUBSCRIPTIONS).await.unwrap().is_empty(), "invalid bodies store nothing");
    assert!(host.ports.documents.list(WEBPUSH_EVENTS).await.unwrap().is_empty(), "invalid events store nothing");
    host.stop().await;
}

async fn browser_events_and_tokens(backends: Backends) {
    let host = push_host(backends).await;
    let now = SystemClock.now_ms();
    let hour = 3_600_000;
    let good = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-1", "d-1", now + hour));

    let response =
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&good, "n-1", "d-1", "e-1", "displayed")))
            .await;
    assert_eq!(response, (202, json!({ "status": "accepted" })));
    let mut clicked = browser_event(&good, "n-1", "d-1", "e-2", "clicked");
    clicked["action_id"] = json!("play");
    clicked["endpoint"] = json!("https://push.example.net/send/abc");
    assert_eq!(platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(clicked)).await.0, 202);
    // The same event reported twice is stored once.
    assert_eq!(
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&good, "n-1", "d-1", "e-1", "displayed")))
            .await
            .0,
        202
    );
    let mut events = stored_events(&host, "n-1").await;
    events.sort_by(|a, b| a["event_id"].as_str().cmp(&b["event_id"].as_str()));
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        (events[0]["tenant_id"].as_str(), events[0]["player_id"].as_i64(), events[0]["event_type"].as_str()),
        (Some(TENANT_A), Some(42), Some("displayed")),
        "identity comes from the token"
    );
    assert_eq!(
        (events[0]["source"].as_str(), events[0]["metadata"]["visible"].as_bool()),
        (Some("browser"), Some(true))
    );
    assert_eq!(
        (events[1]["action_id"].as_str(), events[1]["endpoint"].as_str()),
        (Some("play"), Some("https://push.example.net/send/abc"))
    );

    // A token signed with the previous secret still verifies during a rotation.
    let previous = mint(INTERACTION_SECRET_PREVIOUS.as_bytes(), &claims(TENANT_A, 42, "n-1", "d-1", now + hour));
    assert_eq!(
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&previous, "n-1", "d-1", "e-3", "closed")))
            .await
            .0,
        202
    );

    // Forged, expired, tampered, garbage, and bound to another delivery: 401 UNAUTHORIZED, nothing stored.
    let forged = mint(b"not-the-secret", &claims(TENANT_A, 42, "n-2", "d-2", now + hour));
    let expired = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-2", "d-2", now - 1));
    let tampered = {
        let other = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 99, "n-2", "d-2", now + hour));
        let genuine = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-2", "d-2", now + hour));
        let claims_part = other.split('.').nth(1).unwrap();
        let signature = genuine.split('.').nth(2).unwrap();
        format!("v1.{claims_part}.{signature}")
    };
    let other_delivery = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-2", "d-other", now + hour));
    let other_notification = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-other", "d-2", now + hour));
    for (name, token) in [
        ("forged", forged),
        ("expired", expired),
        ("tampered", tampered),
        ("garbage", "not-a-token".to_owned()),
        ("another delivery", other_delivery),
        ("another notification", other_notification),
    ] {
        let response =
            platform(&host, OPS_TOKEN, "POST", BROWSER, Some(browser_event(&token, "n-2", "d-2", "e-x", "displayed")))
                .await;
        assert_error(&response, 401, "UNAUTHORIZED", name);
    }
    assert!(stored_events(&host, "n-2").await.is_empty(), "refused events are not stored");

    // Tenant scope comes from the token: the bridge (tenant-a only) cannot report tenant-b's events.
    let tenant_b = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_B, 42, "n-b", "d-b", now + hour));
    let response =
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&tenant_b, "n-b", "d-b", "e-b", "clicked")))
            .await;
    assert_error(&response, 403, "FORBIDDEN", "token of another tenant");
    assert!(stored_events(&host, "n-b").await.is_empty());
    let response =
        platform(&host, OPS_TOKEN, "POST", BROWSER, Some(browser_event(&tenant_b, "n-b", "d-b", "e-b", "clicked")))
            .await;
    assert_eq!(response.0, 202);
    assert_eq!(stored_events(&host, "n-b").await[0]["tenant_id"], TENANT_B);
    host.stop().await;
}

async fn semantic_events(backends: Backends) {
    let host = push_host(backends).await;
    for (event_id, event_type) in [("s-1", "opened"), ("s-2", "read")] {
        let response =
            platform(&host, BRIDGE_TOKEN, "POST", SEMANTIC, Some(semantic_event(TENANT_A, 42, event_id, event_type)))
                .await;
        assert_eq!(response, (202, json!({ "status": "accepted" })), "{event_type}");
    }
    let mut events = stored_events(&host, "n-1").await;
    events.sort_by(|a, b| a["event_id"].as_str().cmp(&b["event_id"].as_str()));
    assert_eq!(events.len(), 2);
    assert_eq!(
        (
            events[1]["source"].as_str(),
            events[1]["event_type"].as_str(),
            events[1]["tenant_id"].as_str(),
            events[1]["player_id"].as_i64()
        ),
        (Some("semantic"), Some("read"), Some(TENANT_A), Some(42))
    );
    assert_eq!(events[0]["metadata"]["screen"], "inbox");
    // The same event id for another player is another event; for another tenant the bridge is refused.
    assert_eq!(
        platform(&host, BRIDGE_TOKEN, "POST", SEMANTIC, Some(semantic_event(TENANT_A, 43, "s-1", "opened"))).await.0,
        202
    );
    assert_eq!(stored_events(&host, "n-1").await.len(), 3);
    let response =
        platform(&host, BRIDGE_TOKEN, "POST", SEMANTIC, Some(semantic_event(TENANT_B, 42, "s-9", "opened"))).await;
    assert_error(&response, 403, "FORBIDDEN", "semantic event of another tenant");
    assert_eq!(stored_events(&host, "n-1").await.len(), 3);
    host.stop().await;
}

async fn editor_auth_and_tenants(backends: Backends) {
    let host = push_host(backends).await;
    let routes: [(&str, &str, Option<Value>); 9] = [
        ("GET", "/api/v1/tenants/", None),
        ("GET", TEMPLATES, None),
        ("POST", TEMPLATES, Some(welcome_template())),
        ("GET", "/api/v1/templates/web-push/1", None),
        ("POST", "/api/v1/templates/web-push/preview", Some(json!({}))),
        ("GET", "/api/v1/webpush/activity", None),
        ("GET", "/api/v1/webpush/notifications/n-1", None),
        ("POST", "/api/v1/webpush/send", Some(json!({}))),
        ("POST", "/api/v1/templates/in-app/send", Some(json!({}))),
    ];
    let bridge = format!("Bearer {BRIDGE_TOKEN}");
    let wrong = [
        vec![],
        vec![("authorization", "Bearer wrong-editor-token")],
        vec![("authorization", bridge.as_str())],
        vec![("authorization", EDITOR_TOKEN)],
    ];
    for (method, path, body) in &routes {
        for headers in &wrong {
            let response = send(&host, method, &host.url(path), headers, body.clone().into()).await;
            assert_error(&response, 401, "UNAUTHORIZED", &format!("{method} {path} {headers:?}"));
        }
    }
    assert!(host.ports.documents.list(WEBPUSH_TEMPLATES).await.unwrap().is_empty());

    // Tenants: configured, named by the caller policy, and seen on subscriptions.
    let (status, _) =
        platform(&host, OPS_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription("tenant-c", 1, &endpoint("c")))).await;
    assert_eq!(status, 201);
    let expected =
        json!({ "tenants": [{ "tenant_id": "tenant-a" }, { "tenant_id": "tenant-b" }, { "tenant_id": "tenant-c" }] });
    assert_eq!(editor(&host, None, "GET", "/api/v1/tenants/", None).await, (200, expected.clone()));
    assert_eq!(editor(&host, None, "GET", "/api/v1/tenants", None).await, (200, expected));
    // X-Svc-Client-Id verifies the selection.
    let selected = editor(&host, Some("tenant-c"), "GET", "/api/v1/tenants/", None).await;
    assert_eq!(selected, (200, json!({ "tenants": [{ "tenant_id": "tenant-c" }] })));
    let response = editor(&host, Some("tenant-z"), "GET", "/api/v1/tenants/", None).await;
    assert_error(&response, 403, "FORBIDDEN", "unknown selected tenant");
    host.stop().await;
}

async fn templates_crud(backends: Backends) {
    let host = push_host(backends).await;
    let docs = host.ports.documents.clone();

    let (status, created) = editor(&host, Some(TENANT_A), "POST", TEMPLATES, Some(welcome_template())).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!((created["id"].as_i64(), created["tenant_id"].as_str()), (Some(1), Some(TENANT_A)));
    assert_eq!(created["created_by"], "alice@example.com", "X-Admin-User is recorded");
    assert_eq!(created["contents"]["de"]["target_url"], "https://casino.example/de");
    assert_eq!((created["require_interaction"].as_bool(), created["silent"].as_bool()), (Some(true), Some(false)));
    let stored = docs.get(WEBPUSH_TEMPLATES, "1").await.unwrap().expect("stored");
    assert_eq!(stored["name"], "Welcome");
    assert_eq!(stored["placeholders"][0], json!({ "name": "first_name", "default": "friend" }));

    let (status, second) =
        editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(welcome_template())).await;
    assert_eq!((status, second["id"].as_i64()), (201, Some(2)));
    let mut for_b = welcome_template();
    for_b["tenant_id"] = json!(TENANT_B);
    let (status, third) = editor(&host, None, "POST", TEMPLATES, Some(for_b.clone())).await;
    assert_eq!((status, third["id"].as_i64(), third["tenant_id"].as_str()), (201, Some(3), Some(TENANT_B)));

    let ids = |body: &Value| {
        body["templates"].as_array().unwrap().iter().map(|t| t["id"].as_i64().unwrap()).collect::<Vec<_>>()
    };
    let (status, list) = editor(&host, Some(TENANT_A), "GET", TEMPLATES, None).await;
    assert_eq!((status, ids(&list)), (200, vec![1, 2]));
    assert_eq!(ids(&editor(&host, None, "GET", TEMPLATES, None).await.1), vec![1, 2, 3]);
    assert_eq!(
        ids(&editor(&host, None, "GET", "/api/v1/templates/web-push/?tenant_id=tenant-b", None).await.1),
        vec![3]
    );

    let (status, one) = editor(&host, None, "GET", "/api/v1/templates/web-push/1", None).await;
    assert_eq!((status, one["name"].as_str()), (200, Some("Welcome")));
    for (tenant, path, name) in [
        (Some(TENANT_A), "/api/v1/templates/web-push/3", "another tenant's template"),
        (None, "/api/v1/templates/web-push/999", "unknown id"),
        (None, "/api/v1/templates/web-push/abc", "not an id"),
    ] {
        assert_error(&editor(&host, tenant, "GET", path, None).await, 404, "NOT_FOUND", name);
    }

    // Replace: content changes, id/tenant/creation stay, the acting admin is recorded.
    let mut changed = welcome_template();
    changed["name"] = json!("Welcome v2");
    changed["silent"] = json!(true);
    let auth = format!("Bearer {EDITOR_TOKEN}");
    let headers = [("authorization", auth.as_str()), ("x-admin-user", "bob@example.com")];
    let (status, replaced) =
        send(&host, "PUT", &host.url("/api/v1/templates/web-push/1"), &headers, Body::Json(changed.clone())).await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(
        (replaced["name"].as_str(), replaced["updated_by"].as_str(), replaced["created_by"].as_str()),
        (Some("Welcome v2"), Some("bob@example.com"), Some("alice@example.com"))
    );
    assert_eq!(docs.get(WEBPUSH_TEMPLATES, "1").await.unwrap().unwrap()["silent"], true);
    assert_error(
        &editor(&host, None, "PUT", "/api/v1/templates/web-push/999", Some(changed.clone())).await,
        404,
        "NOT_FOUND",
        "replace unknown",
    );
    assert_error(
        &editor(&host, Some(TENANT_B), "PUT", "/api/v1/templates/web-push/1", Some(changed.clone())).await,
        404,
        "NOT_FOUND",
        "replace another tenant's",
    );
    let response = editor(&host, None, "PUT", "/api/v1/templates/web-push/1", Some(for_b)).await;
    assert_eq!(detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", "move tenant")), ["tenant_id"]);

    // Validation: each problem names its field; nothing is stored.
    let base = welcome_template();
    let mut no_tag = base.clone();
    no_tag.as_object_mut().unwrap().remove("tag");
    let cases: Vec<(Option<&str>, Value, &str)> = vec![
        (Some(TENANT_A), with(&base, "name", None), "name"),
        (Some(TENANT_A), with(&base, "contents", Some(json!({}))), "contents"),
        (Some(TENANT_A), with(&base, "target_url", Some(json!("https://evil.test/"))), "target_url"),
        (Some(TENANT_A), with(&base, "icon", Some(json!("ftp://cdn.casino.example/i.png"))), "icon"),
        (Some(TENANT_A), with(&base, "tag", Some(json!("{{undeclared}}"))), "tag"),
        (Some(TENANT_A), no_tag, "renotify"),
        (Some(TENANT_A), with(&base, "silent", Some(json!("yes"))), "silent"),
        (Some(TENANT_A), with(&base, "colour", Some(json!("red"))), "colour"),
        (Some(TENANT_A), with(&base, "id", Some(json!(77))), "id"),
        (None, base.clone(), "tenant_id"),
        (Some(TENANT_A), with(&base, "tenant_id", Some(json!(TENANT_B))), "tenant_id"),
    ];
    for (tenant, body, field) in cases {
        let response = editor(&host, tenant, "POST", TEMPLATES, Some(body)).await;
        let fields = detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", field));
        assert!(fields.iter().any(|f| f == field), "{field}: {fields:?}");
    }
    assert_eq!(docs.list(WEBPUSH_TEMPLATES).await.unwrap().len(), 3);

    // Delete.
    assert_eq!(editor(&host, None, "DELETE", "/api/v1/templates/web-push/2", None).await, (204, Value::Null));
    assert_eq!(docs.get(WEBPUSH_TEMPLATES, "2").await.unwrap(), None);
    assert_error(
        &editor(&host, None, "DELETE", "/api/v1/templates/web-push/2", None).await,
        404,
        "NOT_FOUND",
        "delete twice",
    );
    assert_error(
        &editor(&host, Some(TENANT_A), "DELETE", "/api/v1/templates/web-push/3", None).await,
        404,
        "NOT_FOUND",
        "delete another tenant's",
    );
    assert!(docs.get(WEBPUSH_TEMPLATES, "3").await.unwrap().is_some());
    assert_error(
        &editor(&host, None, "PATCH", "/api/v1/templates/web-push/1", Some(json!({}))).await,
        405,
        "METHOD_NOT_ALLOWED",
        "PATCH",
    );
    host.stop().await;
}

async fn template_preview(backends: Backends) {
    let host = push_host(backends).await;
    let (status, _) = editor(&host, Some(TENANT_A), "POST", TEMPLATES, Some(welcome_template())).await;
    assert_eq!(status, 201);
    const PREVIEW: &str = "/api/v1/templates/web-push/preview";

    let body = json!({ "template_id": 1, "language_enabled_id": "en", "placeholders": { "game": "slots" } });
    let (status, preview) = editor(&host, Some(TENANT_A), "POST", PREVIEW, Some(body)).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview,
        json!({
            "template_id": 1,
            "language_enabled_id": "en",
            "content": {
                "payload_version": "v1",
                "title": "Hi friend",
                "body": "Try slots now",
                "icon": "https://cdn.casino.example/icon.png",
                "badge": "https://cdn.casino.example/badge.png",
                "target_url": "https://casino.example/play/slots",
                "tag": "welcome",
                "require_interaction": true,
                "silent": false,
                "renotify": true,
                "actions": [{ "id": "play", "label": "Play slots", "target_url": "https://www.casino.example/slots" }],
                "data": {}
            }
        })
    );
    let body = json!({ "template_id": 1, "language_enabled_id": "de", "placeholders": { "game": "poker", "first_name": "Eva" } });
    let (status, preview) = editor(&host, None, "POST", PREVIEW, Some(body)).await;
    assert_eq!(
        (status, preview["content"]["title"].as_str(), preview["content"]["target_url"].as_str()),
        (200, Some("Hallo Eva"), Some("https://casino.example/de"))
    );

    // An unsaved template previews too.
    let mut inline = welcome_template();
    inline["contents"]["en"]["title"] = json!("Draft for {{first_name}}");
    let body = json!({ "template": inline, "language_enabled_id": "en", "placeholders": { "game": "bingo" } });
    let (status, preview) = editor(&host, Some(TENANT_A), "POST", PREVIEW, Some(body)).await;
    assert_eq!(
        (status, preview["content"]["title"].as_str(), preview["template_id"].clone()),
        (200, Some("Draft for friend"), Value::Null)
    );

    let cases: Vec<(Value, &str)> = vec![
        (json!({ "template_id": 1, "language_enabled_id": "en" }), "placeholders.game"),
        (
            json!({ "template_id": 1, "language_enabled_id": "fr", "placeholders": { "game": "x" } }),
            "language_enabled_id",
        ),
        // A placeholder value that would move the target to another host.
        (
            json!({ "template": with(&welcome_template(), "target_url", Some(json!("https://casino.example{{game}}"))), "language_enabled_id": "en", "placeholders": { "game": "@evil.test/" } }),
            "target_url",
        ),
        (json!({ "template": with(&welcome_template(), "name", None), "language_enabled_id": "en" }), "template.name"),
        (json!({ "language_enabled_id": "en" }), "template_id"),
        (json!({ "template_id": 1, "template": welcome_template(), "language_enabled_id": "en" }), "template"),
        (json!({ "template_id": 1 }), "language_enabled_id"),
        (json!({ "template_id": 1, "language_enabled_id": "en", "placeholders": { "game": 5 } }), "placeholders.game"),
    ];
    for (body, field) in cases {
        let response = editor(&host, Some(TENANT_A), "POST", PREVIEW, Some(body.clone())).await;
        let fields = detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", field));
        assert!(fields.iter().any(|f| f == field), "{field}: {fields:?} for {body}");
    }
    let response =
        editor(&host, Some(TENANT_B), "POST", PREVIEW, Some(json!({ "template_id": 1, "language_enabled_id": "en" })))
            .await;
    assert_error(&response, 404, "NOT_FOUND", "another tenant's template");
    host.stop().await;
}

fn activity(notification: &str, tenant: &str, player: i64, created_at_ms: i64, status: &str) -> NotificationActivity {
    NotificationActivity {
        notification_id: notification.into(),
        tenant_id: tenant.into(),
        player_id: player,
        channel: "WEB_PUSH".into(),
        template_id: Some(1),
        language_enabled_id: Some("en".into()),
        status: status.into(),
        delivered: status == "delivered",
        delivery_ids: vec![format!("d-{notification}")],
        invalidated_subscriptions: vec![],
        deliveries: vec![],
        run_id: None,
        attempts: 1,
        content: json!({ "title": "Hi" }),
        created_at_ms,
        created_at: String::new(),
        updated_at: String::new(),
    }
}

async fn activity_and_notifications(backends: Backends) {
    // The activity list pages through the store's queries: reading the collection whole fails here.
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.roles = vec!["admin".to_owned(), "push-api".to_owned()];
    let mut ports = flowhost::connect(&config).await.unwrap();
    let faulty = flowhost_tests::faulty::FaultyDocuments::new(ports.documents.clone());
    faulty.refuse_scans(flowhost_core::collections::WEBPUSH_ACTIVITY);
    ports.documents = faulty;
    let host = TestHost::start_on(config, ports).await;
    // The sender's write path, as the sender will use it.
    let kept = retention(host.config.section::<flowhost_push_api::PushConfig>().retention_days);
    let t0 = SystemClock.now_ms();
    for record in [
        activity("n-a1", TENANT_A, 42, t0, "delivered"),
        activity("n-a2", TENANT_A, 43, t0 + 1000, "subscription_expired"),
        activity("n-b1", TENANT_B, 42, t0 + 2000, "delivered"),
    ] {
        store_activity(&host.ports, kept, &record).await.expect("store activity");
    }
    let token = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-a1", "d-n-a1", t0 + 3_600_000));
    for (event_id, event_type) in [("e-1", "displayed"), ("e-2", "clicked")] {
        let response = platform(
            &host,
            BRIDGE_TOKEN,
            "POST",
            BROWSER,
            Some(browser_event(&token, "n-a1", "d-n-a1", event_id, event_type)),
        )
        .await;
        assert_eq!(response.0, 202);
    }

    let notifications = |body: &Value| {
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["notification_id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let (status, all) = editor(&host, None, "GET", "/api/v1/webpush/activity", None).await;
    assert_eq!(
        (status, notifications(&all), all["total"].as_u64()),
        (200, vec!["n-b1".to_owned(), "n-a2".into(), "n-a1".into()], Some(3))
    );
    assert_eq!(all["items"][2]["created_at"].as_str().map(str::len), Some(24));
    let (_, scoped) = editor(&host, Some(TENANT_A), "GET", "/api/v1/webpush/activity", None).await;
    assert_eq!(notifications(&scoped), ["n-a2", "n-a1"]);
    let (_, by_player) = editor(&host, None, "GET", "/api/v1/webpush/activity?player_id=42", None).await;
    assert_eq!(notifications(&by_player), ["n-b1", "n-a1"]);
    let (_, by_status) = editor(&host, Some(TENANT_A), "GET", "/api/v1/webpush/activity?status=delivered", None).await;
    assert_eq!(notifications(&by_status), ["n-a1"]);
    let (_, page) = editor(&host, None, "GET", "/api/v1/webpush/activity?limit=1&offset=1", None).await;
    assert_eq!(
        (notifications(&page), page["total"].as_u64(), page["limit"].as_u64()),
        (vec!["n-a2".to_owned()], Some(3), Some(1))
    );
    for (query, field) in
        [("limit=0", "limit"), ("limit=501", "limit"), ("player_id=abc", "player_id"), ("offset=-1", "offset")]
    {
        let response = editor(&host, None, "GET", &format!("/api/v1/webpush/activity?{query}"), None).await;
        assert_eq!(detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", query)), [field]);
    }
    let response = editor(&host, Some(TENANT_A), "GET", "/api/v1/webpush/activity?tenant_id=tenant-b", None).await;
    assert_error(&response, 400, "VALIDATION_ERROR", "query tenant outside the selection");

    let (status, record) = editor(&host, None, "GET", "/api/v1/webpush/notifications/n-a1", None).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(
        (record["tenant_id"].as_str(), record["status"].as_str(), record["delivered"].as_bool()),
        (Some(TENANT_A), Some("delivered"), Some(true))
    );
    let event_types: Vec<&str> =
        record["events"].as_array().unwrap().iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    assert_eq!(event_types.len(), 2);
    assert!(event_types.contains(&"displayed") && event_types.contains(&"clicked"));
    assert_eq!(editor(&host, Some(TENANT_A), "GET", "/api/v1/webpush/notifications/n-a1", None).await.0, 200);
    assert_error(
        &editor(&host, Some(TENANT_B), "GET", "/api/v1/webpush/notifications/n-a1", None).await,
        404,
        "NOT_FOUND",
        "other tenant",
    );
    assert_error(
        &editor(&host, None, "GET", "/api/v1/webpush/notifications/nope", None).await,
        404,
        "NOT_FOUND",
        "unknown",
    );
    host.stop().await;
}

async fn send_routes(backends: Backends) {
    let host = push_host(backends).await;
    let (status, _) = editor(&host, Some(TENANT_A), "POST", TEMPLATES, Some(welcome_template())).await;
    assert_eq!(status, 201);
    let valid = json!({ "tenant_id": TENANT_A, "player_id": 42, "template_id": 1, "language_enabled_id": "en", "placeholders": { "game": "slots" } });
    let response = editor(&host, Some(TENANT_A), "POST", "/api/v1/webpush/send", Some(valid.clone())).await;
    let details = assert_error(&response, 503, "SENDER_NOT_RUNNING", "valid web-push send");
    assert_eq!(details, json!({ "channel": "WEB_PUSH" }));
    // The dashboard's smoke test to player 0 is a valid send too.
    let smoke = with(&valid, "player_id", Some(json!(0)));
    assert_error(
        &editor(&host, None, "POST", "/api/v1/webpush/send", Some(smoke)).await,
        503,
        "SENDER_NOT_RUNNING",
        "player 0",
    );
    assert!(host.ports.documents.list(WEBPUSH_ACTIVITY).await.unwrap().is_empty(), "nothing pretends to be sent");

    let cases: Vec<SendCase> = vec![
        (None, with(&valid, "tenant_id", None), 400, "VALIDATION_ERROR", Some("tenant_id")),
        (None, with(&valid, "player_id", Some(json!(-1))), 400, "VALIDATION_ERROR", Some("player_id")),
        (None, with(&valid, "template_id", None), 400, "VALIDATION_ERROR", Some("template_id")),
        (None, with(&valid, "template_id", Some(json!("1"))), 400, "VALIDATION_ERROR", Some("template_id")),
        (None, with(&valid, "language_enabled_id", None), 400, "VALIDATION_ERROR", Some("language_enabled_id")),
        (
            None,
            with(&valid, "language_enabled_id", Some(json!("fr"))),
            400,
            "VALIDATION_ERROR",
            Some("language_enabled_id"),
        ),
        (None, with(&valid, "placeholders", Some(json!({}))), 400, "VALIDATION_ERROR", Some("placeholders.game")),
        (None, with(&valid, "placeholders", Some(json!({ "game": "@evil.test" }))), 200, "", None),
        (Some(TENANT_B), valid.clone(), 400, "VALIDATION_ERROR", Some("tenant_id")),
        (None, with(&valid, "template_id", Some(json!(99))), 404, "NOT_FOUND", None),
        (None, with(&valid, "tenant_id", Some(json!(TENANT_B))), 404, "NOT_FOUND", None),
    ];
    for (tenant, body, status, code, field) in cases {
        let response = editor(&host, tenant, "POST", "/api/v1/webpush/send", Some(body.clone())).await;
        if status == 200 {
            // "@evil.test" lands in the path of https://casino.example/play/..., so it renders fine.
            assert_error(&response, 503, "SENDER_NOT_RUNNING", &body.to_string());
            continue;
        }
        let details = assert_error(&response, status, code, &body.to_string());
        if let Some(field) = field {
            assert!(detail_fields(&details).iter().any(|f| f == field), "{field}: {details}");
        }
    }

    let inapp = json!({ "tenant_id": TENANT_A, "template_id": 7, "player_id": 42, "language_id": "en", "placeholders": { "a": "b" }, "vertical": "casino", "category": "promo", "subcategory": "bonus" });
    let details = assert_error(
        &editor(&host, None, "POST", "/api/v1/templates/in-app/send", Some(inapp.clone())).await,
        503,
        "SENDER_NOT_RUNNING",
        "in-app",
    );
    assert_eq!(details, json!({ "channel": "IN_APP" }));
    for (field, value) in [
        ("tenant_id", None),
        ("template_id", None),
        ("player_id", Some(json!(-2))),
        ("vertical", Some(json!(3))),
        ("placeholders", Some(json!({ "a": 1 }))),
    ] {
        let response =
            editor(&host, None, "POST", "/api/v1/templates/in-app/send", Some(with(&inapp, field, value))).await;
        let fields = detail_fields(&assert_error(&response, 400, "VALIDATION_ERROR", field));
        assert!(fields.iter().any(|f| f.starts_with(field)), "{field}: {fields:?}");
    }
    host.stop().await;

    // A disabled channel says so on the send path; client-config stays ready (both keys, no dry run).
    let host = push_host_with(backends, None, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().channels_enabled = vec![Channel::InApp]
    })
    .await;
    let (status, config) = platform(&host, BRIDGE_TOKEN, "GET", CLIENT_CONFIG, None).await;
    assert_eq!(status, 200, "{config}");
    let response = editor(&host, None, "POST", "/api/v1/webpush/send", Some(valid)).await;
    assert_error(&response, 503, "CHANNEL_DISABLED", "web push disabled");
    host.stop().await;
    let host = push_host_with(backends, None, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().channels_enabled = vec![Channel::WebPush]
    })
    .await;
    let response = editor(&host, None, "POST", "/api/v1/templates/in-app/send", Some(inapp)).await;
    assert_error(&response, 503, "CHANNEL_DISABLED", "in-app disabled");
    host.stop().await;
}

/// Activity and events expire `FLOWHOST_SENDER_WEBPUSH_RETENTION_DAYS` (30) days after they were written; the
/// sweep runs on the injected clock. The clock starts at the real time so MongoDB's own TTL monitor (real
/// time) never removes anything early.
async fn retention_expires_activity_and_events(backends: Backends) {
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let host = push_host_with(backends, Some(clock.clone()), |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().retention_sweep_interval_ms = 50
    })
    .await;
    assert_eq!(host.config.section::<flowhost_push_api::PushConfig>().retention_days, 30);
    let kept = retention(host.config.section::<flowhost_push_api::PushConfig>().retention_days);
    let t0 = clock.now_ms();
    store_activity(&host.ports, kept, &activity("n-old", TENANT_A, 42, t0, "delivered")).await.unwrap();
    let token = mint(INTERACTION_SECRET.as_bytes(), &claims(TENANT_A, 42, "n-old", "d-old", t0 + 90 * DAY_MS));
    assert_eq!(
        platform(
            &host,
            BRIDGE_TOKEN,
            "POST",
            BROWSER,
            Some(browser_event(&token, "n-old", "d-old", "e-1", "displayed"))
        )
        .await
        .0,
        202
    );
    assert_eq!(
        platform(&host, BRIDGE_TOKEN, "POST", SEMANTIC, Some(semantic_event(TENANT_A, 42, "s-1", "read"))).await.0,
        202
    );
    let sub = endpoint("kept");
    assert_eq!(
        platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(subscription(TENANT_A, 42, &sub))).await.0,
        201
    );

    // Ten days later a newer notification arrives.
    clock.advance_ms(10 * DAY_MS);
    store_activity(&host.ports, kept, &activity("n-new", TENANT_A, 42, clock.now_ms(), "delivered")).await.unwrap();
    let newer =
        platform(&host, BRIDGE_TOKEN, "POST", BROWSER, Some(browser_event(&token, "n-old", "d-old", "e-2", "clicked")))
            .await;
    assert_eq!(newer.0, 202);

    // Just before 30 days: several sweeps remove nothing.
    clock.set_ms(t0 + 30 * DAY_MS - 1000);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(editor(&host, None, "GET", "/api/v1/webpush/notifications/n-old", None).await.0, 200);
    assert_eq!(stored_events(&host, "n-old").await.len(), 2);
    assert_eq!(stored_events(&host, "n-1").await.len(), 1);

    // At 30 days the first records expire; the later event, the newer notification and subscriptions stay.
    clock.set_ms(t0 + 30 * DAY_MS);
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while editor(&host, None, "GET", "/api/v1/webpush/notifications/n-old", None).await.0 != 404 {
        assert!(tokio::time::Instant::now() < until, "the sweep did not remove the expired activity");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while stored_events(&host, "n-1").await.len() == 1 {
        assert!(tokio::time::Instant::now() < until, "the sweep did not remove the expired semantic event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let remaining = stored_events(&host, "n-old").await;
    assert_eq!(remaining.iter().map(|e| e["event_id"].as_str().unwrap()).collect::<Vec<_>>(), ["e-2"]);
    assert_eq!(editor(&host, None, "GET", "/api/v1/webpush/notifications/n-new", None).await.0, 200);
    assert_eq!(host.ports.documents.list(WEBPUSH_SUBSCRIPTIONS).await.unwrap().len(), 1, "subscriptions never expire");

    clock.set_ms(t0 + 40 * DAY_MS);
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while !host.ports.documents.list(WEBPUSH_ACTIVITY).await.unwrap().is_empty()
        || !stored_events(&host, "n-old").await.is_empty()
    {
        assert!(tokio::time::Instant::now() < until, "the sweep did not remove the later records");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    host.stop().await;
}

/// The spec's error table: an unexpected error (the store failing) is 500 `INTERNAL_ERROR`, safe to retry, with
/// no backend detail; 503 stays `PUSH_ENV_NOT_READY`'s.
async fn storage_failures_answer_internal_error(backends: Backends) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.roles = vec!["admin".to_owned(), "push-api".to_owned()];
    let mut ports = flowhost::connect(&config).await.unwrap();
    let faulty = flowhost_tests::faulty::FaultyDocuments::new(ports.documents.clone());
    ports.documents = faulty.clone();
    let host = TestHost::start_on(config, ports).await;

    faulty.fail_writes(WEBPUSH_SUBSCRIPTIONS, 1);
    let body = subscription(TENANT_A, 42, "https://fcm.googleapis.com/fcm/send/storage-down");
    let response = platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(body.clone())).await;
    assert_error(&response, 500, "INTERNAL_ERROR", "subscription write failed");
    let message = response.1["error"]["message"].as_str().unwrap();
    assert!(!message.contains("injected"), "no backend detail: {message}");
    // Retrying is safe: the next write goes through.
    assert_eq!(platform(&host, BRIDGE_TOKEN, "POST", SUBSCRIPTIONS, Some(body)).await.0, 201);

    faulty.fail_queries(WEBPUSH_ACTIVITY, true);
    let response = editor(&host, None, "GET", "/api/v1/webpush/activity", None).await;
    assert_error(&response, 500, "INTERNAL_ERROR", "activity query failed");
    faulty.fail_queries(WEBPUSH_ACTIVITY, false);
    assert_eq!(editor(&host, None, "GET", "/api/v1/webpush/activity", None).await.0, 200);
    host.stop().await;
}

/// The spec's 30-day interaction-event TTL holds apart from the retention setting: with 90-day retention an event
/// still expires 30 days after its receipt (activity keeps the 90 days), and an event stored earlier with a
/// longer expiry is removed when the API boots.
async fn interaction_events_keep_the_30_day_ttl(backends: Backends) {
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let t0 = clock.now_ms();
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.roles = vec!["admin".to_owned(), "push-api".to_owned()];
    config.section_mut::<flowhost_push_api::PushConfig>().retention_days = 90;
    config.section_mut::<flowhost_push_api::PushConfig>().retention_sweep_interval_ms = 50;
    let ports = flowhost::connect_with_clock(&config, clock.clone()).await.unwrap();
    // Written by an earlier deployment, 31 days ago, to expire in a year.
    let stale = json!({ "source": "semantic", "event_id": "stale", "event_type": "read", "tenant_id": TENANT_A,
        "player_id": 42, "notification_id": "n-stale", "delivery_id": "d-stale",
        "occurred_at": "2026-03-01T10:00:00Z", "received_at": flowhost_core::digest::iso_utc(t0 - 31 * DAY_MS),
        "metadata": {}, "caller_id": "bridge", "source_app": SOURCE_APP });
    let id = flowhost_notifications::records::event_id("semantic", TENANT_A, 42, "stale");
    ports.documents.upsert_expiring(WEBPUSH_EVENTS, &id, stale, t0 + 365 * DAY_MS).await.unwrap();
    let host = TestHost::start_on(config, ports).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while !stored_events(&host, "n-stale").await.is_empty() {
        assert!(tokio::time::Instant::now() < until, "the boot did not enforce the interaction-event TTL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let kept = retention(host.config.section::<flowhost_push_api::PushConfig>().retention_days);
    store_activity(&host.ports, kept, &activity("n-1", TENANT_A, 42, t0, "delivered")).await.unwrap();
    let event = semantic_event(TENANT_A, 42, "s-1", "read");
    assert_eq!(platform(&host, BRIDGE_TOKEN, "POST", SEMANTIC, Some(event)).await.0, 202);
    clock.set_ms(t0 + 30 * DAY_MS - 1000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored_events(&host, "n-1").await.len(), 1, "kept until 30 days");
    clock.set_ms(t0 + 30 * DAY_MS);
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while !stored_events(&host, "n-1").await.is_empty() {
        assert!(tokio::time::Instant::now() < until, "the event outlived the 30-day TTL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(editor(&host, None, "GET", "/api/v1/webpush/notifications/n-1", None).await.0, 200, "activity: 90 days");
    host.stop().await;
}
