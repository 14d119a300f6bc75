//! The edge's side of internal ingest: accepted events are posted to `GATEWAY_EDGE_INGEST_URL`, concurrent ones
//! together (`{"records": [...]}`, at most [`MAX_FORWARD_BATCH`]), so one HTTP exchange and one queue write carry
//! many events. Each request still answers 202 only once internal ingest acknowledged the batch holding its
//! event (that is, once the durable queue did). Up to [`MAX_BATCHES_IN_FLIGHT`] batches travel at once; while
//! they do, the next one fills.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::event::IngestRecord;

/// The most events one ingest request carries (internal ingest accepts the same).
pub const MAX_FORWARD_BATCH: usize = 256;
/// Batches posted concurrently.
pub const MAX_BATCHES_IN_FLIGHT: usize = 8;

type Pending = (IngestRecord, oneshot::Sender<Result<(), String>>);

#[derive(Serialize)]
struct Batch<'a> {
    records: &'a [IngestRecord],
}

/// Posts events to internal ingest.
#[derive(Clone, Debug)]
pub struct Forwarder {
    sender: mpsc::Sender<Pending>,
}

impl Forwarder {
    /// Starts the posting task (it ends when every forwarder handle is dropped).
    pub fn start(http: reqwest::Client, url: String, timeout: Duration) -> Forwarder {
        let (sender, mut receiver) = mpsc::channel::<Pending>(MAX_FORWARD_BATCH * MAX_BATCHES_IN_FLIGHT * 2);
        let in_flight = Arc::new(Semaphore::new(MAX_BATCHES_IN_FLIGHT));
        tokio::spawn(async move {
            loop {
                // Wait for a free slot first, so events gather while every slot is busy.
                let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
                let mut batch = Vec::with_capacity(MAX_FORWARD_BATCH);
                if receiver.recv_many(&mut batch, MAX_FORWARD_BATCH).await == 0 {
                    return;
                }
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let (records, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                    let result = post(&http, &url, timeout, &records).await;
                    for reply in replies {
                        let _ = reply.send(result.clone());
                    }
                });
            }
        });
        Forwarder { sender }
    }

    /// Forwards one event; `Ok` once internal ingest acknowledged it, else why not (for the log).
    pub async fn forward(&self, record: IngestRecord) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        self.sender.send((record, reply)).await.map_err(|_| "the forwarder stopped".to_owned())?;
        answer.await.map_err(|_| "the forwarder stopped".to_owned())?
    }
}

async fn post(http: &reqwest::Client, url: &str, timeout: Duration, records: &[IngestRecord]) -> Result<(), String> {
    match http.post(url).json(&Batch { records }).timeout(timeout).send().await {
        Ok(response) if response.status() == reqwest::StatusCode::ACCEPTED => Ok(()),
        Ok(response) => Err(format!("internal ingest answered {}", response.status().as_u16())),
        Err(error) if error.is_timeout() => Err("internal ingest did not answer in time".to_owned()),
        Err(error) => Err(format!("internal ingest: {}", error.without_url())),
    }
}
