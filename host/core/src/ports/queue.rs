//! The work queue port: named, durable queues of opaque payloads that workers lease, process and acknowledge
//! (the durable queue between the ingest listener and the broker worker of spec 002 part A). A lease hides a
//! message for a visibility timeout; a message not acknowledged within it goes to the next `lease` again, so a
//! worker that dies loses nothing.

use std::time::Duration;

use async_trait::async_trait;

use super::PortError;

/// One leased delivery of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// The message's id within its queue, the same on every delivery; `ack` takes it.
    pub id: String,
    pub payload: Vec<u8>,
    /// 1 on the first delivery, one more on each redelivery after a visibility timeout expired.
    pub deliveries: u32,
}

/// The state of one queue, for readiness checks and the queue administration API.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Enqueued and not yet acknowledged, leased or not.
    pub pending: u64,
    /// Of `pending`, the messages delivered and not yet acknowledged (their lease may have expired and they
    /// wait to be leased again).
    pub leased: u64,
    /// Acknowledged since the queue was created.
    pub acknowledged: u64,
}

/// A durable work queue. Delivery is **at-least-once**: a message is delivered until it is acknowledged, and a
/// worker that dies after processing and before `ack` makes it be processed again, so consumers must be
/// idempotent. A message leased by one caller is not handed to another until its visibility timeout has passed
/// without an `ack`. Ordering is best effort: `lease` hands out the oldest available messages first
/// (redeliveries before newer messages), but concurrent workers and redeliveries mean processing is not in
/// enqueue order.
#[async_trait]
pub trait WorkQueue: Send + Sync + 'static {
    fn backend(&self) -> &'static str;

    /// Appends one message and returns its id once it is durable (the 202 of the ingest route rests on it).
    async fn enqueue(&self, queue: &str, payload: Vec<u8>) -> Result<String, PortError> {
        let mut ids = self.enqueue_batch(queue, vec![payload]).await?;
        ids.pop().ok_or_else(|| PortError::Backend("enqueue returned no id".to_owned()))
    }

    /// Appends messages in order and returns their ids, once all of them are durable.
    async fn enqueue_batch(&self, queue: &str, payloads: Vec<Vec<u8>>) -> Result<Vec<String>, PortError>;

    /// Leases up to `max` messages for `consumer` (a name for diagnostics and per-consumer bookkeeping) for
    /// `visibility`. Returns at once with what is available, possibly nothing; callers poll with backoff.
    async fn lease(
        &self,
        queue: &str,
        consumer: &str,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, PortError>;

    /// Acknowledges messages: they are removed and never delivered again. Ids that are unknown or already
    /// acknowledged are ignored, so a retried `ack` is harmless. An `ack` after the lease expired still
    /// acknowledges (the message may meanwhile have been redelivered: at-least-once).
    async fn ack(&self, queue: &str, ids: &[String]) -> Result<(), PortError>;

    /// The counts of one queue; a queue never used has all zero.
    async fn stats(&self, queue: &str) -> Result<QueueStats, PortError>;

    /// The names of the queues that have been written to, sorted.
    async fn queues(&self) -> Result<Vec<String>, PortError>;
}

/// Queue names are 1 to 64 of `A-Z a-z 0-9 _ -`: they become stream and key names on every backend (JetStream
/// forbids `.`, `*`, `>` and spaces in stream names).
pub fn check_queue_name(queue: &str) -> Result<(), PortError> {
    let valid = !queue.is_empty()
        && queue.len() <= 64
        && queue.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(PortError::Invalid(format!("queue name {queue:?} must be 1-64 of A-Z a-z 0-9 _ -")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_are_checked() {
        assert!(check_queue_name("analytics-events_1").is_ok());
        for bad in ["", "a.b", "a b", "a*", "a>", &"x".repeat(65)] {
            assert!(matches!(check_queue_name(bad), Err(PortError::Invalid(_))), "{bad:?}");
        }
    }
}
