//! Dead letters (spec 002 part B, rules 3 and 4): a permanently invalid record goes to its input topic's own
//! dead-letter topic (chosen from the input topic before decoding, so a malformed envelope reaches it too), with
//! the exact original bytes as the value, `dlq_id` (`original_topic:partition:offset`) as the key, and the eight
//! headers. A crash between the dead-letter write and the commit can write one twice: consumers deduplicate by
//! `dlq_id`.

use flowhost_core::digest::iso_utc;
use flowhost_core::ports::{OutRecord, Record};

/// The input topic and its dead-letter topic.
pub const INPUT_TOPIC: &str = "gateway.player-casino-presence.v1";
pub const DEAD_LETTER_TOPIC: &str = "presence.player-casino-presence.dlq.v1";
/// The longest `error_detail` header.
pub const MAX_DETAIL_BYTES: usize = 256;

/// The dead-letter topic of an input topic: each input topic owns one.
pub fn dead_letter_topic(input: &str) -> String {
    if input == INPUT_TOPIC {
        DEAD_LETTER_TOPIC.to_owned()
    } else {
        // Another route (a future projector, or a test's own input): `<input>.dlq`.
        format!("{input}.dlq")
    }
}

/// `detail` cut to at most [`MAX_DETAIL_BYTES`] on a character boundary.
fn capped(detail: &str) -> &str {
    if detail.len() <= MAX_DETAIL_BYTES {
        return detail;
    }
    let mut end = MAX_DETAIL_BYTES;
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    &detail[..end]
}

/// The event id of a record when one can be read from it (a valid UUID), else empty.
fn event_id(value: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(value)
        .ok()
        .and_then(|v| v.pointer("/metadata/event_id").and_then(|id| id.as_str()).map(str::to_owned))
        .filter(|id| uuid::Uuid::parse_str(id).is_ok())
        .unwrap_or_default()
}

/// The dead letter of `record`, refused with `code` (bounded) and `detail`, at `now_ms`.
pub fn dead_letter(record: &Record, code: &str, detail: &str, now_ms: i64) -> OutRecord {
    let dlq_id = format!("{}:{}:{}", record.topic, record.partition, record.offset);
    OutRecord::new(dead_letter_topic(&record.topic), record.value.clone())
        .with_key(dlq_id.clone())
        .with_header("dlq_id", dlq_id)
        .with_header("original_topic", record.topic.clone())
        .with_header("original_partition", record.partition.to_string())
        .with_header("original_offset", record.offset.to_string())
        .with_header("event_id", event_id(&record.value))
        .with_header("error_code", code.to_owned())
        .with_header("error_detail", capped(detail).to_owned())
        .with_header("failed_at", iso_utc(now_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: &[u8]) -> Record {
        Record {
            topic: INPUT_TOPIC.to_owned(),
            partition: 3,
            offset: 42,
            key: None,
            value: value.to_vec(),
            headers: Vec::new(),
            timestamp_ms: 0,
        }
    }

    #[test]
    fn a_dead_letter_keeps_the_bytes_and_carries_the_eight_headers() {
        let bytes = b"{\"metadata\": {\"event_id\": \"6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e\"}, \"oops\"";
        let letter = dead_letter(&record(bytes), "malformed_json", &"x".repeat(300), 1_764_000_000_000);
        assert_eq!(letter.topic, DEAD_LETTER_TOPIC);
        assert_eq!(letter.value, bytes);
        assert_eq!(letter.key.as_deref(), Some(&b"gateway.player-casino-presence.v1:3:42"[..]));
        let header = |name: &str| {
            letter.headers.iter().find(|h| h.key == name).map(|h| String::from_utf8(h.value.clone()).unwrap()).unwrap()
        };
        assert_eq!(letter.headers.len(), 8);
        assert_eq!(header("dlq_id"), "gateway.player-casino-presence.v1:3:42");
        assert_eq!((header("original_partition"), header("original_offset")), ("3".into(), "42".into()));
        assert_eq!(header("event_id"), "", "not extractable from a malformed envelope");
        assert_eq!(header("error_detail").len(), MAX_DETAIL_BYTES);
        assert_eq!(header("failed_at"), "2025-11-24T16:00:00.000Z");
        let good = br#"{"metadata": {"event_id": "6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e"}}"#;
        let letter = dead_letter(&record(good), "invalid_action", "é".repeat(200).as_str(), 0);
        assert!(letter
            .headers
            .iter()
            .any(|h| h.key == "event_id" && h.value == b"6f1c1e8a-8f7e-4a53-9d55-2f1a3b4c5d6e"));
        assert!(letter.headers.iter().any(|h| h.key == "error_detail" && h.value.len() == 256));
    }
}
