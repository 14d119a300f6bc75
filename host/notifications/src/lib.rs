//! `flowhost-notifications`: the web-push notification service as a domain, without HTTP. It owns templates and their
//! rendering ([`templates`]), in-app inboxes and their delivery subject ([`inapp`]), the stored records and how they are keyed ([`records`]: activity, tenants),
//! subscriptions ([`subscriptions`]), interaction events ([`events`]), interaction tokens ([`token`]), VAPID
//! keys ([`vapid`]), web-push delivery ([`push`]: encryption, VAPID signing, the push-service allowlist, the HTTPS
//! client), the sender that delivers what the `notifications` plugin asks for ([`sender`]), the target-host
//! policy of rendered URLs ([`targets`]), the push-platform caller policy
//! ([`policy`]), the retention sweep ([`retention`]) and the field validator its inputs go through
//! ([`fields`]). Its errors ([`WebPushError`], [`token::TokenError`], [`policy::PolicyError`]) carry no status
//! codes. Everything works on the ports (`flowhost_core::Ports`), never on a backend.
//!
//! The push-api role (`host/push-api`) is thin handlers over this crate: request parsing, authentication, and the
//! mapping of these errors to its HTTP envelope. The sender role and Studio reuse it without HTTP.

mod channel;
mod error;
pub mod events;
pub mod fields;
pub mod inapp;
pub mod metrics;
pub mod policy;
pub mod push;
pub mod records;
pub mod retention;
pub mod sender;
pub mod subscriptions;
pub mod targets;
pub mod templates;
pub mod token;
pub mod vapid;

pub use channel::Channel;
pub use error::{FieldError, WebPushError};

/// The delivered-payload schema version (`payload_version`).
pub const PAYLOAD_VERSION: &str = "v1";
