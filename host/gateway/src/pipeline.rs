//! The durable part of the pipeline (spec 002 part A, events items 2 and 3): internal ingest writes accepted
//! events to the durable queue (`gateway-events` in the work-queue port), and the worker drains it into the
//! broker.
//!
//! - **Ingest** answers 202 only after the queue acknowledged the events of the request. Concurrent requests
//!   are written together ([`IngestBatcher`]: one `enqueue_batch` per wake-up, up to [`MAX_INGEST_BATCH`]
//!   requests), so the embedded queue pays one commit for many events.
//! - **The worker** leases a batch, produces it to the broker (acknowledged, `acks=all` on Kafka) and only then
//!   acknowledges the messages, so a crash anywhere between 202 and the broker loses nothing: the lease expires
//!   and the batch is produced again (at-least-once; `metadata.event_id` is the consumers' deduplication key).
//!   A transient broker failure retries the batch with backoff while the lease lasts, then leaves it to
//!   redelivery. A message that can never be produced (undecodable, or refused by the broker as invalid) is
//!   moved to the dead-letter queue `gateway-events-dead` with its reason, visible in `GET /admin/v1/queues`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::backoff::Backoff;
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{Header, OutRecord, PortError, QueueMessage, Topics, WorkQueue};
use flowhost_core::Clock;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::event::{IngestRecord, PRESENCE_TOPIC};
use crate::metrics::{IngestMetrics, WorkerMetrics};

/// The durable queue of accepted events.
pub const QUEUE: &str = "gateway-events";
/// Where messages that can never be produced go.
pub const DEAD_LETTER_QUEUE: &str = "gateway-events-dead";
/// The most ingest requests one queue write carries.
pub const MAX_INGEST_BATCH: usize = 64;

type Pending = (Vec<Vec<u8>>, oneshot::Sender<Result<(), PortError>>);

/// Writes events to the durable queue, many concurrent requests per write.
#[derive(Clone, Debug)]
pub struct IngestBatcher {
    sender: mpsc::Sender<Pending>,
}

impl IngestBatcher {
    /// Starts the writer task; it ends when every batcher handle is dropped.
    pub fn start(queue: Arc<dyn WorkQueue>, metrics: IngestMetrics) -> IngestBatcher {
        let (sender, mut receiver) = mpsc::channel::<Pending>(MAX_INGEST_BATCH * 8);
        tokio::spawn(async move {
            let mut batch: Vec<Pending> = Vec::with_capacity(MAX_INGEST_BATCH);
            while receiver.recv_many(&mut batch, MAX_INGEST_BATCH).await > 0 {
                let (requests, replies): (Vec<_>, Vec<_>) = batch.drain(..).unzip();
                let payloads: Vec<Vec<u8>> = requests.into_iter().flatten().collect();
                let count = payloads.len() as u64;
                let result = queue.enqueue_batch(QUEUE, payloads).await.map(|_| ());
                let outcome = if result.is_ok() { "ok" } else { "error" };
                metrics.queue_publish.with_label_values(&[outcome]).inc_by(count);
                if let Err(error) = &result {
                    warn!(%error, events = count, "writing events to the durable queue failed");
                }
                for reply in replies {
                    let _ = reply.send(result.clone());
                }
            }
        });
        IngestBatcher { sender }
    }

    /// Writes the events of one request; returns once the queue acknowledged them.
    pub async fn enqueue(&self, payloads: Vec<Vec<u8>>) -> Result<(), PortError> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send((payloads, reply))
            .await
            .map_err(|_| PortError::Unavailable("the queue writer stopped".to_owned()))?;
        answer.await.map_err(|_| PortError::Unavailable("the queue writer stopped".to_owned()))?
    }
}

/// How the worker runs.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    pub analytics_topic: String,
    pub partitions: i32,
    pub batch_size: usize,
    pub lease: Duration,
    /// This worker's name in the queue's bookkeeping.
    pub consumer: String,
}

pub struct Worker {
    pub queue: Arc<dyn WorkQueue>,
    pub topics: Arc<dyn Topics>,
    pub clock: Arc<dyn Clock>,
    pub settings: WorkerSettings,
    pub metrics: WorkerMetrics,
}

/// The longest the worker waits between polls of an empty queue.
const MAX_IDLE_POLL: Duration = Duration::from_millis(100);
/// How long the worker lets a partial batch fill before it leases again.
const GATHER: Duration = Duration::from_millis(10);

impl Worker {
    /// Creates the gateway's topics, then drains the queue into the broker until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        if !self.create_topics(&shutdown).await {
            return Ok(());
        }
        let mut idle = Backoff::new(Duration::from_millis(2), 2.0, MAX_IDLE_POLL);
        let mut failing = Backoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(5));
        while !shutdown.is_cancelled() {
            let delay = match self
                .queue
                .lease(QUEUE, &self.settings.consumer, self.settings.batch_size, self.settings.lease)
                .await
            {
                Ok(messages) if messages.is_empty() => idle.next_delay(),
                Ok(messages) => {
                    idle.reset();
                    failing.reset();
                    let full = messages.len() == self.settings.batch_size;
                    self.drain(messages, &shutdown).await;
                    if full {
                        continue;
                    }
                    // A partial batch: let the queue fill a little, so the worker writes (lease, produce, ack)
                    // in batches rather than event by event under a steady load.
                    GATHER
                }
                Err(error) => {
                    let delay = failing.next_delay();
                    warn!(%error, retry_in_ms = delay.as_millis() as u64, "leasing from the durable queue failed");
                    delay
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(delay) => {}
            }
        }
        Ok(())
    }

    /// Creates the presence and analytics topics (idempotent), retrying while the broker is unavailable;
    /// false when shut down first.
    async fn create_topics(&self, shutdown: &CancellationToken) -> bool {
        let mut backoff = Backoff::new(Duration::from_millis(200), 2.0, Duration::from_secs(10));
        for topic in [PRESENCE_TOPIC, self.settings.analytics_topic.as_str()] {
            loop {
                match self.topics.create_topic(topic, self.settings.partitions).await {
                    Ok(()) | Err(PortError::Conflict(_)) => break,
                    Err(error) => {
                        let delay = backoff.next_delay();
                        warn!(topic, %error, retry_in_ms = delay.as_millis() as u64, "creating a gateway topic failed");
                        tokio::select! {
                            _ = shutdown.cancelled() => return false,
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
        }
        info!(topics = ?[PRESENCE_TOPIC, self.settings.analytics_topic.as_str()], "gateway worker producing");
        true
    }

    /// Produces one leased batch and acknowledges what is done with.
    async fn drain(&self, messages: Vec<QueueMessage>, shutdown: &CancellationToken) {
        let leased_at = Instant::now();
        let redelivered = messages.iter().filter(|m| m.deliveries > 1).count() as u64;
        self.metrics.redeliveries.inc_by(redelivered);
        let mut ids = Vec::with_capacity(messages.len());
        let mut records = Vec::with_capacity(messages.len());
        for message in &messages {
            match decode(&message.payload) {
                Some(record) => {
                    ids.push(message.id.clone());
                    records.push(record);
                }
                None => self.dead_letter(message, "undecodable", "not a gateway record").await,
            }
        }
        if records.is_empty() {
            return;
        }
        let mut backoff = Backoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(5));
        loop {
            match self.topics.publish(&records).await {
                Ok(()) => {
                    self.metrics.produce.with_label_values(&["ok"]).inc_by(records.len() as u64);
                    self.ack(&ids).await;
                    return;
                }
                Err(error) if error.is_transient() => {
                    self.metrics.produce.with_label_values(&["error"]).inc_by(records.len() as u64);
                    let delay = backoff.next_delay();
                    // Past half the lease another worker may take the batch: leave it to redelivery.
                    if leased_at.elapsed() + delay > self.settings.lease / 2 || shutdown.is_cancelled() {
                        warn!(%error, events = records.len(), "the broker is unavailable; the batch waits for redelivery");
                        return;
                    }
                    warn!(%error, retry_in_ms = delay.as_millis() as u64, "producing to the broker failed; retrying");
                    self.metrics.retries.inc();
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                Err(error) => {
                    warn!(%error, "the broker refused a batch; producing its records one by one");
                    self.produce_one_by_one(&messages, &ids, &records).await;
                    return;
                }
            }
        }
    }

    /// After the broker refused a batch: each record alone; the refused ones are dead-lettered, the transient
    /// failures left to redelivery.
    async fn produce_one_by_one(&self, messages: &[QueueMessage], ids: &[String], records: &[OutRecord]) {
        for (id, record) in ids.iter().zip(records) {
            match self.topics.publish(std::slice::from_ref(record)).await {
                Ok(()) => {
                    self.metrics.produce.with_label_values(&["ok"]).inc();
                    self.ack(std::slice::from_ref(id)).await;
                }
                Err(error) => {
                    self.metrics.produce.with_label_values(&["error"]).inc();
                    if !error.is_transient() {
                        if let Some(message) = messages.iter().find(|m| &m.id == id) {
                            self.dead_letter(message, "rejected_by_broker", &error.to_string()).await;
                        }
                    }
                }
            }
        }
    }

    async fn ack(&self, ids: &[String]) {
        // A failed ack only means the batch is produced again after its lease: at-least-once.
        if let Err(error) = self.queue.ack(QUEUE, ids).await {
            warn!(%error, events = ids.len(), "acknowledging produced events failed; they will be produced again");
        }
    }

    /// Moves a message to the dead-letter queue (then acknowledges it); when that write fails the message
    /// stays leased and comes back, so nothing is lost.
    async fn dead_letter(&self, message: &QueueMessage, reason: &'static str, detail: &str) {
        let entry = json!({
            "reason": reason,
            "detail": detail.chars().take(256).collect::<String>(),
            "failed_at": iso_utc(self.clock.now_ms()),
            "deliveries": message.deliveries,
            "message": String::from_utf8_lossy(&message.payload),
        });
        match self.queue.enqueue(DEAD_LETTER_QUEUE, entry.to_string().into_bytes()).await {
            Ok(_) => {
                self.metrics.dead_letters.with_label_values(&[reason]).inc();
                warn!(reason, "a queued event was moved to the dead-letter queue");
                self.ack(std::slice::from_ref(&message.id)).await;
            }
            Err(error) => warn!(%error, "writing a dead letter failed; the message will be delivered again"),
        }
    }
}

/// The broker record of a queued event: the envelope as value (its text as queued), keyed by tenant and player,
/// with the event's id and type as headers.
fn decode(payload: &[u8]) -> Option<OutRecord> {
    let record: IngestRecord = serde_json::from_slice(payload).ok()?;
    // Internal ingest checked the head; a record queued without one is still published, without headers.
    let head = record.head().unwrap_or_default();
    let mut headers = Vec::with_capacity(2);
    if let Some(id) = head.event_id() {
        headers.push(Header { key: "event_id".to_owned(), value: id.as_bytes().to_vec() });
    }
    if let Some(kind) = head.event_type() {
        headers.push(Header { key: "event_type".to_owned(), value: kind.as_bytes().to_vec() });
    }
    Some(OutRecord {
        topic: record.topic,
        key: Some(record.key.into_bytes()),
        value: Box::<str>::from(record.envelope).into_boxed_bytes().into_vec(),
        headers,
    })
}
