//! The core of Flowhost: the domain model of the flow runtime, the ports (traits) every external system sits
//! behind, the typed configuration and the clock. Nothing here knows HTTP, SQLite, MongoDB, Kafka, NATS or
//! Redis; adapters implement the ports and the engine and API use them through [`Ports`].

pub mod backoff;
pub mod clock;
pub mod collections;
pub mod config;
pub mod digest;
pub mod envelope;
pub mod flows;
pub mod model;
pub mod notify;
pub mod placeholders;
pub mod ports;
pub mod secret;
pub mod settings;
pub mod signing;
pub mod source;
pub mod stored;

pub use clock::{Clock, ManualClock, SystemClock};
pub use ports::{Cache, DocumentStore, PortError, Ports, Subjects, Topics};
