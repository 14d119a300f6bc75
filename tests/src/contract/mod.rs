//! The port contract suites: one module per port, each a set of `pub async fn` checks that take the port as a
//! trait object and assert what the port's doc comments promise. The embedded defaults and the distributed
//! backends (MongoDB, Kafka, NATS, Redis) run the same checks (`tests/tests/contract_*.rs`), so a backend that
//! passes is interchangeable with the others. `namespaces` checks that deployments sharing a server (NATS
//! accounts, or the distributed adapters' name prefixes) never see each other. `source` checks the one
//! consume/commit loop (`flowhost_core::source`) over each topics backend.

pub mod cache;
pub mod documents;
pub mod namespaces;
pub mod queue;
pub mod secrets;
pub mod source;
pub mod subjects;
pub mod topics;
