//! The public route, `POST /api/gateway/events` (and its CORS preflight) on `GATEWAY_EDGE_HTTP_PORT`. The
//! controls run in the spec's order, cheapest first, and the body is read only once the request is allowed:
//!
//! 1. the peer is a trusted proxy (403) and names exactly one well-formed client IP (503);
//! 2. the `Origin` is in the origin map (else 403 without an allow-origin header); a preflight is answered
//!    here, before the in-flight and validation controls;
//! 3. the in-flight budget (`GATEWAY_EDGE_MAX_INFLIGHT`): shed at once with 503 when it is spent;
//! 4. the bearer is there and well-formed (401);
//! 5. request limits per token, tenant and global scope (429 with `Retry-After`);
//! 6. player validation, cached (401 invalid, 429 validation limit, 503 dependency failure);
//! 7. the body (413 over `GATEWAY_EDGE_MAX_BODY_BYTES`, 400 not an event), then internal ingest (with the
//!    events of concurrent requests, [`Forwarder`]): 202 once the durable queue acknowledged the event, 503 when
//!    ingest fails or does not answer within `GATEWAY_EDGE_INGEST_TIMEOUT_MS`.
//!
//! Errors answer `{"error": {"code", "message"}}`. Answers to an allowed origin carry its CORS headers (never
//! `*`, no credentials), so the page can read them; the route never redirects. No log line carries the client
//! IP or the bearer.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::digest::iso_utc;
use flowhost_core::Clock;
use flowhost_role::openapi::{with_default_error, CodedError};
use flowhost_role::{routes, ApiRouter};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::client_ip::{ClientIpError, TrustedProxies};
use crate::event;
use crate::forward::Forwarder;
use crate::keys::CacheKeys;
use crate::limits::{LimitError, Limiter};
use crate::metrics::EdgeMetrics;
use crate::origins::OriginEntry;
use crate::player::{PlayerValidator, Validation};

/// The public route's exact path.
pub const ROUTE: &str = "/api/gateway/events";
/// The longest bearer accepted.
const MAX_TOKEN_BYTES: usize = 4096;
/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE_SECS: u32 = 600;

pub struct Edge {
    pub proxies: TrustedProxies,
    pub origins: HashMap<String, OriginEntry>,
    pub keys: CacheKeys,
    pub request_limits: Limiter,
    pub validator: PlayerValidator,
    pub inflight: Arc<Semaphore>,
    pub ingest: Forwarder,
    pub ingest_timeout: Duration,
    pub analytics_topic: String,
    pub max_body_bytes: usize,
    pub clock: Arc<dyn Clock>,
    pub metrics: EdgeMetrics,
}

impl Edge {
    pub fn router(self: Arc<Self>) -> ApiRouter {
        with_default_error::<CodedError, _>(
            ApiRouter::new().routes(routes!(accept, preflight)),
            "The edge's error envelope",
        )
        .with_state(self)
    }

    fn refuse_with(&self, refusal: Refusal) -> Response {
        self.refuse(refusal.outcome, refusal.status, refusal.code, refusal.message)
    }

    fn refuse(&self, outcome: &'static str, status: StatusCode, code: &str, message: &str) -> Response {
        self.metrics.requests.with_label_values(&[outcome]).inc();
        (status, Json(json!({ "error": { "code": code, "message": message } }))).into_response()
    }
}

/// The CORS headers of an allowed origin, on every answer to it.
fn with_cors(mut response: Response, origin: &str) -> Response {
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
    }
    // Without it a browser hides `Retry-After` from the page, which must honour it (spec 002, rule 7).
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("Retry-After"));
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

/// A refusal before any player data is looked at.
struct Refusal {
    outcome: &'static str,
    status: StatusCode,
    code: &'static str,
    message: &'static str,
}

const FORBIDDEN_PEER: Refusal = Refusal {
    outcome: "forbidden_peer",
    status: StatusCode::FORBIDDEN,
    code: "FORBIDDEN",
    message: "the peer is not a trusted proxy",
};

/// Rule 1 without the client IP (a preflight carries no player data), then rule 2.
fn allowed_origin<'a>(edge: &'a Edge, peer: SocketAddr, headers: &HeaderMap) -> Result<&'a OriginEntry, Refusal> {
    if !edge.proxies.peer_allowed(peer.ip()) {
        return Err(FORBIDDEN_PEER);
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or_default();
    edge.origins.get(origin).ok_or(Refusal {
        outcome: "origin_forbidden",
        status: StatusCode::FORBIDDEN,
        code: "ORIGIN_FORBIDDEN",
        message: "this origin may not send events",
    })
}

#[utoipa::path(options, path = ROUTE, tag = "gateway edge", params(
        ("Origin" = String, Header, description = "A configured origin"),
        ("Access-Control-Request-Method" = Option<String>, Header, description = "Only POST is allowed"),
    ), responses((status = 204, description = "CORS preflight allowed")))]
async fn preflight(
    State(edge): State<Arc<Edge>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let entry = match allowed_origin(&edge, peer, &headers) {
        Ok(entry) => entry,
        Err(refusal) => return edge.refuse_with(refusal),
    };
    let requested = headers.get(header::ACCESS_CONTROL_REQUEST_METHOD).and_then(|v| v.to_str().ok());
    if requested.is_some_and(|method| method != Method::POST.as_str()) {
        let refused =
            edge.refuse("preflight_refused", StatusCode::FORBIDDEN, "METHOD_FORBIDDEN", "only POST is allowed");
        return with_cors(refused, &entry.origin);
    }
    edge.metrics.requests.with_label_values(&["preflight"]).inc();
    let response = (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("POST")),
            (header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("authorization, content-type")),
            (header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(PREFLIGHT_MAX_AGE_SECS)),
        ],
    )
        .into_response();
    with_cors(response, &entry.origin)
}

#[utoipa::path(post, path = ROUTE, tag = "gateway edge", params(
        ("Origin" = String, Header, description = "A configured origin"),
        ("Authorization" = Option<String>, Header, description = "`Bearer <player token>` where the origin requires one"),
    ), request_body(content = Value, description = "One analytics event, as spec 002 describes"),
    responses((status = 202, description = "Accepted for delivery", body = Value)))]
async fn accept(
    State(edge): State<Arc<Edge>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let client_ip = match edge.proxies.client_ip(peer.ip(), &parts.headers) {
        Ok(ip) => ip,
        Err(ClientIpError::UntrustedPeer) => return edge.refuse_with(FORBIDDEN_PEER),
        Err(_) => {
            return edge.refuse(
                "client_ip_invalid",
                StatusCode::SERVICE_UNAVAILABLE,
                "CLIENT_IP_INVALID",
                "the request does not carry exactly one well-formed client IP",
            )
        }
    };
    let origin = match allowed_origin(&edge, peer, &parts.headers) {
        Ok(entry) => entry,
        Err(refusal) => return edge.refuse_with(refusal),
    };
    let response = accept_from(&edge, client_ip, origin, &parts.headers, body, started).await;
    with_cors(response, &origin.origin)
}

async fn accept_from(
    edge: &Edge,
    client_ip: crate::client_ip::ClientIp,
    origin: &OriginEntry,
    headers: &HeaderMap,
    body: Body,
    started: Instant,
) -> Response {
    let Ok(_permit) = edge.inflight.clone().try_acquire_owned() else {
        return edge.refuse("shed", StatusCode::SERVICE_UNAVAILABLE, "OVERLOADED", "the gateway is at capacity; retry");
    };
    edge.metrics.inflight.inc();
    let _inflight = scopeguard(&edge.metrics.inflight);
    let Some(token) = bearer(headers) else {
        return edge.refuse("unauthorized", StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "a player bearer is required");
    };
    let token_id = edge.keys.token(token);
    match edge.request_limits.admit(&token_id, &origin.tenant_id).await {
        Ok(()) => {}
        Err(LimitError::Exceeded { scope, retry_after_secs }) => {
            return too_many(edge, &format!("the {scope} request limit is exceeded"), retry_after_secs)
        }
        Err(LimitError::Unavailable(reason)) => return unavailable(edge, &reason),
    }
    let player = match edge.validator.validate(token, &token_id, &client_ip, origin).await {
        Validation::Valid(player) => player,
        Validation::Invalid => {
            return edge.refuse(
                "player_invalid",
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                "the player bearer is not valid",
            )
        }
        Validation::Limited { retry_after_secs } => {
            return too_many(edge, "the player validation limit is exceeded", retry_after_secs)
        }
        Validation::Unavailable(reason) => return unavailable(edge, &reason),
    };
    let bytes = match axum::body::to_bytes(body, edge.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            let message = format!("the event is larger than {} bytes", edge.max_body_bytes);
            return edge.refuse("too_large", StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", &message);
        }
    };
    let browser_event = match event::parse(&bytes) {
        Ok(event) => event,
        Err(message) => return edge.refuse("invalid_event", StatusCode::BAD_REQUEST, "INVALID_EVENT", &message),
    };
    let event_id = browser_event.event_id.clone();
    let received_at = iso_utc(edge.clock.now_ms());
    let record = event::record(browser_event, origin, player, received_at, &edge.analytics_topic);
    match tokio::time::timeout(edge.ingest_timeout, edge.ingest.forward(record)).await {
        Ok(Ok(())) => {
            edge.metrics.requests.with_label_values(&["accepted"]).inc();
            edge.metrics.accepted_latency.observe(started.elapsed().as_secs_f64());
            (StatusCode::ACCEPTED, Json(json!({ "status": "accepted", "event_id": event_id }))).into_response()
        }
        Ok(Err(reason)) => unavailable(edge, &reason),
        Err(_) => unavailable(edge, "internal ingest did not answer in time"),
    }
}

/// Decrements the in-flight gauge when the request ends, however it ends.
fn scopeguard(gauge: &prometheus::IntGauge) -> impl Drop + '_ {
    struct Guard<'a>(&'a prometheus::IntGauge);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            self.0.dec();
        }
    }
    Guard(gauge)
}

/// The bearer of `Authorization: Bearer <token>`: exactly one header, an RFC 6750 token of at most
/// [`MAX_TOKEN_BYTES`].
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let well_formed = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= MAX_TOKEN_BYTES
        && token.trim_end_matches('=').bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
        && !token.trim_end_matches('=').is_empty();
    well_formed.then_some(token)
}

fn too_many(edge: &Edge, message: &str, retry_after_secs: u64) -> Response {
    let mut response = edge.refuse("rate_limited", StatusCode::TOO_MANY_REQUESTS, "RATE_LIMITED", message);
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    response
}

/// A dependency failed: 503; the reason goes to the log (it names a dependency, never the client).
fn unavailable(edge: &Edge, reason: &str) -> Response {
    tracing::warn!(reason, "an event was refused: a dependency failed");
    edge.refuse(
        "unavailable",
        StatusCode::SERVICE_UNAVAILABLE,
        "UNAVAILABLE",
        "a dependency of the gateway is unavailable; retry",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(header::AUTHORIZATION, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn bearers_are_one_well_formed_token() {
        assert_eq!(bearer(&auth(&["Bearer abc.DEF-123_~+/=="])), Some("abc.DEF-123_~+/=="));
        assert_eq!(bearer(&auth(&["bearer abc"])), Some("abc"));
        for bad in [
            vec![],
            vec!["Basic abc"],
            vec!["Bearer "],
            vec!["Bearer a b"],
            vec!["Bearer =="],
            vec!["Bearer a", "Bearer b"],
            vec!["Bearerabc"],
        ] {
            assert_eq!(bearer(&auth(&bad)), None, "{bad:?}");
        }
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(bearer(&auth(&[&long])), None);
    }
}
