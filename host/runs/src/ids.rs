//! The identities of a run: its id (derived from the source record, so a redelivered record names the same
//! run), the idempotency key of each action invocation (the spec's `sha256(FlowRunID + NodeID)`; a rule's node,
//! run in no run, keys by the record instead), and the trace id carried from the source record through every
//! node.

use flowhost_core::digest::sha256_hex;
use flowhost_core::ports::Record;

/// The run of `flow_id` started by `record`: a UUID version 7 whose 48-bit time is the record's timestamp
/// (milliseconds since the epoch; 0 when the record has none) and whose other bits are SHA-256 over the flow and
/// the record's place (topic, partition, offset). Deterministic, so a record consumed again (after a crash before
/// its offset was committed) names the run that already exists, whatever version the flow is at by then; time
/// first, so the ids of new runs sort after the stored ones and a store's key index grows at its end instead of
/// being written all over (a tenth more runs per second on the embedded store).
pub fn run_id(flow_id: &str, record: &Record) -> String {
    let hash = record_hash(flow_id, record);
    let time = format!("{:012x}", record.timestamp_ms.clamp(0, (1 << 48) - 1));
    // RFC 9562: version 7 in the 13th digit, the variant (binary 10) in the top bits of the 17th.
    let variant = char::from_digit(8 | (u32::from(hash.as_bytes()[3]) & 3), 16).unwrap_or('8');
    format!("{}-{}-7{}-{variant}{}-{}", &time[0..8], &time[8..12], &hash[0..3], &hash[4..7], &hash[7..19])
}

/// The id an earlier build gave the same run: a UUID-formatted prefix of the same SHA-256 (the runner looks for
/// it too for records that may have started a run before an upgrade).
pub fn legacy_run_id(flow_id: &str, record: &Record) -> String {
    uuid_format(&record_hash(flow_id, record))
}

fn record_hash(flow_id: &str, record: &Record) -> String {
    sha256_hex(&[flow_id, &record.topic, &record.partition.to_string(), &record.offset.to_string()])
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

/// The idempotency key of a rule's node on a consumed record (no run): `topic/partition/offset/<rule>`, the
/// same on every attempt, written into one allocation (it is made for every event and rule of a batch).
pub fn record_idempotency_key(record: &Record, rule_id: &str) -> String {
    use std::fmt::Write;
    let mut key = String::with_capacity(record.topic.len() + rule_id.len() + 32);
    key.push_str(&record.topic);
    let _ = write!(key, "/{}/{}/", record.partition, record.offset);
    key.push_str(rule_id);
    key
}

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
    fn a_rules_key_names_the_record_and_the_rule_as_v1_did() {
        assert_eq!(record_idempotency_key(&record(2, 41, 0), "big-deposit"), "deposits/2/41/big-deposit");
    }

    fn record(partition: i32, offset: i64, timestamp_ms: i64) -> Record {
        Record {
            topic: "deposits".into(),
            partition,
            offset,
            key: None,
            value: Vec::new(),
            headers: Vec::new(),
            timestamp_ms,
        }
    }

    #[test]
    fn run_ids_are_stable_time_ordered_uuids_per_record_and_flow() {
        let at = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        let id = run_id("f1", &record(0, 42, at));
        assert_eq!(id, run_id("f1", &record(0, 42, at)));
        assert_ne!(id, run_id("f2", &record(0, 42, at)));
        assert_ne!(id, run_id("f1", &record(1, 42, at)));
        let uuid = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(uuid.get_version_num(), 7);
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
        let (seconds, nanos) = uuid.get_timestamp().unwrap().to_unix();
        assert_eq!(seconds as i64 * 1000 + i64::from(nanos / 1_000_000), at);
        assert!(run_id("f1", &record(0, 43, at + 1)) > id, "later records sort after");
        assert!(run_id("f1", &record(0, 0, -1)).starts_with("00000000-0000-7"), "no timestamp: time zero");
        let legacy = legacy_run_id("f1", &record(0, 42, at));
        assert_eq!(legacy, "f3e84dcf-19ad-0fbc-d0b0-2e332b5b5d93", "the id earlier builds gave this run");
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
