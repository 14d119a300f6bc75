//! `flow_v2_body`: the body of `POST /api/v2/flows`, `PUT /api/v2/flows/{id}` and `/validate-draft`, taken the
//! way a save and a release take it: parsed, validated against dependencies (a schema, an event source and a
//! registered service, see `context`), and, when nothing blocks a release, normalized as the released version,
//! split into the broadcast's segments and compiled into the plan the runner executes.

use flowhost_flows::{broadcast, normalize, referenced_services, validate, FlowInput, FlowVersion, Report};
use flowhost_runs::plan::FlowPlan;

use crate::context::context;

pub fn flow_v2_body(data: &[u8]) {
    let Ok(input) = serde_json::from_slice::<FlowInput>(data) else { return };
    let deps = &context().deps;
    let body = input.body;
    let report = Report::new(validate(&body, deps));
    if !report.blocking().is_empty() {
        return;
    }
    let normalized = normalize(&body, deps);
    // Normalizing what is already normalized changes nothing (a release of a released body is the same).
    assert_eq!(normalize(&normalized, deps), normalized, "normalization is not idempotent");
    let services = referenced_services(&normalized);
    for service in &services {
        let _ = broadcast::segments_of(&normalized, service);
    }
    let version = FlowVersion {
        flow_id: "fuzzed".into(),
        version: 1,
        body: normalized,
        body_hash: String::new(),
        services,
        released_at: String::new(),
        released_by: "fuzz".into(),
        warnings: Vec::new(),
        acknowledged_warnings: Vec::new(),
        unacknowledged_warnings: Vec::new(),
    };
    // A flow that may run but cannot is refused with a reason; only a panic is a bug.
    let _ = FlowPlan::compile("fuzzed", &version, deps);
}
