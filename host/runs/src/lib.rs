//! `flowhost-runs`: the executor. v1 rules and released v2 flows compile to flow plans and run from one
//! consumer. A source event goes through every rule its topic and event type match, recorded in no run (the v1
//! contract), and starts a run of every flow they start; the run walks the released version's graph
//! (conditions, rate limits, mappings, lookups, outputs, service segments and actions, plugin node kinds),
//! records every node's input, output, outcome, attempts and timing, retries failed steps with backoff without
//! holding up other runs, and dead-letters terminal failures.
//!
//! - [`model`]: the run, node records, pending steps, dead letters, completion events;
//! - [`ids`]: run ids, the idempotency key `sha256(run_id + node_id)`, trace ids;
//! - [`plan`]: a released version compiled for running, and every runnable flow indexed by source;
//! - [`execute`]: advancing a run through its plan, and what that must make durable;
//! - [`nodes`]: the node-kinds port: conditions and mappings natively or as components (`engine.node_kinds`);
//! - [`services`]: calls into services: in-process components, external data sources;
//! - [`call`]: how such a call fails ([`CallError`]: the outcome class and what the callee said);
//! - [`effects`]: publishing, mirroring and storing in the order that keeps delivery at-least-once;
//! - [`store`]: runs and dead letters in the documents port;
//! - [`replay`]: replaying dead letters to the run's version or the latest release;
//! - [`reply`]: external services' replies, whichever channel they come on;
//! - [`retention`]: the sweep that removes runs and dead letters past their retention;
//! - [`rules`]: v1 rules as plans: the rule cache, a batch through it, its delivery and metrics;
//! - [`group`]: the executor's consumer group, and adopting the flows' former offsets once;
//! - [`runner`]: the tasks the engine role runs (rule and plan reload, the source loop, the scheduler);
//! - [`role`]: the engine role.

pub mod call;
pub mod config;
pub mod effects;
pub mod endpoint;
pub mod execute;
pub mod group;
pub mod ids;
pub mod metrics;
pub mod model;
pub mod nodes;
pub mod plan;
pub mod replay;
pub mod reply;
pub mod retention;
pub mod role;
pub mod rules;
pub mod runner;
pub mod services;
pub mod store;

pub use call::CallError;
pub use config::{EngineConfig, NodeKindsMode, NodePayloads, RetryPolicy, RunStorage, ENGINE_SETTINGS};
pub use endpoint::ServiceEndpoint;
pub use execute::ServiceCalls;
pub use metrics::RunMetrics;
pub use model::{
    CompletionEvent, DeadLetter, DeadLetterStatus, InboundEnvelope, ReplayTarget, ReplyEnvelope, Run, RunStatus,
    RunSummary,
};
pub use nodes::{ComponentNodes, NativeNodes, NodeFailure, NodeKinds};
pub use role::EngineRole;
pub use rules::batch::{process_batch, process_batch_with, BatchOutcome, Destinations};
pub use rules::{CompiledRule, EngineMetrics, ExpressionMemo, RuleSet};
pub use runner::{Runner, RunnerConfig, RunnerStatus};
pub use services::Services;
pub use store::{RunPage, Runs, RunsError};
