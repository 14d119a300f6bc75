//! The topics port contract: records come back with keys, values and headers intact; a key always lands in one
//! partition, in order; progress is durable only through `commit`, so a new member of a group resumes after the
//! committed offsets and receives again whatever was not committed; groups are independent; a new group can start
//! at the end of the log; `exists` and `lag` report the log without changing it; a paused partition holds back
//! while the others flow; positions marked done are committed when the member closes; a group without members
//! can be seeded, one with members refuses it.
//!
//! Every wait is patient: against Kafka a consumer's first poll includes the group join, which can take seconds
//! (on the tansu broker about half of `session.timeout.ms`), so reads loop until the expected records arrive or
//! [`PATIENCE`] passes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::ports::{
    next_positions, ConsumerConfig, Header, OutRecord, PartitionLag, Position, Record, StartFrom, TopicConsumer, Topics,
};

use crate::unique;

/// The longest any check waits for records to arrive.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// How long a check waits to be sure that nothing more arrives.
const QUIET: Duration = Duration::from_millis(1500);

async fn consumer(topics: &Arc<dyn Topics>, group: &str, topic: &str, start: StartFrom) -> Box<dyn TopicConsumer> {
    topics
        .consumer(ConsumerConfig { group: group.to_owned(), topics: vec![topic.to_owned()], start })
        .await
        .expect("create consumer")
}

/// One poll that tolerates transient failures: the port reports `Unavailable` while a broker is still
/// settling (e.g. a topic's metadata right after its creation) and callers are expected to retry, so such a
/// poll counts as an empty batch; any other error fails the check.
pub async fn poll_once(consumer: &mut dyn TopicConsumer, max: usize, timeout: Duration) -> Vec<Record> {
    match consumer.poll(max, timeout).await {
        Ok(records) => records,
        Err(error) if error.is_transient() => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Vec::new()
        }
        Err(error) => panic!("poll failed: {error}"),
    }
}

/// Polls until at least `expected` records arrived or [`PATIENCE`] passed; returns all it got.
pub async fn poll_until(consumer: &mut dyn TopicConsumer, expected: usize) -> Vec<Record> {
    let deadline = Instant::now() + PATIENCE;
    let mut records = Vec::new();
    while records.len() < expected && Instant::now() < deadline {
        let batch = poll_once(consumer, 100, Duration::from_millis(500)).await;
        records.extend(batch);
    }
    records
}

/// Polls for [`QUIET`] and returns whatever arrives (expected: nothing).
async fn poll_quiet(consumer: &mut dyn TopicConsumer) -> Vec<Record> {
    let deadline = Instant::now() + QUIET;
    let mut records = Vec::new();
    while Instant::now() < deadline {
        records.extend(poll_once(consumer, 100, Duration::from_millis(300)).await);
    }
    records
}

fn values(records: &[Record]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()).collect()
}

fn sorted_values(records: &[Record]) -> Vec<String> {
    let mut values = values(records);
    values.sort();
    values
}

/// Publishes values `prefix-0..n` one call each (each record in its own produce request).
async fn publish_each(topics: &Arc<dyn Topics>, topic: &str, prefix: &str, n: usize) -> Vec<String> {
    let mut published = Vec::new();
    for i in 0..n {
        let value = format!("{prefix}-{i}");
        topics.publish(&[OutRecord::new(topic, value.clone())]).await.expect("publish");
        published.push(value);
    }
    published
}

/// Records published in one batch to a fresh group come back with topic, key, value and headers (repeated
/// keys and empty values included, in order), a real offset and a timestamp; `create_topic` is idempotent.
pub async fn publish_and_consume_round_trip(topics: Arc<dyn Topics>) {
    let topic = unique("t-roundtrip");
    topics.create_topic(&topic, 3).await.expect("create topic");
    topics.create_topic(&topic, 3).await.expect("create topic again is a no-op");

    let mut out = Vec::new();
    for i in 0..5 {
        out.push(
            OutRecord::new(&topic, format!("value-{i}"))
                .with_key(format!("key-{i}"))
                .with_header("trace", format!("t-{i}"))
                .with_header("empty", Vec::new())
                .with_header("trace", b"\x00\xff".to_vec()),
        );
    }
    out.push(OutRecord::new(&topic, b"no key \x00\xff".to_vec()));
    topics.publish(&out).await.expect("publish");

    let mut consumer = consumer(&topics, &unique("g"), &topic, StartFrom::Earliest).await;
    let records = poll_until(consumer.as_mut(), out.len()).await;
    assert_eq!(records.len(), out.len(), "every published record arrives once: {:?}", values(&records));

    for sent in &out {
        let got = records.iter().find(|r| r.value == sent.value).expect("published record consumed");
        assert_eq!(got.topic, topic);
        assert_eq!(got.key, sent.key, "key of {:?}", String::from_utf8_lossy(&sent.value));
        assert_eq!(got.headers, sent.headers, "headers keep order, repeats and empty values");
        assert!((0..3).contains(&got.partition), "partition {} within the topic", got.partition);
        assert!(got.offset >= 0);
        assert!(got.timestamp_ms > 0, "a consumed record carries its timestamp");
    }
    let keyed = records.iter().find(|r| r.value == b"value-1").expect("keyed record");
    assert_eq!(keyed.header("trace"), Some(&b"t-1"[..]), "header() returns the first value of a key");
    assert_eq!(keyed.headers[1], Header { key: "empty".into(), value: Vec::new() });
    let positions: BTreeSet<(i32, i64)> = records.iter().map(|r| (r.partition, r.offset)).collect();
    assert_eq!(positions.len(), records.len(), "each record has its own (partition, offset)");
}

/// Records with one key all land in one partition, and are consumed in the order they were published with
/// increasing offsets.
pub async fn same_key_same_partition_in_order(topics: Arc<dyn Topics>) {
    let topic = unique("t-keys");
    topics.create_topic(&topic, 4).await.expect("create topic");
    let keys = ["alpha", "bravo", "charlie", "delta", "echo"];
    let mut out = Vec::new();
    for round in 0..6 {
        for key in keys {
            out.push(OutRecord::new(&topic, format!("{key}:{round}")).with_key(key));
        }
    }
    // Two publishes: order must also hold across calls.
    let second = out.split_off(15);
    topics.publish(&out).await.expect("publish first half");
    topics.publish(&second).await.expect("publish second half");

    let mut consumer = consumer(&topics, &unique("g"), &topic, StartFrom::Earliest).await;
    let records = poll_until(consumer.as_mut(), 30).await;
    assert_eq!(records.len(), 30, "all records arrive: {:?}", values(&records));

    let mut by_key: BTreeMap<Vec<u8>, Vec<&Record>> = BTreeMap::new();
    for record in &records {
        by_key.entry(record.key.clone().expect("keyed")).or_default().push(record);
    }
    assert_eq!(by_key.len(), keys.len());
    for (key, records) in by_key {
        let key = String::from_utf8_lossy(&key).into_owned();
        let partitions: BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
        assert_eq!(partitions.len(), 1, "key {key} spread over partitions {partitions:?}");
        let rounds: Vec<String> = records.iter().map(|r| String::from_utf8_lossy(&r.value).into_owned()).collect();
        let expected: Vec<String> = (0..6).map(|round| format!("{key}:{round}")).collect();
        assert_eq!(rounds, expected, "records of key {key} in publish order");
        assert!(records.windows(2).all(|w| w[0].offset < w[1].offset), "offsets increase for key {key}");
    }
}

/// A member that committed part of what it read is replaced by a new member of the group, which resumes
/// exactly after the committed offsets; after committing everything, the next member sees only new records.
pub async fn commit_then_resume(topics: Arc<dyn Topics>) {
    let topic = unique("t-commit");
    topics.create_topic(&topic, 1).await.expect("create topic");
    let group = unique("g");
    let published = publish_each(&topics, &topic, "r", 6).await;

    let mut first = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let records = poll_until(first.as_mut(), 6).await;
    assert_eq!(values(&records), published, "one partition: everything in publish order");
    first.commit(&next_positions(&records[..3])).await.expect("commit the first three");
    drop(first);

    let mut second = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let mut resumed = poll_until(second.as_mut(), 3).await;
    resumed.extend(poll_quiet(second.as_mut()).await);
    assert_eq!(values(&resumed), published[3..], "resumes right after the committed offset");
    assert_eq!(resumed[0].offset, records[3].offset);
    second.commit(&next_positions(&resumed)).await.expect("commit the rest");
    drop(second);

    let newer = publish_each(&topics, &topic, "n", 2).await;
    let mut third = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let mut rest = poll_until(third.as_mut(), 2).await;
    rest.extend(poll_quiet(third.as_mut()).await);
    assert_eq!(values(&rest), newer, "after a full commit only newer records arrive");
}

/// A group without members can be seeded (a migration moving its offsets): its next member resumes at the
/// seeded offsets; while the group has a member the seed is refused, so it never races the member's commits.
pub async fn seeded_group_resumes_there_and_a_joined_one_refuses(topics: Arc<dyn Topics>) {
    let topic = unique("t-seed");
    topics.create_topic(&topic, 1).await.expect("create topic");
    let group = unique("g");
    let published = publish_each(&topics, &topic, "r", 5).await;
    let seed = Position { topic: topic.clone(), partition: 0, next_offset: 2 };
    topics.seed_group(&group, std::slice::from_ref(&seed)).await.expect("seed a group without members");
    assert_eq!(topics.lag(&group, &topic).await.expect("lag")[0].committed, Some(2));

    let mut member = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let mut resumed = poll_until(member.as_mut(), 3).await;
    resumed.extend(poll_quiet(member.as_mut()).await);
    assert_eq!(values(&resumed), published[2..], "the member resumes at the seeded offset");
    let again = Position { next_offset: 0, ..seed };
    let refused = topics.seed_group(&group, &[again]).await;
    assert!(matches!(refused, Err(flowhost_core::ports::PortError::Conflict(_))), "{refused:?}");
    assert_eq!(topics.lag(&group, &topic).await.expect("lag")[0].committed, Some(2), "the refused seed moved nothing");
}

/// Records a member read but did not commit are delivered again, at the same offsets, to the group's next
/// member: polling alone never makes progress durable.
pub async fn uncommitted_records_are_redelivered(topics: Arc<dyn Topics>) {
    let topic = unique("t-redeliver");
    topics.create_topic(&topic, 2).await.expect("create topic");
    let group = unique("g");
    let out: Vec<OutRecord> =
        (0..4).map(|i| OutRecord::new(&topic, format!("v{i}")).with_key(format!("k{i}"))).collect();
    topics.publish(&out).await.expect("publish");

    let mut first = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let read = poll_until(first.as_mut(), 4).await;
    assert_eq!(read.len(), 4, "first member reads everything: {:?}", values(&read));
    drop(first);

    let mut second = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let again = poll_until(second.as_mut(), 4).await;
    assert_eq!(sorted_values(&again), sorted_values(&read), "uncommitted records come again");
    let offsets = |records: &[Record]| records.iter().map(|r| (r.partition, r.offset)).collect::<BTreeSet<_>>();
    assert_eq!(offsets(&again), offsets(&read), "redelivered at the same positions");
}

/// Two groups on one topic each receive every record, independently of the other's progress.
pub async fn groups_are_independent(topics: Arc<dyn Topics>) {
    let topic = unique("t-groups");
    topics.create_topic(&topic, 2).await.expect("create topic");
    let out: Vec<OutRecord> =
        (0..6).map(|i| OutRecord::new(&topic, format!("v{i}")).with_key(format!("k{}", i % 3))).collect();
    let expected: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
    topics.publish(&out).await.expect("publish");

    let (group_one, group_two) = (unique("g1"), unique("g2"));
    let mut one = consumer(&topics, &group_one, &topic, StartFrom::Earliest).await;
    let mut two = consumer(&topics, &group_two, &topic, StartFrom::Earliest).await;
    // Both join at once; one group's commit must not move the other.
    let (got_one, got_two) = futures::join!(poll_until(one.as_mut(), 6), poll_until(two.as_mut(), 6));
    assert_eq!(sorted_values(&got_one), expected, "group one sees everything");
    assert_eq!(sorted_values(&got_two), expected, "group two sees everything");
    one.commit(&next_positions(&got_one)).await.expect("commit group one");
    drop(one);
    drop(two);

    // Group two never committed: its next member reads everything again, whatever group one committed.
    let mut two_again = consumer(&topics, &group_two, &topic, StartFrom::Earliest).await;
    let again = poll_until(two_again.as_mut(), 6).await;
    assert_eq!(sorted_values(&again), expected, "group one's commit does not move group two");
}

/// A new group that starts at `Latest` never sees records published before it joined, and does see records
/// published after.
///
/// The older records are published one call each on purpose: the tansu broker answers "latest offset" with the
/// last batch's base offset + 1 instead of the log end, so a multi-record last batch would make a `Latest`
/// group start inside it (see shared/infra/README.md). With one record per batch both answers agree, and the
/// assertion stays exact for every backend.
pub async fn latest_skips_older_records(topics: Arc<dyn Topics>) {
    let topic = unique("t-latest");
    topics.create_topic(&topic, 1).await.expect("create topic");
    let older = publish_each(&topics, &topic, "old", 3).await;

    let group = unique("g");
    let mut late = consumer(&topics, &group, &topic, StartFrom::Latest).await;
    // The group's start is fixed when it gets its partitions (after the join on Kafka), which the port does not
    // announce: publish a new record each round until one arrives.
    let deadline = Instant::now() + PATIENCE;
    let mut newer = Vec::new();
    let mut received = Vec::new();
    let mut round = 0;
    while received.is_empty() && Instant::now() < deadline {
        let value = format!("new-{round}");
        topics.publish(&[OutRecord::new(&topic, value.clone())]).await.expect("publish newer");
        newer.push(value);
        round += 1;
        received.extend(poll_once(late.as_mut(), 100, Duration::from_millis(700)).await);
    }
    received.extend(poll_quiet(late.as_mut()).await);
    let got = values(&received);
    assert!(!got.is_empty(), "a Latest group receives records published after it joined");
    assert!(got.iter().all(|v| !older.contains(v)), "older records must be skipped, got {got:?}");
    assert!(got.iter().all(|v| newer.contains(v)), "only newer records, got {got:?}");
    let suffix = &newer[newer.len() - got.len()..];
    assert_eq!(got, suffix, "a Latest group reads the newer records from some point on, in order");

    // `Latest` only applies to a group without committed offsets: once the group committed a position, its
    // next member resumes there, even though that is before the end of the log.
    let first = &received[0];
    let rewind = Position { topic: first.topic.clone(), partition: first.partition, next_offset: first.offset };
    late.commit(&[rewind]).await.expect("commit");
    // Closed, not dropped: the member leaves its group now, so the next one is not held until its session
    // times out (which under load came close to the patience of `poll_until`).
    late.close().await.expect("close");
    let mut resumed = consumer(&topics, &group, &topic, StartFrom::Latest).await;
    let mut again = poll_until(resumed.as_mut(), received.len()).await;
    again.extend(poll_quiet(resumed.as_mut()).await);
    assert_eq!(values(&again), got, "a group with a committed offset resumes there, not at the end");
}

/// `poll` returns at most `max` records, and an empty batch (not an error) once its timeout passes with
/// nothing to read.
pub async fn poll_respects_max_and_timeout(topics: Arc<dyn Topics>) {
    let topic = unique("t-poll");
    topics.create_topic(&topic, 1).await.expect("create topic");
    let published = publish_each(&topics, &topic, "p", 5).await;

    let mut member = consumer(&topics, &unique("g"), &topic, StartFrom::Earliest).await;
    let deadline = Instant::now() + PATIENCE;
    let mut records = Vec::new();
    while records.len() < 5 && Instant::now() < deadline {
        let batch = poll_once(member.as_mut(), 2, Duration::from_millis(500)).await;
        assert!(batch.len() <= 2, "poll(max = 2) returned {} records", batch.len());
        records.extend(batch);
    }
    assert_eq!(values(&records), published);

    let started = Instant::now();
    let empty = member.poll(10, Duration::from_millis(400)).await.expect("idle poll");
    let waited = started.elapsed();
    assert!(empty.is_empty(), "nothing left to read, got {:?}", values(&empty));
    assert!(waited >= Duration::from_millis(300), "an idle poll waits for its timeout, returned after {waited:?}");
    assert!(waited < Duration::from_secs(5), "an idle poll returns after its timeout, took {waited:?}");
}

/// `exists` never creates a topic; `create_topic_replicated` creates one with the asked partitions (a factor of 1
/// fits every cluster, even a single broker); publishing lends the batch, so the same slice can be published again
/// (a retry) and both copies arrive.
pub async fn exists_create_and_publish_by_slice(topics: Arc<dyn Topics>) {
    let topic = unique("t-exists");
    assert!(!topics.exists(&topic).await.expect("exists"), "a topic nobody created does not exist");
    assert!(!topics.exists(&topic).await.expect("exists again"), "asking does not create it");
    topics.create_topic_replicated(&topic, 3, Some(1)).await.expect("create with partitions and a factor");
    assert!(topics.exists(&topic).await.expect("exists after create"));
    let partitions: Vec<i32> =
        topics.lag(&unique("g"), &topic).await.expect("lag").iter().map(|l| l.partition).collect();
    assert_eq!(partitions, vec![0, 1, 2], "the topic has the partitions it was created with");

    let batch: Vec<OutRecord> =
        (0..3).map(|i| OutRecord::new(&topic, format!("s{i}")).with_key(format!("k{i}"))).collect();
    topics.publish(&batch).await.expect("publish the slice");
    topics.publish(&batch).await.expect("publish the same slice again");
    assert_eq!(batch[2].value, b"s2", "the caller keeps its batch");
    let mut member = consumer(&topics, &unique("g"), &topic, StartFrom::Earliest).await;
    let mut got = poll_until(member.as_mut(), 6).await;
    got.extend(poll_quiet(member.as_mut()).await);
    assert_eq!(sorted_values(&got), vec!["s0", "s0", "s1", "s1", "s2", "s2"], "both publishes arrive whole");
}

/// Per partition, `lag` reports the group's committed offset (none before a commit), the end of the log and the
/// difference; a commit moves exactly the partitions it names; a topic that does not exist has no partitions.
///
/// Records are published one per call: tansu reports a partition's end as its last batch's base offset + 1
/// (shared/infra/README.md), which is the true end only when every batch holds one record.
pub async fn lag_before_and_after_commit(topics: Arc<dyn Topics>) {
    let topic = unique("t-lag");
    topics.create_topic(&topic, 2).await.expect("create topic");
    let group = unique("g");
    for i in 0..6 {
        let record = OutRecord::new(&topic, format!("l{i}")).with_key(format!("key-{i}"));
        topics.publish(&[record]).await.expect("publish");
    }
    let mut member = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let records = poll_until(member.as_mut(), 6).await;
    assert_eq!(records.len(), 6, "every record arrives: {:?}", values(&records));
    // The end of each partition, from what was read.
    let mut ends: BTreeMap<i32, i64> = BTreeMap::from([(0, 0), (1, 0)]);
    for r in &records {
        let end = ends.entry(r.partition).or_default();
        *end = (*end).max(r.offset + 1);
    }
    let expect = |committed: &BTreeMap<i32, i64>| -> Vec<PartitionLag> {
        ends.iter()
            .map(|(partition, end)| {
                let done = committed.get(partition).copied();
                PartitionLag { partition: *partition, committed: done, end: *end, lag: end - done.unwrap_or(0) }
            })
            .collect()
    };
    assert_eq!(topics.lag(&group, &topic).await.expect("lag"), expect(&BTreeMap::new()), "before any commit");

    // Commit all of one partition and nothing of the other.
    let busiest = *ends.iter().max_by_key(|(_, end)| **end).expect("two partitions").0;
    let done: Vec<Position> = next_positions(&records).into_iter().filter(|p| p.partition == busiest).collect();
    member.commit(&done).await.expect("commit one partition");
    let committed = BTreeMap::from([(busiest, ends[&busiest])]);
    assert_eq!(topics.lag(&group, &topic).await.expect("lag"), expect(&committed), "after committing one partition");

    member.commit(&next_positions(&records)).await.expect("commit everything");
    let lags = topics.lag(&group, &topic).await.expect("lag");
    assert_eq!(lags.len(), 2);
    assert!(lags.iter().all(|l| l.lag == 0), "nothing left after committing everything: {lags:?}");
    assert!(topics.lag(&group, &unique("t-none")).await.expect("lag of a missing topic").is_empty());
}

/// While one partition is paused, records of the other keep arriving and none of the paused one does; after
/// `resume` the paused partition continues right after the last record read from it, in order, with nothing lost.
pub async fn paused_partition_while_another_flows(topics: Arc<dyn Topics>) {
    let topic = unique("t-pause");
    topics.create_topic(&topic, 2).await.expect("create topic");
    let mut member = consumer(&topics, &unique("g"), &topic, StartFrom::Earliest).await;
    // Learn one key per partition (the backend's partitioner decides), reading as we go.
    let mut key_of: BTreeMap<i32, Vec<u8>> = BTreeMap::new();
    let mut read: Vec<Record> = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    let mut i = 0;
    while key_of.len() < 2 {
        assert!(Instant::now() < deadline, "records did not reach both partitions: {:?}", values(&read));
        let record = OutRecord::new(&topic, format!("warm-{i}")).with_key(format!("key-{i}"));
        topics.publish(&[record]).await.expect("publish");
        i += 1;
        let batch = poll_until(member.as_mut(), 1).await;
        for r in &batch {
            key_of.entry(r.partition).or_insert_with(|| r.key.clone().expect("keyed"));
        }
        read.extend(batch);
    }
    let before = read.iter().filter(|r| r.partition == 0).map(|r| r.offset).max().expect("partition 0 was read");

    member.pause(&topic, 0).await.expect("pause partition 0");
    let (mut held, mut flowing) = (Vec::new(), Vec::new());
    for n in 0..3 {
        let (h, f) = (format!("held-{n}"), format!("flow-{n}"));
        topics.publish(&[OutRecord::new(&topic, h.clone()).with_key(key_of[&0].clone())]).await.expect("publish");
        topics.publish(&[OutRecord::new(&topic, f.clone()).with_key(key_of[&1].clone())]).await.expect("publish");
        held.push(h);
        flowing.push(f);
    }
    let mut during = poll_until(member.as_mut(), 3).await;
    during.extend(poll_quiet(member.as_mut()).await);
    assert_eq!(values(&during), flowing, "only the flowing partition's records arrive while the other is paused");

    member.resume(&topic, 0).await.expect("resume partition 0");
    let mut after = poll_until(member.as_mut(), 3).await;
    after.extend(poll_quiet(member.as_mut()).await);
    assert_eq!(values(&after), held, "the paused partition continues with what it held, in order");
    assert!(after.iter().all(|r| r.partition == 0));
    assert_eq!(after[0].offset, before + 1, "resumes right after the last record read before the pause");
}

/// Positions marked done are committed by `close` (the furthest mark per partition): the group's next member
/// resumes right after them. Marking alone commits nothing, and a closed member cannot be used again.
pub async fn marked_positions_committed_on_close(topics: Arc<dyn Topics>) {
    let topic = unique("t-mark");
    topics.create_topic(&topic, 1).await.expect("create topic");
    let group = unique("g");
    let published = publish_each(&topics, &topic, "m", 5).await;

    let mut first = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let records = poll_until(first.as_mut(), 5).await;
    assert_eq!(values(&records), published);
    first.mark(&next_positions(&records[..1]));
    first.mark(&next_positions(&records[..3]));
    first.mark(&next_positions(&records[..2]));
    let lags = topics.lag(&group, &topic).await.expect("lag");
    assert!(lags.iter().all(|l| l.committed.is_none()), "marking alone commits nothing: {lags:?}");
    first.close().await.expect("close commits the marks");
    assert!(first.poll(10, Duration::from_millis(10)).await.is_err(), "a closed member cannot poll");

    let lags = topics.lag(&group, &topic).await.expect("lag");
    assert_eq!(lags[0].committed, Some(records[2].offset + 1), "the furthest mark is committed");
    let mut second = consumer(&topics, &group, &topic, StartFrom::Earliest).await;
    let mut resumed = poll_until(second.as_mut(), 2).await;
    resumed.extend(poll_quiet(second.as_mut()).await);
    assert_eq!(values(&resumed), published[3..], "the next member resumes after the marked positions");
    second.close().await.expect("close without marks");
}

/// A member closed right after it subscribed (its first join still under way, as when a consumer's topics
/// change at once) leaves the group usable: the next member with more topics reads every record of all of them.
pub async fn closed_while_joining_leaves_the_group_usable(topics: Arc<dyn Topics>) {
    let (first_topic, second_topic) = (unique("t-join-a"), unique("t-join-b"));
    topics.create_topic(&first_topic, 2).await.expect("create topic");
    topics.create_topic(&second_topic, 2).await.expect("create topic");
    let group = unique("g");
    let mut first = consumer(&topics, &group, &first_topic, StartFrom::Earliest).await;
    let _ = first.poll(10, Duration::from_millis(50)).await.expect("poll");
    first.close().await.expect("close while joining");
    let mut published = publish_each(&topics, &first_topic, "a", 2).await;
    published.extend(publish_each(&topics, &second_topic, "b", 2).await);
    let config =
        ConsumerConfig { group, topics: vec![first_topic.clone(), second_topic.clone()], start: StartFrom::Earliest };
    let mut second = topics.consumer(config).await.expect("consumer");
    let mut read = values(&poll_until(second.as_mut(), 4).await);
    read.sort();
    published.sort();
    assert_eq!(read, published, "the next member reads both topics");
    second.close().await.expect("close");
}
