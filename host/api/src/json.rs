//! JSON body extractors that answer bad input with their envelope: 400 for malformed JSON or wrong types
//! (naming the offending field's path), 413 past the body limit. They do not insist on a `Content-Type`.
//! [`JsonBody`] answers with the v1 envelope; the v2 routes' `V2Json` uses [`read_body`] and [`parse_body`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await.map_err(|(status, message)| ApiError::new(status, message))?;
        parse(&bytes).map(JsonBody)
    }
}

/// The request body, or the status and message to refuse it with (413 past the limit, else 400).
pub async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, (StatusCode, String)> {
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            (StatusCode::PAYLOAD_TOO_LARGE, "request body is too large".to_owned())
        } else {
            (StatusCode::BAD_REQUEST, format!("cannot read request body: {rejection}"))
        }
    })
}

/// Why a body does not parse: the offending field's path (empty for the whole body) and the reason.
pub struct BodyError {
    pub path: String,
    pub message: String,
}

/// Parses a body; an empty body reads as `{}` so optional-only bodies may be omitted.
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        BodyError { path, message: e.into_inner().to_string() }
    })
}

/// [`parse_body`] answering with the v1 envelope.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    parse_body(bytes).map_err(|BodyError { path, message }| {
        if path.is_empty() {
            ApiError::bad_request(format!("invalid body: {message}"))
        } else {
            ApiError::bad_request(format!("invalid body: {path}: {message}"))
        }
    })
}
