//! Flowhost as the service side of its in-process service plugins: what an external service does for a flow
//! (spec 001, the v2 loop), done for a WebAssembly service such as the bundled `notifications`, so a flow may
//! reach it over the transports its manifest declares (`service_sources`), not only in process:
//!
//! - **NATS**: envelopes on `triggers.v2.<service>.inbound` (queue group `<engine.group_id>.service.<service>`,
//!   so one node of a deployment takes each), the reply on `triggers.v2.replies`;
//! - **Kafka**: envelopes on `triggers_v2_<service>_inbound` (consumer group `<engine.group_id>.service.<service>`;
//!   the topic is created when missing), the reply on `triggers_v2_replies`, the offset committed after the reply;
//! - **HTTP**: `POST /v2/<service>/inbound` (served by the admin API, [`ServiceEndpoint::accept_http`]): 202 at
//!   once, the reply POSTed to this deployment's `<public base URL>/api/v2/runs/<run_id>/reply`;
//! - **data sources**: requests on `triggers.v2.service.<service>.data.<name>` answered from the plugin's
//!   `data-sources` export (parameters as a JSON object of strings, as lookups send them).
//!
//! Replies go only to this deployment's own reply subject, topic and URL, whatever an envelope's `reply_to`
//! names: an envelope is data anyone on the bus may have published, and must not choose where Flowhost writes.
//!
//! Each envelope runs the plugin's action with the envelope's invocation context (run, node, idempotency key,
//! attempt), so it is the same step as in process: a redelivered envelope is the same notification. The reply's
//! `outcome` is the invocation's class (`success`, `skip-forward`, `retryable`, `permanent`).

use std::sync::Arc;
use std::time::Duration;

use flowhost_components::ComponentStore;
use flowhost_core::ports::{ConsumerConfig, OutRecord, Ports, Position, StartFrom};
use flowhost_runtime::{InvocationContext, Outcome, Plugin};
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::model::{InboundEnvelope, ReplyEnvelope};
use flowhost_core::signing::SIGNATURE_HEADER;

/// How long a reply POST may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Envelopes taken from Kafka per poll.
const KAFKA_BATCH: usize = 64;

/// Serves the inbound transports and data sources of the in-process services of one node.
#[derive(Clone)]
pub struct ServiceEndpoint {
    store: Arc<ComponentStore>,
    ports: Ports,
    http: reqwest::Client,
    /// The deployment's group id (`engine.group_id`): its nodes share the work, other deployments do not.
    group_id: String,
    /// This deployment's public base URL (`FLOWHOST_HTTP_PUBLIC_BASE_URL`): HTTP replies go under it only.
    reply_url_base: String,
}

impl std::fmt::Debug for ServiceEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceEndpoint").finish_non_exhaustive()
    }
}

/// The subject of `service`'s inbound envelopes.
pub fn inbound_subject(service: &str) -> String {
    format!("triggers.v2.{service}.inbound")
}

/// The topic of `service`'s inbound envelopes.
pub fn inbound_topic(service: &str) -> String {
    format!("triggers_v2_{service}_inbound")
}

impl ServiceEndpoint {
    /// An endpoint of the deployment `group_id` (`engine.group_id`) whose runs take HTTP replies under
    /// `reply_url_base` (`Config::public_base_url`).
    pub fn new(store: Arc<ComponentStore>, ports: Ports, group_id: &str, reply_url_base: &str) -> ServiceEndpoint {
        let http = reqwest::Client::builder()
            .timeout(REPLY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let reply_url_base = reply_url_base.trim_end_matches('/').to_owned();
        ServiceEndpoint { store, ports, http, group_id: group_id.to_owned(), reply_url_base }
    }

    /// Where the reply to `envelope` is POSTed: this deployment's reply route for its run.
    fn reply_url(&self, envelope: &InboundEnvelope) -> String {
        let run = url::form_urlencoded::byte_serialize(envelope.run_id.as_bytes()).collect::<String>();
        format!("{}/api/v2/runs/{run}/reply", self.reply_url_base)
    }

    /// The queue and consumer group of `service`'s envelopes in this deployment.
    fn group(&self, service: &str) -> String {
        format!("{}.service.{service}", self.group_id)
    }

    /// The active component of `service` offering `action` (or, without an action, any component of it).
    fn component(&self, service: &str, action: Option<&str>) -> Option<Plugin> {
        self.store.active_of_service(service, |plugin| {
            action.is_none_or(|action| plugin.manifest().actions.iter().any(|a| a.name == action))
        })
    }

    /// Runs `envelope`'s action and answers the reply for it.
    pub async fn handle(&self, envelope: &InboundEnvelope) -> ReplyEnvelope {
        let reply = |outcome: &str, result: Option<Value>, error: Option<String>| ReplyEnvelope {
            run_id: envelope.run_id.clone(),
            node_id: envelope.node_id.clone(),
            idempotency_key: envelope.idempotency_key.clone(),
            attempt: Some(envelope.attempt),
            outcome: outcome.to_owned(),
            result,
            error,
        };
        let Some(plugin) = self.component(&envelope.service, Some(&envelope.action)) else {
            let message = format!("no active component of {:?} offers {:?} here", envelope.service, envelope.action);
            return reply("retryable", None, Some(message));
        };
        let context = InvocationContext {
            tenant_id: envelope.tenant_id.clone(),
            flow_id: Some(envelope.flow_id.clone()),
            run_id: Some(envelope.run_id.clone()),
            node_id: Some(envelope.node_id.clone()),
            idempotency_key: envelope.idempotency_key.clone(),
            attempt: envelope.attempt,
        };
        let input = envelope.input.to_string();
        match plugin.invoke_in(&context, &envelope.action, &input, plugin.limits()).await {
            Ok(output) => match serde_json::from_str::<Value>(&output) {
                Ok(result) => reply("success", Some(result), None),
                Err(error) => reply("permanent", None, Some(format!("the action's output is not JSON: {error}"))),
            },
            Err(error) => {
                let outcome = match error.outcome() {
                    Outcome::SkipForward => "skip-forward",
                    Outcome::Retryable => "retryable",
                    Outcome::Permanent => "permanent",
                };
                // The reply crosses the bus: the classification, never wasmtime's trap text (logged here).
                debug!(action = %envelope.action, %error, "the service's action failed");
                reply(outcome, None, Some(error.public_message()))
            }
        }
    }

    /// Takes an HTTP envelope: runs it in the background and POSTs the reply to `reply_to.url`.
    pub fn accept_http(&self, envelope: InboundEnvelope) {
        let endpoint = self.clone();
        tokio::spawn(async move {
            let reply = endpoint.handle(&envelope).await;
            let url = &endpoint.reply_url(&envelope);
            if envelope.reply_to.url != *url {
                debug!(asked = %envelope.reply_to.url, url, "an envelope's reply URL is not this deployment's; replying to its own");
            }
            let body = serde_json::to_vec(&reply).unwrap_or_default();
            let mut request = endpoint.http.post(url).header("content-type", "application/json");
            if let Some((name, signature)) = endpoint.ports.signing.header(&body) {
                request = request.header(name, signature);
            }
            match request.body(body).send().await {
                Ok(response) if response.status().is_success() => {}
                Ok(response) => warn!(url, status = response.status().as_u16(), "the run refused a service reply"),
                Err(error) => warn!(url, %error, "a service reply over HTTP failed; the run asks again"),
            }
        });
    }

    /// Whether `service` runs in this process (an active component of it is loaded).
    pub fn serves(&self, service: &str) -> bool {
        self.component(service, None).is_some()
    }

    /// Serves `service`'s NATS inbound subject and data-source subjects, and its Kafka inbound topic, until
    /// `shutdown`. A failure of one transport is logged and retried; it never stops the others.
    ///
    /// Nothing is subscribed or consumed until a component of `service` is active here, and only the transports
    /// its manifest lists in `service_sources` are served.
    pub async fn run(self, service: String, shutdown: CancellationToken) {
        let plugin = loop {
            if let Some(plugin) = self.component(&service, None) {
                break plugin;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        };
        let sources = plugin.manifest().service_sources.clone();
        let serves = |transport: &str| sources.iter().any(|s| s == transport);
        info!(service, ?sources, "serving the service's inbound transports and data sources");
        let nats = serves("nats").then(|| self.clone().run_nats(service.clone(), shutdown.clone()));
        let kafka = serves("kafka").then(|| self.clone().run_kafka(service.clone(), shutdown.clone()));
        let data = (!plugin.manifest().data_sources.is_empty())
            .then(|| self.clone().run_data_sources(service.clone(), shutdown.clone()));
        tokio::join!(
            async move {
                if let Some(nats) = nats {
                    nats.await
                }
            },
            async move {
                if let Some(kafka) = kafka {
                    kafka.await
                }
            },
            async move {
                if let Some(data) = data {
                    data.await
                }
            },
        );
    }

    async fn run_nats(self, service: String, shutdown: CancellationToken) {
        let subject = inbound_subject(&service);
        let mut stream = match self.ports.subjects.queue_subscribe(&subject, &self.group(&service)).await {
            Ok(stream) => stream,
            Err(error) => return warn!(subject, %error, "cannot take inbound envelopes over NATS"),
        };
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => return,
                message = stream.next() => message,
            };
            let Some(message) = message else { return warn!(subject, "the inbound subscription ended") };
            if let Err(error) = self.ports.signing.verify(message.header(SIGNATURE_HEADER), &message.payload) {
                warn!(subject, %error, "an inbound envelope was refused");
                continue;
            }
            let Ok(envelope) = serde_json::from_slice::<InboundEnvelope>(&message.payload) else {
                warn!(subject, "an inbound envelope that does not parse was dropped");
                continue;
            };
            let endpoint = self.clone();
            tokio::spawn(async move {
                let reply = endpoint.handle(&envelope).await;
                let payload = serde_json::to_vec(&reply).unwrap_or_default();
                let signed = endpoint.ports.signing.headers(&payload);
                let subjects = &endpoint.ports.subjects;
                if let Err(error) = subjects.publish_with_headers(crate::execute::REPLY_SUBJECT, signed, payload).await
                {
                    warn!(%error, "a service reply over NATS failed; the run asks again");
                }
            });
        }
    }

    async fn run_data_sources(self, service: String, shutdown: CancellationToken) {
        let pattern = format!("triggers.v2.service.{service}.data.*");
        let mut stream = match self.ports.subjects.queue_subscribe(&pattern, &self.group(&service)).await {
            Ok(stream) => stream,
            Err(error) => return warn!(pattern, %error, "cannot answer data sources over NATS"),
        };
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => return,
                message = stream.next() => message,
            };
            let Some(message) = message else { return warn!(pattern, "the data-source subscription ended") };
            let Some(reply_subject) = message.reply.clone() else { continue };
            if let Err(error) = self.ports.signing.verify(message.header(SIGNATURE_HEADER), &message.payload) {
                // Unanswered: a client without the key learns nothing (its request times out).
                warn!(subject = %message.subject, %error, "a data-source request was refused");
                continue;
            }
            let name = message.subject.rsplit('.').next().unwrap_or_default().to_owned();
            let params: Vec<(String, String)> =
                serde_json::from_slice::<serde_json::Map<String, Value>>(&message.payload)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(key, value)| Some((key, value.as_str()?.to_owned())))
                    .collect();
            let endpoint = self.clone();
            let service = service.clone();
            tokio::spawn(async move {
                let answer = match endpoint.component(&service, None) {
                    Some(plugin) => match plugin.data_source(&name, &params).await {
                        Ok(json) => json,
                        Err(error) => {
                            debug!(source = %name, %error, "a data source failed");
                            serde_json::json!({ "error": { "code": error.kind(), "message": error.public_message() } }).to_string()
                        }
                    },
                    None => serde_json::json!({ "error": { "code": "not_loaded", "message": "the service is not loaded here" } }).to_string(),
                };
                let answer = answer.into_bytes();
                let signed = endpoint.ports.signing.headers(&answer);
                if let Err(error) = endpoint.ports.subjects.respond_with_headers(&reply_subject, signed, answer).await {
                    debug!(%error, "a data-source answer was not delivered");
                }
            });
        }
    }

    async fn run_kafka(self, service: String, shutdown: CancellationToken) {
        let topic = inbound_topic(&service);
        let topics = self.ports.topics.clone();
        if let Ok(false) = topics.exists(&topic).await {
            if let Err(error) = topics.create_topic(&topic, 1).await {
                warn!(topic, %error, "cannot create the inbound topic");
            }
        }
        let config =
            ConsumerConfig { group: self.group(&service), topics: vec![topic.clone()], start: StartFrom::Earliest };
        let mut consumer = match topics.consumer(config).await {
            Ok(consumer) => consumer,
            Err(error) => return warn!(topic, %error, "cannot take inbound envelopes over Kafka"),
        };
        while !shutdown.is_cancelled() {
            let records = tokio::select! {
                _ = shutdown.cancelled() => break,
                records = consumer.poll(KAFKA_BATCH, Duration::from_millis(500)) => records,
            };
            let records = match records {
                Ok(records) => records,
                Err(error) => {
                    warn!(topic, %error, "polling the inbound topic failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut replies = Vec::new();
            let mut positions = Vec::new();
            for record in &records {
                positions.push(Position {
                    topic: record.topic.clone(),
                    partition: record.partition,
                    next_offset: record.offset + 1,
                });
                let signature = record.header(SIGNATURE_HEADER).and_then(|value| std::str::from_utf8(value).ok());
                if let Err(error) = self.ports.signing.verify(signature, &record.value) {
                    warn!(topic, offset = record.offset, %error, "an inbound envelope was refused");
                    continue;
                }
                let Ok(envelope) = serde_json::from_slice::<InboundEnvelope>(&record.value) else {
                    warn!(topic, offset = record.offset, "an inbound envelope that does not parse was skipped");
                    continue;
                };
                let reply = self.handle(&envelope).await;
                let value = serde_json::to_vec(&reply).unwrap_or_default();
                let mut record = OutRecord::new(crate::execute::REPLY_TOPIC, value);
                if let Some((name, signature)) = self.ports.signing.header(&record.value) {
                    record = record.with_header(name, signature.into_bytes());
                }
                replies.push(record);
            }
            if !replies.is_empty() {
                if let Err(error) = topics.publish(&replies).await {
                    // Not committed: the envelopes are taken again (the same steps, so nothing is done twice).
                    warn!(topic, %error, "service replies over Kafka failed; taking the envelopes again");
                    continue;
                }
            }
            if !positions.is_empty() {
                if let Err(error) = consumer.commit(&positions).await {
                    warn!(topic, %error, "committing the inbound topic failed");
                }
            }
        }
        if let Err(error) = consumer.close().await {
            debug!(topic, %error, "closing the inbound consumer failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(inbound_subject("notifications"), "triggers.v2.notifications.inbound");
        assert_eq!(inbound_topic("notifications"), "triggers_v2_notifications_inbound");
    }
}
