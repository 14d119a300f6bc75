//! The subjects and work queue (JetStream) contract suites against the real NATS server
//! (`FLOWHOST_TEST_NATS_URL`), and deployments sharing that server: in NATS accounts of their own (the
//! specification's subjects), or in one account under subject prefixes (`FLOWHOST_NATS_SUBJECT_PREFIX`).

use std::sync::Arc;

use flowhost_core::ports::{Namespace, PortError, Subjects, WorkQueue};
use flowhost_nats::{NatsQueue, NatsSubjects};
use flowhost_tests::contract::{namespaces, queue, subjects};
use flowhost_tests::servers;

async fn nats() -> Arc<dyn Subjects> {
    let subjects = NatsSubjects::connect(&servers::nats_url()).await.expect("connect to NATS");
    assert_eq!(subjects.backend(), "nats");
    Arc::new(subjects)
}

/// A connection to `url` (its account) under `prefix`.
async fn nats_in(url: &str, prefix: &str) -> Arc<dyn Subjects> {
    Arc::new(NatsSubjects::connect_in(url, Namespace::new(prefix, '.')).await.expect("connect to NATS"))
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
async fn headers_travel_with_messages_requests_and_answers() {
    subjects::headers_travel_with_messages_requests_and_answers(nats().await).await;
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

/// The port's promises hold under a subject prefix too: wildcards, queue groups, and requests whose reply
/// inbox is under the prefix.
#[tokio::test]
async fn the_suite_holds_under_a_subject_prefix() {
    let (url, prefix) = (servers::nats_url(), flowhost_tests::host::deployment_name());
    let prefixed = || nats_in(&url, &prefix);
    subjects::exact_subject(prefixed().await).await;
    subjects::tail_wildcard(prefixed().await).await;
    subjects::request_reply_round_trip(prefixed().await).await;
    subjects::request_timeout_and_no_responders(prefixed().await).await;
    subjects::queue_group_delivers_each_message_once(prefixed().await).await;
}

/// Two deployments in two NATS accounts (the URL signs in; the password is percent-encoded), both on the
/// specification's subjects, never see each other.
#[tokio::test]
async fn deployments_in_their_own_accounts_never_meet() {
    let blue_url = servers::nats_blue_url();
    let blue = || nats_in(&blue_url, "");
    let green = nats_in(&servers::nats_green_url(), "").await;
    namespaces::subjects_stay_in_their_deployment(blue().await, blue().await, green.clone()).await;
    namespaces::subjects_stay_in_their_deployment(green.clone(), green, blue().await).await;
}

/// Two deployments in one account under two subject prefixes never see each other.
#[tokio::test]
async fn deployments_under_their_own_subject_prefixes_never_meet() {
    let (ours, theirs) = (flowhost_tests::host::deployment_name(), flowhost_tests::host::deployment_name());
    let url = servers::nats_url();
    namespaces::subjects_stay_in_their_deployment(
        nats_in(&url, &ours).await,
        nats_in(&url, &ours).await,
        nats_in(&url, &theirs).await,
    )
    .await;
}

/// A wrong password is refused at connect, naming no secret.
#[tokio::test]
async fn a_wrong_password_is_refused() {
    let url = servers::nats_blue_url().replace("blue%2Fsecret", "wrong");
    let error = NatsSubjects::connect(&url).await.expect_err("refused");
    assert!(!error.to_string().contains("wrong"), "{error}");
}
