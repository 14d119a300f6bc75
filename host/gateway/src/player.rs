//! Player validation (spec 002 part A, rules 3 and 4): is this bearer a logged-in player of this site, from
//! this client IP? Answered from the cache when it can be, else by the operator's validation backend:
//! `GET {player_url}/getPlayer` with the player's bearer and the JSON body `{"ip": "<canonical client IP>",
//! "site_id": <site id>}`, whose valid answer is 200 `{"client_player_id": N, "global_player_id": M}` (both
//! positive).
//!
//! Caching, under the keyed identity of (token, client IP, site): a valid player for
//! `GATEWAY_EDGE_PLAYER_CACHE_TTL_SECONDS`; a definitive invalid status (`GATEWAY_EDGE_PLAYER_INVALID_STATUSES`)
//! for `GATEWAY_EDGE_PLAYER_NEGATIVE_TTL_SECONDS`; any other failure (timeout, 5xx, another status, a body
//! that is not a valid pair) is not cached and answers 503. Calls to the backend count against the validation
//! limits. The cache's failure is a dependency failure (503), never a reason to skip the limits.

use std::sync::Arc;
use std::time::Duration;

use flowhost_core::ports::Cache;
use prometheus::IntCounterVec;
use serde::{Deserialize, Serialize};

use crate::client_ip::ClientIp;
use crate::keys::CacheKeys;
use crate::limits::{LimitError, Limiter};
use crate::origins::OriginEntry;

/// The largest answer read from the validation backend (a player is two ids): a longer one is an error.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A validated player: the ids the envelope carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Player {
    pub client_player_id: u64,
    pub global_player_id: u64,
}

/// What validation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validation {
    Valid(Player),
    /// The backend said definitively that the bearer is not a valid player here: 401.
    Invalid,
    /// A validation limit is exceeded: 429.
    Limited {
        retry_after_secs: u64,
    },
    /// The cache or the backend failed: 503 (the reason is logged, never sent).
    Unavailable(String),
}

/// What the cache holds per identity.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "v")]
enum Cached {
    #[serde(rename = "valid")]
    Valid { c: u64, g: u64 },
    #[serde(rename = "invalid")]
    Invalid,
}

/// The validation request's body.
#[derive(Serialize)]
struct ValidationRequest<'a> {
    ip: &'a str,
    site_id: u64,
}

#[derive(Debug, Clone)]
pub struct PlayerSettings {
    pub cache_ttl: Duration,
    pub negative_ttl: Duration,
    pub invalid_statuses: Vec<u16>,
    pub cache_timeout: Duration,
    pub player_timeout: Duration,
}

/// The counters of spec 002's events section: `gateway_edge_player_validation_total{outcome}` (valid,
/// invalid, limited, error, timeout) and `gateway_edge_player_cache_total{outcome}` (hit, negative_hit, miss,
/// error).
#[derive(Clone)]
pub struct PlayerMetrics {
    pub validation: IntCounterVec,
    pub cache: IntCounterVec,
}

#[derive(Clone)]
pub struct PlayerValidator {
    cache: Arc<dyn Cache>,
    keys: CacheKeys,
    limiter: Limiter,
    http: reqwest::Client,
    settings: PlayerSettings,
    metrics: PlayerMetrics,
}

impl PlayerValidator {
    pub fn new(
        cache: Arc<dyn Cache>,
        keys: CacheKeys,
        limiter: Limiter,
        http: reqwest::Client,
        settings: PlayerSettings,
        metrics: PlayerMetrics,
    ) -> PlayerValidator {
        PlayerValidator { cache, keys, limiter, http, settings, metrics }
    }

    /// Validates `token` from `ip` for the site of `origin`.
    pub async fn validate(&self, token: &str, token_id: &str, ip: &ClientIp, origin: &OriginEntry) -> Validation {
        let key = self.keys.player(token, ip, &origin.site_id);
        let cached = tokio::time::timeout(self.settings.cache_timeout, self.cache.get(&key)).await;
        match cached {
            Ok(Ok(Some(bytes))) => match serde_json::from_slice::<Cached>(&bytes) {
                Ok(Cached::Valid { c, g }) => {
                    self.count_cache("hit");
                    return Validation::Valid(Player { client_player_id: c, global_player_id: g });
                }
                Ok(Cached::Invalid) => {
                    self.count_cache("negative_hit");
                    return Validation::Invalid;
                }
                // Written by another version, or damaged: validate again and overwrite it.
                Err(_) => self.count_cache("miss"),
            },
            Ok(Ok(None)) => self.count_cache("miss"),
            Ok(Err(error)) => {
                self.count_cache("error");
                return Validation::Unavailable(format!("cache: {error}"));
            }
            Err(_) => {
                self.count_cache("error");
                return Validation::Unavailable("cache: no answer in time".to_owned());
            }
        }
        match self.limiter.admit(token_id, &origin.tenant_id).await {
            Ok(()) => {}
            Err(LimitError::Exceeded { retry_after_secs, .. }) => {
                self.count_validation("limited");
                return Validation::Limited { retry_after_secs };
            }
            Err(LimitError::Unavailable(reason)) => {
                self.count_validation("error");
                return Validation::Unavailable(format!("cache: {reason}"));
            }
        }
        let (validation, cached) = self.ask_backend(token, ip, origin).await;
        if let Some((value, ttl)) = cached {
            let value = serde_json::to_vec(&value).expect("a cache entry serializes");
            // A failed write costs one more validation later, not this request.
            match tokio::time::timeout(self.settings.cache_timeout, self.cache.set(&key, value, Some(ttl))).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "caching a player validation failed"),
                Err(_) => tracing::warn!("caching a player validation timed out"),
            }
        }
        validation
    }

    /// Calls the validation backend; returns the decision and what to cache, for how long.
    async fn ask_backend(
        &self,
        token: &str,
        ip: &ClientIp,
        origin: &OriginEntry,
    ) -> (Validation, Option<(Cached, Duration)>) {
        let Ok(site_id) = origin.site_id.parse::<u64>() else {
            return (Validation::Unavailable("the origin map's site id is not a number".to_owned()), None);
        };
        let url = format!("{}/getPlayer", origin.player_url.trim_end_matches('/'));
        let ip = ip.canonical();
        let request = self
            .http
            .get(&url)
            .bearer_auth(token)
            .json(&ValidationRequest { ip: &ip, site_id })
            .timeout(self.settings.player_timeout);
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let outcome = if error.is_timeout() { "timeout" } else { "error" };
                self.count_validation(outcome);
                return (
                    Validation::Unavailable(format!("validation backend: {outcome}: {}", error.without_url())),
                    None,
                );
            }
        };
        let status = response.status().as_u16();
        if self.settings.invalid_statuses.contains(&status) {
            self.count_validation("invalid");
            return (Validation::Invalid, Some((Cached::Invalid, self.settings.negative_ttl)));
        }
        if status != 200 {
            self.count_validation("error");
            return (Validation::Unavailable(format!("validation backend answered {status}")), None);
        }
        let read = flowhost_egress::read_capped(response, MAX_ANSWER_BYTES);
        let body = match tokio::time::timeout(self.settings.player_timeout, read).await {
            Ok(Ok(body)) => body,
            Ok(Err(error)) => {
                self.count_validation("error");
                return (Validation::Unavailable(format!("validation backend body: {error}")), None);
            }
            Err(_) => {
                self.count_validation("timeout");
                return (Validation::Unavailable("validation backend body: timed out".to_owned()), None);
            }
        };
        match serde_json::from_slice::<Player>(&body) {
            Ok(player) if player.client_player_id > 0 && player.global_player_id > 0 => {
                self.count_validation("valid");
                let cached = Cached::Valid { c: player.client_player_id, g: player.global_player_id };
                (Validation::Valid(player), Some((cached, self.settings.cache_ttl)))
            }
            _ => {
                self.count_validation("error");
                (Validation::Unavailable("validation backend answered 200 without a positive id pair".to_owned()), None)
            }
        }
    }

    fn count_cache(&self, outcome: &str) {
        self.metrics.cache.with_label_values(&[outcome]).inc();
    }

    fn count_validation(&self, outcome: &str) {
        self.metrics.validation.with_label_values(&[outcome]).inc();
    }
}
