//! `flowhost-flows`: v2 flows as a domain, without HTTP. A v2 flow is a graph of typed nodes (source,
//! condition, rate-limit, mapping, lookup, output-topic, service segment, action) edited as a draft and
//! released as immutable, normalized versions.
//!
//! - [`model`]: the body, the stored flow, versions, release attempts, the edit lock;
//! - [`validate()`]: the one validation engine (draft validation, the validate route, save, release and the
//!   drift pass), over [`Dependencies`] loaded fresh each time;
//! - [`normalize()`]: what a release stores;
//! - [`Flows`]: the operations the admin API exposes (save, release, versions, locks, delete);
//! - [`drift`]: re-validation of released flows when a service's active manifest changes, and the task that
//!   runs it;
//! - [`broadcast`]: the flow broadcast telling each service which released flows target it.

pub mod broadcast;
pub mod deps;
pub mod drift;
pub mod issues;
pub mod model;
mod normalize;
mod schema;
mod store;
mod validate;

pub use deps::{
    active_service, placeable_node_kinds, ActiveService, Dependencies, NodeKindMissing, PlaceableNodeKind, IN_PROCESS,
};
pub use issues::{Code, Issue, Report, Severity};
pub use model::{
    CampaignMeta, EditLock, FlowBody, FlowRecord, FlowStatus, FlowSummary, FlowVersion, Node, NodeKind, ReleaseAttempt,
};
pub use normalize::normalize;
pub use schema::body_schema;
pub use store::{FlowInput, Flows, LOCK_TTL_DEFAULT_SECONDS, LOCK_TTL_MAX_SECONDS};
pub use validate::{node_fields, referenced_services, retarget_topics, validate, ACTION_RESULT_FIELD};

use flowhost_core::ports::PortError;

/// Why a flow operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("flow {0:?} not found")]
    NotFound(String),
    #[error("flow {0:?} is a v1 flow; use /api/v1/flows")]
    NotV2(String),
    #[error("flow {0:?} already exists")]
    Exists(String),
    #[error("flow {0:?} has no released version")]
    NotReleased(String),
    #[error("flow {flow_id:?} has no version {version}")]
    VersionNotFound { flow_id: String, version: u64 },
    /// Another editor holds the draft.
    #[error("the draft is being edited by {} until {}", .0.holder, .0.expires_at)]
    Locked(EditLock),
    /// Blocking issues (with the warning codes the request did not acknowledge, for the editor's information).
    #[error("release blocked: {}", blocked_summary(.report, .unacknowledged))]
    ReleaseBlocked { report: Report, unacknowledged: Vec<String> },
    /// A request field is wrong: the field (a JSON Pointer into the request) and why.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// Another request changed the flow at the same time, more often than retries absorb.
    #[error("flow {0:?} was changed concurrently; retry")]
    Concurrent(String),
    #[error(transparent)]
    Storage(#[from] PortError),
}

fn blocked_summary(report: &Report, unacknowledged: &[String]) -> String {
    let mut parts: Vec<String> = report.errors.clone();
    if !unacknowledged.is_empty() {
        parts.push(format!("unacknowledged warnings: {}", unacknowledged.join(", ")));
    }
    parts.join("; ")
}
