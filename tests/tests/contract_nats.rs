//! The subjects and work queue (JetStream) contract suites against the real NATS server
//! (`FLOWHOST_TEST_NATS_URL`).

use std::sync::Arc;

use flowhost_core::ports::{PortError, Subjects, WorkQueue};
use flowhost_nats::{NatsQueue, NatsSubjects};
use flowhost_tests::contract::{queue, subjects};
use flowhost_tests::servers;

async fn nats() -> Arc<dyn Subjects> {
    let subjects = NatsSubjects::connect(&servers::nats_url()).await.expect("connect to NATS");
    assert_eq!(subjects.backend(), "nats");
    Arc::new(subjects)
}

#[tokio::test]
async fn exact_subject() {
    subjects::exact_subject(nats().await).await;
}

#[tokio::test]
async fn star_wildcard() {
    subjects::star_wildcard(nats().await).await;
}

#[tokio::test]
async fn tail_wildcard() {
    subjects::tail_wildcard(nats().await).await;
}

#[tokio::test]
async fn every_subscriber_receives() {
    subjects::every_subscriber_receives(nats().await).await;
}

#[tokio::test]
async fn request_reply_round_trip() {
    subjects::request_reply_round_trip(nats().await).await;
}

#[tokio::test]
async fn request_timeout_and_no_responders() {
    subjects::request_timeout_and_no_responders(nats().await).await;
}

#[tokio::test]
async fn queue_group_delivers_each_message_once() {
    subjects::queue_group_delivers_each_message_once(nats().await).await;
}

/// Not part of the shared suite: messages published on another connection reach a subscription as soon as
/// `subscribe` has returned (the subscription is registered with the server, not only queued locally).
#[tokio::test]
async fn subscription_is_live_for_other_connections() {
    let subscriber = nats().await;
    let publisher = nats().await;
    let subject = flowhost_tests::unique("live");
    let mut stream = subscriber.subscribe(&subject).await.expect("subscribe");
    publisher.publish(&subject, b"hello".to_vec()).await.expect("publish");
    let message = tokio::time::timeout(std::time::Duration::from_secs(5), futures::StreamExt::next(&mut stream))
        .await
        .expect("delivered")
        .expect("open");
    assert_eq!(message.payload, b"hello");
}

/// Not part of the shared suite: a server that does not answer is a transient failure.
#[tokio::test]
async fn unreachable_server_is_unavailable() {
    let result = NatsSubjects::connect("nats://127.0.0.1:9").await;
    assert!(matches!(result, Err(PortError::Unavailable(_))), "got {:?}", result.err());
}

async fn jetstream_queue() -> Arc<dyn WorkQueue> {
    let queue = NatsQueue::connect(&servers::nats_url()).await.expect("connect to NATS");
    assert_eq!(queue.backend(), "jetstream");
    Arc::new(queue)
}

#[tokio::test]
async fn queue_enqueue_lease_ack() {
    queue::enqueue_lease_ack(jetstream_queue().await).await;
}

#[tokio::test]
async fn queue_lease_max_and_batches() {
    queue::lease_max_and_batches(jetstream_queue().await).await;
}

#[tokio::test]
async fn queue_lease_exclusivity() {
    queue::lease_exclusivity(jetstream_queue().await).await;
}

/// Visibility is the consumer's `ack_wait`, measured by the server, so the check polls for up to its bound.
#[tokio::test]
async fn queue_redelivery_after_consumer_dies() {
    queue::redelivery_after_consumer_dies(
        jetstream_queue().await,
        std::time::Duration::from_secs(1),
        queue::server_time(),
    )
    .await;
}

#[tokio::test]
async fn queue_ack_unknown_ids() {
    queue::ack_unknown_ids(jetstream_queue().await).await;
}
