//! The topics contract suite against the real Kafka-protocol broker (`FLOWHOST_TEST_KAFKA_BROKERS`, tansu on
//! this machine). Consumers use `session.timeout.ms=6000`: tansu completes a group join after about half the
//! session timeout, and librdkafka's default (45 s) would make every join take over 20 s.

use std::collections::BTreeMap;
use std::sync::Arc;

use flowhost_core::ports::{Namespace, Topics};
use flowhost_kafka::KafkaTopics;
use flowhost_tests::contract::{namespaces, source, topics};
use flowhost_tests::servers;

fn kafka() -> Arc<dyn Topics> {
    kafka_in("")
}

/// Clients whose topics and groups are under `prefix` (`FLOWHOST_KAFKA_TOPIC_PREFIX`).
fn kafka_in(prefix: &str) -> Arc<dyn Topics> {
    let properties = BTreeMap::from([("session.timeout.ms".to_owned(), "6000".to_owned())]);
    let namespace = Namespace::new(prefix, '.');
    let topics = KafkaTopics::new_in(&servers::kafka_brokers(), &properties, namespace).expect("Kafka clients");
    assert_eq!(topics.backend(), "kafka");
    Arc::new(topics)
}

#[tokio::test]
async fn publish_and_consume_round_trip() {
    topics::publish_and_consume_round_trip(kafka()).await;
}

#[tokio::test]
async fn same_key_same_partition_in_order() {
    topics::same_key_same_partition_in_order(kafka()).await;
}

#[tokio::test]
async fn commit_then_resume() {
    topics::commit_then_resume(kafka()).await;
}

#[tokio::test]
async fn seeded_group_resumes_there_and_a_joined_one_refuses() {
    topics::seeded_group_resumes_there_and_a_joined_one_refuses(kafka()).await;
}

#[tokio::test]
async fn uncommitted_records_are_redelivered() {
    topics::uncommitted_records_are_redelivered(kafka()).await;
}

#[tokio::test]
async fn groups_are_independent() {
    topics::groups_are_independent(kafka()).await;
}

#[tokio::test]
async fn latest_skips_older_records() {
    topics::latest_skips_older_records(kafka()).await;
}

#[tokio::test]
async fn poll_respects_max_and_timeout() {
    topics::poll_respects_max_and_timeout(kafka()).await;
}

#[tokio::test]
async fn exists_create_and_publish_by_slice() {
    topics::exists_create_and_publish_by_slice(kafka()).await;
}

#[tokio::test]
async fn lag_before_and_after_commit() {
    topics::lag_before_and_after_commit(kafka()).await;
}

#[tokio::test]
async fn paused_partition_while_another_flows() {
    topics::paused_partition_while_another_flows(kafka()).await;
}

#[tokio::test]
async fn marked_positions_committed_on_close() {
    topics::marked_positions_committed_on_close(kafka()).await;
}

#[tokio::test]
async fn closed_while_joining_leaves_the_group_usable() {
    topics::closed_while_joining_leaves_the_group_usable(kafka()).await;
}

/// The port's promises hold under a topic prefix too: records come back under their own topic names, and
/// commits, pauses and marks name the prefixed partitions.
#[tokio::test]
async fn the_suite_holds_under_a_topic_prefix() {
    let prefixed = || kafka_in(&flowhost_tests::host::deployment_name());
    topics::publish_and_consume_round_trip(prefixed()).await;
    topics::commit_then_resume(prefixed()).await;
    topics::seeded_group_resumes_there_and_a_joined_one_refuses(prefixed()).await;
    topics::lag_before_and_after_commit(prefixed()).await;
    topics::paused_partition_while_another_flows(prefixed()).await;
    topics::marked_positions_committed_on_close(prefixed()).await;
}

/// Two deployments on one cluster under two topic prefixes, with the same topic and group names, never read
/// each other's records nor move each other's groups; neither do one with a prefix and one without.
#[tokio::test]
async fn deployments_under_their_own_topic_prefixes_never_meet() {
    let ours = kafka_in(&flowhost_tests::host::deployment_name());
    namespaces::topics_stay_in_their_deployment(ours.clone(), kafka_in(&flowhost_tests::host::deployment_name())).await;
    namespaces::topics_stay_in_their_deployment(kafka(), ours).await;
}

#[tokio::test]
async fn source_commits_only_the_durable_prefix_in_order() {
    source::commits_only_the_durable_prefix_in_order(kafka()).await;
}

#[tokio::test]
async fn source_commits_when_idle_and_follows_the_topic_set() {
    source::commits_when_idle_and_follows_the_topic_set(kafka()).await;
}

#[tokio::test]
async fn source_per_partition_holds_back_only_the_busy_partition() {
    source::per_partition_holds_back_only_the_busy_partition(kafka()).await;
}

#[tokio::test]
async fn source_per_partition_reads_a_partition_again_as_its_batch_ends() {
    source::per_partition_reads_a_partition_again_as_its_batch_ends(kafka()).await;
}
