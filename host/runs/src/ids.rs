//! The identities of a run: its id (derived from the source record, so a redelivered record names the same
//! run), the idempotency key of each action invocation (the spec's `sha256(FlowRunID + NodeID)`), and the trace
//! id carried from the source record through every node.

use flowhost_core::digest::sha256_hex;
use flowhost_core::ports::Record;

/// The run of `flow_id` started by the record at `topic`/`partition`/`offset`: a UUID-formatted prefix of
/// SHA-256 over the length-prefixed parts. Deterministic, so a record consumed again (after a crash before its
/// offset was committed) names the run that already exists, whatever version the flow is at by then.
pub fn run_id(flow_id: &str, topic: &str, partition: i32, offset: i64) -> String {
    uuid_format(&sha256_hex(&[flow_id, topic, &partition.to_string(), &offset.to_string()]))
}

/// The run a replay of `dead_letter_id` to the latest release starts (its `n`th such replay).
pub fn replay_run_id(dead_letter_id: &str, n: usize) -> String {
    uuid_format(&sha256_hex(&["replay", dead_letter_id, &n.to_string()]))
}

/// The id of the dead letter of `node_id` in `run_id` (path-safe, the same on every redelivery).
pub fn dead_letter_id(run_id: &str, node_id: &str) -> String {
    format!("dl-{}", &sha256_hex(&["dead-letter", run_id, node_id])[..32])
}

pub use flowhost_core::digest::idempotency_key;

/// The trace id of a run started by `record`: the trace id of its W3C `traceparent` header when it has a valid
/// one, else 32 hex digits derived from where the record sits (the same on every redelivery).
pub fn trace_id(record: &Record) -> String {
    record
        .header("traceparent")
        .and_then(|value| std::str::from_utf8(value).ok())
        .and_then(trace_id_of_traceparent)
        .unwrap_or_else(|| {
            sha256_hex(&["trace", &record.topic, &record.partition.to_string(), &record.offset.to_string()])[..32]
                .to_owned()
        })
}

/// The trace id of a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`), unless it is malformed or all zero.
pub fn trace_id_of_traceparent(value: &str) -> Option<String> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let valid = hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2) && trace.bytes().any(|b| b != b'0');
    valid.then(|| trace.to_ascii_lowercase())
}

/// A `traceparent` header value for `trace_id` with a span id derived from `span_seed` (the run and node).
pub fn traceparent(trace_id: &str, span_seed: &str) -> String {
    format!("00-{trace_id}-{}-01", &sha256_hex(&["span", span_seed])[..16])
}

fn uuid_format(hex: &str) -> String {
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idempotency_key_is_the_sha256_of_the_two_ids_joined() {
        // printf 'run-1node-a' | sha256sum
        assert_eq!(
            idempotency_key("run-1", "node-a"),
            "58e9451eb11ddc6a77bfcfce74c6d56ab35cbbb995d217c34ed2656159118516"
        );
    }

    #[test]
    fn run_ids_are_stable_uuids_per_record_and_flow() {
        let id = run_id("f1", "deposits", 0, 42);
        assert_eq!(id, run_id("f1", "deposits", 0, 42));
        assert_ne!(id, run_id("f2", "deposits", 0, 42));
        assert_ne!(id, run_id("f1", "deposits", 1, 42));
        assert_eq!(id.len(), 36);
        assert!(uuid::Uuid::parse_str(&id).is_ok());
    }

    #[test]
    fn traceparent_is_read_and_written() {
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(trace_id_of_traceparent(parent).as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(trace_id_of_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), None);
        assert_eq!(trace_id_of_traceparent("garbage"), None);
        let written = traceparent("4bf92f3577b34da6a3ce929d0e0e4736", "run/node");
        assert_eq!(trace_id_of_traceparent(&written).as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
    }
}
