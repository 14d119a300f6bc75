//! `flowhost-fuzz`: the bodies of Flowhost's fuzz targets, one function per kind of untrusted input. Each feeds
//! the bytes to the product's own entry point for that input (the function the HTTP handler or the consumer
//! calls) and asserts only what must hold for any input: no panic, no hang, and where it is cheap a round trip or
//! an agreement between two parts that must agree (what the gateway accepts, the projector accepts).
//!
//! Three drivers share these functions by name ([`TARGETS`]): the cargo-fuzz project (`cargo-fuzz/`, libFuzzer,
//! run by `run.sh`), and `tests/replay.rs`, which runs every kept input (`corpus/<target>/`,
//! `regressions/<target>/`) through them under `cargo test` on stable. See README.md.

mod components;
mod context;
mod expressions;
mod flows;
mod gateway;
mod presence;
mod push;
mod services;
mod tokens;

pub use components::{component, manifest};
pub use context::remove_scratch;
pub use expressions::cel_source;
pub use flows::flow_v2_body;
pub use gateway::origin_map;
pub use presence::presence_envelope;
pub use push::push_subscription_keys;
pub use services::{service_envelope, service_reply};
pub use tokens::{connect_token, interaction_token};

/// A fuzz target: takes any bytes, panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name: the name of its cargo-fuzz binary and of its `corpus/` and `regressions/` folders.
pub const TARGETS: [(&str, Target); 11] = [
    ("cel_source", cel_source),
    ("manifest", manifest),
    ("component", component),
    ("flow_v2_body", flow_v2_body),
    ("origin_map", origin_map),
    ("presence_envelope", presence_envelope),
    ("push_subscription_keys", push_subscription_keys),
    ("interaction_token", interaction_token),
    ("connect_token", connect_token),
    ("service_envelope", service_envelope),
    ("service_reply", service_reply),
];
