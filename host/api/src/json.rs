//! A JSON body extractor that answers bad input with the v1 envelope: 400 for malformed JSON or wrong types
//! (naming the offending field's path), 413 past the body limit. It does not insist on a `Content-Type`.

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
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body is too large")
            } else {
                ApiError::bad_request(format!("cannot read request body: {rejection}"))
            }
        })?;
        parse(&bytes).map(JsonBody)
    }
}

/// Parses a body; an empty body reads as `{}` so optional-only bodies may be omitted.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ApiError::bad_request(format!("invalid body: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid body: {path}: {inner}"))
        }
    })
}
