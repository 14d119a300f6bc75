//! The NATS backend of the subjects port: [`NatsSubjects`] publishes and subscribes with core NATS (at-most-once,
//! no JetStream) on one client connection, and maps received messages to [`SubjectMessage`]. Queue groups and
//! request/reply are NATS's own (the server picks the member; the client's muxed inbox carries replies, and
//! the server's "no responders" status tells an unanswered subject from a slow answer). A subscription is
//! confirmed by a server round trip before `subscribe` returns, so a message published right after is delivered.
//!
//! A deployment is isolated on a shared server by its NATS account (the user and password, or token, in the
//! URL: `nats://user:password@host:4222`), or else by its [`Namespace`] (`FLOWHOST_NATS_SUBJECT_PREFIX`): every
//! subject, queue group and reply inbox goes out under the prefix, and received subjects come back without it.
//! [`NatsQueue`] is the work queue port on JetStream.

use std::time::Duration;

use async_nats::{ConnectErrorKind, RequestErrorKind};
use async_trait::async_trait;
use flowhost_core::ports::{Headers, Namespace, PortError, SubjectMessage, SubjectStream, Subjects};
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
    namespace: Namespace,
}

impl std::fmt::Debug for NatsSubjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSubjects")
            .field("state", &self.client.connection_state())
            .field("namespace", &self.namespace.prefix())
            .finish()
    }
}

impl NatsSubjects {
    /// Connects to `url` (`nats://host:port`, with `user:password@` or `token@` for an account); fails with
    /// `Unavailable` when the server does not answer within a few seconds. The client reconnects by itself
    /// afterwards. Subjects are the specification's own ([`Namespace::NONE`]).
    pub async fn connect(url: &str) -> Result<NatsSubjects, PortError> {
        NatsSubjects::connect_in(url, Namespace::NONE).await
    }

    /// [`NatsSubjects::connect`] with every subject under `namespace` (separator `.`), reply inboxes included.
    pub async fn connect_in(url: &str, namespace: Namespace) -> Result<NatsSubjects, PortError> {
        let inbox = namespace.is_set().then(|| namespace.wire("_INBOX").into_owned());
        Ok(NatsSubjects { client: connect_client(url, inbox, Start::Now).await?, namespace })
    }

    /// [`NatsSubjects::connect_in`] that starts without NATS when the server does not answer: the client keeps
    /// connecting in the background (with the client's capped backoff) and calls fail or wait meanwhile.
    /// A malformed URL or refused credentials still fail.
    pub async fn open_in(url: &str, namespace: Namespace) -> Result<NatsSubjects, PortError> {
        let inbox = namespace.is_set().then(|| namespace.wire("_INBOX").into_owned());
        let client = match connect_client(url, inbox.clone(), Start::Now).await {
            Ok(client) => client,
            Err(PortError::Unavailable(error)) => {
                warn!(%error, "NATS does not answer yet; starting without it and connecting in the background");
                connect_client(url, inbox, Start::InBackground).await?
            }
            Err(error) => return Err(error),
        };
        Ok(NatsSubjects { client, namespace })
    }

    /// A received message with its subject back in this deployment's terms (its reply address stays as is).
    fn local(&self, message: async_nats::Message) -> SubjectMessage {
        let headers = message
            .headers
            .iter()
            .flat_map(|map| map.iter())
            .flat_map(|(name, values)| values.iter().map(move |value| (name.to_string(), value.to_string())))
            .collect();
        SubjectMessage {
            subject: self.namespace.into_local(message.subject.to_string()),
            payload: message.payload.to_vec(),
            reply: message.reply.map(|reply| reply.to_string()),
            headers,
        }
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

/// Whether [`connect_client`] waits for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Connect now; fail when the server does not answer.
    Now,
    /// Return at once; the client connects in the background and keeps retrying.
    InBackground,
}

/// A client of `url`; `Unavailable` when the server does not answer within a few seconds (unless `start` is
/// [`Start::InBackground`]), `Invalid` when it refuses the credentials. The client reconnects by itself
/// afterwards. The URL's user and password (or a user alone, as a token) sign in, which is how a deployment
/// reaches its own account; `inbox` replaces the `_INBOX` prefix of reply subjects.
pub(crate) async fn connect_client(
    url: &str,
    inbox: Option<String>,
    start: Start,
) -> Result<async_nats::Client, PortError> {
    let address: async_nats::ServerAddr =
        url.parse().map_err(|error| PortError::Invalid(format!("invalid NATS URL: {error}")))?;
    let mut options = async_nats::ConnectOptions::new().name("flowhost").connection_timeout(CONNECTION_TIMEOUT);
    match (address.username(), address.password()) {
        (Some(user), Some(password)) => {
            options = options.user_and_password(decode(user)?, decode(password)?);
        }
        (Some(token), None) => options = options.token(decode(token)?),
        _ => {}
    }
    if let Some(inbox) = inbox {
        options = options.custom_inbox_prefix(inbox);
    }
    if start == Start::InBackground {
        options = options.retry_on_initial_connect();
    }
    let client = options.connect(address).await.map_err(|error| {
        warn!(%error, "connecting to NATS failed");
        match error.kind() {
            ConnectErrorKind::Authentication | ConnectErrorKind::AuthorizationViolation => {
                PortError::Invalid(format!("connecting to NATS: {error}"))
            }
            _ => PortError::Unavailable(format!("connecting to NATS: {error}")),
        }
    })?;
    debug!("connected to NATS");
    Ok(client)
}

/// The URL's percent-encoded user or password as written in the server's configuration.
fn decode(part: &str) -> Result<String, PortError> {
    percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| PortError::Invalid("the NATS URL's user or password is not valid UTF-8".into()))
}

/// `headers` as NATS headers (`None` when there are none: a message without a header block).
fn header_map(headers: Headers) -> Option<async_nats::HeaderMap> {
    if headers.is_empty() {
        return None;
    }
    let mut map = async_nats::HeaderMap::new();
    for (name, value) in headers {
        map.append(name.as_str(), value.as_str());
    }
    Some(map)
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

    fn connected(&self) -> Result<(), PortError> {
        match self.client.connection_state() {
            async_nats::connection::State::Connected => Ok(()),
            state => Err(PortError::Unavailable(format!("NATS connection is {state}"))),
        }
    }

    async fn publish_with_headers(&self, subject: &str, headers: Headers, payload: Vec<u8>) -> Result<(), PortError> {
        validate(subject, false)?;
        let wire = self.namespace.wire(subject).into_owned();
        let sent = match header_map(headers) {
            None => self.client.publish(wire, payload.into()).await,
            Some(headers) => self.client.publish_with_headers(wire, headers, payload.into()).await,
        };
        sent.map_err(|error| {
            warn!(%error, subject, "NATS publish failed");
            PortError::Unavailable(format!("publishing to {subject:?}: {error}"))
        })
    }

    async fn respond_with_headers(&self, reply: &str, headers: Headers, payload: Vec<u8>) -> Result<(), PortError> {
        validate(reply, false)?;
        let sent = match header_map(headers) {
            None => self.client.publish(reply.to_owned(), payload.into()).await,
            Some(headers) => self.client.publish_with_headers(reply.to_owned(), headers, payload.into()).await,
        };
        sent.map_err(|error| {
            warn!(%error, "NATS reply failed");
            PortError::Unavailable(format!("replying: {error}"))
        })
    }

    async fn subscribe(&self, pattern: &str) -> Result<SubjectStream, PortError> {
        validate(pattern, true)?;
        let subscriber = self.client.subscribe(self.namespace.wire(pattern).into_owned()).await.map_err(|error| {
            warn!(%error, pattern, "NATS subscribe failed");
            PortError::Unavailable(format!("subscribing to {pattern:?}: {error}"))
        })?;
        self.round_trip().await?;
        let this = self.clone();
        Ok(subscriber.map(move |message| this.local(message)).boxed())
    }

    async fn queue_subscribe(&self, pattern: &str, group: &str) -> Result<SubjectStream, PortError> {
        validate(pattern, true)?;
        if group.is_empty() || group.chars().any(char::is_whitespace) {
            return Err(PortError::Invalid(format!("invalid queue group {group:?}")));
        }
        let (subject, queue) = (self.namespace.wire(pattern).into_owned(), self.namespace.wire(group).into_owned());
        let subscriber = self.client.queue_subscribe(subject, queue).await.map_err(|error| {
            warn!(%error, pattern, group, "NATS queue subscribe failed");
            PortError::Unavailable(format!("subscribing to {pattern:?} in group {group:?}: {error}"))
        })?;
        self.round_trip().await?;
        let this = self.clone();
        Ok(subscriber.map(move |message| this.local(message)).boxed())
    }

    async fn request_with_headers(
        &self,
        subject: &str,
        headers: Headers,
        payload: Vec<u8>,
        timeout: Duration,
    ) -> Result<SubjectMessage, PortError> {
        validate(subject, false)?;
        let mut request = async_nats::Request::new().payload(payload.into()).timeout(Some(timeout));
        if let Some(headers) = header_map(headers) {
            request = request.headers(headers);
        }
        match self.client.send_request(self.namespace.wire(subject).into_owned(), request).await {
            Ok(message) => Ok(self.local(message)),
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
