//! The source consumer's invariants (`flowhost_core::source`), checked over any topics backend: offsets are
//! committed in poll order and only past batches whose handler answered durable (a batch that never becomes
//! durable holds back every later one, however far they got); what is durable is committed on an idle poll
//! and in the drain on shutdown; the consumed topics follow the watched set; per partition, a busy partition
//! holds back only itself, and a partition paused for its window is read again as soon as its batch ends.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowhost_core::ports::{OutRecord, Topics};
use flowhost_core::source::SourceConsumer;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::topics::PATIENCE;
use crate::{eventually, unique};

/// What a handler saw: each batch's first and last offsets, by topic.
type Seen = Arc<Mutex<Vec<(String, i64, i64)>>>;

async fn publish_values(topics: &Arc<dyn Topics>, topic: &str, n: usize) {
    topics.create_topic(topic, 1).await.expect("create the topic");
    let records: Vec<OutRecord> = (0..n).map(|i| OutRecord::new(topic, format!("v-{i}").into_bytes())).collect();
    topics.publish(&records).await.expect("publish");
}

fn seen_offsets(seen: &Seen) -> BTreeSet<i64> {
    seen.lock().unwrap().iter().flat_map(|(_, first, last)| *first..=*last).collect()
}

/// The group's committed next offset in the topic's one partition (`None`: never committed). Read from the
/// group's offsets, not from the end of the log, which a broker may report per batch.
async fn committed(topics: &Arc<dyn Topics>, group: &str, topic: &str) -> Option<i64> {
    let lag = topics.lag(group, topic).await.ok()?;
    lag.first().and_then(|partition| partition.committed)
}

/// A batch that never becomes durable holds back the commit of every later one, even those already durable;
/// the drain on shutdown commits exactly the durable prefix.
pub async fn commits_only_the_durable_prefix_in_order(topics: Arc<dyn Topics>) {
    let (topic, group) = (unique("source-order"), unique("source-order-group"));
    publish_values(&topics, &topic, 40).await;
    let seen: Seen = Arc::default();
    let stuck: Arc<Mutex<Option<i64>>> = Arc::default();
    let shutdown = CancellationToken::new();
    let source = SourceConsumer::new("check", topics.clone(), group.clone()).batch_size(5).window(4);
    let (_keep, sources) = watch::channel(BTreeSet::from([topic.clone()]));
    let handle = {
        let (seen, stuck, shutdown) = (seen.clone(), stuck.clone(), shutdown.clone());
        move |batch: Vec<flowhost_core::ports::Record>| {
            let (first, last) = (batch[0].offset, batch[batch.len() - 1].offset);
            seen.lock().unwrap().push((batch[0].topic.clone(), first, last));
            let holds_twelve = (first..=last).contains(&12);
            if holds_twelve {
                *stuck.lock().unwrap() = Some(first);
            }
            let shutdown = shutdown.clone();
            async move {
                if holds_twelve {
                    // Never durable: answers not durable once the consumer stops.
                    shutdown.cancelled().await;
                    return false;
                }
                true
            }
        }
    };
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { source.run(sources, handle, &shutdown).await })
    };
    // The window lets batches after the stuck one be handled (and become durable) meanwhile.
    eventually("batches after the stuck one are handled", PATIENCE.as_secs(), || {
        let done = seen_offsets(&seen).iter().any(|offset| *offset > 14);
        async move { done.then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), running).await.expect("stops in time").expect("no panic");
    let stuck_at = stuck.lock().unwrap().expect("the batch holding offset 12 was handled");
    assert_eq!(
        committed(&topics, &group, &topic).await,
        Some(stuck_at),
        "committed up to the batch that never became durable, not past it"
    );
}

/// Durable batches are committed while the consumer idles (not only at the next record or on shutdown), and
/// the consumed topics follow the watched set: a topic added is consumed, an emptied set consumes nothing.
pub async fn commits_when_idle_and_follows_the_topic_set(topics: Arc<dyn Topics>) {
    let (first, second, group) = (unique("source-a"), unique("source-b"), unique("source-set-group"));
    publish_values(&topics, &first, 7).await;
    publish_values(&topics, &second, 3).await;
    let seen: Seen = Arc::default();
    let shutdown = CancellationToken::new();
    let source = SourceConsumer::new("check", topics.clone(), group.clone()).batch_size(3);
    let health = source.health();
    let (set, sources) = watch::channel(BTreeSet::from([first.clone()]));
    let handle = {
        let seen = seen.clone();
        move |batch: Vec<flowhost_core::ports::Record>| {
            let (first, last) = (batch[0].offset, batch[batch.len() - 1].offset);
            seen.lock().unwrap().push((batch[0].topic.clone(), first, last));
            async { true }
        }
    };
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { source.run(sources, handle, &shutdown).await })
    };
    let committed_to = |topic: String, end: i64| {
        let topics = topics.clone();
        let group = group.clone();
        move || {
            let (topics, group, topic) = (topics.clone(), group.clone(), topic.clone());
            async move { (committed(&topics, &group, &topic).await == Some(end)).then_some(()) }
        }
    };
    eventually("the first topic is committed while idle", PATIENCE.as_secs(), committed_to(first.clone(), 7)).await;
    assert!(health.joined() && health.error().is_none(), "a healthy member");
    set.send_replace(BTreeSet::from([first.clone(), second.clone()]));
    eventually("the added topic is consumed and committed", PATIENCE.as_secs(), committed_to(second.clone(), 3)).await;
    set.send_replace(BTreeSet::new());
    eventually("an empty set leaves the group", PATIENCE.as_secs(), || {
        let left = !health.joined();
        async move { left.then_some(()) }
    })
    .await;
    let handled: Vec<String> = seen.lock().unwrap().iter().map(|(topic, _, _)| topic.clone()).collect();
    assert!(handled.contains(&first) && handled.contains(&second), "both topics handled: {handled:?}");
    let first_offsets: BTreeSet<i64> =
        seen.lock().unwrap().iter().filter(|(t, _, _)| *t == first).flat_map(|(_, a, b)| *a..=*b).collect();
    assert_eq!(first_offsets, (0..7).collect(), "every record of the first topic handled");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), running).await.expect("stops in time").expect("no panic");
}

/// Per partition, a partition whose batch never becomes durable holds back only itself: its next batches wait
/// behind it (never two of one partition at once), it is paused once its window is full, and the other
/// partition is consumed and committed to its end meanwhile; released, it catches up.
pub async fn per_partition_holds_back_only_the_busy_partition(topics: Arc<dyn Topics>) {
    let (topic, group) = (unique("source-lanes"), unique("source-lanes-group"));
    topics.create_topic(&topic, 2).await.expect("create the topic");
    for i in 0..40 {
        // One record per call: every broker then reports the end of the log in records.
        let record = OutRecord::new(&topic, format!("v-{i}").into_bytes()).with_key(format!("k-{}", i % 8));
        topics.publish(&[record]).await.expect("publish");
    }
    let ends: Vec<(i32, i64)> = topics
        .lag(&unique("nobody"), &topic)
        .await
        .expect("lag")
        .iter()
        .map(|partition| (partition.partition, partition.end))
        .collect();
    assert!(ends.len() == 2 && ends.iter().all(|(_, end)| *end > 0), "both partitions hold records: {ends:?}");
    let end_of = |partition: i32| ends.iter().find(|(p, _)| *p == partition).map(|(_, end)| *end).expect("a partition");
    let committed_in = |partition: i32| {
        let (topics, group, topic) = (topics.clone(), group.clone(), topic.clone());
        async move {
            let lag = topics.lag(&group, &topic).await.ok()?;
            lag.iter().find(|p| p.partition == partition).and_then(|p| p.committed)
        }
    };
    let busy: Arc<Mutex<Option<i32>>> = Arc::default();
    let handed: Arc<Mutex<Vec<(i32, usize)>>> = Arc::default();
    let running: Arc<Mutex<std::collections::BTreeMap<i32, (usize, usize)>>> = Arc::default();
    let release = CancellationToken::new();
    let shutdown = CancellationToken::new();
    let source = SourceConsumer::new("check", topics.clone(), group.clone()).batch_size(3).window(2).per_partition();
    let (_keep, sources) = watch::channel(BTreeSet::from([topic.clone()]));
    let handle = {
        let (busy, handed, running, release) = (busy.clone(), handed.clone(), running.clone(), release.clone());
        move |batch: Vec<flowhost_core::ports::Record>| {
            let partition = batch[0].partition;
            assert!(batch.iter().all(|record| record.partition == partition), "one partition per batch");
            handed.lock().unwrap().push((partition, batch.len()));
            let held = *busy.lock().unwrap().get_or_insert(partition) == partition;
            let (running, release) = (running.clone(), release.clone());
            async move {
                {
                    let mut running = running.lock().unwrap();
                    let (now, most) = running.entry(partition).or_default();
                    *now += 1;
                    *most = (*most).max(*now);
                }
                if held {
                    release.cancelled().await;
                }
                running.lock().unwrap().entry(partition).or_default().0 -= 1;
                true
            }
        }
    };
    let consuming = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { source.run(sources, handle, &shutdown).await })
    };
    let held = eventually("a partition is held", PATIENCE.as_secs(), || {
        let held = *busy.lock().unwrap();
        async move { held }
    })
    .await;
    let other = ends.iter().map(|(p, _)| *p).find(|p| *p != held).expect("the other partition");
    eventually("the other partition is committed to its end", PATIENCE.as_secs(), || {
        let committed = committed_in(other);
        async move { (committed.await == Some(end_of(other))).then_some(()) }
    })
    .await;
    assert_eq!(committed_in(held).await, None, "nothing of the held partition is committed");
    let handed_held: usize = handed.lock().unwrap().iter().filter(|(p, _)| *p == held).map(|(_, n)| n).sum();
    assert!(handed_held <= 6, "the held partition is paused after its window (2 batches of 3): {handed_held} handed");
    release.cancel();
    eventually("the held partition catches up", PATIENCE.as_secs(), || {
        let committed = committed_in(held);
        async move { (committed.await == Some(end_of(held))).then_some(()) }
    })
    .await;
    let most = running.lock().unwrap().values().map(|(_, most)| *most).max();
    assert_eq!(most, Some(1), "never two batches of one partition at once");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), consuming).await.expect("stops in time").expect("no panic");
}

/// Per partition, a partition paused because its window is full is read again as soon as a batch of it ends, not
/// when a poll that found nothing to read gives up: with a poll timeout longer than [`PATIENCE`], a consumer that
/// waited for it could not drain a partition of ten batches in time.
pub async fn per_partition_reads_a_partition_again_as_its_batch_ends(topics: Arc<dyn Topics>) {
    let (topic, group) = (unique("source-resume"), unique("source-resume-group"));
    publish_values(&topics, &topic, 30).await;
    let shutdown = CancellationToken::new();
    let source = SourceConsumer::new("check", topics.clone(), group.clone())
        .batch_size(3)
        .window(1)
        .per_partition()
        .poll_timeout(PATIENCE * 2);
    let (_keep, sources) = watch::channel(BTreeSet::from([topic.clone()]));
    let seen: Seen = Arc::default();
    let handle = {
        let seen = seen.clone();
        move |batch: Vec<flowhost_core::ports::Record>| {
            let (first, last) = (batch[0].offset, batch[batch.len() - 1].offset);
            seen.lock().unwrap().push((batch[0].topic.clone(), first, last));
            async move { true }
        }
    };
    let consuming = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { source.run(sources, handle, &shutdown).await })
    };
    eventually("every batch is handled and committed", PATIENCE.as_secs(), || {
        let committed = committed(&topics, &group, &topic);
        async move { (committed.await == Some(30)).then_some(()) }
    })
    .await;
    assert_eq!(seen_offsets(&seen), (0..30).collect(), "every record handed");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), consuming).await.expect("stops in time").expect("no panic");
}
