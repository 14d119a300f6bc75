//! `flowhost-presence`: the presence projector (spec 002 part B). Presence events from the gateway's topic are
//! projected into one document per player with a state per site. The projection itself is the bundled
//! `presence` plugin (a pure function, `plugins/presence`); this crate does the I/O around it: reading and
//! compare-and-replacing documents ([`project`]), dead letters ([`dead_letter`]), the consumer with its commits
//! and blocked partitions ([`consumer`]), the expiry sweep ([`sweep`]), metrics ([`metrics`]) and the role with
//! its operational listener ([`role`]).

pub mod config;
pub mod consumer;
pub mod dead_letter;
pub mod metrics;
pub mod project;
pub mod role;
pub mod sweep;

pub use config::{PresenceConfig, PRESENCE_DATABASE, PRESENCE_SETTINGS};
pub use role::{PresenceDocuments, PresenceRole, PresenceTopics};
