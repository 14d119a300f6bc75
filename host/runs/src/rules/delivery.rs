//! Processing and delivering one consumed batch: [`Delivery::process`] turns records into outputs,
//! [`Delivery::deliver`] publishes them and then retries, one by
//! one, the records a node asked to retry, under the engine's retry policy: each attempt after a backoff with
//! the freshest rules; a success publishes that record's outputs, a permanent failure or the last attempt
//! failing moves it to the dead-letter topic. The batch counts as delivered (its offsets may be committed) once
//! every record is published or dead-lettered, so a slow record holds back the commit of its batch, never the
//! processing of the batches after it (up to the engine's in-flight window).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::config::{EngineConfig, RetryPolicy};
use flowhost_core::backoff::Backoff;
use flowhost_core::ports::{KnownTopics, PortError, Record, Topics};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use flowhost_core::clock::sleep_or_shutdown;

use super::batch::{dead_letter, process_batch_with, BatchOutcome, Destinations, RetryRecord};
use super::{EngineMetrics, RuleSet};
use crate::nodes::{NodeFailure, NodeKinds};

/// Everything processing and delivering a batch needs, shared by the consume loop and its delivery tasks.
pub(crate) struct Delivery {
    pub(crate) topics: Arc<dyn Topics>,
    pub(crate) known: Arc<KnownTopics>,
    pub(crate) nodes: Arc<dyn NodeKinds>,
    pub(crate) metrics: Arc<EngineMetrics>,
    pub(crate) invalid_topic: String,
    pub(crate) dead_letter_topic: String,
    pub(crate) retry: RetryPolicy,
    /// The freshest rules, for each retry.
    pub(crate) rules: watch::Receiver<Arc<RuleSet>>,
}

impl Delivery {
    pub(crate) fn new(
        topics: Arc<dyn Topics>,
        known: Arc<KnownTopics>,
        nodes: Arc<dyn NodeKinds>,
        metrics: Arc<EngineMetrics>,
        config: &EngineConfig,
        rules: watch::Receiver<Arc<RuleSet>>,
    ) -> Delivery {
        Delivery {
            topics,
            known,
            nodes,
            metrics,
            invalid_topic: config.invalid_events_topic.clone(),
            dead_letter_topic: config.dead_letter_topic.clone(),
            retry: config.retry.clone(),
            rules,
        }
    }

    /// Processes `batch` (attempt `attempt` of its records). The node kinds are async: a wasm node kind yields
    /// to the executor while it runs.
    pub(crate) async fn process(
        &self,
        set: &RuleSet,
        batch: &[Record],
        attempt: u32,
    ) -> Result<BatchOutcome, NodeFailure> {
        let to = Destinations { invalid: &self.invalid_topic, dead_letters: &self.dead_letter_topic };
        process_batch_with(set, batch, to, &self.metrics, self.nodes.as_ref(), attempt).await
    }

    /// The handler of one consumed batch: its records on topics rules read, processed with the freshest rules
    /// (again after a backoff while a node kind is unavailable), then their outputs published; true once every
    /// record is acknowledged, false when shut down first.
    pub(crate) async fn handle(self: Arc<Self>, batch: &[Record], shutdown: CancellationToken) -> bool {
        let mut backoff = Backoff::for_backend();
        let outcome = loop {
            // The freshest rules, not the ones seen before the poll: a change that landed while waiting applies.
            let set = self.rules.borrow().clone();
            let ruled: Vec<Record>;
            let records = if batch.iter().all(|record| set.reads(&record.topic)) {
                batch
            } else {
                // Records on topics only flows read are not the rules' (not counted, not moved when invalid).
                ruled = batch.iter().filter(|record| set.reads(&record.topic)).cloned().collect();
                &ruled
            };
            if records.is_empty() {
                return true;
            }
            match self.process(&set, records, 1).await {
                Ok(outcome) => break outcome,
                Err(failure) => {
                    self.metrics.errors.with_label_values(&["node_unavailable"]).inc();
                    warn!(?failure, "a node kind is unavailable; processing the batch again after a backoff");
                    if !sleep_or_shutdown(backoff.next_delay(), &shutdown).await {
                        return false;
                    }
                }
            }
        };
        self.deliver(outcome, shutdown).await
    }

    /// Publishes the batch's outputs, then settles its retried records; true once every record is
    /// acknowledged (published or dead-lettered), false when shut down first.
    async fn deliver(self: Arc<Self>, mut outcome: BatchOutcome, shutdown: CancellationToken) -> bool {
        let retries = std::mem::take(&mut outcome.retries);
        if !self.publish(outcome, &shutdown).await {
            return false;
        }
        let settled = futures::future::join_all(
            retries.into_iter().map(|retry| self.clone().retry_record(retry, shutdown.clone())),
        )
        .await;
        settled.into_iter().all(|done| done)
    }

    /// Attempts 2.. of one record, each after the policy's backoff; the last failure dead-letters it.
    async fn retry_record(self: Arc<Self>, retry: RetryRecord, shutdown: CancellationToken) -> bool {
        let RetryRecord { record, mut rule_id, mut cause } = retry;
        let mut backoff = self.retry.backoff();
        let mut attempt = 1;
        loop {
            if attempt >= self.retry.max_attempts {
                warn!(topic = %record.topic, partition = record.partition, offset = record.offset, attempts = attempt,
                      %cause, "retries exhausted; moved to the dead-letter topic");
                self.metrics.dead_letters.with_label_values(&["exhausted"]).inc();
                let letter = dead_letter(&record, &self.dead_letter_topic, &rule_id, "exhausted", &cause, attempt);
                let outcome = BatchOutcome { records: vec![letter], dead_letters: 1, ..BatchOutcome::default() };
                return self.publish(outcome, &shutdown).await;
            }
            if !sleep_or_shutdown(backoff.next_delay(), &shutdown).await {
                return false;
            }
            attempt += 1;
            self.metrics.retries.inc();
            let set = self.rules.borrow().clone();
            match self.process(&set, std::slice::from_ref(&record), attempt).await {
                Ok(mut outcome) => match outcome.retries.pop() {
                    Some(again) => (rule_id, cause) = (again.rule_id, again.cause),
                    None => {
                        info!(topic = %record.topic, offset = record.offset, attempt, "record succeeded on a retry");
                        return self.publish(outcome, &shutdown).await;
                    }
                },
                // The node kind is down as a whole: wait without spending the record's attempts.
                Err(failure) => {
                    warn!(?failure, offset = record.offset, "node kind unavailable while retrying a record");
                    attempt -= 1;
                }
            }
        }
    }

    /// Creates the topics of `outcome` and publishes its records until acknowledged (retrying with the
    /// backend backoff, never dropping; every attempt lends the same records, no copy per attempt); false when
    /// shut down first.
    async fn publish(&self, outcome: BatchOutcome, shutdown: &CancellationToken) -> bool {
        if outcome.records.is_empty() {
            return true;
        }
        let names: BTreeSet<String> = outcome.records.iter().map(|r| r.topic.clone()).collect();
        let mut backoff = Backoff::for_backend();
        while let Err(error) = self.known.ensure(self.topics.as_ref(), &names).await {
            self.metrics.errors.with_label_values(&["create_topic"]).inc();
            warn!(%error, "cannot create an output topic; retrying (nothing is committed meanwhile)");
            if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                return false;
            }
        }
        let count = outcome.records.len() as u64;
        let mut backoff = Backoff::for_backend();
        loop {
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return false,
                result = self.topics.publish(&outcome.records) => result,
            };
            match attempt {
                Ok(()) => {
                    self.metrics.published.inc_by(count - outcome.invalid - outcome.dead_letters);
                    return true;
                }
                Err(error) => {
                    self.metrics.errors.with_label_values(&["publish"]).inc();
                    warn!(%error, records = count, "publish failed; retrying the batch");
                    if let PortError::Invalid(_) = error {
                        // A bad topic name cannot heal by waiting, but dropping would lose events: keep retrying
                        // slowly so an operator can fix the rule while nothing is committed.
                        warn!("a rule names an invalid output topic; fix the rule to let the partition continue");
                    }
                    if !sleep_or_shutdown(backoff.next_delay(), shutdown).await {
                        return false;
                    }
                }
            }
        }
    }
}
