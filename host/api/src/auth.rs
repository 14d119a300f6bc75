//! The admin token (`FLOWHOST_ADMIN_TOKEN`): when set, every admin route (rules, flows, schemas, event sources,
//! the component catalog, plugin upload, activation and invocation) requires `Authorization: Bearer <token>`.
//! The token is kept only as its SHA-256 digest and compared in constant time (`subtle`), so neither the
//! comparison's timing nor a `Debug` print reveals it. Unset, the routes are open; `flowhost serve` then refuses
//! an admin address that is not loopback unless the operator says so explicitly (see [`crate::AdminRole`]).
//!
//! Cross-site requests: the token travels only as a bearer a page must set itself (no cookie), so another
//! site's page cannot borrow it; on top, a write (any method but `GET`, `HEAD` and `OPTIONS`) that a browser
//! says another site or origin sent (`Sec-Fetch-Site` other than `same-origin` or `none`, or an `Origin` whose
//! host is not the request's `Host`) is refused with 403 before any route runs, which also protects an admin
//! API left without a token on loopback from pages the operator's browser opens. Callers that are not browsers
//! send neither header and are not affected.
//!
//! DNS rebinding: a page whose own name the attacker points at 127.0.0.1 sends requests that are same-origin
//! for the browser (its `Origin` and `Host` agree), so without a token every admin request, reads included,
//! must name this API in its `Host`: a loopback name or address with the listener's port, or a name the operator
//! lists (`FLOWHOST_ADMIN_ALLOWED_HOSTS`). Others are refused with 403 ([`require_known_host`]).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use flowhost_core::digest::TokenDigest;

use crate::ApiError;

/// Whether a browser says another site or origin sent this request (see the module documentation).
fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        if !matches!(site, "same-origin" | "none") {
            return true;
        }
    }
    match (text("origin"), text("host")) {
        (Some(origin), Some(host)) => origin.split_once("://").is_none_or(|(_, authority)| authority != host),
        (Some(_), None) => true,
        _ => false,
    }
}

/// Middleware: refuses a cross-site write with 403 (see the module documentation).
pub(crate) async fn refuse_cross_site_writes(request: Request, next: Next) -> Response {
    let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && cross_site(request.headers()) {
        return ApiError::new(StatusCode::FORBIDDEN, "cross-site requests may not change the admin API's state")
            .into_response();
    }
    next.run(request).await
}

/// The `Host` names an admin API without a token answers besides loopback ones (`FLOWHOST_ADMIN_ALLOWED_HOSTS`:
/// `host` for every port, or `host:port`), lower-cased.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    pub fn new(names: &[String]) -> AllowedHosts {
        AllowedHosts(names.iter().map(|name| name.trim().to_ascii_lowercase()).collect())
    }

    /// Whether a request with `host` (the `Host` header) that came in on port `local_port` names this API.
    fn admits(&self, host: &str, local_port: Option<u16>) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = split_authority(&host);
        if self.0.iter().any(|allowed| *allowed == host || *allowed == name) {
            return true;
        }
        let port_matches = match (port, local_port) {
            (Some(port), Some(local)) => port == local,
            (None, Some(local)) => local == 80,
            (_, None) => true,
        };
        is_loopback_name(name) && port_matches
    }
}

/// `host[:port]` (an IPv6 address in brackets) as the name and the port; an unparsable port is no port.
fn split_authority(authority: &str) -> (&str, Option<u16>) {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((address, tail)) => (address, tail.strip_prefix(':').and_then(|port| port.parse().ok())),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) => (name, port.parse().ok()),
        None => (authority, None),
    }
}

/// `localhost` (and names under it), or a loopback address.
fn is_loopback_name(name: &str) -> bool {
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

/// Middleware of an admin API without a token: refuses with 403 a request whose `Host` does not name it (see
/// the module documentation). A request without `Host` (HTTP/1.0 tools; no browser sends one) passes.
pub(crate) async fn require_known_host(State(allowed): State<AllowedHosts>, request: Request, next: Next) -> Response {
    let local_port = request.extensions().get::<flowhost_role::LocalAddr>().map(|local| local.0.port());
    let host = request.headers().get(header::HOST).map(|value| value.to_str().unwrap_or("\u{fffd}"));
    match host {
        Some(host) if !allowed.admits(host, local_port) => ApiError::new(
            StatusCode::FORBIDDEN,
            "this admin API has no token and answers only requests addressed to it by a loopback name; set \
             FLOWHOST_ADMIN_TOKEN, or list the name in FLOWHOST_ADMIN_ALLOWED_HOSTS",
        )
        .into_response(),
        _ => next.run(request).await,
    }
}

/// The bearer value of an `Authorization` header, if it is one (scheme compared case-insensitively).
fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Middleware: passes the request on when no token is configured or the bearer matches; 401 otherwise.
pub(crate) async fn require_admin_token(
    State(token): State<Option<TokenDigest>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token else { return next.run(request).await };
    match bearer(&request) {
        Some(presented) if token.matches(presented) => next.run(request).await,
        presented => {
            let message = if presented.is_some() {
                "the admin token is not valid"
            } else {
                "this route needs the admin token: send Authorization: Bearer <FLOWHOST_ADMIN_TOKEN>"
            };
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_site_is_what_the_browser_says() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        assert!(!cross_site(&headers(&[])), "curl and services send neither header");
        assert!(!cross_site(&headers(&[
            ("sec-fetch-site", "same-origin"),
            ("origin", "http://127.0.0.1:8787"),
            ("host", "127.0.0.1:8787")
        ])));
        assert!(!cross_site(&headers(&[("sec-fetch-site", "none")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")])), "another port of the same host");
        assert!(cross_site(&headers(&[("origin", "http://evil.example"), ("host", "127.0.0.1:8787")])));
        assert!(cross_site(&headers(&[("origin", "null"), ("host", "127.0.0.1:8787")])));
    }

    #[test]
    fn without_a_token_only_loopback_names_or_listed_hosts_are_answered() {
        let none = AllowedHosts::default();
        for (host, port, admitted) in [
            ("127.0.0.1:8787", Some(8787), true),
            ("localhost:8787", Some(8787), true),
            ("LOCALHOST:8787", Some(8787), true),
            ("[::1]:8787", Some(8787), true),
            ("127.0.0.2:8787", Some(8787), true),
            ("studio.localhost:8787", Some(8787), true),
            ("127.0.0.1:9999", Some(8787), false),
            ("localhost", Some(8787), false),
            ("localhost", Some(80), true),
            ("rebind.example:8787", Some(8787), false),
            ("127.0.0.1.nip.io:8787", Some(8787), false),
            ("localhost.evil.example:8787", Some(8787), false),
            ("[::1", Some(8787), false),
            ("", Some(8787), false),
        ] {
            assert_eq!(none.admits(host, port), admitted, "{host} on {port:?}");
        }
        let listed = AllowedHosts::new(&["Admin.Internal".to_owned(), "flowhost:9000".to_owned()]);
        assert!(listed.admits("admin.internal:8787", Some(8787)));
        assert!(listed.admits("admin.internal", Some(8787)));
        assert!(listed.admits("flowhost:9000", Some(8787)));
        assert!(!listed.admits("flowhost:9001", Some(8787)));
        assert!(!listed.admits("rebind.example:8787", Some(8787)));
    }
}
