//! `flowhost-webpush`: the web-push notification service as a domain, without HTTP. It owns the caller policy
//! of the push-platform routes ([`policy`]), interaction tokens ([`token`]), VAPID keys ([`vapid`]) and the
//! target-host policy of rendered URLs ([`targets`]). The push-api role (`host/push`) is thin handlers over
//! it; the sender role and Studio reuse it without HTTP.

mod error;
pub mod events;
pub mod fields;
pub mod policy;
pub mod records;
pub mod retention;
pub mod subscriptions;
pub mod targets;
pub mod templates;
pub mod token;
pub mod vapid;

pub use error::{FieldError, WebPushError};

/// The delivered-payload schema version (`payload_version`).
pub const PAYLOAD_VERSION: &str = "v1";
