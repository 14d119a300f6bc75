//! Web-push delivery as a push service sees it (spec 000: delivered payload, VAPID, the outcome table): the host's
//! push client against a local HTTPS push service that decrypts every message with Python's `http_ece` and
//! verifies every VAPID token with `cryptography`, answering 201, 404, 410, 429 with `Retry-After` and 500.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::config::Secret;
use flowhost_core::SystemClock;
use flowhost_notifications::push::{PushClient, PushMessage, PushOutcome, PushServiceHosts, Urgency, VapidSigner};
use flowhost_notifications::vapid::{generate, VapidKeys};
use flowhost_tests::push_service::{PushService, PushSubscription};
use serde_json::json;

const SUBJECT: &str = "mailto:push-ops@casino.example";

fn client(service: &PushService, hosts: &str) -> (PushClient, String) {
    let (public, private) = generate().unwrap();
    let keys = VapidKeys { public_key: public.clone(), private_key: Secret::new(private), temporary: false };
    let signer = Arc::new(VapidSigner::new(&keys, SUBJECT, Arc::new(SystemClock)).unwrap());
    let client = PushClient::new(signer, PushServiceHosts::parse(hosts).unwrap(), Some(&service.ca_path)).unwrap();
    (client, public)
}

fn message<'a>(subscription: &'a PushSubscription, payload: &'a [u8]) -> PushMessage<'a> {
    PushMessage {
        endpoint: &subscription.endpoint,
        p256dh: &subscription.p256dh,
        auth: &subscription.auth,
        payload,
        ttl_seconds: 3600,
        urgency: Urgency::High,
        topic: Some("offer-42"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_decrypt_independently_and_every_answer_is_classified() {
    let service = PushService::start().await;
    let (client, public_key) = client(&service, "127.0.0.1");
    let payload = json!({"payload_version": "v1", "delivery_id": "d1", "title": "Bonus", "body": "50 free spins",
        "data": {"notification_id": "n1"}})
    .to_string();

    // 201: decrypted by http_ece into the same JSON; the token verifies for the origin and the subject.
    let accepted = service.subscribe(&[201], None).await;
    assert_eq!(client.send(&message(&accepted, payload.as_bytes())).await, PushOutcome::Delivered { status: 201 });
    let received = service.received(&accepted).await;
    assert_eq!(received.len(), 1);
    let push = &received[0];
    assert!(push.get("error").is_none(), "{push}");
    assert_eq!(push["payload"], serde_json::from_str::<serde_json::Value>(&payload).unwrap());
    assert_eq!(push["claims"]["aud"], service.base_url);
    assert_eq!(push["claims"]["sub"], SUBJECT);
    assert_eq!(push["headers"]["ttl"], "3600");
    assert_eq!(push["headers"]["urgency"], "high");
    assert_eq!(push["headers"]["topic"], "offer-42");
    assert_eq!(push["headers"]["content-encoding"], "aes128gcm");
    // A second message reuses the signed token (cached per origin): the same expiry.
    assert_eq!(client.send(&message(&accepted, b"{}")).await, PushOutcome::Delivered { status: 201 });
    let received = service.received(&accepted).await;
    assert_eq!(received[1]["claims"]["exp"], received[0]["claims"]["exp"]);
    assert!(!public_key.is_empty());

    // 404 and 410: the subscription is gone.
    for status in [404, 410] {
        let gone = service.subscribe(&[status], None).await;
        assert_eq!(client.send(&message(&gone, b"{}")).await, PushOutcome::Expired { status });
    }
    // 429 with Retry-After, and 500: try again later.
    let limited = service.subscribe(&[429, 201], Some("2")).await;
    match client.send(&message(&limited, b"{}")).await {
        PushOutcome::Retry { status: Some(429), after, .. } => assert_eq!(after, Some(Duration::from_secs(2))),
        other => panic!("429: {other:?}"),
    }
    assert_eq!(client.send(&message(&limited, b"{}")).await, PushOutcome::Delivered { status: 201 });
    let failing = service.subscribe(&[500], None).await;
    assert!(matches!(
        client.send(&message(&failing, b"{}")).await,
        PushOutcome::Retry { status: Some(500), after: None, .. }
    ));
    // Another 4xx: sending again will not help.
    let refusing = service.subscribe(&[403], None).await;
    assert!(matches!(client.send(&message(&refusing, b"{}")).await, PushOutcome::Rejected { status: Some(403), .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_listed_push_services_are_called() {
    let service = PushService::start().await;
    let subscription = service.subscribe(&[201], None).await;
    // The default list names the browsers' push services only: a loopback endpoint is refused unsent.
    let (default_client, _) = client(&service, flowhost_notifications::push::DEFAULT_PUSH_SERVICE_HOSTS);
    match default_client.send(&message(&subscription, b"{}")).await {
        PushOutcome::Rejected { status: None, reason } => {
            assert!(reason.contains("FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Listed with another port: refused too.
    let (other_port, _) = client(&service, "127.0.0.1:1");
    assert!(matches!(
        other_port.send(&message(&subscription, b"{}")).await,
        PushOutcome::Rejected { status: None, .. }
    ));
    assert!(service.received(&subscription).await.is_empty(), "nothing reached the push service");
    // Bad keys and oversized payloads are refused before sending.
    let (client, _) = client(&service, "127.0.0.1");
    let mut bad = subscription.clone();
    bad.p256dh = "AAAA".into();
    assert!(matches!(client.send(&message(&bad, b"{}")).await, PushOutcome::Rejected { status: None, .. }));
    let huge = vec![b'x'; 5000];
    assert!(matches!(client.send(&message(&subscription, &huge)).await, PushOutcome::Rejected { status: None, .. }));
}
