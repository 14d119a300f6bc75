//! Request bodies: the JSON object extractor (413 past the body limit, 400 `VALIDATION_ERROR` for anything
//! that is not a JSON object). Handlers read typed fields out of the object with `flowhost_notifications`'s `Fields`,
//! which collects every problem, so one 400 names all offending fields at once.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde_json::{Map, Value};

use crate::error::PushError;

/// The request body as a JSON object.
pub struct JsonObject(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = PushError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                PushError::new(StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE", "request body is too large")
            } else {
                PushError::field("body", "cannot read the request body")
            }
        })?;
        parse_object(&bytes).map(JsonObject)
    }
}

/// A request body as a JSON object, or the 400 that refuses it (what [`JsonObject`] extracts).
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, PushError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(PushError::field("body", "a JSON object is required"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(PushError::field("body", "must be a JSON object")),
        Err(e) => Err(PushError::field("body", format!("malformed JSON at line {} column {}", e.line(), e.column()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_must_be_objects() {
        for body in [&b""[..], b"  ", b"[1]", b"{\"a\":", b"null"] {
            let error = parse_object(body).unwrap_err();
            assert_eq!((error.status(), error.code()), (StatusCode::BAD_REQUEST, "VALIDATION_ERROR"));
        }
        assert!(parse_object(b"{\"a\": 1}").is_ok());
    }
}
