//! The work queue port contract: enqueue returns ids, `lease` hands out the oldest available messages once per
//! visibility timeout, `ack` removes them (ignoring unknown ids), the counts follow, two consumers never hold
//! the same message, and a message whose consumer died (leased, never acknowledged) is delivered again with its
//! delivery count increased.
//!
//! Visibility needs time to pass, which the backends measure differently (Redis and JetStream on the server's
//! clock, the embedded queue on the injected one): the redelivery check takes an [`Advance`] hook (a manual
//! clock moves; real servers need nothing) and then polls with a bound, so no sleep decides the outcome.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::ports::{PortError, QueueMessage, QueueStats, WorkQueue};
use futures::future::BoxFuture;
use futures::FutureExt;

use crate::unique;

/// Lets `Duration` pass for the queue under test.
pub type Advance = Arc<dyn Fn(Duration) -> BoxFuture<'static, ()> + Send + Sync>;

/// An [`Advance`] for backends that measure visibility on their own clock: the check's polling waits.
pub fn server_time() -> Advance {
    Arc::new(|_| async {}.boxed())
}

const LONG: Duration = Duration::from_secs(60);

/// Leases until something comes back or `bound` passes (then fails): waiting for a server-side timeout
/// without a fixed sleep deciding the outcome.
async fn lease_within(
    queue: &dyn WorkQueue,
    name: &str,
    consumer: &str,
    visibility: Duration,
    bound: Duration,
) -> Vec<QueueMessage> {
    let start = Instant::now();
    loop {
        let leased = queue.lease(name, consumer, 10, visibility).await.expect("lease");
        if !leased.is_empty() {
            return leased;
        }
        assert!(start.elapsed() < bound, "nothing was redelivered within {bound:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn stats(pending: u64, leased: u64, acknowledged: u64) -> QueueStats {
    QueueStats { pending, leased, acknowledged }
}

/// Enqueued messages are leased in enqueue order with their payloads and one delivery; acks remove them and
/// count; a repeated ack changes nothing; a leased message is not leased again within its visibility.
pub async fn enqueue_lease_ack(queue: Arc<dyn WorkQueue>) {
    let name = unique("q");
    assert_eq!(queue.stats(&name).await.expect("stats of an unused queue"), QueueStats::default());
    let payloads: Vec<Vec<u8>> = vec![b"one".to_vec(), vec![0, 255, 10], Vec::new()];
    let mut ids = Vec::new();
    for payload in &payloads {
        ids.push(queue.enqueue(&name, payload.clone()).await.expect("enqueue"));
    }
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3, "ids are distinct: {ids:?}");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(3, 0, 0));
    assert!(queue.queues().await.expect("queues").contains(&name), "a written queue is listed");

    let leased = queue.lease(&name, "worker-a", 10, LONG).await.expect("lease");
    assert_eq!(leased.iter().map(|m| &m.id).collect::<Vec<_>>(), ids.iter().collect::<Vec<_>>(), "enqueue order");
    assert_eq!(leased.iter().map(|m| m.payload.clone()).collect::<Vec<_>>(), payloads);
    assert!(leased.iter().all(|m| m.deliveries == 1), "first deliveries: {leased:?}");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(3, 3, 0));
    assert!(queue.lease(&name, "worker-a", 10, LONG).await.expect("lease again").is_empty(), "all are leased");

    queue.ack(&name, &ids[..2]).await.expect("ack two");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(1, 1, 2));
    queue.ack(&name, &ids[..2]).await.expect("ack again");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(1, 1, 2), "a repeated ack counts once");
    queue.ack(&name, &ids[2..]).await.expect("ack the last");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(0, 0, 3));
    assert!(queue.lease(&name, "worker-a", 10, LONG).await.expect("lease").is_empty(), "acked is gone");
}

/// `lease` hands out at most `max`, oldest first, and batches enqueue in order; queues are separate.
pub async fn lease_max_and_batches(queue: Arc<dyn WorkQueue>) {
    let name = unique("q");
    let other = unique("q");
    let payloads: Vec<Vec<u8>> = (0..5).map(|i| format!("m{i}").into_bytes()).collect();
    let ids = queue.enqueue_batch(&name, payloads.clone()).await.expect("enqueue batch");
    assert_eq!(ids.len(), 5);
    queue.enqueue(&other, b"elsewhere".to_vec()).await.expect("enqueue other");

    let first = queue.lease(&name, "w", 2, LONG).await.expect("lease two");
    assert_eq!(first.iter().map(|m| m.payload.clone()).collect::<Vec<_>>(), payloads[..2].to_vec());
    let rest = queue.lease(&name, "w", 10, LONG).await.expect("lease the rest");
    assert_eq!(rest.iter().map(|m| m.payload.clone()).collect::<Vec<_>>(), payloads[2..].to_vec());
    assert_eq!(queue.stats(&other).await.expect("stats other"), stats(1, 0, 0), "queues are separate");
    assert!(queue.lease(&name, "w", 0, LONG).await.expect("lease none").is_empty());
}

/// Two consumers leasing at the same time never receive the same message, and together receive all.
pub async fn lease_exclusivity(queue: Arc<dyn WorkQueue>) {
    let name = unique("q");
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| format!("m{i}").into_bytes()).collect();
    let ids = queue.enqueue_batch(&name, payloads).await.expect("enqueue");
    let mut seen = HashSet::new();
    for _ in 0..10 {
        let (a, b) = tokio::join!(queue.lease(&name, "worker-a", 7, LONG), queue.lease(&name, "worker-b", 7, LONG));
        let (a, b) = (a.expect("lease a"), b.expect("lease b"));
        for message in a.iter().chain(&b) {
            assert!(seen.insert(message.id.clone()), "{} was leased twice", message.id);
        }
        if seen.len() == ids.len() {
            break;
        }
    }
    assert_eq!(seen, ids.into_iter().collect::<HashSet<_>>(), "together they receive every message");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(40, 40, 0));
}

/// A consumer leases and dies (never acks): nobody gets the message within the visibility, and after it the
/// next lease gets the same message with two deliveries. The dead consumer's late ack is harmless.
pub async fn redelivery_after_consumer_dies(queue: Arc<dyn WorkQueue>, visibility: Duration, advance: Advance) {
    let name = unique("q");
    let id = queue.enqueue(&name, b"job".to_vec()).await.expect("enqueue");
    let dead = queue.lease(&name, "worker-dead", 10, visibility).await.expect("lease by the doomed worker");
    assert_eq!(dead.len(), 1);
    assert!(
        queue.lease(&name, "worker-live", 10, visibility).await.expect("lease within visibility").is_empty(),
        "a leased message is hidden within its visibility"
    );

    advance(visibility + Duration::from_millis(100)).await;
    let again = lease_within(queue.as_ref(), &name, "worker-live", visibility, Duration::from_secs(20)).await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!((again[0].id.as_str(), again[0].payload.as_slice(), again[0].deliveries), (id.as_str(), &b"job"[..], 2));
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(1, 1, 0));

    queue.ack(&name, std::slice::from_ref(&id)).await.expect("ack by the live worker");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(0, 0, 1));
    queue.ack(&name, std::slice::from_ref(&id)).await.expect("late ack by the dead worker");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(0, 0, 1), "the late ack counts nothing");
}

/// Unknown ids, ids of another backend's form and ids of messages never leased are ignored by `ack`: nothing is
/// counted and the unleased message is still delivered. Bad queue names are `Invalid`.
pub async fn ack_unknown_ids(queue: Arc<dyn WorkQueue>) {
    let name = unique("q");
    let id = queue.enqueue(&name, b"keep".to_vec()).await.expect("enqueue");
    let unknown = ["999999999".to_owned(), "not-an-id".to_owned(), "123-0".to_owned(), String::new()];
    queue.ack(&name, &unknown).await.expect("ack of unknown ids");
    queue.ack(&name, std::slice::from_ref(&id)).await.expect("ack of a message nobody leased");
    assert_eq!(queue.stats(&name).await.expect("stats"), stats(1, 0, 0));
    let leased = queue.lease(&name, "w", 10, LONG).await.expect("lease");
    assert_eq!(leased.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), vec![id], "still delivered");
    queue.ack(&unique("q"), &unknown).await.expect("ack on an unused queue");

    for bad in ["", "a.b", "with space"] {
        let result = queue.enqueue(bad, b"x".to_vec()).await;
        assert!(matches!(result, Err(PortError::Invalid(_))), "{bad:?}: {result:?}");
        let result = queue.lease(bad, "w", 1, LONG).await;
        assert!(matches!(result, Err(PortError::Invalid(_))), "{bad:?}: {result:?}");
    }
}
