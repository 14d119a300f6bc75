//! The work queue port on NATS JetStream: one work-queue-retention stream per queue (`FLOWHOST_Q_<name>` on
//! subject `flowhost.queue.<name>`, file storage) and one durable pull consumer (`workers`) with explicit acks
//! and `ack_wait` = the visibility timeout. A message's id is its stream sequence; the server removes it from
//! the stream when it is acknowledged, and redelivers it after `ack_wait` when it is not. The stream therefore
//! holds only the backlog, and the acknowledged count is the stream's last sequence minus what it still holds.
//!
//! `ack_wait` belongs to the consumer, not to a lease: a `lease` with another visibility than the last updates
//! the consumer, so every worker of a queue should use the same visibility.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use async_trait::async_trait;
use flowhost_core::ports::{check_queue_name, PortError, QueueMessage, QueueStats, WorkQueue};
use futures::{StreamExt, TryStreamExt};
use tracing::debug;

const CONSUMER: &str = "workers";
const STREAM_PREFIX: &str = "FLOWHOST_Q_";
/// How long an ack waits for the server's confirmation (a double ack: the reply comes once the ack is applied).
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

type Consumer = consumer::Consumer<consumer::pull::Config>;

/// A work queue on JetStream.
pub struct NatsQueue {
    client: async_nats::Client,
    context: jetstream::Context,
    /// The consumer of each queue this process used, with the `ack_wait` it was last configured with.
    consumers: Mutex<HashMap<String, (Consumer, Duration)>>,
}

impl std::fmt::Debug for NatsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsQueue").field("state", &self.client.connection_state()).finish_non_exhaustive()
    }
}

fn stream_name(queue: &str) -> String {
    format!("{STREAM_PREFIX}{queue}")
}

fn subject(queue: &str) -> String {
    format!("flowhost.queue.{queue}")
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> PortError {
    PortError::Unavailable(format!("NATS JetStream {what}: {error}"))
}

fn backend(what: &str, error: impl std::fmt::Display) -> PortError {
    PortError::Backend(format!("NATS JetStream {what}: {error}"))
}

impl NatsQueue {
    /// Connects to `url` (`nats://host:port`, a server with JetStream enabled).
    pub async fn connect(url: &str) -> Result<NatsQueue, PortError> {
        let client = crate::connect_client(url, None, crate::Start::Now).await?;
        let context = jetstream::new(client.clone());
        Ok(NatsQueue { client, context, consumers: Mutex::new(HashMap::new()) })
    }

    async fn ensure_stream(&self, queue: &str) -> Result<stream::Stream, PortError> {
        self.context
            .get_or_create_stream(stream::Config {
                name: stream_name(queue),
                subjects: vec![subject(queue)],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
            .map_err(|error| backend("creating the stream", error))
    }

    /// The queue's consumer with `ack_wait` = `visibility`, creating the stream and consumer on first use.
    async fn consumer(&self, queue: &str, visibility: Duration) -> Result<Consumer, PortError> {
        if let Some((consumer, ack_wait)) = self.consumers.lock().unwrap_or_else(|p| p.into_inner()).get(queue) {
            if *ack_wait == visibility {
                return Ok(consumer.clone());
            }
        }
        let stream = self.ensure_stream(queue).await?;
        let config = consumer::pull::Config {
            durable_name: Some(CONSUMER.to_owned()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: visibility,
            // Leases are bounded by the callers' `max`, not by the server.
            max_ack_pending: -1,
            ..Default::default()
        };
        let consumer: Consumer = match stream.get_consumer(CONSUMER).await {
            Ok(existing) => {
                let existing: Consumer = existing;
                if existing.cached_info().config.ack_wait == visibility {
                    existing
                } else {
                    debug!(queue, ?visibility, "updating the queue consumer's ack_wait");
                    stream.update_consumer(config).await.map_err(|error| backend("updating the consumer", error))?
                }
            }
            Err(_) => stream
                .get_or_create_consumer(CONSUMER, config)
                .await
                .map_err(|error| backend("creating the consumer", error))?,
        };
        self.consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue.to_owned(), (consumer.clone(), visibility));
        Ok(consumer)
    }
}

#[async_trait]
impl WorkQueue for NatsQueue {
    fn backend(&self) -> &'static str {
        "jetstream"
    }

    async fn enqueue_batch(&self, queue: &str, payloads: Vec<Vec<u8>>) -> Result<Vec<String>, PortError> {
        check_queue_name(queue)?;
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        if !self.consumers.lock().unwrap_or_else(|p| p.into_inner()).contains_key(queue) {
            self.ensure_stream(queue).await?;
        }
        let subject = subject(queue);
        // Publish all, then wait for every acknowledgement: one round trip of latency for the batch.
        let mut acks = Vec::with_capacity(payloads.len());
        for payload in payloads {
            acks.push(
                self.context
                    .publish(subject.clone(), payload.into())
                    .await
                    .map_err(|error| unavailable("publish", error))?,
            );
        }
        let mut ids = Vec::with_capacity(acks.len());
        for ack in acks {
            ids.push(ack.await.map_err(|error| unavailable("publish acknowledgement", error))?.sequence.to_string());
        }
        Ok(ids)
    }

    async fn lease(
        &self,
        queue: &str,
        _consumer: &str,
        max: usize,
        visibility: Duration,
    ) -> Result<Vec<QueueMessage>, PortError> {
        check_queue_name(queue)?;
        if max == 0 {
            return Ok(Vec::new());
        }
        let consumer = self.consumer(queue, visibility).await?;
        let batch = consumer.fetch().max_messages(max).messages().await.map_err(|error| unavailable("fetch", error))?;
        let messages: Vec<jetstream::Message> =
            batch.try_collect().await.map_err(|error| unavailable("fetch", error))?;
        messages
            .into_iter()
            .map(|message| {
                let info = message.info().map_err(|error| backend("delivery info", error))?;
                Ok(QueueMessage {
                    id: info.stream_sequence.to_string(),
                    payload: message.payload.to_vec(),
                    deliveries: u32::try_from(info.delivered).unwrap_or(u32::MAX),
                })
            })
            .collect()
    }

    async fn ack(&self, queue: &str, ids: &[String]) -> Result<(), PortError> {
        check_queue_name(queue)?;
        let sequences: Vec<u64> = ids.iter().filter_map(|id| id.parse().ok()).collect();
        if sequences.is_empty() {
            return Ok(());
        }
        // The ack subject of the JetStream wire API (ADR-15, v1 form): the server acknowledges by the stream
        // sequence it carries, whichever delivery that was, so an id stays valid across redeliveries.
        let stream = stream_name(queue);
        let requests = sequences.into_iter().map(|sequence| {
            let subject = format!("$JS.ACK.{stream}.{CONSUMER}.1.{sequence}.{sequence}.0.0");
            let client = self.client.clone();
            async move {
                match tokio::time::timeout(ACK_TIMEOUT, client.request(subject, "+ACK".into())).await {
                    Ok(Ok(_)) => Ok(()),
                    // Nobody answers for a queue without a consumer: nothing was ever leased, so the ids are
                    // unknown, and unknown ids are ignored.
                    Ok(Err(error)) if error.kind() == async_nats::RequestErrorKind::NoResponders => Ok(()),
                    Ok(Err(error)) => Err(unavailable("ack", error)),
                    Err(_) => {
                        Err(PortError::Unavailable(format!("NATS JetStream ack not confirmed in {ACK_TIMEOUT:?}")))
                    }
                }
            }
        });
        futures::stream::iter(requests).buffer_unordered(64).try_collect::<Vec<_>>().await?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats, PortError> {
        check_queue_name(queue)?;
        let stream = match self.context.get_stream(stream_name(queue)).await {
            Ok(stream) => stream,
            Err(error) if matches!(error.kind(), jetstream::context::GetStreamErrorKind::JetStream(_)) => {
                return Ok(QueueStats::default())
            }
            Err(error) => return Err(unavailable("stream info", error)),
        };
        let state = stream.get_info().await.map_err(|error| unavailable("stream info", error))?.state;
        let leased = match stream.get_consumer::<consumer::pull::Config>(CONSUMER).await {
            Ok(consumer) => consumer.cached_info().num_ack_pending as u64,
            Err(_) => 0,
        };
        Ok(QueueStats {
            pending: state.messages,
            leased,
            acknowledged: state.last_sequence.saturating_sub(state.messages),
        })
    }

    async fn queues(&self) -> Result<Vec<String>, PortError> {
        let names: Vec<String> =
            self.context.stream_names().try_collect().await.map_err(|error| unavailable("stream names", error))?;
        let mut queues: Vec<String> =
            names.into_iter().filter_map(|name| name.strip_prefix(STREAM_PREFIX).map(str::to_owned)).collect();
        queues.sort();
        Ok(queues)
    }
}
