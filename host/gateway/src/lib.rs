//! `flowhost-gateway`: the edge analytics gateway (spec 002, part A). Domain modules know no HTTP: the origin
//! map and its generator ([`origins`]), who the client is ([`client_ip`]), keyed cache identities ([`keys`]),
//! limits ([`limits`]), player validation ([`player`]), the browser event and the published envelope
//! ([`event`]), the durable queue and the worker ([`pipeline`]). The HTTP surfaces are thin: the public route
//! ([`edge`]) and its batching client of internal ingest ([`forward`]), internal ingest and queue administration ([`ingest`]), and the roles that assemble them
//! ([`role`]).

pub mod client_ip;
pub mod config;
pub mod edge;
pub mod event;
pub mod forward;
pub mod ingest;
pub mod keys;
pub mod limits;
pub mod metrics;
pub mod origins;
pub mod pipeline;
pub mod player;
pub mod role;

pub use config::{
    GatewayConfig, GatewayParts, ScopeLimits, DEFAULT_INVALID_STATUSES, GATEWAY_SETTINGS, MIN_CACHE_HMAC_KEY_BYTES,
};
pub use role::{GatewayAdminRole, GatewayCache, GatewayEdgeRole, GatewayIngestRole, GatewayRole, GatewayWorkerRole};
