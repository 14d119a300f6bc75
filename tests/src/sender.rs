//! A host whose sender delivers to the local push service (`push_service`), as the sender and deployment suites
//! start it: the bundled `notifications` plugin, template 1 of `tenant-a` (`Bonus`), subscriptions stored
//! through the push-platform route, and a released flow source -> notifications segment -> `send_webpush` ->
//! output topic.

use flowhost_core::config::Config;
use serde_json::{json, Value};

use crate::push::{editor, platform, subscription, DASHBOARD_TOKEN, OPS_TOKEN, TENANT_A};
use crate::push_service::{PushService, PushSubscription};
use crate::{unique, Backends, TestHost};

/// The settings that let the sender reach `service` (loopback, its CA) with the bundled plugins.
pub fn configure(config: &mut Config, service: &PushService) {
    config.plugins.bundled = true;
    config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50;
    config.section_mut::<flowhost_push_api::PushConfig>().push_service_hosts = Some("127.0.0.1".into());
    config.section_mut::<flowhost_push_api::PushConfig>().ssl_cert_file = Some(service.ca_path.display().to_string());
    config.section_mut::<flowhost_push_api::PushConfig>().vapid_subject = "mailto:push-ops@casino.example".into();
}

/// A ready host (changed by `tweak`) with [`template`] stored as template 1 of `tenant-a`.
pub async fn start(backends: Backends, service: &PushService, tweak: impl FnOnce(&mut Config)) -> TestHost {
    let host = TestHost::start_configured(backends, None, |config| {
        configure(config, service);
        tweak(config);
    })
    .await;
    host.wait_ready().await;
    let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(template())).await;
    assert_eq!((status, created["id"].as_i64()), (201, Some(1)), "{created}");
    host
}

/// The web-push template `Bonus`, with a defaulted and a required placeholder.
pub fn template() -> Value {
    json!({
        "name": "Bonus",
        "placeholders": [{ "name": "first_name", "default": "friend" }, { "name": "game" }],
        "icon": "https://cdn.casino.example/icon.png",
        "target_url": "https://casino.example/play/{{game}}",
        "tag": "bonus",
        "actions": [{ "id": "play", "label": "Play {{game}}", "target_url": "https://casino.example/{{game}}" }],
        "contents": { "en": { "title": "Hi {{first_name}}", "body": "Try {{game}} now" } }
    })
}

/// Stores `subscription_of` for `(tenant-a, player)` through the push-platform route, as the bridge does.
pub async fn subscribe(host: &TestHost, player: i64, subscription_of: &PushSubscription) {
    let mut body = subscription(TENANT_A, player, &subscription_of.endpoint);
    body["keys"] = json!({ "p256dh": subscription_of.p256dh, "auth": subscription_of.auth });
    // Player 0 is the dashboard's smoke-test player: only its caller may subscribe it.
    let token = if player == 0 { DASHBOARD_TOKEN } else { OPS_TOKEN };
    let (status, stored) = platform(host, token, "POST", "/api/v1/service/webpush/subscriptions", Some(body)).await;
    assert_eq!(status, 201, "{stored}");
}

/// Releases source -> notifications segment (over `transport`, in process when `None`) -> send_webpush (with
/// passthrough `data` `{campaign: big-win, game}`) -> output; answers the flow id, the source topic and the
/// output topic.
pub async fn release_push_flow(host: &TestHost, transport: Option<&str>) -> (String, String, String) {
    let mut segment = json!({"service": "notifications"});
    if let Some(transport) = transport {
        segment["transport"] = json!(transport);
    }
    release_push_flow_through(host, segment).await
}

/// [`release_push_flow`] with the segment's whole config (`{"service": "notifications", ...}`).
pub async fn release_push_flow_through(host: &TestHost, segment: Value) -> (String, String, String) {
    let schema = json!({"fields": [{"name": "player_id", "type": "int"}, {"name": "game", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/big_win", Some(schema)).await.0, 200);
    let (source, out) = (unique("wins"), unique("notified"));
    let flow = json!({
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "big_win", "topic": source}},
            {"id": "seg", "kind": "service-in", "config": segment},
            {"id": "push", "kind": "action", "config": {
                "action_ref": "send_webpush", "tenant_id": "{{tenant_id}}", "player_id": "{{player_id}}",
                "template_id": 1, "language_enabled_id": "en", "placeholders": {"game": "{{game}}"},
                "data": {"campaign": "big-win", "game": "{{game}}"}}},
            {"id": "out", "kind": "output-topic", "config": {"topic": out}},
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "push"}, {"from": "push", "to": "out"}],
    });
    (host.release_flow(flow).await, source, out)
}
