//! Making a batch of advanced runs durable, in the order that keeps delivery at-least-once: outputs and
//! completion events are published and acknowledged first, then dead letters are mirrored into the store and
//! published on `triggers.v2.dlq.<service>.<action>`, then the runs are stored. Only after all of it may the
//! source offsets be committed (or a claimed run released), so a crash anywhere replays the step instead of
//! losing it; a replayed step carries the same run id and idempotency key.

use std::sync::Arc;

use flowhost_core::backoff::Backoff;
use flowhost_core::ports::{KnownTopics, OutRecord, Ports};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::execute::{Effects, Outgoing};
use crate::model::Run;
use crate::plan::Via;
use crate::store::Runs;
use crate::RunMetrics;

/// The subject a dead letter of `service`'s `action` is published on.
pub fn dead_letter_subject(service: &str, action: &str) -> String {
    let token = |s: &str| {
        let cleaned: String =
            s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
        if cleaned.is_empty() {
            "_".to_owned()
        } else {
            cleaned
        }
    };
    format!("triggers.v2.dlq.{}.{}", token(service), token(action))
}

/// What delivering effects needs.
pub struct Durability {
    pub ports: Ports,
    pub runs: Runs,
    pub known: Arc<KnownTopics>,
    pub completions_topic: String,
    pub metrics: Arc<RunMetrics>,
    /// Outbound HTTP to external services' endpoints (segments over HTTP), under the egress policy.
    pub egress: flowhost_egress::Egress,
    /// HTTP to this deployment's own routes (a service Flowhost serves itself): not subject to the egress
    /// policy, never redirected.
    pub own: reqwest::Client,
    /// This deployment's public base URL: an HTTP send to a relative path (a service Flowhost serves itself)
    /// goes under it.
    pub own_base_url: String,
    /// Sent as the bearer to this deployment's own routes when the admin API has a token.
    pub admin_token: Option<flowhost_core::config::Secret>,
}

impl Durability {
    /// Publishes, mirrors and stores (see the module documentation), each retried with backoff until it
    /// succeeds; false when `shutdown` came first (nothing may then be committed).
    pub async fn make_durable(&self, runs: &[Run], effects: Effects, shutdown: &CancellationToken) -> bool {
        let Effects { mut outputs, completions, dead_letters, sends } = effects;
        outputs.extend(completions.iter().map(|event| {
            let value = serde_json::to_vec(event).unwrap_or_default();
            OutRecord::new(self.completions_topic.clone(), value).with_key(event.run_id.as_bytes().to_vec())
        }));
        if !outputs.is_empty() {
            let topics: std::collections::BTreeSet<String> = outputs.iter().map(|r| r.topic.clone()).collect();
            let published = self
                .retry("publish", shutdown, || async {
                    self.known.ensure(self.ports.topics.as_ref(), &topics).await?;
                    self.ports.topics.publish(&outputs).await
                })
                .await;
            if !published {
                return false;
            }
        }
        if !dead_letters.is_empty() {
            let mirrored = self
                .retry("dead_letter", shutdown, || async {
                    self.runs.save_dead_letters(&dead_letters).await.map_err(|e| e.to_string())?;
                    for letter in &dead_letters {
                        let payload = serde_json::to_vec(letter).unwrap_or_default();
                        let subject = dead_letter_subject(&letter.service, &letter.action);
                        let signature = self.ports.signing.headers(&payload);
                        self.ports
                            .subjects
                            .publish_with_headers(&subject, signature, payload)
                            .await
                            .map_err(|e| e.to_string())?;
                    }
                    Ok::<(), String>(())
                })
                .await;
            if !mirrored {
                return false;
            }
        }
        if !runs.is_empty() && !self.retry("store", shutdown, || async { self.runs.save_all(runs).await }).await {
            return false;
        }
        self.send(sends).await;
        true
    }

    /// Sends inbound envelopes to external services, once the runs waiting for their replies are stored. A
    /// failed send is counted and logged, not retried here: the step's reply timeout sends it again.
    pub async fn send(&self, sends: Vec<Outgoing>) {
        let mut kafka: Vec<OutRecord> = Vec::new();
        let mut canonical: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for outgoing in sends {
            let transport = outgoing.via.name();
            let result = match &outgoing.via {
                Via::InProcess => continue,
                Via::Nats { subject } => {
                    let signature = self.ports.signing.headers(&outgoing.body);
                    self.ports
                        .subjects
                        .publish_with_headers(subject, signature, outgoing.body)
                        .await
                        .map_err(|e| e.to_string())
                }
                Via::Kafka { topic, retarget } => {
                    if !retarget {
                        canonical.insert(topic.clone());
                    }
                    let signature = self.ports.signing.header(&outgoing.body);
                    let mut record = OutRecord::new(topic.clone(), outgoing.body)
                        .with_key(outgoing.run_id.into_bytes())
                        .with_header("traceparent", outgoing.traceparent.into_bytes());
                    if let Some((name, value)) = signature {
                        record = record.with_header(name, value.into_bytes());
                    }
                    kafka.push(record);
                    continue;
                }
                Via::Http { url } => {
                    let url = if url.starts_with('/') { format!("{}{url}", self.own_base_url) } else { url.clone() };
                    self.post(&url, &outgoing.traceparent, outgoing.body).await
                }
            };
            self.sent(transport, result);
        }
        if !kafka.is_empty() {
            let result = async {
                self.known.ensure(self.ports.topics.as_ref(), &canonical).await?;
                self.ports.topics.publish(&kafka).await
            }
            .await
            .map_err(|e| e.to_string());
            for _ in 0..kafka.len() {
                self.sent("kafka", result.clone());
            }
        }
    }

    async fn post(&self, url: &str, traceparent: &str, body: Vec<u8>) -> Result<(), String> {
        let own = same_origin(url, &self.own_base_url);
        let mut request = if own {
            self.own.post(url)
        } else {
            self.egress.request(reqwest::Method::POST, url).map_err(|e| format!("POST {url}: {e}"))?
        };
        if let Some(token) = self.admin_token.as_ref().filter(|_| own) {
            request = request.bearer_auth(token.expose());
        }
        if let Some((name, value)) = self.ports.signing.header(&body) {
            request = request.header(name, value);
        }
        let request = request
            .header("content-type", "application/json")
            .header("traceparent", traceparent)
            .body(body)
            .timeout(std::time::Duration::from_secs(10));
        let response = if own {
            request.send().await.map_err(|e| format!("POST {url}: {}", e.without_url()))?
        } else {
            self.egress.send(request).await.map_err(|e| format!("POST {url}: {e}"))?
        };
        match response.status() {
            status if status.is_success() => Ok(()),
            status => Err(format!("POST {url}: {status}")),
        }
    }

    fn sent(&self, transport: &str, result: Result<(), String>) {
        let outcome = if result.is_ok() { "sent" } else { "failed" };
        self.metrics.sends.with_label_values(&[transport, outcome]).inc();
        if let Err(error) = result {
            warn!(transport, %error, "sending to an external service failed; the reply timeout sends it again");
        }
    }

    /// Runs `attempt` until it succeeds or `shutdown` fires; failures are counted and logged.
    async fn retry<F, Fut, E>(&self, kind: &str, shutdown: &CancellationToken, mut attempt: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let mut backoff = Backoff::for_backend();
        loop {
            match attempt().await {
                Ok(()) => return true,
                Err(error) => {
                    self.metrics.errors.with_label_values(&[kind]).inc();
                    warn!(%error, kind, "making runs durable failed; retrying");
                    tokio::select! {
                        () = shutdown.cancelled() => return false,
                        () = tokio::time::sleep(backoff.next_delay()) => {}
                    }
                }
            }
        }
    }
}

/// Whether `url` is on the origin of `base` (scheme, host and port compared after parsing, so
/// `http://127.0.0.1:87870/` or `http://127.0.0.1:8787.evil.example/` is not `http://127.0.0.1:8787`): only
/// there does the admin token go.
fn same_origin(url: &str, base: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base)) {
        (Ok(url), Ok(base)) => url.origin() == base.origin() && url.origin().is_tuple(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_admin_token_goes_to_the_own_origin_only() {
        let base = "http://127.0.0.1:8787";
        assert!(super::same_origin("http://127.0.0.1:8787/api/v2/runs/r/reply", base));
        assert!(super::same_origin("http://127.0.0.1:8787", "http://127.0.0.1:8787/"));
        for other in [
            "http://127.0.0.1:87870/api",
            "http://127.0.0.1:8787.evil.example/api",
            "http://127.0.0.1:8787@evil.example/api",
            "https://127.0.0.1:8787/api",
            "http://localhost:8787/api",
            "not a url",
        ] {
            assert!(!super::same_origin(other, base), "{other}");
        }
    }
}
