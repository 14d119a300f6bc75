//! The topics contract suite against the real Kafka-protocol broker (`FLOWHOST_TEST_KAFKA_BROKERS`, tansu on
//! this machine). Consumers use `session.timeout.ms=6000`: tansu completes a group join after about half the
//! session timeout, and librdkafka's default (45 s) would make every join take over 20 s.

use std::collections::BTreeMap;
use std::sync::Arc;

use flowhost_core::ports::Topics;
use flowhost_kafka::KafkaTopics;
use flowhost_tests::contract::topics;
use flowhost_tests::servers;

fn kafka() -> Arc<dyn Topics> {
    let properties = BTreeMap::from([("session.timeout.ms".to_owned(), "6000".to_owned())]);
    let topics = KafkaTopics::new(&servers::kafka_brokers(), &properties).expect("Kafka clients");
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
