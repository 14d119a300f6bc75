//! Small shared encodings: content digests and ISO 8601 timestamps, so every surface writes them alike.

use sha2::{Digest, Sha256};

/// SHA-256 over length-prefixed parts, in lowercase hex: `("ab", "c")` and `("a", "bc")` differ.
pub fn sha256_hex(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

/// The plain SHA-256 of `bytes`, in lowercase hex (what `sha256sum` prints for a file).
pub fn sha256_bytes_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// An instant (epoch milliseconds) as ISO 8601 UTC with milliseconds: `2026-01-31T12:00:00.000Z`.
pub fn iso_utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The idempotency key of the invocations of `node_id` in `run_id`: the lowercase hex SHA-256 of the UTF-8
/// bytes of the run id immediately followed by the UTF-8 bytes of the node id, nothing between them
/// (`sha256(FlowRunID + NodeID)`). Every attempt and every redelivery of that step carries the same key.
pub fn idempotency_key(run_id: &str, node_id: &str) -> String {
    let mut bytes = Vec::with_capacity(run_id.len() + node_id.len());
    bytes.extend_from_slice(run_id.as_bytes());
    bytes.extend_from_slice(node_id.as_bytes());
    sha256_bytes_hex(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_separate_parts_and_times_are_utc() {
        assert_ne!(sha256_hex(&["ab", "c"]), sha256_hex(&["a", "bc"]));
        assert_eq!(sha256_hex(&["x"]).len(), 64);
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
    }
}
