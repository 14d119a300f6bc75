//! Cache identities, keyed with `GATEWAY_EDGE_CACHE_HMAC_KEY` (HMAC-SHA256): a bearer or a client IP never
//! appears in a cache key or value, and whoever reads the cache cannot test guesses against it without the key.
//! A validation is cached under the identity of (token, client IP, site), so it cannot cross client IPs or
//! sites; limits count per token under the token's own identity.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::client_ip::ClientIp;

type HmacSha256 = Hmac<Sha256>;

/// Prefix of every key the gateway writes to its cache.
pub const PREFIX: &str = "gw:";

#[derive(Clone)]
pub struct CacheKeys {
    mac: HmacSha256,
}

impl std::fmt::Debug for CacheKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKeys(<redacted>)")
    }
}

impl CacheKeys {
    pub fn new(key: &[u8]) -> CacheKeys {
        CacheKeys { mac: <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length") }
    }

    /// The keyed digest of length-prefixed parts (so `("ab", "c")` and `("a", "bc")` differ).
    fn digest(&self, domain: &str, parts: &[&[u8]]) -> String {
        let mut mac = self.mac.clone();
        mac.update(domain.as_bytes());
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Where the validation of `token` from `ip` on `site_id` is cached.
    pub fn player(&self, token: &str, ip: &ClientIp, site_id: &str) -> String {
        let ip = ip.canonical();
        format!("{PREFIX}player:{}", self.digest("player", &[token.as_bytes(), ip.as_bytes(), site_id.as_bytes()]))
    }

    /// The token's identity in limit keys.
    pub fn token(&self, token: &str) -> String {
        self.digest("token", &[token.as_bytes()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client_ip::TrustedProxies;

    fn ip(text: &str) -> ClientIp {
        TrustedProxies::default().client_ip(text.parse().unwrap(), &Default::default()).unwrap()
    }

    #[test]
    fn identities_are_keyed_and_never_hold_the_inputs() {
        let keys = CacheKeys::new(&[7; 32]);
        let one = keys.player("token-1", &ip("203.0.113.7"), "34");
        assert!(one.starts_with("gw:player:") && !one.contains("token-1") && !one.contains("203.0.113.7"));
        assert_eq!(one, keys.player("token-1", &ip("203.0.113.7"), "34"), "stable");
        assert_ne!(one, keys.player("token-1", &ip("203.0.113.8"), "34"), "never crosses client IPs");
        assert_ne!(one, keys.player("token-1", &ip("203.0.113.7"), "35"), "nor sites");
        assert_ne!(one, keys.player("token-2", &ip("203.0.113.7"), "34"));
        assert_ne!(one, CacheKeys::new(&[8; 32]).player("token-1", &ip("203.0.113.7"), "34"), "rotating the key");
        assert_ne!(keys.token("ab"), keys.player("ab", &ip("1.1.1.1"), "1"));
        assert_eq!(format!("{keys:?}"), "CacheKeys(<redacted>)");
    }
}
