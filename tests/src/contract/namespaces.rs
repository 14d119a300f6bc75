//! Deployments sharing a server: each check takes two handles of one port that belong to different deployments
//! (`ours` and `theirs`: another namespace on the same server, or another NATS account) and a second handle of
//! `ours` where the check needs two members of one deployment. It uses the same names on both sides, as two
//! installations of Flowhost do, and asserts that nothing crosses: not a message, a request, a record, a
//! consumer group's progress, a cache key or a queued message. A check also shows the message arriving where it
//! should, so it cannot pass by delivering nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::ports::{Cache, ConsumerConfig, OutRecord, PortError, StartFrom, Subjects, Topics, WorkQueue};
use futures::StreamExt;

use super::topics::{poll_once, poll_until};
use crate::unique;

/// How long a check listens to be sure that nothing arrives.
const QUIET: Duration = Duration::from_millis(500);

/// A message published in one deployment reaches its own subscribers (plain, wildcard and queue group) with the
/// subject as published, and none of the other deployment's, which subscribed to the same subject, to
/// everything (`>`) and in a queue group of the same name; a request is answered by its own deployment's
/// responder only, even with one of the other deployment's on the same subject.
pub async fn subjects_stay_in_their_deployment(
    ours: Arc<dyn Subjects>,
    ours_too: Arc<dyn Subjects>,
    theirs: Arc<dyn Subjects>,
) {
    let subject = format!("{}.triggers.inbound", unique("ns"));
    let mut their_exact = theirs.subscribe(&subject).await.expect("subscribe");
    let mut their_all = theirs.subscribe(">").await.expect("subscribe to everything");
    let mut their_group = theirs.queue_subscribe(&subject, "workers").await.expect("queue subscribe");
    let mut our_group = ours_too.queue_subscribe(&subject, "workers").await.expect("queue subscribe");

    ours.publish(&subject, b"ours".to_vec()).await.expect("publish");
    let delivered = tokio::time::timeout(Duration::from_secs(5), our_group.next())
        .await
        .expect("our queue group gets our message")
        .expect("open");
    assert_eq!((delivered.subject.as_str(), delivered.payload.as_slice()), (subject.as_str(), &b"ours"[..]));
    for (name, stream) in [("exact", &mut their_exact), ("'>'", &mut their_all), ("group", &mut their_group)] {
        let crossed = tokio::time::timeout(QUIET, async {
            while let Some(message) = stream.next().await {
                // The other deployment's own traffic (another test's) may show on '>': only ours must not.
                if message.payload == b"ours" || message.subject.contains(&subject) {
                    return Some(message);
                }
            }
            None
        })
        .await;
        if let Ok(Some(message)) = crossed {
            panic!("their {name} subscription received our message: {message:?}");
        }
    }

    // Both deployments answer the same request subject; each asker hears its own.
    let service = format!("{}.data.templates", unique("ns"));
    let responders: Vec<tokio::task::JoinHandle<()>> = [(ours_too.clone(), "ours"), (theirs.clone(), "theirs")]
        .into_iter()
        .map(|(subjects, answer)| {
            let service = service.clone();
            tokio::spawn(async move {
                let mut requests = subjects.queue_subscribe(&service, "answerers").await.expect("subscribe");
                while let Some(request) = requests.next().await {
                    let reply = request.reply.expect("a request carries its reply address");
                    subjects.respond(&reply, answer.as_bytes().to_vec()).await.expect("respond");
                }
            })
        })
        .collect();
    for (asker, expected) in [(&ours, "ours"), (&theirs, "theirs")] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut answers = Vec::new();
        while answers.len() < 10 {
            match asker.request(&service, b"{}".to_vec(), Duration::from_secs(2)).await {
                Ok(answer) => answers.push(String::from_utf8(answer.payload).unwrap()),
                // The responders may still be subscribing.
                Err(PortError::NoResponders(_) | PortError::Timeout(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(error) => panic!("request failed: {error}"),
            }
        }
        assert!(answers.iter().all(|answer| answer == expected), "{expected} asked and heard {answers:?}");
    }
    for responder in responders {
        responder.abort();
    }
}

/// A record published in one deployment is read by its consumer group under the topic's own name; the other
/// deployment does not see the topic, and its group of the same name on the same topic name reads nothing and
/// lags nothing; one deployment's commits leave the other's group untouched.
pub async fn topics_stay_in_their_deployment(ours: Arc<dyn Topics>, theirs: Arc<dyn Topics>) {
    let (topic, group) = (unique("ns-topic"), unique("ns-group"));
    ours.create_topic(&topic, 2).await.expect("create topic");
    ours.publish(&[OutRecord::new(&topic, "ours").with_key("k")]).await.expect("publish");
    assert!(ours.exists(&topic).await.expect("exists"));
    assert!(!theirs.exists(&topic).await.expect("exists"), "their deployment sees our topic");

    let config = ConsumerConfig { group: group.clone(), topics: vec![topic.clone()], start: StartFrom::Earliest };
    let mut our_reader = ours.consumer(config.clone()).await.expect("consumer");
    let records = poll_until(our_reader.as_mut(), 1).await;
    assert_eq!(records.len(), 1, "our group reads our record");
    assert_eq!((records[0].topic.as_str(), records[0].value.as_slice()), (topic.as_str(), &b"ours"[..]));
    our_reader.commit(&flowhost_core::ports::next_positions(&records)).await.expect("commit");
    our_reader.close().await.expect("close");
    let committed: i64 = ours.lag(&group, &topic).await.expect("lag").iter().filter_map(|p| p.committed).sum();
    assert_eq!(committed, 1, "our group committed past our record");

    theirs.create_topic(&topic, 2).await.expect("their topic of the same name");
    let mut their_reader = theirs.consumer(config).await.expect("consumer");
    let deadline = Instant::now() + QUIET * 6;
    while Instant::now() < deadline {
        let read = poll_once(their_reader.as_mut(), 10, Duration::from_millis(300)).await;
        assert!(read.is_empty(), "their group read our record: {read:?}");
    }
    their_reader.close().await.expect("close");
    let theirs_lag = theirs.lag(&group, &topic).await.expect("lag");
    assert!(theirs_lag.iter().all(|p| p.committed.is_none() && p.lag == 0), "their group: {theirs_lag:?}");
}

/// A key written in one deployment is not there for the other, and the other's write of the same key and
/// counter of the same name do not change ours.
pub async fn cache_keys_stay_in_their_deployment(ours: Arc<dyn Cache>, theirs: Arc<dyn Cache>) {
    let key = unique("ns-key");
    ours.set(&key, b"ours".to_vec(), Some(Duration::from_secs(60))).await.expect("set");
    assert_eq!(theirs.get(&key).await.expect("get"), None, "their deployment reads our key");
    assert!(theirs.set_if_absent(&key, b"theirs".to_vec(), Duration::from_secs(60)).await.expect("set nx"));
    assert_eq!(ours.get(&key).await.expect("get").as_deref(), Some(&b"ours"[..]));
    let counter = unique("ns-counter");
    assert_eq!(ours.incr(&counter, Duration::from_secs(60)).await.expect("incr"), 1);
    assert_eq!(theirs.incr(&counter, Duration::from_secs(60)).await.expect("incr"), 1, "one counter each");
    assert!(theirs.delete(&key).await.expect("delete"));
    assert_eq!(ours.get(&key).await.expect("get").as_deref(), Some(&b"ours"[..]), "their delete left ours");
}

/// A message queued in one deployment is leased there only; the other's queue of the same name is empty and
/// its list of queues does not name ours.
pub async fn queues_stay_in_their_deployment(ours: Arc<dyn WorkQueue>, theirs: Arc<dyn WorkQueue>) {
    let queue = unique("nsq").replace('-', "_");
    ours.enqueue(&queue, b"ours".to_vec()).await.expect("enqueue");
    assert!(theirs.lease(&queue, "worker", 10, Duration::from_secs(30)).await.expect("lease").is_empty());
    assert_eq!(theirs.stats(&queue).await.expect("stats").pending, 0);
    assert!(!theirs.queues().await.expect("queues").contains(&queue), "their queues list ours");
    let leased = ours.lease(&queue, "worker", 10, Duration::from_secs(30)).await.expect("lease");
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].payload, b"ours");
    assert!(ours.queues().await.expect("queues").contains(&queue));
    ours.ack(&queue, &[leased[0].id.clone()]).await.expect("ack");
}
