//! Flowhost as the service side of its in-process service plugins: what an external service does for a flow
//! (spec 001, the v2 loop), done for a WebAssembly service such as the bundled `notifications`, so a flow may
//! reach it over the transports its manifest declares (`service_sources`), not only in process:
//!
//! - **NATS**: envelopes on `triggers.v2.<service>.inbound` (queue group `<engine.group_id>.service.<service>`,
//!   so one node of a deployment takes each), the reply on `triggers.v2.replies`;
//! - **Kafka**: envelopes on `triggers_v2_<service>_inbound` (consumer group `<engine.group_id>.service.<service>`;
//!   the topic is created when missing) and on every retarget topic a released flow's segment of the service
//!   names, learnt from the service's flow broadcasts (below), the reply on `triggers_v2_replies`, the offset
//!   committed after the reply;
//! - **HTTP**: `POST /v2/<service>/inbound` (served by the admin API, [`ServiceEndpoint::accept_http`]): 202 at
//!   once, the reply POSTed to this deployment's `<public base URL>/api/v2/runs/<run_id>/reply`;
//! - **data sources**: requests on `triggers.v2.service.<service>.data.<name>` answered from the plugin's
//!   `data-sources` export (parameters as a JSON object of strings, as lookups send them).
//!
//! - **flow broadcasts** (spec 001, the v2 loop): the service follows `triggers.v2.service.<service>.flows`, and
//!   asks for the current one when it starts and every [`BROADCAST_REFRESH`] (the fallback for a lost one), so
//!   the live ingress of a retargeted segment is consumed as soon as the flow is released, and no longer once no
//!   released flow names it. A retarget topic is never created here: a missing one is not consumed until it
//!   exists (the engine fails closed on it too);
//! - **manifest heartbeat**: the active components of the service post their catalog manifest when the service
//!   starts and every [`MANIFEST_HEARTBEAT`] (spec 001: on boot and every 5 minutes), so `last_seen_at` says the
//!   service is alive.
//!
//! Replies go only to this deployment's own reply subject, topic and URL, whatever an envelope's `reply_to`
//! names: an envelope is data anyone on the bus may have published, and must not choose where Flowhost writes.
//!
//! Each envelope runs the plugin's action with the envelope's invocation context (run, node, idempotency key,
//! attempt), so it is the same step as in process: a redelivered envelope is the same notification. The reply's
//! `outcome` is the invocation's class (`success`, `skip-forward`, `retryable`, `permanent`).

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use flowhost_catalog::Catalog;
use flowhost_components::{catalog_manifest, ComponentStore};
use flowhost_core::backoff::{until_done, Backoff};
use flowhost_core::ports::{OutRecord, Ports, Record, SubjectMessage};
use flowhost_core::source::{replace_if_changed, SourceConsumer};
use flowhost_flows::broadcast::{self, FlowBroadcast};
use flowhost_runtime::{InvocationContext, Outcome, Plugin};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::model::{InboundEnvelope, ReplyEnvelope};
use flowhost_core::signing::SIGNATURE_HEADER;

/// How long a reply POST may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// Envelopes taken from Kafka per poll.
const KAFKA_BATCH: usize = 64;
/// How often the service asks for its flow broadcast besides following the published ones, and re-checks a
/// retarget topic that did not exist.
pub const BROADCAST_REFRESH: Duration = Duration::from_secs(30);
/// How long a flow-broadcast request waits for the admin API's answer.
const BROADCAST_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Spec 001 (component catalog, limits): a service posts its manifest on boot and every 5 minutes.
pub const MANIFEST_HEARTBEAT: Duration = Duration::from_secs(5 * 60);

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
    /// How often the service's manifest is posted again ([`MANIFEST_HEARTBEAT`]).
    heartbeat: Duration,
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
        ServiceEndpoint {
            store,
            ports,
            http,
            group_id: group_id.to_owned(),
            reply_url_base,
            heartbeat: MANIFEST_HEARTBEAT,
        }
    }

    /// The same endpoint posting the service's manifest every `interval` instead of [`MANIFEST_HEARTBEAT`].
    pub fn with_heartbeat(mut self, interval: Duration) -> ServiceEndpoint {
        self.heartbeat = interval.max(Duration::from_millis(1));
        self
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
            smoke_test: false,
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

    /// Serves `service`'s NATS inbound subject and data-source subjects, its Kafka inbound topic and the retarget
    /// topics its flow broadcasts name, and posts its manifest every heartbeat, until `shutdown`. A failure of
    /// one transport is logged and retried; it never stops the others.
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
        let (retargets, retargets_seen) = watch::channel(BTreeSet::new());
        let nats = serves("nats").then(|| self.clone().run_nats(service.clone(), shutdown.clone()));
        let follow =
            serves("kafka").then(|| self.clone().follow_broadcasts(service.clone(), retargets, shutdown.clone()));
        let kafka = serves("kafka").then(|| self.clone().run_kafka(service.clone(), retargets_seen, shutdown.clone()));
        let data = (!plugin.manifest().data_sources.is_empty())
            .then(|| self.clone().run_data_sources(service.clone(), shutdown.clone()));
        let heartbeat = self.clone().run_heartbeat(service.clone(), shutdown.clone());
        tokio::join!(optional(nats), optional(follow), optional(kafka), optional(data), heartbeat);
    }

    /// Posts the catalog manifest of each active component of `service` now and every heartbeat: the same
    /// content is a heartbeat (only `last_seen_at` moves).
    async fn run_heartbeat(self, service: String, shutdown: CancellationToken) {
        flowhost_core::clock::every(self.heartbeat, &shutdown, || self.post_manifests(&service)).await;
    }

    async fn post_manifests(&self, service: &str) {
        let plugins = self.store.active_plugins();
        let of_service = plugins.values().filter(|plugin| {
            let manifest = plugin.manifest();
            manifest.service.as_deref().unwrap_or(&manifest.id) == service
        });
        for plugin in of_service {
            let (id, version) = (&plugin.manifest().id, &plugin.manifest().version);
            let content_hash = match self.store.get(id).await {
                Ok(summary) => summary.versions.into_iter().find(|v| &v.version == version).map(|v| v.content_hash),
                Err(error) => {
                    warn!(service, plugin = %id, %error, "cannot read the component for its manifest heartbeat");
                    continue;
                }
            };
            let Some(content_hash) = content_hash else { continue };
            let registered = match catalog_manifest(plugin, &content_hash) {
                Ok(manifest) => Catalog::new(&self.ports).register(manifest).await,
                Err(error) => Err(error),
            };
            match registered {
                Ok(_) => debug!(service, plugin = %id, %version, "manifest heartbeat"),
                Err(error) => warn!(service, plugin = %id, %version, %error, "the manifest heartbeat failed"),
            }
        }
    }

    /// Keeps `retargets` at the Kafka retarget topics of `service`'s segments in its current flow broadcast:
    /// follows the published broadcasts and asks for the current one at once and every [`BROADCAST_REFRESH`].
    async fn follow_broadcasts(
        self,
        service: String,
        retargets: watch::Sender<BTreeSet<String>>,
        shutdown: CancellationToken,
    ) {
        let subject = broadcast::subject(&service);
        let Some(mut published) =
            flowhost_core::ports::subscribe_until_done(self.ports.subjects.as_ref(), &subject, None, &shutdown).await
        else {
            return;
        };
        let mut refresh = tokio::time::interval(BROADCAST_REFRESH);
        refresh.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = refresh.tick() => {
                    // Subscribed first, so a broadcast published while this request is answered is not missed.
                    let payload = b"{}".to_vec();
                    let headers = self.ports.signing.headers(&payload);
                    let subjects = &self.ports.subjects;
                    match subjects.request_with_headers(&subject, headers, payload, BROADCAST_REQUEST_TIMEOUT).await {
                        Ok(answer) => self.take_broadcast(&service, &answer, &retargets),
                        Err(error) => debug!(subject, %error, "no answer to the flow broadcast request; asking again later"),
                    }
                }
                message = published.next() => match message {
                    // A request (ours or another node's) carries a reply subject: only broadcasts are read.
                    Some(message) if message.reply.is_none() => self.take_broadcast(&service, &message, &retargets),
                    Some(_) => {}
                    None => {
                        warn!(subject, "the flow broadcast subscription ended; following the periodic request only");
                        published = futures::stream::pending().boxed();
                    }
                },
            }
        }
    }

    fn take_broadcast(&self, service: &str, message: &SubjectMessage, retargets: &watch::Sender<BTreeSet<String>>) {
        if let Err(error) = self.ports.signing.verify(message.header(SIGNATURE_HEADER), &message.payload) {
            warn!(service, %error, "a flow broadcast was refused");
            return;
        }
        let Ok(broadcast) = serde_json::from_slice::<FlowBroadcast>(&message.payload) else { return };
        if broadcast.service != service {
            return;
        }
        let topics = retarget_topics(&broadcast);
        retargets.send_if_modified(|current| {
            if *current == topics {
                return false;
            }
            info!(service, ?topics, "the flow broadcast changed the retarget topics to consume");
            *current = topics;
            true
        });
    }

    async fn run_nats(self, service: String, shutdown: CancellationToken) {
        let subject = inbound_subject(&service);
        // Subscribed with backoff: NATS down at start delays the service's NATS transport, never drops it.
        let group = self.group(&service);
        let subjects = self.ports.subjects.clone();
        let Some(mut stream) =
            flowhost_core::ports::subscribe_until_done(subjects.as_ref(), &subject, Some(&group), &shutdown).await
        else {
            return;
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
        let group = self.group(&service);
        let subjects = self.ports.subjects.clone();
        let Some(mut stream) =
            flowhost_core::ports::subscribe_until_done(subjects.as_ref(), &pattern, Some(&group), &shutdown).await
        else {
            return;
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

    /// Consumes the canonical inbound topic and the retarget topics in `retargets` that exist (see
    /// `flowhost_core::source`: the member is replaced whenever that set changes).
    async fn run_kafka(
        self,
        service: String,
        retargets: watch::Receiver<BTreeSet<String>>,
        shutdown: CancellationToken,
    ) {
        let canonical = inbound_topic(&service);
        let topics = self.ports.topics.clone();
        if let Ok(false) = topics.exists(&canonical).await {
            if let Err(error) = topics.create_topic(&canonical, 1).await {
                warn!(topic = canonical, %error, "cannot create the inbound topic");
            }
        }
        let (existing, consumed) = watch::channel(BTreeSet::from([canonical.clone()]));
        let follow = self.follow_existing(&service, canonical, retargets, existing, &shutdown);
        let source =
            SourceConsumer::new("service inbound", topics, self.group(&service)).batch_size(KAFKA_BATCH).window(1);
        let handle = |batch| self.clone().take_envelopes(batch, shutdown.clone());
        tokio::join!(follow, source.run(consumed, handle, &shutdown));
    }

    /// Keeps `existing` to the canonical topic plus those of `retargets` that exist: checked again on every
    /// change of `retargets` and, while one is missing, every [`BROADCAST_REFRESH`].
    async fn follow_existing(
        &self,
        service: &str,
        canonical: String,
        mut retargets: watch::Receiver<BTreeSet<String>>,
        existing: watch::Sender<BTreeSet<String>>,
        shutdown: &CancellationToken,
    ) {
        loop {
            let wanted = retargets.borrow_and_update().clone();
            let mut names = BTreeSet::from([canonical.clone()]);
            let mut missing = false;
            for topic in wanted.into_iter().filter(|topic| *topic != canonical) {
                match self.ports.topics.exists(&topic).await {
                    Ok(true) => {
                        names.insert(topic);
                    }
                    Ok(false) => {
                        // Never created here: the flow's author names an existing topic, and it fails closed.
                        warn!(topic, service, "a retarget topic does not exist; it is consumed once it does");
                        missing = true;
                    }
                    Err(error) => {
                        warn!(topic, %error, "cannot tell whether a retarget topic exists; asking again");
                        missing = true;
                    }
                }
            }
            debug!(service, ?names, "inbound topics to consume");
            existing.send_if_modified(|current| replace_if_changed(current, names));
            let recheck = async {
                match missing {
                    true => tokio::time::sleep(BROADCAST_REFRESH).await,
                    false => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = recheck => {}
                changed = retargets.changed() => {
                    if changed.is_err() {
                        // No more broadcasts: the set stays as it is.
                        shutdown.cancelled().await;
                        return;
                    }
                }
            }
        }
    }

    /// Runs the envelopes of a batch and publishes their replies; true once the replies are acknowledged (the
    /// batch may be committed), false when shut down first (it is taken again: the same steps, so nothing is
    /// done twice).
    async fn take_envelopes(self, batch: Vec<Record>, shutdown: CancellationToken) -> bool {
        let mut replies = Vec::new();
        for record in &batch {
            let topic = &record.topic;
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
        replies.is_empty()
            || until_done("publishing service replies over Kafka", Backoff::for_backend(), &shutdown, || {
                self.ports.topics.publish(&replies)
            })
            .await
    }
}

/// The Kafka retarget topics of the service's segments in `broadcast`: every released flow it lists, whatever
/// its status, since a run of a flow just disabled or broken may still wait for its reply.
pub fn retarget_topics(broadcast: &FlowBroadcast) -> BTreeSet<String> {
    broadcast
        .flows
        .iter()
        .flat_map(|flow| flow.segments.iter())
        .filter(|segment| segment.transport == "kafka")
        .filter_map(|segment| segment.kafka_topic.clone())
        .collect()
}

/// Runs `task` when there is one.
async fn optional(task: Option<impl Future<Output = ()>>) {
    if let Some(task) = task {
        task.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retarget_topics_come_from_the_broadcasts_kafka_segments() {
        let broadcast: FlowBroadcast = serde_json::from_value(serde_json::json!({
            "service": "notifications", "emitted_at": "2026-11-24T10:00:00.000Z",
            "flows": [
                {"flow_id": "f1", "version": 3, "status": "valid", "enabled": true, "segments": [
                    {"node_id": "a", "transport": "kafka", "kafka_topic": "crm.inbound", "actions": []},
                    {"node_id": "b", "transport": "kafka", "actions": []},
                    {"node_id": "c", "transport": "nats", "actions": []}]},
                {"flow_id": "f2", "version": 1, "status": "invalid", "enabled": false, "segments": [
                    {"node_id": "d", "transport": "kafka", "kafka_topic": "other.inbound", "actions": []}]}]
        }))
        .unwrap();
        let topics: Vec<String> = retarget_topics(&broadcast).into_iter().collect();
        assert_eq!(topics, ["crm.inbound", "other.inbound"]);
    }

    #[test]
    fn canonical_names() {
        assert_eq!(inbound_subject("notifications"), "triggers.v2.notifications.inbound");
        assert_eq!(inbound_topic("notifications"), "triggers_v2_notifications_inbound");
    }
}
