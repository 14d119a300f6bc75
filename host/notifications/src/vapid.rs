//! VAPID keys (RFC 8292) on `ring`: generating a keypair for operators (`flowhost webpush vapid-keys`) and
//! checking a configured pair at start. Keys travel as base64url without padding: the public key is the
//! uncompressed P-256 point (65 bytes, `0x04 || X || Y`, what browsers take as `applicationServerKey`), the
//! private key the 32-byte scalar.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use flowhost_core::config::Secret;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

/// A usable VAPID keypair. `temporary` marks a pair generated at start under
/// `FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID` (local development; client-config stays not ready with it).
#[derive(Clone)]
pub struct VapidKeys {
    pub public_key: String,
    pub private_key: Secret,
    pub temporary: bool,
}

impl std::fmt::Debug for VapidKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidKeys")
            .field("public_key", &self.public_key)
            .field("temporary", &self.temporary)
            .finish_non_exhaustive()
    }
}

/// Decodes base64url, tolerating `=` padding (keys, and the keys of a push subscription).
pub fn decode_base64url(value: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(value.trim().trim_end_matches('=')).ok()
}

/// The raw private scalar inside the PKCS#8 v1 document `ring` generates for P-256: the DER prefix up to the
/// scalar's OCTET STRING is fixed (RFC 5915 inside RFC 5208), so the scalar sits at a known place; the caller
/// re-checks the extracted pair with `ring`.
fn private_scalar(pkcs8: &[u8]) -> Option<&[u8]> {
    const PREFIX: [u8; 36] = [
        0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06,
        0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x6d, 0x30, 0x6b, 0x02, 0x01, 0x01, 0x04, 0x20,
    ];
    pkcs8.strip_prefix(&PREFIX[..]).and_then(|rest| rest.get(..32))
}

/// A fresh keypair: (public key, private key), both base64url.
pub fn generate() -> Result<(String, String), String> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| "the system random source failed".to_owned())?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| "ring rejected its own key".to_owned())?;
    let scalar = private_scalar(pkcs8.as_ref()).ok_or("unexpected PKCS#8 layout from ring")?;
    let public = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let private = URL_SAFE_NO_PAD.encode(scalar);
    check_pair(&public, &private).map_err(|e| format!("generated pair does not check: {e}"))?;
    Ok((public, private))
}

/// Checks that `public` and `private` are a matching P-256 pair in the expected encoding; the message says
/// what is wrong without showing the private key.
pub fn check_pair(public: &str, private: &str) -> Result<(), String> {
    let public_bytes = decode_base64url(public).ok_or("the public key is not base64url")?;
    if public_bytes.len() != 65 || public_bytes[0] != 0x04 {
        return Err(format!(
            "the public key must be an uncompressed P-256 point (65 bytes starting with 0x04), got {} bytes",
            public_bytes.len()
        ));
    }
    let private_bytes = decode_base64url(private).ok_or("the private key is not base64url")?;
    if private_bytes.len() != 32 {
        return Err(format!("the private key must be 32 bytes, got {}", private_bytes.len()));
    }
    EcdsaKeyPair::from_private_key_and_public_key(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &private_bytes,
        &public_bytes,
        &SystemRandom::new(),
    )
    .map(|_| ())
    .map_err(|_| "the private key does not match the public key".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_pairs_check_and_differ() {
        let (public, private) = generate().unwrap();
        assert_eq!(decode_base64url(&public).unwrap().len(), 65);
        assert_eq!(decode_base64url(&private).unwrap().len(), 32);
        assert!(!public.contains(['+', '/', '=']) && !private.contains(['+', '/', '=']));
        check_pair(&public, &private).unwrap();
        let (other_public, other_private) = generate().unwrap();
        assert_ne!(public, other_public);
        assert!(check_pair(&public, &other_private).unwrap_err().contains("does not match"));
        assert!(check_pair(&other_public, &format!("{other_private}=")).is_ok(), "padding is tolerated");
    }

    #[test]
    fn malformed_keys_are_named() {
        let (public, private) = generate().unwrap();
        assert!(check_pair("not base64!", &private).unwrap_err().contains("public key"));
        assert!(check_pair(&public[..40], &private).unwrap_err().contains("65 bytes"));
        assert!(check_pair(&public, "AAAA").unwrap_err().contains("32 bytes"));
        assert!(!check_pair(&public, "AAAA").unwrap_err().contains(&private));
    }
}
