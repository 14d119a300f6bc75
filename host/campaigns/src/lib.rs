//! The campaign events read API (spec 002 part C): a read-only API over read models that the role keeps
//! synchronized, per tenant and per slice, from Flowhost's own stores.
//!
//! - `model`: what a campaign is (a v2 flow with campaign metadata) and its `ui_status` bucket.
//! - `read_model`: the read models' documents (database `campaigns`): rows, per-tenant aggregates, sync states.
//! - `sync`: the slices' synchronization passes and their freshness bookkeeping.
//! - `live`: the live-events slice: run completions, deliveries and interactions, and campaign engagement.
//! - `live_marks`: where deep pages of a live-event list start (marks earlier pages showed).
//! - `overlap`: where the slices' incremental reads start: the cursor less an overlap, until its window closes.
//! - `api`: the routes, their query parsing and the `{ "error": string }` envelope; `X-Request-Id` on every
//!   response.
//! - `explorer`: the OpenAPI document, the explorer page and the bearer-checked proxy path.
//! - `support`: the optional external support-case source.
//! - `metrics`: the `sync_state` gauges.
//! - `role`: the `campaigns` role.

pub mod api;
pub mod config;
pub mod explorer;
pub mod external;
pub mod list_cache;
pub mod live;
pub mod live_marks;
pub mod live_model;
pub mod metrics;
pub mod model;
mod openapi;
pub mod overlap;
pub mod read_model;
pub mod role;
pub mod source;
pub mod support;
pub mod sync;

pub use config::{CampaignsConfig, CAMPAIGNS_SETTINGS};
pub use role::CampaignsRole;
