//! The subjects port: fire-and-forget messages on NATS-style subjects (`a.b.c`, wildcards `*` and `>`), queue
//! groups (one member of a group gets each message) and request/reply with a timeout.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::PortError;

/// One message received on a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectMessage {
    pub subject: String,
    pub payload: Vec<u8>,
    /// Where the sender of a `request` waits for the answer: answer with [`Subjects::respond`]. An address as
    /// the server gave it, not a subject of this deployment's namespace.
    pub reply: Option<String>,
    /// The message's headers (NATS headers; e.g. `flowhost-signature`), in the order sent.
    pub headers: Vec<(String, String)>,
}

impl SubjectMessage {
    pub fn new(subject: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self { subject: subject.into(), payload: payload.into(), reply: None, headers: Vec::new() }
    }

    /// The first value of header `name` (compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// Headers of a message: `(name, value)` pairs.
pub type Headers = Vec<(String, String)>;

/// A live subscription; dropping it unsubscribes.
pub type SubjectStream = BoxStream<'static, SubjectMessage>;

/// Core publish/subscribe with at-most-once delivery (signals, broadcasts). Durable streams are the topics port.
#[async_trait]
pub trait Subjects: Send + Sync + 'static {
    fn backend(&self) -> &'static str;

    /// Whether the backend is reachable now (readiness probes ask; an in-process backend always is).
    fn connected(&self) -> Result<(), PortError> {
        Ok(())
    }

    async fn publish(&self, subject: &str, payload: Vec<u8>) -> Result<(), PortError> {
        self.publish_with_headers(subject, Vec::new(), payload).await
    }

    /// [`Subjects::publish`] with headers.
    async fn publish_with_headers(&self, subject: &str, headers: Headers, payload: Vec<u8>) -> Result<(), PortError>;

    /// Answers a request: publishes to its `reply` address ([`SubjectMessage::reply`]) as it is, where
    /// `publish` would put the subject into this deployment's namespace.
    async fn respond(&self, reply: &str, payload: Vec<u8>) -> Result<(), PortError> {
        self.respond_with_headers(reply, Vec::new(), payload).await
    }

    /// [`Subjects::respond`] with headers.
    async fn respond_with_headers(&self, reply: &str, headers: Headers, payload: Vec<u8>) -> Result<(), PortError> {
        self.publish_with_headers(reply, headers, payload).await
    }

    /// Subscribes to a subject or a pattern with `*` (one token) and `>` (one or more trailing tokens).
    /// Messages published after this returns are delivered.
    async fn subscribe(&self, pattern: &str) -> Result<SubjectStream, PortError>;

    /// Subscribes as a member of queue group `group`: each matching message goes to one member of the group
    /// (plain subscribers still get their copy). Members of one group should use the same pattern.
    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<SubjectStream, PortError>;

    /// Publishes `payload` with a fresh reply subject and waits for the first answer. Fails with
    /// `PortError::NoResponders` when no subscription matches `subject`, and `PortError::Timeout` when none
    /// answers within `timeout`.
    async fn request(&self, subject: &str, payload: Vec<u8>, timeout: Duration) -> Result<SubjectMessage, PortError> {
        self.request_with_headers(subject, Vec::new(), payload, timeout).await
    }

    /// [`Subjects::request`] with headers on the request (the answer's are on the returned message).
    async fn request_with_headers(
        &self,
        subject: &str,
        headers: Headers,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<SubjectMessage, PortError>;
}

/// Subscribes to `pattern` (in the queue group `group` when given), retrying with capped backoff (logged) while
/// the backend refuses, e.g. NATS down at start; `None` once `shutdown` fires first. For a task that must hold a
/// subscription for the life of the process.
pub async fn subscribe_until_done(
    subjects: &dyn Subjects,
    pattern: &str,
    group: Option<&str>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Option<SubjectStream> {
    let mut backoff = crate::backoff::Backoff::for_backend();
    loop {
        if shutdown.is_cancelled() {
            // A caller that subscribes again when its stream ends must not spin once the process stops.
            return None;
        }
        let subscribed = match group {
            Some(group) => subjects.queue_subscribe(pattern, group).await,
            None => subjects.subscribe(pattern).await,
        };
        match subscribed {
            Ok(stream) => return Some(stream),
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, pattern, retry_in_ms = delay.as_millis() as u64, "subscribing failed; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Wake-ups of a reconcile loop: every `interval`, and at once whenever a message arrives on a subject (a change
/// signal). Signals are at-most-once, so the tick is the fallback that bounds how long a lost one delays work.
pub struct Wakeups {
    signals: Option<SubjectStream>,
    tick: tokio::time::Interval,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups").field("signals", &self.signals.is_some()).finish_non_exhaustive()
    }
}

impl Wakeups {
    /// Subscribes to `subject`; when that fails, logs it and relies on the tick alone. The first wake-up is
    /// immediate.
    pub async fn new(subjects: &dyn Subjects, subject: &str, interval: std::time::Duration) -> Wakeups {
        Wakeups::on_any(subjects, &[subject], interval).await
    }

    /// Like [`Wakeups::new`], woken by a message on any of `subjects_to_watch`.
    pub async fn on_any(subjects: &dyn Subjects, subjects_to_watch: &[&str], interval: std::time::Duration) -> Wakeups {
        use futures::StreamExt;
        let mut streams = Vec::new();
        for subject in subjects_to_watch {
            match subjects.subscribe(subject).await {
                Ok(stream) => streams.push(stream),
                Err(error) => {
                    tracing::warn!(%error, subject, "cannot subscribe to change signals; relying on the periodic tick");
                }
            }
        }
        let signals = match streams.len() {
            0 => None,
            1 => streams.pop(),
            _ => Some(futures::stream::select_all(streams).boxed()),
        };
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Wakeups { signals, tick }
    }

    /// Waits for the next tick or signal; `false` once `shutdown` fires.
    pub async fn next(&mut self, shutdown: &tokio_util::sync::CancellationToken) -> bool {
        use futures::StreamExt;
        let signals = &mut self.signals;
        tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = self.tick.tick() => true,
            Some(_) = async { match signals.as_mut() { Some(s) => s.next().await, None => None } } => {
                tracing::debug!("change signal received");
                true
            }
        }
    }
}

/// Whether `subject` matches the NATS-style `pattern`.
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut pattern_tokens = pattern.split('.');
    let mut subject_tokens = subject.split('.');
    loop {
        match (pattern_tokens.next(), subject_tokens.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(p), Some(s)) if p == s => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::subject_matches;

    #[test]
    fn wildcards_follow_nats_rules() {
        let cases = [
            ("a.b", "a.b", true),
            ("a.b", "a.c", false),
            ("a.*", "a.b", true),
            ("a.*", "a.b.c", false),
            ("a.>", "a.b.c", true),
            ("a.>", "a", false),
            ("*.b", "a.b", true),
            ("a.b", "a.b.c", false),
        ];
        for (pattern, subject, expected) in cases {
            assert_eq!(subject_matches(pattern, subject), expected, "{pattern} vs {subject}");
        }
    }
}
