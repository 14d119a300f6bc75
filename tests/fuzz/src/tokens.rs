//! `interaction_token` and `connect_token`: the signed tokens the push service hands out and takes back (the
//! interaction token in browser events, `POST /api/v1/service/webpush/events/browser`; the in-app connect token
//! on `GET /api/v1/inapp/ws?token=` and in a websocket's `refresh` frame).
//!
//! The bytes are tried twice: as a token as it arrives (which, lacking the secret, must be refused without a
//! panic), and as the claims part of a token signed with the secret, as if the service had minted it, which
//! reaches the claims decoding and the expiry. Whatever verifies must be minted again into a token that
//! verifies to the same claims, and must be usable by the code after verification.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use flowhost_notifications::records::iso;
use flowhost_notifications::token::{self, TokenError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::context::NOW_MS;

const SECRET: &[u8] = b"fuzz-interaction-token-secret-0123456789";
const PREVIOUS: &[u8] = b"fuzz-previous-secret";

pub fn interaction_token(data: &[u8]) {
    let verify = |token: &str| token::verify(token, &[SECRET, PREVIOUS], NOW_MS);
    for claims in [verify(&String::from_utf8_lossy(data)), verify(&signed("v1", data))].into_iter().flatten() {
        assert_eq!(verify(&token::mint(SECRET, &claims)).as_ref(), Ok(&claims), "minted again: {claims:?}");
    }
}

pub fn connect_token(data: &[u8]) {
    let verify = |token: &str| token::verify_connect(token, &[SECRET, PREVIOUS], NOW_MS);
    for claims in [verify(&String::from_utf8_lossy(data)), verify(&signed("c1", data))].into_iter().flatten() {
        assert_eq!(verify(&token::mint_connect(SECRET, &claims)).as_ref(), Ok(&claims), "minted again: {claims:?}");
        // The websocket's hello frame and its expiry notice print the expiry.
        let _ = iso(claims.expires_at_ms);
    }
    // A token of one kind never verifies as the other.
    assert!(matches!(token::verify(&signed("c1", data), &[SECRET], NOW_MS), Err(TokenError::Malformed)));
}

/// A token of `version` whose claims part is `claims`, signed with [`SECRET`] (the format of `token::mint`).
fn signed(version: &str, claims: &[u8]) -> String {
    let signed = format!("{version}.{}", URL_SAFE_NO_PAD.encode(claims));
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET).expect("HMAC takes any key length");
    mac.update(signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}
