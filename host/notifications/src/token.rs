//! Interaction tokens (and in-app connect tokens, [`mint_connect`]): the opaque value a delivered payload carries and the service worker echoes in browser
//! events. A token binds tenant, player, notification id, delivery id and an expiry, signed with HMAC-SHA256
//! (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET`). Only the service mints (the sender, per delivery) and verifies
//! (the browser-events route); callers pass it through untouched.
//!
//! Format: `v1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(secret, "v1." + claims part))>`. Verification
//! checks the MAC in constant time (`hmac`'s `verify_slice`) with the current secret and, during a rotation,
//! the previous one (`FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS`), then the expiry against the
//! injected clock.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const VERSION: &str = "v1";
/// Longer tokens are rejected before any work.
pub const MAX_TOKEN_LEN: usize = 4096;

/// What a token binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractionClaims {
    #[serde(rename = "t")]
    pub tenant_id: String,
    #[serde(rename = "p")]
    pub player_id: i64,
    #[serde(rename = "n")]
    pub notification_id: String,
    #[serde(rename = "d")]
    pub delivery_id: String,
    /// Expiry in milliseconds since the Unix epoch; the token is refused from this instant on.
    #[serde(rename = "e")]
    pub expires_at_ms: i64,
}

/// Why a token was refused. The API answers 401 `UNAUTHORIZED` for each, without saying which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three parts, an unknown version, bad base64 or claims that do not parse.
    #[error("malformed interaction token")]
    Malformed,
    /// The MAC matches neither the current nor the previous secret (forged or tampered).
    #[error("interaction token signature does not verify")]
    BadSignature,
    /// Signed correctly, but past its expiry.
    #[error("interaction token expired")]
    Expired,
}

fn mac(secret: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length; this cannot fail.
    <HmacSha256 as KeyInit>::new_from_slice(secret).expect("HMAC accepts any key length")
}

/// Mints a token for `claims` with `secret`.
pub fn mint(secret: &[u8], claims: &InteractionClaims) -> String {
    sign(VERSION, secret, claims)
}

/// Verifies `token` against each of `secrets` (current first) and its expiry against `now_ms`.
pub fn verify(token: &str, secrets: &[&[u8]], now_ms: i64) -> Result<InteractionClaims, TokenError> {
    open(VERSION, token, secrets, now_ms, |claims: &InteractionClaims| claims.expires_at_ms)
}

/// The version prefix of in-app connect tokens: a token of one kind never verifies as the other.
const CONNECT_VERSION: &str = "c1";

/// What an in-app connect token binds: the player a websocket is for, until a short expiry, and a nonce that
/// makes each token a different one (a token admits one websocket, or one refresh of a websocket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectClaims {
    #[serde(rename = "t")]
    pub tenant_id: String,
    #[serde(rename = "p")]
    pub player_id: i64,
    /// Expiry in milliseconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires_at_ms: i64,
    /// Unique per minted token (128 random bits, hex): the key that spends it.
    #[serde(rename = "j")]
    pub nonce: String,
}

impl ConnectClaims {
    /// Claims for a new token of `(tenant_id, player_id)` valid until `expires_at_ms`, with a fresh nonce.
    pub fn new(tenant_id: String, player_id: i64, expires_at_ms: i64) -> ConnectClaims {
        ConnectClaims { tenant_id, player_id, expires_at_ms, nonce: uuid::Uuid::new_v4().simple().to_string() }
    }
}

/// Mints an in-app connect token (format `c1.<claims>.<mac>`, signed like interaction tokens).
pub fn mint_connect(secret: &[u8], claims: &ConnectClaims) -> String {
    sign(CONNECT_VERSION, secret, claims)
}

/// Verifies an in-app connect token as [`verify`] does an interaction token.
pub fn verify_connect(token: &str, secrets: &[&[u8]], now_ms: i64) -> Result<ConnectClaims, TokenError> {
    open(CONNECT_VERSION, token, secrets, now_ms, |claims: &ConnectClaims| claims.expires_at_ms)
}

fn sign<T: Serialize>(version: &str, secret: &[u8], claims: &T) -> String {
    let payload = serde_json::to_vec(claims).expect("claims serialize");
    let signed = format!("{version}.{}", URL_SAFE_NO_PAD.encode(payload));
    let mut mac = mac(secret);
    mac.update(signed.as_bytes());
    let signature = mac.finalize().into_bytes();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// Checks the format and version, the MAC in constant time against each secret, then decodes the claims and
/// checks their expiry.
fn open<T: DeserializeOwned>(
    version: &str,
    token: &str,
    secrets: &[&[u8]],
    now_ms: i64,
    expiry: impl Fn(&T) -> i64,
) -> Result<T, TokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed);
    }
    let (signed, signature) = token.rsplit_once('.').ok_or(TokenError::Malformed)?;
    let (prefix, payload) = signed.split_once('.').ok_or(TokenError::Malformed)?;
    if prefix != version || payload.contains('.') {
        return Err(TokenError::Malformed);
    }
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenError::Malformed)?;
    let mut verified = false;
    for secret in secrets {
        let mut mac = mac(secret);
        mac.update(signed.as_bytes());
        verified |= mac.verify_slice(&signature).is_ok();
    }
    if !verified {
        return Err(TokenError::BadSignature);
    }
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| TokenError::Malformed)?;
    let claims: T = serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
    if now_ms >= expiry(&claims) {
        return Err(TokenError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn claims() -> InteractionClaims {
        InteractionClaims {
            tenant_id: "casino-1".into(),
            player_id: 42,
            notification_id: "n-1".into(),
            delivery_id: "d-1".into(),
            expires_at_ms: NOW + 60_000,
        }
    }

    #[test]
    fn round_trip() {
        let token = mint(b"secret", &claims());
        assert!(token.starts_with("v1.") && token.split('.').count() == 3, "{token}");
        assert_eq!(verify(&token, &[b"secret"], NOW), Ok(claims()));
    }

    #[test]
    fn forged_tampered_and_expired_tokens_are_refused() {
        let token = mint(b"secret", &claims());
        assert_eq!(verify(&token, &[b"other"], NOW), Err(TokenError::BadSignature), "forged: another key");
        assert_eq!(verify(&token, &[b"secret"], NOW + 60_000), Err(TokenError::Expired), "expired at the instant");
        assert_eq!(verify(&token, &[b"secret"], NOW + 59_999).map(|c| c.player_id), Ok(42));

        // Tampered claims: another player, re-encoded, old signature.
        let (_, rest) = token.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let other = InteractionClaims { player_id: 43, ..claims() };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&other).unwrap());
        let tampered = format!("v1.{payload}.{signature}");
        assert_eq!(verify(&tampered, &[b"secret"], NOW), Err(TokenError::BadSignature));

        // A flipped signature character.
        let mut bytes = token.clone().into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(verify(&String::from_utf8(bytes).unwrap(), &[b"secret"], NOW), Err(TokenError::BadSignature));

        for malformed in ["", "v1", "v1.x", "v2.e30.AAAA", "v1.a.b.c", "v1.e30.%%", &"x".repeat(MAX_TOKEN_LEN + 1)] {
            assert_eq!(verify(malformed, &[b"secret"], NOW), Err(TokenError::Malformed), "{malformed:?}");
        }
        // The MAC is checked before the claims are even decoded.
        assert_eq!(verify("v1.%%.AAAA", &[b"secret"], NOW), Err(TokenError::BadSignature));
        // Correctly signed but the claims are not ours.
        let mut mac = mac(b"secret");
        let signed = format!("v1.{}", URL_SAFE_NO_PAD.encode(b"{\"x\":1}"));
        mac.update(signed.as_bytes());
        let odd = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()));
        assert_eq!(verify(&odd, &[b"secret"], NOW), Err(TokenError::Malformed));
    }

    #[test]
    fn connect_tokens_are_their_own_kind() {
        let connect = ConnectClaims::new("casino-1".into(), 42, NOW + 1000);
        assert_ne!(connect.nonce, ConnectClaims::new("casino-1".into(), 42, NOW + 1000).nonce, "a nonce each");
        let token = mint_connect(b"secret", &connect);
        assert!(token.starts_with("c1."), "{token}");
        assert_eq!(verify_connect(&token, &[b"secret"], NOW), Ok(connect));
        assert_eq!(verify(&token, &[b"secret"], NOW), Err(TokenError::Malformed), "not an interaction token");
        let interaction = mint(b"secret", &claims());
        assert_eq!(verify_connect(&interaction, &[b"secret"], NOW), Err(TokenError::Malformed));
        assert_eq!(verify_connect(&token, &[b"secret"], NOW + 1000), Err(TokenError::Expired));
    }

    #[test]
    fn the_previous_secret_verifies_during_a_rotation() {
        let old = mint(b"old-secret", &claims());
        let new = mint(b"new-secret", &claims());
        let rotating: [&[u8]; 2] = [b"new-secret", b"old-secret"];
        assert!(verify(&old, &rotating, NOW).is_ok());
        assert!(verify(&new, &rotating, NOW).is_ok());
        assert_eq!(verify(&old, &[b"new-secret"], NOW), Err(TokenError::BadSignature), "after the window");
    }
}
