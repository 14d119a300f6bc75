//! The admin token (`FLOWHOST_ADMIN_TOKEN`): when set, every admin route (rules, flows, schemas, event sources,
//! the component catalog, plugin upload, activation and invocation) requires `Authorization: Bearer <token>`.
//! The token is kept only as its SHA-256 digest and compared in constant time (`subtle`), so neither the
//! comparison's timing nor a `Debug` print reveals it. Unset, the routes are open; `flowhost serve` then refuses
//! an admin address that is not loopback unless the operator says so explicitly (see [`crate::AdminRole`]).

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use flowhost_core::config::Secret;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::ApiError;

/// The SHA-256 of the configured admin token; `Debug` does not show it.
#[derive(Clone)]
pub struct AdminToken([u8; 32]);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl AdminToken {
    pub fn new(token: &Secret) -> AdminToken {
        AdminToken(Sha256::digest(token.expose().as_bytes()).into())
    }

    /// Whether `presented` is the token (constant time in the token's content).
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        bool::from(digest.ct_eq(&self.0))
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
    State(token): State<Option<AdminToken>>,
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
    fn matches_only_the_token() {
        let token = AdminToken::new(&Secret::new("s3cret-admin"));
        assert!(token.matches("s3cret-admin"));
        assert!(!token.matches("s3cret-admin "));
        assert!(!token.matches(""));
        assert!(!token.matches("S3CRET-ADMIN"));
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
