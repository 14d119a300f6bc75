//! Administration API v2: flows as graphs (drafts, validation, releases, versions, release attempts, edit
//! locks) over `flowhost-flows`; their runs and dead letters over `flowhost-runs`; the CEL environment's catalog
//! (`cel.rs`); a service's active manifest as validation sees it (`GET /api/v2/services/{service}`) and the node
//! kinds plugins declare for flows (`GET /api/v2/node-kinds`).
//!
//! The v2 error envelope is `{ "error": { "code": "FLOW_NOT_FOUND", "message": "...", "details": {...} } }`
//! (`details` only where there is more to say, such as the issues that blocked a release or the field of a
//! malformed body). The caller names themselves in the `X-Flowhost-User` header (who saved, released or holds
//! the edit lock; at most 128 characters); without it they are `anonymous`.

mod cel;
mod error;
mod flows;
mod runs;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use flowhost_role::openapi::{with_default_error, ApiRouter, CodedError};
use flowhost_role::routes;
use serde::de::DeserializeOwned;

pub(crate) use error::V2Error;

use crate::json::{parse_body, read_body, BodyError};
use crate::v1::SharedState;

pub(crate) fn routes() -> ApiRouter<SharedState> {
    let routes = ApiRouter::new()
        .routes(routes!(flows::list, flows::create))
        .routes(routes!(flows::schema))
        .routes(routes!(cel::functions))
        .routes(routes!(flows::validate_draft))
        .routes(routes!(flows::read, flows::save, flows::remove))
        .routes(routes!(flows::draft))
        .routes(routes!(flows::set_enabled))
        .routes(routes!(flows::validate_released))
        .routes(routes!(flows::release))
        .routes(routes!(flows::versions))
        .routes(routes!(flows::version))
        .routes(routes!(flows::attempts))
        .routes(routes!(flows::lock, flows::take_lock, flows::give_up_lock))
        .routes(routes!(flows::service))
        .routes(routes!(flows::service_flows))
        .routes(routes!(flows::node_kinds))
        .routes(routes!(runs::list))
        .routes(routes!(runs::read))
        .routes(routes!(runs::reply))
        .routes(routes!(runs::inbound))
        .routes(routes!(runs::dead_letters))
        .routes(routes!(runs::replay_many))
        .routes(routes!(runs::dead_letter))
        .routes(routes!(runs::replay_one));
    with_default_error::<CodedError, _>(
        routes,
        "The v2 error envelope `{ \"error\": { \"code\", \"message\", \"details\"? } }`",
    )
}

/// A body on a service transport (a reply, an inbound envelope): its `flowhost-signature` checked against the
/// exact bytes first when the deployment signs (401 `INVALID_SIGNATURE` otherwise; see
/// `flowhost_core::signing`), then parsed as [`V2Json`] does.
pub(crate) struct SignedV2Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<SharedState> for SignedV2Json<T> {
    type Rejection = V2Error;

    async fn from_request(req: Request, state: &SharedState) -> Result<Self, Self::Rejection> {
        let signature = req.headers().get(flowhost_core::signing::SIGNATURE_HEADER).cloned();
        let bytes = read_body(req, state).await.map_err(|(status, message)| {
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "PAYLOAD_TOO_LARGE" } else { "INVALID_BODY" };
            V2Error::new(status, code, message)
        })?;
        let signature = signature.as_ref().and_then(|value| value.to_str().ok());
        state
            .ports
            .signing
            .verify(signature, &bytes)
            .map_err(|error| V2Error::new(StatusCode::UNAUTHORIZED, "INVALID_SIGNATURE", error.to_string()))?;
        parse_body(&bytes)
            .map(SignedV2Json)
            .map_err(|BodyError { path, message }| V2Error::invalid_field(&path, message))
    }
}

/// A JSON body answered with the v2 envelope when it does not parse (`INVALID_BODY`, the field in `details`).
pub(crate) struct V2Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for V2Json<T> {
    type Rejection = V2Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await.map_err(|(status, message)| {
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE { "PAYLOAD_TOO_LARGE" } else { "INVALID_BODY" };
            V2Error::new(status, code, message)
        })?;
        parse_body(&bytes).map(V2Json).map_err(|BodyError { path, message }| V2Error::invalid_field(&path, message))
    }
}

/// Longest `X-Flowhost-User`.
const MAX_USER_LEN: usize = 128;

/// Who is calling, from `X-Flowhost-User` (`anonymous` when absent): a name the caller claims, not an identity
/// anything checked (records that keep it say `released_by_claimed: true`); authentication is the admin token.
pub(crate) struct Caller(pub Option<String>);

impl Caller {
    pub(crate) fn name(&self) -> &str {
        self.0.as_deref().unwrap_or("anonymous")
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = V2Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get("x-flowhost-user") else { return Ok(Caller(None)) };
        let invalid = || {
            V2Error::new(
                StatusCode::BAD_REQUEST,
                "INVALID_HEADER",
                format!("X-Flowhost-User must be 1 to {MAX_USER_LEN} printable characters"),
            )
        };
        let name = value.to_str().map_err(|_| invalid())?.trim();
        if name.is_empty() || name.len() > MAX_USER_LEN || name.chars().any(char::is_control) {
            return Err(invalid());
        }
        Ok(Caller(Some(name.to_owned())))
    }
}
