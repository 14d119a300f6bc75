//! [`PushClient`]: one encrypted message to one push-service endpoint over HTTPS, classified by the answer.
//! The endpoint must be on the push-service allowlist; the payload is encrypted for the subscription
//! ([`crate::push::ece`]), signed for the service's origin ([`crate::push::jwt`]), and sent with `TTL`, `Urgency`
//! and, when given, `Topic`. Connections are pooled per push service. Extra CA roots come from `SSL_CERT_FILE`
//! (a PEM bundle), as OpenSSL-based tools take them.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, RETRY_AFTER};

use crate::push::ece;
use crate::push::hosts::PushServiceHosts;
use crate::push::jwt::VapidSigner;
use crate::vapid::decode_base64url;

/// How long one push request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How urgent a message is for the push service (RFC 8030 section 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Urgency {
    VeryLow,
    Low,
    Normal,
    High,
}

impl Urgency {
    pub fn as_str(self) -> &'static str {
        match self {
            Urgency::VeryLow => "very-low",
            Urgency::Low => "low",
            Urgency::Normal => "normal",
            Urgency::High => "high",
        }
    }
}

/// One message for one subscription.
#[derive(Debug, Clone)]
pub struct PushMessage<'a> {
    pub endpoint: &'a str,
    /// The subscription's `keys.p256dh` and `keys.auth`, base64url.
    pub p256dh: &'a str,
    pub auth: &'a str,
    pub payload: &'a [u8],
    /// How long the push service keeps the message for an offline browser, in seconds.
    pub ttl_seconds: u32,
    pub urgency: Urgency,
    /// Replaces an undelivered message with the same topic (at most 32 URL-safe base64 characters).
    pub topic: Option<&'a str>,
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushOutcome {
    /// The push service took it (2xx).
    Delivered { status: u16 },
    /// The subscription is gone (404, 410): deactivate the endpoint.
    Expired { status: u16 },
    /// Try again later (429, 5xx, no answer), after `after` when the service said (`Retry-After`).
    Retry { status: Option<u16>, after: Option<Duration>, reason: String },
    /// Sending it again will not help (a host not allowed, bad keys, a payload too large, another 4xx).
    Rejected { status: Option<u16>, reason: String },
}

impl PushOutcome {
    /// `delivered`, `expired`, `retry` or `rejected`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PushOutcome::Delivered { .. } => "delivered",
            PushOutcome::Expired { .. } => "expired",
            PushOutcome::Retry { .. } => "retry",
            PushOutcome::Rejected { .. } => "rejected",
        }
    }
}

/// Sends web-push messages (see the module documentation).
#[derive(Clone)]
pub struct PushClient {
    http: reqwest::Client,
    hosts: PushServiceHosts,
    signer: Arc<VapidSigner>,
    metrics: crate::metrics::PushMetrics,
}

impl std::fmt::Debug for PushClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushClient").field("hosts", &self.hosts).finish_non_exhaustive()
    }
}

impl PushClient {
    /// A client signing with `signer`, calling only `hosts`, trusting the public roots plus the PEM bundle at
    /// `extra_roots` (from `SSL_CERT_FILE`) when given.
    pub fn new(
        signer: Arc<VapidSigner>,
        hosts: PushServiceHosts,
        extra_roots: Option<&std::path::Path>,
    ) -> Result<PushClient, String> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(1024);
        if let Some(path) = extra_roots {
            let pem = std::fs::read(path).map_err(|e| format!("SSL_CERT_FILE {}: {e}", path.display()))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("SSL_CERT_FILE {}: not a PEM bundle: {e}", path.display()))?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| format!("cannot build the push HTTP client: {e}"))?;
        Ok(PushClient { http, hosts, signer, metrics: Default::default() })
    }

    /// Times encryption and POSTs into `metrics`.
    pub fn with_metrics(mut self, metrics: crate::metrics::PushMetrics) -> PushClient {
        self.metrics = metrics;
        self
    }

    /// Encrypts, signs and sends `message`; never fails, it says what became of the message.
    pub async fn send(&self, message: &PushMessage<'_>) -> PushOutcome {
        let rejected = |reason: String| PushOutcome::Rejected { status: None, reason };
        let url = match url::Url::parse(message.endpoint) {
            Ok(url) => url,
            Err(_) => return rejected("the endpoint is not a URL".to_owned()),
        };
        if !self.hosts.allows_url(&url) {
            return rejected(format!(
                "the endpoint's host {:?} is not on FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS",
                url.host_str().unwrap_or_default()
            ));
        }
        let (Some(p256dh), Some(auth)) = (decode_base64url(message.p256dh), decode_base64url(message.auth)) else {
            return rejected("the subscription's keys are not base64url".to_owned());
        };
        let encrypting = self.metrics.encryption();
        let body = match ece::encrypt(message.payload, &p256dh, &auth) {
            Ok(body) => body,
            Err(error) => return rejected(error.to_string()),
        };
        encrypting.observe_duration();
        let origin = url.origin().ascii_serialization();
        let authorization = match self.signer.authorization(&origin) {
            Ok(value) => value,
            Err(error) => return rejected(error),
        };
        let mut request = self
            .http
            .post(url)
            .header(AUTHORIZATION, authorization)
            .header(CONTENT_ENCODING, "aes128gcm")
            .header(CONTENT_TYPE, "application/octet-stream")
            .header("TTL", message.ttl_seconds.to_string())
            .header("Urgency", message.urgency.as_str());
        if let Some(topic) = message.topic.filter(|t| valid_topic(t)) {
            request = request.header("Topic", topic);
        }
        let posting = self.metrics.post();
        let sent = request.body(body).send().await;
        posting.observe_duration();
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                return PushOutcome::Retry { status: None, after: None, reason: format!("no answer: {error}") }
            }
        };
        let status = response.status().as_u16();
        let after = response.headers().get(RETRY_AFTER).and_then(retry_after);
        match status {
            200..=299 => PushOutcome::Delivered { status },
            404 | 410 => PushOutcome::Expired { status },
            429 | 500..=599 => PushOutcome::Retry {
                status: Some(status),
                after,
                reason: format!("the push service answered {status}"),
            },
            _ => {
                let text = response.text().await.unwrap_or_default();
                let reason =
                    format!("the push service answered {status}: {}", text.chars().take(200).collect::<String>());
                PushOutcome::Rejected { status: Some(status), reason }
            }
        }
    }
}

/// A `Topic` header value: 1 to 32 characters of the URL-safe base64 alphabet.
fn valid_topic(topic: &str) -> bool {
    (1..=32).contains(&topic.len()) && topic.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `Retry-After` as seconds, or as an HTTP date from now.
fn retry_after(value: &HeaderValue) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = chrono::DateTime::parse_from_rfc2822(text).ok()?;
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let wait = date.timestamp_millis() - now_ms;
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_and_retry_after() {
        assert!(valid_topic("player-42_offer"));
        assert!(!valid_topic(""));
        assert!(!valid_topic(&"x".repeat(33)));
        assert!(!valid_topic("has space"));
        assert_eq!(retry_after(&HeaderValue::from_static("120")), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(&HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT")), Some(Duration::ZERO));
        assert_eq!(retry_after(&HeaderValue::from_static("soon")), None);
    }
}
