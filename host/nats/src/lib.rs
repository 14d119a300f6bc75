//! The NATS backend of the subjects port: [`NatsSubjects`] publishes and subscribes with core NATS (at-most-once,
//! no JetStream) on one client connection, and maps received messages to [`SubjectMessage`]. Queue groups and
//! request/reply are NATS's own (the server picks the member; the client's muxed inbox carries replies, and
//! the server's "no responders" status tells an unanswered subject from a slow answer). A subscription is
//! confirmed by a server round trip before `subscribe` returns, so a message published right after is delivered.
//! [`NatsQueue`] is the work queue port on JetStream.

use std::time::Duration;

use async_nats::RequestErrorKind;
use async_trait::async_trait;
use flowhost_core::ports::{PortError, SubjectMessage, SubjectStream, Subjects};
use futures::StreamExt;
use tracing::{debug, warn};

mod queue;
pub use queue::NatsQueue;

const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `subscribe` waits for the server to confirm the subscription.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);

/// Subjects on a NATS server.
#[derive(Clone)]
pub struct NatsSubjects {
    client: async_nats::Client,
}

impl std::fmt::Debug for NatsSubjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSubjects").field("state", &self.client.connection_state()).finish()
    }
}

impl NatsSubjects {
    /// Connects to `url` (`nats://host:port`); fails with `Unavailable` when the server does not answer within
    /// a few seconds. The client reconnects by itself afterwards.
    pub async fn connect(url: &str) -> Result<NatsSubjects, PortError> {
        Ok(NatsSubjects { client: connect_client(url).await? })
    }

    /// Waits until the server has processed everything this connection sent so far: it delivers a message
    /// published to a fresh inbox back to us only after handling the commands before it (such as a `SUB`).
    async fn round_trip(&self) -> Result<(), PortError> {
        let inbox = self.client.new_inbox();
        let mut probe = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|error| PortError::Unavailable(format!("NATS subscription probe: {error}")))?;
        self.client
            .publish(inbox, Vec::new().into())
            .await
            .map_err(|error| PortError::Unavailable(format!("NATS subscription probe: {error}")))?;
        match tokio::time::timeout(CONFIRM_TIMEOUT, probe.next()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(PortError::Unavailable("NATS closed the subscription probe".into())),
            Err(_) => {
                Err(PortError::Unavailable(format!("NATS did not confirm a subscription within {CONFIRM_TIMEOUT:?}")))
            }
        }
    }
}

/// A client of `url`; `Unavailable` when the server does not answer within a few seconds. The client
/// reconnects by itself afterwards.
pub(crate) async fn connect_client(url: &str) -> Result<async_nats::Client, PortError> {
    let client = async_nats::ConnectOptions::new()
        .name("flowhost")
        .connection_timeout(CONNECTION_TIMEOUT)
        .connect(url)
        .await
        .map_err(|error| {
            warn!(%error, "connecting to NATS failed");
            PortError::Unavailable(format!("connecting to NATS: {error}"))
        })?;
    debug!("connected to NATS");
    Ok(client)
}

/// Subjects and patterns are non-empty dot-separated tokens without whitespace.
fn validate(subject: &str, pattern: bool) -> Result<(), PortError> {
    let valid = !subject.is_empty()
        && !subject.chars().any(char::is_whitespace)
        && subject.split('.').all(|token| !token.is_empty())
        && (pattern || !subject.split('.').any(|token| token == "*" || token == ">"));
    if valid {
        Ok(())
    } else {
        Err(PortError::Invalid(format!("invalid subject {subject:?}")))
    }
}

#[async_trait]
impl Subjects for NatsSubjects {
    fn backend(&self) -> &'static str {
        "nats"
    }

    async fn publish(&self, subject: &str, payload: Vec<u8>) -> Result<(), PortError> {
        validate(subject, false)?;
        self.client.publish(subject.to_owned(), payload.into()).await.map_err(|error| {
            warn!(%error, subject, "NATS publish failed");
            PortError::Unavailable(format!("publishing to {subject:?}: {error}"))
        })
    }

    async fn subscribe(&self, pattern: &str) -> Result<SubjectStream, PortError> {
        validate(pattern, true)?;
        let subscriber = self.client.subscribe(pattern.to_owned()).await.map_err(|error| {
            warn!(%error, pattern, "NATS subscribe failed");
            PortError::Unavailable(format!("subscribing to {pattern:?}: {error}"))
        })?;
        self.round_trip().await?;
        Ok(subscriber.map(to_message).boxed())
    }

    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<SubjectStream, PortError> {
        validate(pattern, true)?;
        if group.is_empty() || group.chars().any(char::is_whitespace) {
            return Err(PortError::Invalid(format!("invalid queue group {group:?}")));
        }
        let subscriber = self.client.queue_subscribe(pattern.to_owned(), group.to_owned()).await.map_err(|error| {
            warn!(%error, pattern, group, "NATS queue subscribe failed");
            PortError::Unavailable(format!("subscribing to {pattern:?} in group {group:?}: {error}"))
        })?;
        self.round_trip().await?;
        Ok(subscriber.map(to_message).boxed())
    }

    async fn request(&self, subject: &str, payload: Vec<u8>, timeout: Duration) -> Result<SubjectMessage, PortError> {
        validate(subject, false)?;
        let request = async_nats::Request::new().payload(payload.into()).timeout(Some(timeout));
        match self.client.send_request(subject.to_owned(), request).await {
            Ok(message) => Ok(to_message(message)),
            Err(error) => Err(match error.kind() {
                RequestErrorKind::TimedOut => PortError::Timeout(format!("no reply to {subject:?} within {timeout:?}")),
                RequestErrorKind::NoResponders => {
                    PortError::NoResponders(format!("no subscription answers {subject:?}"))
                }
                RequestErrorKind::InvalidSubject | RequestErrorKind::MaxPayloadExceeded => {
                    PortError::Invalid(format!("request to {subject:?}: {error}"))
                }
                RequestErrorKind::Other => {
                    warn!(%error, subject, "NATS request failed");
                    PortError::Unavailable(format!("request to {subject:?}: {error}"))
                }
            }),
        }
    }
}

fn to_message(message: async_nats::Message) -> SubjectMessage {
    SubjectMessage {
        subject: message.subject.to_string(),
        payload: message.payload.to_vec(),
        reply: message.reply.map(|reply| reply.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn subjects_and_patterns_are_validated() {
        assert!(validate("a.b", false).is_ok());
        assert!(validate("a.*", true).is_ok());
        assert!(validate("a.>", true).is_ok());
        assert!(validate("a.*", false).is_err());
        assert!(validate("", true).is_err());
        assert!(validate("a..b", true).is_err());
        assert!(validate("a b", true).is_err());
    }
}
