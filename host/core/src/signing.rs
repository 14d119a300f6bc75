//! Service transport signatures (`FLOWHOST_SERVICE_SIGNING_KEY`): with a key, every message Flowhost exchanges
//! with services on their transports (inbound envelopes, replies, data-source requests and answers, flow
//! broadcasts; over NATS, Kafka and HTTP alike) carries the header `flowhost-signature: v1=<hex>`, the
//! HMAC-SHA256 of the message's exact bytes under the key, and what Flowhost receives there without a valid one
//! is refused. A bus client that does not hold the key can then neither pose as Flowhost to a service nor as a
//! service to Flowhost, nor read data sources. Without a key nothing is signed nor checked (the
//! specification's behaviour; broker ACLs are then the only guard).
//!
//! An HTTP request without a body (a lookup's `GET`) is signed over its path and query.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::secret::Secret;

/// The header that carries a signature, on every transport.
pub const SIGNATURE_HEADER: &str = "flowhost-signature";
/// The shortest key accepted.
pub const MIN_KEY_BYTES: usize = 32;

/// The signing key of this deployment's service transports, or none. Cheap to clone.
#[derive(Clone, Default)]
pub struct ServiceSigning {
    key: Option<std::sync::Arc<Secret>>,
}

impl std::fmt::Debug for ServiceSigning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSigning").field("enabled", &self.key.is_some()).finish()
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the message carries no flowhost-signature header")]
    Missing,
    #[error("the message's flowhost-signature does not verify")]
    Invalid,
}

impl ServiceSigning {
    /// Signing with `key` (`None`: off).
    pub fn new(key: Option<&Secret>) -> ServiceSigning {
        ServiceSigning { key: key.cloned().map(std::sync::Arc::new) }
    }

    pub fn is_enabled(&self) -> bool {
        self.key.is_some()
    }

    fn mac(key: &Secret) -> Hmac<Sha256> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(key.expose().as_bytes()).expect("HMAC takes keys of any length")
    }

    /// The signature header of `body` (`None` without a key).
    pub fn header(&self, body: &[u8]) -> Option<(String, String)> {
        let key = self.key.as_ref()?;
        let mut mac = Self::mac(key);
        mac.update(body);
        Some((SIGNATURE_HEADER.to_owned(), format!("v1={}", hex::encode(mac.finalize().into_bytes()))))
    }

    /// The signature header of `body` as a list of headers (empty without a key).
    pub fn headers(&self, body: &[u8]) -> Vec<(String, String)> {
        self.header(body).into_iter().collect()
    }

    /// Checks `signature` (the header's value, if any) against `body` in constant time. Without a key every
    /// message passes.
    pub fn verify(&self, signature: Option<&str>, body: &[u8]) -> Result<(), SignatureError> {
        let Some(key) = &self.key else { return Ok(()) };
        let signature = signature.ok_or(SignatureError::Missing)?;
        let hex = signature.trim().strip_prefix("v1=").ok_or(SignatureError::Invalid)?;
        let bytes = hex::decode(hex).map_err(|_| SignatureError::Invalid)?;
        let mut mac = Self::mac(key);
        mac.update(body);
        mac.verify_slice(&bytes).map_err(|_| SignatureError::Invalid)
    }

    /// [`ServiceSigning::verify`] with the signature looked up in `headers` (names compared case-insensitively).
    pub fn verify_headers<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: &[u8],
    ) -> Result<(), SignatureError> {
        let signature =
            headers.into_iter().find(|(name, _)| name.eq_ignore_ascii_case(SIGNATURE_HEADER)).map(|(_, v)| v);
        self.verify(signature, body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_its_bytes_only() {
        let signing = ServiceSigning::new(Some(&Secret::new("k".repeat(32))));
        let (name, value) = signing.header(b"{\"run_id\":\"r\"}").unwrap();
        assert_eq!(name, SIGNATURE_HEADER);
        assert!(value.starts_with("v1=") && value.len() == 3 + 64, "{value}");
        assert_eq!(signing.verify(Some(&value), b"{\"run_id\":\"r\"}"), Ok(()));
        assert_eq!(signing.verify(Some(&value), b"{\"run_id\":\"s\"}"), Err(SignatureError::Invalid));
        assert_eq!(signing.verify(None, b"x"), Err(SignatureError::Missing));
        for forged in ["v1=00", "v2=abcd", "v1=zz", "", &value[..value.len() - 1]] {
            assert_eq!(signing.verify(Some(forged), b"{\"run_id\":\"r\"}"), Err(SignatureError::Invalid), "{forged}");
        }
        let other = ServiceSigning::new(Some(&Secret::new("o".repeat(32))));
        assert_eq!(other.verify(Some(&value), b"{\"run_id\":\"r\"}"), Err(SignatureError::Invalid));
        let headers = [("Flowhost-Signature", value.as_str())];
        assert_eq!(signing.verify_headers(headers, b"{\"run_id\":\"r\"}"), Ok(()));
    }

    #[test]
    fn without_a_key_nothing_is_signed_or_checked() {
        let off = ServiceSigning::default();
        assert!(!off.is_enabled());
        assert_eq!(off.header(b"x"), None);
        assert_eq!(off.verify(None, b"x"), Ok(()));
        assert!(!format!("{:?}", ServiceSigning::new(Some(&Secret::new("secret-value".repeat(3))))).contains("secret"));
    }
}
