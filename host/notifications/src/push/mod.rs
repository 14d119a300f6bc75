//! Web-push delivery, the host's side (the plugin asks; secrets stay here): RFC 8291 payload encryption
//! ([`ece`]), RFC 8292 VAPID authorization ([`jwt`]), the push-service allowlist ([`hosts`]) and the HTTPS
//! client that sends one message and classifies the answer ([`client`]).

pub mod client;
pub mod ece;
pub mod hosts;
pub mod jwt;

pub use client::{PushClient, PushMessage, PushOutcome, Urgency};
pub use hosts::{PushServiceHosts, DEFAULT_PUSH_SERVICE_HOSTS};
pub use jwt::VapidSigner;
