//! Who is calling: the push-platform caller (bearer token from the caller policy, the route as `METHOD /path`,
//! `X-Source-App`) and the editor (bearer token equal to `INAPP_EDITOR_API_AUTH_TOKEN`, plus the optional
//! `X-Svc-Client-Id` tenant selection and `X-Admin-User` acting admin). Both are extractors, so a handler that
//! takes one cannot run unauthenticated, and both run before the body is read.

use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use flowhost_notifications::policy::Caller;

use crate::error::PushError;
use crate::PushState;

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive), if well-formed.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A header as trimmed text; absent or blank is `None`; too long or not text is a 400 naming the header.
fn optional_header(headers: &HeaderMap, name: &str, max: usize) -> Result<Option<String>, PushError> {
    let Some(value) = headers.get(name) else { return Ok(None) };
    let value = value.to_str().map_err(|_| PushError::field(name, "must be visible ASCII text"))?.trim();
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > max {
        return Err(PushError::field(name, format!("must be at most {max} characters")));
    }
    Ok(Some(value.to_owned()))
}

/// The headers [`PlatformCaller`] reads, as the OpenAPI document lists them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // documentation only
pub(crate) struct CallerHeaders {
    /// `Bearer <caller token>`: a token of the caller policy (401 `UNAUTHORIZED` when missing or unknown; the
    /// caller's `allowed_routes` must list this route, else 403 `FORBIDDEN`).
    #[param(rename = "Authorization")]
    authorization: String,
    /// A source app in the caller's `allowed_source_apps` (403 `FORBIDDEN` when missing or not allowed).
    #[param(rename = "X-Source-App", max_length = 256)]
    source_app: String,
}

/// The headers [`Editor`] reads, as the OpenAPI document lists them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)] // documentation only
pub(crate) struct EditorHeaders {
    /// `Bearer <editor token>`: equal to `INAPP_EDITOR_API_AUTH_TOKEN` (401 `UNAUTHORIZED` otherwise; 503
    /// `EDITOR_TOKEN_NOT_CONFIGURED` when the service has none).
    #[param(rename = "Authorization")]
    authorization: String,
    /// The tenant the editor selected: scopes the request.
    #[param(rename = "X-Svc-Client-Id", max_length = 128, nullable = false)]
    client_id: Option<String>,
    /// The acting admin, recorded on template changes and logged.
    #[param(rename = "X-Admin-User", max_length = 256, nullable = false)]
    admin_user: Option<String>,
}

/// An authorized push-platform caller: its token matched, the route is allowed and so is its `X-Source-App`.
/// Tenant scope is checked by each handler, from where the route takes its tenant.
pub struct PlatformCaller {
    pub caller: Caller,
    pub source_app: String,
}

impl FromRequestParts<Arc<PushState>> for PlatformCaller {
    type Rejection = PushError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<PushState>) -> Result<Self, Self::Rejection> {
        let policy = state.policy.as_ref().map_err(|_| {
            PushError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "CALLER_POLICY_INVALID",
                "the push-platform caller policy failed to load; the operator must fix it",
            )
        })?;
        let token = bearer(&parts.headers).ok_or_else(|| PushError::unauthorized("missing or invalid caller token"))?;
        let caller =
            policy.authenticate(token).ok_or_else(|| PushError::unauthorized("missing or invalid caller token"))?;
        let path = parts.extensions.get::<MatchedPath>().map(MatchedPath::as_str).unwrap_or_else(|| parts.uri.path());
        let route = format!("{} {path}", parts.method);
        if !caller.allows_route(&route) {
            return Err(PushError::forbidden(format!("caller {:?} may not call {route}", caller.id)));
        }
        let source_app = optional_header(&parts.headers, "x-source-app", 256)
            .ok()
            .flatten()
            .ok_or_else(|| PushError::forbidden("the X-Source-App header is required"))?;
        if !caller.allows_source_app(&source_app) {
            return Err(PushError::forbidden(format!(
                "source app {source_app:?} is not allowed for caller {:?}",
                caller.id
            )));
        }
        Ok(PlatformCaller { caller: caller.clone(), source_app })
    }
}

impl PlatformCaller {
    /// 403 `FORBIDDEN` unless the caller may act for `tenant_id`.
    pub fn check_tenant(&self, tenant_id: &str) -> Result<(), PushError> {
        if self.caller.allows_tenant(tenant_id) {
            Ok(())
        } else {
            Err(PushError::forbidden(format!("caller {:?} may not act for this tenant", self.caller.id)))
        }
    }
}

/// An authenticated editor request.
pub struct Editor {
    /// `X-Svc-Client-Id`: the tenant the editor selected; scopes every editor route when present.
    pub tenant: Option<String>,
    /// `X-Admin-User`: the acting admin, recorded on template changes and logged.
    pub admin_user: Option<String>,
}

impl FromRequestParts<Arc<PushState>> for Editor {
    type Rejection = PushError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<PushState>) -> Result<Self, Self::Rejection> {
        let Some(expected) = state.settings.editor_token_digest.as_ref() else {
            return Err(PushError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "EDITOR_TOKEN_NOT_CONFIGURED",
                "editor routes need INAPP_EDITOR_API_AUTH_TOKEN on the service",
            ));
        };
        let token = bearer(&parts.headers).ok_or_else(|| PushError::unauthorized("missing or invalid editor token"))?;
        if !expected.matches(token) {
            return Err(PushError::unauthorized("missing or invalid editor token"));
        }
        Ok(Editor {
            tenant: optional_header(&parts.headers, "x-svc-client-id", 128)?,
            admin_user: optional_header(&parts.headers, "x-admin-user", 256)?,
        })
    }
}

impl Editor {
    /// The tenant a request acts for: the selected tenant (`X-Svc-Client-Id`) or `requested` (body or query);
    /// both present and different is a 400 naming `field`.
    pub fn tenant_for(&self, requested: Option<String>, field: &str) -> Result<Option<String>, PushError> {
        match (&self.tenant, requested) {
            (Some(selected), Some(requested)) if *selected != requested => {
                Err(PushError::field(field, "does not match the tenant selected with X-Svc-Client-Id"))
            }
            (Some(selected), _) => Ok(Some(selected.clone())),
            (None, requested) => Ok(requested),
        }
    }
}
