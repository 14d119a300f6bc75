//! The sender as flows, editors and push services see it (spec 000: sender actions, both outcome tables,
//! delivered payload, states): the bundled `notifications` plugin delivers through the host's capability to a
//! local HTTPS push service that decrypts every message independently (`http_ece`) and verifies every VAPID
//! token; the editor's send route runs the same action path; a Kafka source event runs a released flow to a
//! delivered push. Every case on the embedded backends and on MongoDB/Kafka/NATS/Redis.

use std::time::Duration;

use flowhost_core::collections::WEBPUSH_SUBSCRIPTIONS;
use flowhost_notifications::Channel;
use flowhost_tests::push::{assert_error, editor, platform, EDITOR_TOKEN, OPS_TOKEN, TENANT_A};
use flowhost_tests::push_service::PushService;
use flowhost_tests::sender::{configure, release_push_flow, release_push_flow_through, start, subscribe};
use flowhost_tests::{on_both_backends, unique, Backends, TestHost};
use futures::StreamExt;
use serde_json::{json, Value};

on_both_backends!(
    the_editor_send_delivers_and_classifies_every_outcome,
    a_redelivered_send_pushes_once_and_honours_retry_after,
    dry_run_records_skipped_deliveries,
    a_kafka_event_runs_a_flow_to_a_delivered_push,
    the_data_sources_answer_through_the_catalog,
    flows_reach_the_service_over_nats_kafka_and_http_too,
    a_segment_retargeted_to_another_kafka_topic_reaches_the_service,
    an_invocation_for_one_tenant_never_notifies_another,
    with_a_signing_key_only_signed_requests_get_data,
    an_editor_send_is_delivered_by_a_sender_in_another_process,
    without_a_vapid_pair_sends_and_flow_steps_name_push_env_not_ready,
    player_zero_and_a_disabled_channel_dead_letter_a_flow_step_as_permanent,
);

const SEND: &str = "/api/v1/webpush/send";

fn send_body(player: i64) -> Value {
    json!({ "tenant_id": TENANT_A, "player_id": player, "template_id": 1, "language_enabled_id": "en",
            "placeholders": { "game": "slots", "first_name": "Ada" } })
}

/// An editor send with an `Idempotency-Key`: status, `Retry-After` and body.
async fn send_keyed(host: &TestHost, body: &Value, key: &str) -> (u16, Option<String>, Value) {
    let response = host
        .http
        .post(host.url(SEND))
        .header("authorization", format!("Bearer {EDITOR_TOKEN}"))
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry_after, response.json().await.unwrap_or(Value::Null))
}

async fn notification(host: &TestHost, id: &str) -> Value {
    let (status, record) = editor(host, None, "GET", &format!("/api/v1/webpush/notifications/{id}"), None).await;
    assert_eq!(status, 200, "{record}");
    record
}

fn outcomes(record: &Value) -> Vec<String> {
    let mut outcomes: Vec<String> =
        record["deliveries"].as_array().unwrap().iter().map(|d| d["outcome"].as_str().unwrap().to_owned()).collect();
    outcomes.sort();
    outcomes
}

async fn the_editor_send_delivers_and_classifies_every_outcome(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;

    // Player 42: two live subscriptions and one the push service says is gone.
    let live = [service.subscribe(&[201], None).await, service.subscribe(&[201], None).await];
    let gone = service.subscribe(&[410], None).await;
    for sub in live.iter().chain([&gone]) {
        subscribe(&host, 42, sub).await;
    }
    let (status, result) = editor(&host, None, "POST", SEND, Some(send_body(42))).await;
    assert_eq!(status, 200, "{result}");
    let id = result["notification_id"].as_str().unwrap().to_owned();
    assert_eq!(result["player_id"], 42);
    assert_eq!(result["status"], "delivered");
    assert_eq!(result["delivered"], true);
    assert_eq!(result["invalidated_subscriptions"], json!([gone.endpoint]));

    // Each live subscription got one message, decrypted by http_ece into DeliveryContent v1.
    let mut delivery_ids = Vec::new();
    let mut token = String::new();
    for sub in &live {
        let received = service.received(sub).await;
        assert_eq!(received.len(), 1, "{received:?}");
        let push = &received[0];
        assert!(push.get("error").is_none(), "{push}");
        let payload = &push["payload"];
        assert_eq!(payload["payload_version"], "v1");
        assert_eq!((payload["title"].as_str(), payload["body"].as_str()), (Some("Hi Ada"), Some("Try slots now")));
        assert_eq!(payload["target_url"], "https://casino.example/play/slots");
        assert_eq!(payload["actions"][0]["label"], "Play slots");
        assert_eq!(payload["data"]["notification_id"], id.as_str());
        assert_eq!(push["claims"]["sub"], "mailto:push-ops@casino.example");
        assert_eq!(push["claims"]["aud"], service.base_url);
        assert_eq!(push["headers"]["topic"], "bonus");
        assert!(push["headers"]["ttl"].as_str().is_some());
        delivery_ids.push(payload["delivery_id"].as_str().unwrap().to_owned());
        token = payload["interaction_token"].as_str().unwrap().to_owned();
    }
    assert_ne!(delivery_ids[0], delivery_ids[1], "a delivery id per delivery");

    // The service worker reports `displayed` with the token it received.
    let event = json!({ "event_id": "e1", "delivery_id": delivery_ids[1], "notification_id": id,
        "interaction_token": token, "event_type": "displayed", "endpoint": live[1].endpoint,
        "occurred_at": "2026-11-24T10:00:00Z", "metadata": {} });
    let (status, _) = platform(&host, OPS_TOKEN, "POST", "/api/v1/service/webpush/events/browser", Some(event)).await;
    assert_eq!(status, 202);

    // The record shows every delivery with its outcome and the browser events.
    let record = notification(&host, &id).await;
    assert_eq!(outcomes(&record), ["delivered", "delivered", "expired"]);
    assert_eq!((record["status"].as_str(), record["delivered"].as_bool()), (Some("delivered"), Some(true)));
    assert_eq!(record["events"][0]["event_type"], "displayed", "{record}");
    // The expired subscription is deactivated: the next send does not call it.
    let gone_doc = host
        .ports
        .documents
        .get(WEBPUSH_SUBSCRIPTIONS, &flowhost_notifications::records::subscription_id(&gone.endpoint))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone_doc["status"], "deactivated");
    let (status, again) = editor(&host, None, "POST", SEND, Some(send_body(42))).await;
    assert_eq!((status, again["invalidated_subscriptions"].clone()), (200, json!([])), "{again}");
    assert_ne!(again["notification_id"], id.as_str(), "another send is another notification");
    assert_eq!(service.received(&gone).await.len(), 1);

    // No active subscription: skip-forward, answered 200 with delivered false.
    let (status, none) = editor(&host, None, "POST", SEND, Some(send_body(43))).await;
    assert_eq!(status, 200, "{none}");
    assert_eq!((none["status"].as_str(), none["delivered"].as_bool()), (Some("no_active_subscriptions"), Some(false)));
    assert_eq!(none["invalidated_subscriptions"], json!([]));
    // Only expired subscriptions: success with status subscription_expired, nothing to retry.
    let expired = [service.subscribe(&[404], None).await, service.subscribe(&[410], None).await];
    for sub in &expired {
        subscribe(&host, 44, sub).await;
    }
    let (status, result) = editor(&host, None, "POST", SEND, Some(send_body(44))).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!((result["status"].as_str(), result["delivered"].as_bool()), (Some("subscription_expired"), Some(false)));
    let mut invalidated: Vec<&str> =
        result["invalidated_subscriptions"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    invalidated.sort();
    let mut expected = [expired[0].endpoint.as_str(), expired[1].endpoint.as_str()];
    expected.sort();
    assert_eq!(invalidated, expected);
    // Refused for good (403): a permanent failure, 4xx with the envelope.
    let refusing = service.subscribe(&[403], None).await;
    subscribe(&host, 45, &refusing).await;
    let details =
        assert_error(&editor(&host, None, "POST", SEND, Some(send_body(45))).await, 422, "SEND_FAILED", "403");
    assert!(details["notification_id"].as_str().is_some());
    // A missing template is refused before anything runs.
    let mut missing = send_body(42);
    missing["template_id"] = json!(99);
    assert_error(&editor(&host, None, "POST", SEND, Some(missing)).await, 404, "NOT_FOUND", "template 99");
    // The push metrics count every outcome above, and time encryption and the push services' answers.
    assert!(host.metric("webpush_deliveries_total{outcome=\"delivered\"}").await >= 2.0);
    assert_eq!(host.metric("webpush_deliveries_total{outcome=\"expired\"}").await, 3.0);
    assert_eq!(host.metric("webpush_deliveries_total{outcome=\"rejected\"}").await, 1.0);
    assert_eq!(host.metric("webpush_expired_endpoints_total").await, 3.0);
    let posts = host.metric("webpush_post_seconds_count").await;
    assert!(posts >= 6.0 && host.metric("webpush_encryption_seconds_count").await == posts, "{posts}");
    host.stop().await;
}

async fn a_redelivered_send_pushes_once_and_honours_retry_after(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    // 429 with Retry-After 2, then accepted; the second subscription accepts at once.
    let limited = service.subscribe(&[429, 201], Some("2")).await;
    let fine = service.subscribe(&[201], None).await;
    subscribe(&host, 50, &limited).await;
    subscribe(&host, 50, &fine).await;
    // One subscription delivered is a success: the limited one is recorded to retry.
    let key = unique("send");
    let (status, _, result) = send_keyed(&host, &send_body(50), &key).await;
    assert_eq!((status, result["status"].as_str()), (200, Some("delivered")), "{result}");
    // The same request again (same Idempotency-Key): the same notification, nothing pushed twice.
    let (status, _, again) = send_keyed(&host, &send_body(50), &key).await;
    assert_eq!((status, again["notification_id"].clone()), (200, result["notification_id"].clone()));
    assert_eq!(service.received(&fine).await.len(), 1, "the delivered subscription is not sent to again");

    // Only a rate-limited subscription: retryable, 503 with the push service's Retry-After.
    let slow = service.subscribe(&[429, 201], Some("3")).await;
    subscribe(&host, 51, &slow).await;
    let key = unique("send");
    let (status, retry_after, body) = send_keyed(&host, &send_body(51), &key).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("SEND_RETRYABLE")), "{body}");
    assert_eq!(retry_after.as_deref(), Some("3"));
    // Retried at once: the hold is honoured, the push service is not called before its time.
    let (status, retry_after, _) = send_keyed(&host, &send_body(51), &key).await;
    assert_eq!(status, 503);
    assert!(retry_after.is_some_and(|s| s.parse::<u64>().unwrap() <= 3));
    assert_eq!(service.received(&slow).await.len(), 1);
    // After Retry-After: delivered, on the same notification, with both attempts recorded.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let (status, _, result) = send_keyed(&host, &send_body(51), &key).await;
    assert_eq!((status, result["delivered"].as_bool()), (200, Some(true)), "{result}");
    let record = notification(&host, result["notification_id"].as_str().unwrap()).await;
    assert_eq!(outcomes(&record), ["delivered"]);
    assert_eq!(record["attempts"], 3);
    assert_eq!(service.received(&slow).await.len(), 2);

    // A push service failing with 500 (no Retry-After): 503 with the default wait.
    let failing = service.subscribe(&[500], None).await;
    subscribe(&host, 52, &failing).await;
    let (status, retry_after, _) = send_keyed(&host, &send_body(52), &unique("send")).await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("2")));
    host.stop().await;
}

async fn dry_run_records_skipped_deliveries(backends: Backends) {
    let service = PushService::start().await;
    let host =
        start(backends, &service, |config| config.section_mut::<flowhost_push_api::PushConfig>().dry_run = true).await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&host, 60, &sub).await;
    let (status, result) = editor(&host, None, "POST", SEND, Some(send_body(60))).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!((result["status"].as_str(), result["delivered"].as_bool()), (Some("dry_run"), Some(false)));
    let record = notification(&host, result["notification_id"].as_str().unwrap()).await;
    assert_eq!(outcomes(&record), ["skipped"]);
    assert_eq!(record["delivered"], false);
    assert!(service.received(&sub).await.is_empty(), "nothing was sent");
    host.stop().await;
}

/// Publishes `event` to `source` and answers the flow's first output on `out` (panicking with the flow's runs when
/// none arrives within a minute).
async fn run_to_output(
    host: &TestHost,
    flow_id: &str,
    source: &str,
    out: &str,
    event: Value,
) -> flowhost_core::ports::Record {
    host.publish(source, &[event]).await;
    let outputs = host.read(out, 1, Duration::from_secs(60)).await;
    if outputs.is_empty() {
        let (_, runs) = host.call("GET", &format!("/api/v2/flows/{flow_id}/runs"), None).await;
        panic!("no output; runs: {runs:#}");
    }
    outputs.into_iter().next().unwrap()
}

async fn a_kafka_event_runs_a_flow_to_a_delivered_push(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&host, 77, &sub).await;
    let (flow_id, source, out) = release_push_flow(&host, None).await;

    let event = json!({"event_type": "big_win", "tenant_id": TENANT_A, "player_id": 77, "game": "roulette"});
    let output = run_to_output(&host, &flow_id, &source, &out, event).await;
    let value: Value = serde_json::from_slice(&output.value).unwrap();
    assert_eq!(value["result"]["delivered"], true, "{value}");
    assert_eq!(value["result"]["status"], "delivered");
    let received = service.received(&sub).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["payload"]["body"], "Try roulette now");
    assert_eq!(received[0]["payload"]["data"]["notification_id"], value["result"]["notification_id"]);
    // The step's `data` passes through into the payload, rendered.
    assert_eq!(
        (received[0]["payload"]["data"]["campaign"].as_str(), received[0]["payload"]["data"]["game"].as_str()),
        (Some("big-win"), Some("roulette"))
    );
    // The notification belongs to the run: its record names it.
    let record = notification(&host, value["result"]["notification_id"].as_str().unwrap()).await;
    let run_id = String::from_utf8(output.header("flowhost-run-id").unwrap().to_vec()).unwrap();
    assert_eq!(record["run_id"], run_id.as_str());
    host.stop().await;
}

async fn the_data_sources_answer_through_the_catalog(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    let (status, components) = host.call("GET", "/api/v1/components", None).await;
    assert_eq!(status, 200);
    let row = components
        .as_array()
        .or_else(|| components["components"].as_array())
        .unwrap()
        .iter()
        .find(|c| c["component_id"] == "notifications")
        .unwrap_or_else(|| panic!("no notifications component: {components}"))
        .clone();
    let listed = |field: &str| {
        let mut values: Vec<String> =
            row[field].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        values.sort();
        values
    };
    assert_eq!(listed("service_sources"), ["http", "kafka", "nats"], "{row}");
    assert_eq!(listed("supports_nodes"), ["condition", "lookup", "mapping"], "{row}");
    let (status, templates) = host
        .call("GET", &format!("/api/v1/components/notifications/data/push_templates?tenant_id={TENANT_A}"), None)
        .await;
    assert_eq!(status, 200, "{templates}");
    assert_eq!(templates["items"][0]["id"], 1);
    assert_eq!(templates["items"][0]["languages"], json!(["en"]));
    let (status, fields) =
        host.call("GET", "/api/v1/components/notifications/data/push_template_fields?template_id=1", None).await;
    assert_eq!(status, 200, "{fields}");
    assert_eq!(fields["placeholders"][1], json!({"name": "game", "default": null, "required": true}));
    let (status, tenants) = host.call("GET", "/api/v1/components/notifications/data/tenants", None).await;
    assert_eq!(status, 200);
    assert!(tenants["items"].as_array().unwrap().contains(&json!({"tenant_id": TENANT_A})), "{tenants}");
    host.stop().await;
}

async fn flows_reach_the_service_over_nats_kafka_and_http_too(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    for (player, transport) in [(81, "nats"), (82, "kafka"), (83, "http")] {
        let sub = service.subscribe(&[201], None).await;
        subscribe(&host, player, &sub).await;
        let (_, source, out) = release_push_flow(&host, Some(transport)).await;
        let event = json!({"event_type": "big_win", "tenant_id": TENANT_A, "player_id": player, "game": transport});
        host.publish(&source, &[event]).await;
        let outputs = host.read(&out, 1, Duration::from_secs(60)).await;
        assert_eq!(outputs.len(), 1, "{transport}: no output");
        let value: Value = serde_json::from_slice(&outputs[0].value).unwrap();
        assert_eq!(value["result"]["status"], "delivered", "{transport}: {value}");
        let received = service.received(&sub).await;
        assert_eq!(received.len(), 1, "{transport}");
        assert_eq!(received[0]["payload"]["body"], format!("Try {transport} now"));
    }
    // The data sources answer on their subjects too (a lookup from another deployment asks there).
    let subject = "triggers.v2.service.notifications.data.push_templates";
    let request = json!({"tenant_id": TENANT_A}).to_string().into_bytes();
    let answer = host.ports.subjects.request(subject, request, Duration::from_secs(10)).await.unwrap();
    let templates: Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(templates["items"][0]["name"], "Bonus", "{templates}");
    host.stop().await;
}

/// A released flow whose segment retargets the `kafka` transport to another (existing) topic runs end to end:
/// the service side follows the flow broadcasts and consumes the retarget topic (spec 001, the v2 loop), so the
/// step is answered at once, not after the reply timeout.
async fn a_segment_retargeted_to_another_kafka_topic_reaches_the_service(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |config| {
        // Far beyond the test's patience: an unanswered envelope would show as no output, not as a late one.
        config.section_mut::<flowhost_runs::EngineConfig>().reply_timeout_ms = 600_000;
    })
    .await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&host, 84, &sub).await;
    let retarget = unique("notifications-retarget");
    host.ports.topics.create_topic(&retarget, 1).await.unwrap();
    let segment = json!({"service": "notifications", "transport": "kafka", "kafka_topic": retarget});
    let (flow_id, source, out) = release_push_flow_through(&host, segment).await;
    let (_, broadcast) = host.call("GET", "/api/v2/services/notifications/flows", None).await;
    let flow = broadcast["flows"].as_array().unwrap().iter().find(|f| f["flow_id"] == flow_id.as_str()).unwrap();
    assert_eq!(flow["segments"][0]["kafka_topic"], retarget.as_str(), "{broadcast}");

    let event = json!({"event_type": "big_win", "tenant_id": TENANT_A, "player_id": 84, "game": "retarget"});
    let output = run_to_output(&host, &flow_id, &source, &out, event).await;
    let value: Value = serde_json::from_slice(&output.value).unwrap();
    assert_eq!(value["result"]["status"], "delivered", "{value}");
    let received = service.received(&sub).await;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0]["payload"]["body"], "Try retarget now");
    // The envelope went to the retarget topic, not to the canonical one.
    let envelopes = host.read(&retarget, 1, Duration::from_secs(10)).await;
    let envelope: Value = serde_json::from_slice(&envelopes[0].value).unwrap();
    assert_eq!(
        (envelope["service"].as_str(), envelope["action"].as_str()),
        (Some("notifications"), Some("send_webpush"))
    );
    let (_, dead) = host.call("GET", &format!("/api/v2/dead-letters?flow_id={flow_id}"), None).await;
    assert_eq!(dead["total"], 0, "{dead}");
    host.stop().await;
}

/// An invocation for a tenant (a flow step of its run) notifies that tenant's players only: a config naming
/// another tenant is refused by the host (permanent), whatever the plugin asks.
async fn an_invocation_for_one_tenant_never_notifies_another(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&host, 91, &sub).await;
    let call = |tenant: &str| {
        json!({"action": "send_webpush", "tenant_id": tenant, "input": {"tenant_id": TENANT_A, "player_id": 91,
            "template_id": 1, "language_enabled_id": "en", "placeholders": {"game": "slots"}}})
    };
    let (status, body) = host.call("POST", "/api/v1/plugins/notifications/invoke", Some(call("tenant-b"))).await;
    assert_eq!((status, body["outcome"].as_str()), (422, Some("permanent")), "{body}");
    assert!(body["error"].as_str().unwrap().contains("cannot notify tenant"), "{body}");
    assert!(service.received(&sub).await.is_empty(), "nothing was sent");
    let (status, body) = host.call("POST", "/api/v1/plugins/notifications/invoke", Some(call(TENANT_A))).await;
    assert_eq!((status, body["output"]["status"].as_str()), (200, Some("delivered")), "{body}");
    host.stop().await;
}

/// With `FLOWHOST_SERVICE_SIGNING_KEY`, a bus client without the key gets no data source's answer (its request
/// goes unanswered), and a signed request gets a signed answer.
async fn with_a_signing_key_only_signed_requests_get_data(backends: Backends) {
    use flowhost_core::signing::{ServiceSigning, SIGNATURE_HEADER};
    const KEY: &str = "service-signing-key-0123456789abcdef";
    let service = PushService::start().await;
    let host = start(backends, &service, |config| {
        config.service_signing_key = Some(flowhost_core::config::Secret::new(KEY));
    })
    .await;
    let signing = ServiceSigning::new(Some(&flowhost_core::config::Secret::new(KEY)));
    let subject = "triggers.v2.service.notifications.data.push_templates";
    let request = json!({"tenant_id": TENANT_A}).to_string().into_bytes();
    // Signed: answered (once the endpoint subscribed), and the answer is signed.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let asked = host.ports.subjects.request_with_headers(
            subject,
            signing.headers(&request),
            request.clone(),
            Duration::from_secs(2),
        );
        match asked.await {
            Ok(answer) => break answer,
            Err(error) => assert!(tokio::time::Instant::now() < until, "never answered: {error}"),
        }
    };
    assert_eq!(signing.verify(answer.header(SIGNATURE_HEADER), &answer.payload), Ok(()), "the answer is signed");
    let templates: Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(templates["items"][0]["name"], "Bonus", "{templates}");
    // Unsigned: no answer.
    let unsigned = host.ports.subjects.request(subject, request, Duration::from_secs(2)).await;
    assert!(matches!(unsigned, Err(flowhost_core::PortError::Timeout(_))), "{unsigned:?}");
    host.stop().await;
}

/// Sends until the answer is no longer `SENDER_NOT_RUNNING` (a sender starting elsewhere subscribes as it
/// builds), for at most a minute.
async fn send_once_a_sender_answers(host: &TestHost, body: &Value) -> (u16, Value) {
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let response = editor(host, None, "POST", SEND, Some(body.clone())).await;
        if response.1["error"]["code"] != "SENDER_NOT_RUNNING" {
            return response;
        }
        assert!(tokio::time::Instant::now() < until, "no sender ever answered: {}", response.1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node of `api`'s deployment running the sender role alone, as a second process would (on the embedded
/// backends it shares `api`'s ports, the in-process subjects and the same store, as one machine's would).
async fn sender_process(
    api: &TestHost,
    service: &PushService,
    tweak: impl FnOnce(&mut flowhost_core::config::Config),
) -> TestHost {
    let mut config = api.config.clone();
    TestHost::join_deployment(&mut config, &api.config);
    configure(&mut config, service);
    config.roles = vec!["sender".to_owned()];
    config.api.port = 0;
    tweak(&mut config);
    if api.config.nats.url.is_some() {
        TestHost::start_with(config).await
    } else {
        TestHost::start_on(config, api.ports.clone()).await
    }
}

/// The seeds' topology: the API process (`admin,push-api`) runs no sender; an editor send goes over the subjects
/// port to the sender process, which delivers it (decrypted by the push service) and answers the route.
async fn an_editor_send_is_delivered_by_a_sender_in_another_process(backends: Backends) {
    let service = PushService::start().await;
    let api = start(backends, &service, |config| config.roles = vec!["admin".to_owned(), "push-api".to_owned()]).await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&api, 42, &sub).await;
    // No sender anywhere: nothing is sent, and the answer says so.
    let response = editor(&api, None, "POST", SEND, Some(send_body(42))).await;
    assert_eq!(assert_error(&response, 503, "SENDER_NOT_RUNNING", "no sender"), json!({ "channel": "WEB_PUSH" }));

    let sender = sender_process(&api, &service, |_| {}).await;
    sender.wait_ready().await;
    let (status, result) = send_once_a_sender_answers(&api, &send_body(42)).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!((result["status"].as_str(), result["delivered"].as_bool()), (Some("delivered"), Some(true)));
    let received = service.received(&sub).await;
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0]["payload"]["body"], "Try slots now");
    assert_eq!(received[0]["payload"]["data"]["notification_id"], result["notification_id"]);
    // The same Idempotency-Key is the same notification: the sender pushes nothing twice.
    let first = send_keyed(&api, &send_body(42), "cross-process-1").await;
    let again = send_keyed(&api, &send_body(42), "cross-process-1").await;
    assert_eq!((first.0, again.0), (200, 200), "{first:?} {again:?}");
    assert_eq!(first.2["notification_id"], again.2["notification_id"]);
    assert_eq!(service.received(&sub).await.len(), 2);
    // The in-app channel takes the same path: stored in the inbox by the sender, answered to the API.
    let template = json!({ "name": "Cashback", "default_language": "en",
                           "contents": { "en": { "title": "Cashback", "body": "Some back" } } });
    let (status, created) = editor(&api, Some(TENANT_A), "POST", "/api/v1/templates/in-app", Some(template)).await;
    assert_eq!(status, 201, "{created}");
    let inapp = json!({ "tenant_id": TENANT_A, "template_id": created["id"], "player_id": 42 });
    let (status, answer) = editor(&api, None, "POST", "/api/v1/templates/in-app/send", Some(inapp)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["notification_id"].as_str().is_some_and(|id| !id.is_empty()), "{answer}");
    sender.stop().await;
    api.stop().await;
}

/// Releases a push flow ([`release_push_flow`]), publishes a `big_win` of `player` and answers the dead letter of
/// its `send_webpush` step (waiting at most a minute).
async fn dead_letter_of_a_push_flow(host: &TestHost, player: i64) -> Value {
    let mut letters = host.ports.subjects.subscribe("triggers.v2.dlq.notifications.send_webpush").await.unwrap();
    let (_, source, _) = release_push_flow(host, None).await;
    let event = json!({"event_type": "big_win", "tenant_id": TENANT_A, "player_id": player, "game": "roulette"});
    host.publish(&source, &[event]).await;
    let letter = tokio::time::timeout(Duration::from_secs(60), letters.next()).await.expect("a dead letter").unwrap();
    serde_json::from_slice(&letter.payload).unwrap()
}

/// Without a VAPID pair the sender cannot deliver: an editor send answers 503 `PUSH_ENV_NOT_READY`, and a flow
/// step's error and its dead letter name it.
async fn without_a_vapid_pair_sends_and_flow_steps_name_push_env_not_ready(backends: Backends) {
    let service = PushService::start().await;
    let api = start(backends, &service, |config| {
        config.roles = vec!["admin".to_owned(), "engine".to_owned(), "push-api".to_owned()]
    })
    .await;
    let sub = service.subscribe(&[201], None).await;
    subscribe(&api, 42, &sub).await;
    let sender = sender_process(&api, &service, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_public_key = None;
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_private_key = None;
    })
    .await;
    let response = send_once_a_sender_answers(&api, &send_body(42)).await;
    let details = assert_error(&response, 503, "PUSH_ENV_NOT_READY", "no VAPID pair");
    assert_eq!(details["channel"], "WEB_PUSH");
    assert!(details["reasons"][0].as_str().unwrap().contains("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY"), "{details}");
    let (_, ready) = sender.call("GET", "/ready", None).await;
    assert!(ready.to_string().contains("notifications_sender"), "{ready}");
    sender.stop().await;
    api.stop().await;

    // A flow step on such a sender (in process here) fails naming the code, and so does its dead letter.
    let host = TestHost::start_configured(backends, None, |config| {
        configure(config, &service);
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_public_key = None;
        config.section_mut::<flowhost_push_api::PushConfig>().vapid_private_key = None;
        config.section_mut::<flowhost_runs::EngineConfig>().retry.max_attempts = 2;
        config.section_mut::<flowhost_runs::EngineConfig>().retry.initial_backoff_ms = 100;
    })
    .await;
    let (status, created) =
        editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(flowhost_tests::sender::template()))
            .await;
    assert_eq!(status, 201, "{created}");
    let letter = dead_letter_of_a_push_flow(&host, 42).await;
    assert_eq!(letter["reason"], "exhausted", "{letter}");
    assert!(letter["error"].as_str().unwrap().contains("PUSH_ENV_NOT_READY"), "{letter}");
    host.stop().await;
}

/// Spec 000: `player_id` 0 is reserved for the dashboard's smoke tests, so a flow step for player 0 is refused by
/// the host whatever the plugin asks, and dead-lettered as permanent (the editor's smoke send still reaches player
/// 0). A channel the deployment does not run is permanent too: retrying cannot help until an operator enables it.
/// Passthrough `data` over its limit is permanent, and the service's `notification_id` wins over a forged one.
async fn player_zero_and_a_disabled_channel_dead_letter_a_flow_step_as_permanent(backends: Backends) {
    let service = PushService::start().await;
    let host = start(backends, &service, |_| {}).await;
    let sub = service.subscribe(&[201, 201], None).await;
    subscribe(&host, 0, &sub).await;
    let letter = dead_letter_of_a_push_flow(&host, 0).await;
    assert_eq!(letter["reason"], "permanent", "{letter}");
    assert!(letter["error"].as_str().unwrap().contains("reserved for the dashboard's smoke tests"), "{letter}");
    assert!(service.received(&sub).await.is_empty(), "nothing was sent to player 0 from a flow");
    // The operator's invoke route is no smoke send either.
    let call = json!({"action": "send_webpush", "tenant_id": TENANT_A, "input": {"tenant_id": TENANT_A,
        "player_id": 0, "template_id": 1, "language_enabled_id": "en", "placeholders": {"game": "slots"}}});
    let (status, body) = host.call("POST", "/api/v1/plugins/notifications/invoke", Some(call)).await;
    assert_eq!((status, body["outcome"].as_str()), (422, Some("permanent")), "{body}");
    // The editor's smoke send reaches player 0, with its data passed through and the service's notification id.
    let mut smoke = send_body(0);
    smoke["data"] = json!({"notification_id": "forged", "screen": "lobby"});
    let (status, result) = editor(&host, None, "POST", SEND, Some(smoke.clone())).await;
    assert_eq!((status, result["delivered"].as_bool()), (200, Some(true)), "{result}");
    let received = service.received(&sub).await;
    assert_eq!(received[0]["payload"]["data"]["notification_id"], result["notification_id"]);
    assert_eq!(received[0]["payload"]["data"]["screen"], "lobby");
    smoke["data"] = json!({"blob": "x".repeat(1100)});
    let response = editor(&host, None, "POST", SEND, Some(smoke)).await;
    assert_error(&response, 400, "VALIDATION_ERROR", "data over 1024 bytes");
    let call = json!({"action": "send_webpush", "tenant_id": TENANT_A, "input": {"tenant_id": TENANT_A,
        "player_id": 5, "template_id": 1, "language_enabled_id": "en", "data": {"blob": "x".repeat(1100)}}});
    let (status, body) = host.call("POST", "/api/v1/plugins/notifications/invoke", Some(call)).await;
    assert_eq!((status, body["outcome"].as_str()), (422, Some("permanent")), "{body}");
    assert!(body["error"].as_str().unwrap().contains("data must be at most 1024 bytes"), "{body}");
    host.stop().await;

    // Web push not among the deployment's channels: the flow step is dead-lettered at once, naming the setting.
    let host = start(backends, &service, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().channels_enabled = vec![Channel::InApp]
    })
    .await;
    let letter = dead_letter_of_a_push_flow(&host, 42).await;
    assert_eq!((letter["reason"].as_str(), letter["attempts"].as_u64()), (Some("permanent"), Some(1)), "{letter}");
    assert!(letter["error"].as_str().unwrap().contains("FLOWHOST_CHANNELS_ENABLED"), "{letter}");
    host.stop().await;
}
