//! Small shared encodings: content digests, token digests and ISO 8601 timestamps, so every surface writes them
//! alike.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Secret;

/// A configured bearer token (admin, editor, metrics, campaigns), kept only as its SHA-256 digest and compared in
/// constant time: neither the comparison's timing nor a `Debug` print tells anything about it (a digest of a weak
/// token can still be brute-forced offline, so `Debug` hides the digest too).
#[derive(Clone, Copy)]
pub struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub fn new(token: &Secret) -> TokenDigest {
        TokenDigest(Sha256::digest(token.expose().as_bytes()).into())
    }

    /// Whether `presented` is the token (constant time in the token's content and length).
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        bool::from(digest.ct_eq(&self.0))
    }

    /// Whether an `Authorization` header value is `Bearer <token>`.
    pub fn matches_bearer(&self, authorization: Option<&str>) -> bool {
        authorization.and_then(|value| value.strip_prefix("Bearer ")).is_some_and(|token| self.matches(token))
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(<redacted>)")
    }
}

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

/// Lowercase hex in one allocation (run ids, idempotency and trace keys are made for every run and node).
fn hex(digest: &[u8]) -> String {
    hex::encode(digest)
}

/// An instant (epoch milliseconds) as ISO 8601 UTC with milliseconds: `2026-01-31T12:00:00.000Z`.
///
/// Every run and node record carries a few of these, so the text up to the second is formatted once per second
/// per thread and the milliseconds appended (chrono's formatter per call was 18% of starting a run).
pub fn iso_utc(ms: i64) -> String {
    thread_local! {
        /// The last second formatted on this thread, and its text up to the seconds.
        static LAST_SECOND: std::cell::RefCell<Option<(i64, String)>> = const { std::cell::RefCell::new(None) };
    }
    let Some(instant) = chrono::DateTime::from_timestamp_millis(ms) else {
        return iso_utc_slow(chrono::DateTime::default());
    };
    let second = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    LAST_SECOND.with(|last| {
        let mut last = last.borrow_mut();
        let prefix = match &*last {
            Some((cached, prefix)) if *cached == second => prefix,
            _ => {
                let text = iso_utc_slow(instant);
                // Everything before the `.` of the milliseconds.
                let prefix = text[..text.len() - 5].to_owned();
                &last.insert((second, prefix)).1
            }
        };
        let mut text = String::with_capacity(prefix.len() + 5);
        text.push_str(prefix);
        text.push('.');
        text.push(char::from(b'0' + (millis / 100) as u8));
        text.push(char::from(b'0' + (millis / 10 % 10) as u8));
        text.push(char::from(b'0' + (millis % 10) as u8));
        text.push('Z');
        text
    })
}

fn iso_utc_slow(instant: chrono::DateTime<chrono::Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
    fn iso_utc_matches_chrono_across_seconds_and_ranges() {
        let chrono_text = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let mut instants = vec![0, 1, 999, 1000, -1, -999, -1000, -1001, 1_769_860_800_000, i64::MAX, i64::MIN];
        instants.extend((0..3000).map(|step| 1_769_860_799_000 + step * 7));
        instants.extend([253_402_300_799_999, 253_402_300_800_000, -62_135_596_800_001]);
        for ms in instants {
            assert_eq!(iso_utc(ms), chrono_text(ms), "{ms}");
        }
        assert_eq!(iso_utc(1_769_860_800_007), "2026-01-31T12:00:00.007Z");
    }

    #[test]
    fn a_token_digest_matches_only_the_whole_token() {
        let token = TokenDigest::new(&Secret::new("s3cret-admin"));
        assert!(token.matches("s3cret-admin"));
        for wrong in ["s3cret-admin ", "s3cret-admi", "", "S3CRET-ADMIN"] {
            assert!(!token.matches(wrong), "{wrong}");
        }
        assert!(token.matches_bearer(Some("Bearer s3cret-admin")));
        for wrong in
            [None, Some("bearer s3cret-admin"), Some("s3cret-admin"), Some("Bearer "), Some("Bearer  s3cret-admin")]
        {
            assert!(!token.matches_bearer(wrong), "{wrong:?}");
        }
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn digests_separate_parts_and_times_are_utc() {
        assert_ne!(sha256_hex(&["ab", "c"]), sha256_hex(&["a", "bc"]));
        assert_eq!(sha256_hex(&["x"]).len(), 64);
        assert_eq!(iso_utc(0), "1970-01-01T00:00:00.000Z");
    }
}
