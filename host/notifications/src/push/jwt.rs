//! The VAPID authorization of a push request (RFC 8292): an ES256 JWT `{"aud": <push service origin>, "exp",
//! "sub"}` signed with the VAPID private key, sent as `Authorization: vapid t=<jwt>, k=<public key>`. Signing
//! costs more than the rest of a message, so [`VapidSigner`] keeps one header per push-service origin until it
//! is within [`REFRESH_BEFORE`] of its expiry. The private key stays in this type: it is never logged, never
//! shown in `Debug`, never handed to a plugin.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use flowhost_core::Clock;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

use crate::vapid::{decode_base64url, VapidKeys};

/// How long a token is valid (RFC 8292 allows at most 24 hours).
pub const TOKEN_LIFETIME_MS: i64 = 12 * 3600 * 1000;
/// A cached header is replaced when it expires within this.
pub const REFRESH_BEFORE_MS: i64 = 3600 * 1000;

/// Signs VAPID headers and caches them per origin (see the module documentation).
pub struct VapidSigner {
    pair: EcdsaKeyPair,
    public_key: String,
    subject: String,
    clock: Arc<dyn Clock>,
    rng: SystemRandom,
    cache: Mutex<HashMap<String, (String, i64)>>,
}

impl std::fmt::Debug for VapidSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VapidSigner")
            .field("public_key", &self.public_key)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl VapidSigner {
    /// A signer for `keys`, naming `subject` (a `mailto:` or `https:` URI) as the contact.
    pub fn new(keys: &VapidKeys, subject: &str, clock: Arc<dyn Clock>) -> Result<VapidSigner, String> {
        if !(subject.starts_with("mailto:") || subject.starts_with("https:")) {
            return Err(format!("the VAPID subject must be a mailto: or https: URI, got {subject:?}"));
        }
        let public = decode_base64url(&keys.public_key).ok_or("the VAPID public key is not base64url")?;
        let private = decode_base64url(keys.private_key.expose()).ok_or("the VAPID private key is not base64url")?;
        let rng = SystemRandom::new();
        let pair =
            EcdsaKeyPair::from_private_key_and_public_key(&ECDSA_P256_SHA256_FIXED_SIGNING, &private, &public, &rng)
                .map_err(|_| "the VAPID keys are not a matching P-256 pair".to_owned())?;
        Ok(VapidSigner {
            pair,
            public_key: keys.public_key.clone(),
            subject: subject.to_owned(),
            clock,
            rng,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The `Authorization` header value for a push to `endpoint`'s origin.
    pub fn authorization(&self, origin: &str) -> Result<String, String> {
        let now = self.clock.now_ms();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((header, expires_ms)) = cache.get(origin) {
            if *expires_ms - now > REFRESH_BEFORE_MS {
                return Ok(header.clone());
            }
        }
        let expires_ms = now + TOKEN_LIFETIME_MS;
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({ "aud": origin, "exp": expires_ms / 1000, "sub": self.subject });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let signature =
            self.pair.sign(&self.rng, signing_input.as_bytes()).map_err(|_| "signing the VAPID token failed")?;
        let token = format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()));
        let value = format!("vapid t={token}, k={}", self.public_key);
        cache.insert(origin.to_owned(), (value.clone(), expires_ms));
        Ok(value)
    }
}
