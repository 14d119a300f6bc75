//! The v1 error envelope `{ "error": "<message>" }` and the mapping of failures to status codes. Internal
//! details (a backend's message) are logged, never sent: the client sees a generic 503/500 message.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use flowhost_core::ports::PortError;
use serde_json::{json, Map, Value};
use tracing::error;

/// The v1 error envelope as documented: `error` always, `errors` when validation listed several.
#[derive(utoipa::ToSchema)]
#[schema(as = V1Error)]
#[allow(dead_code)] // documentation only: `ApiError` writes the same shape
pub(crate) struct ErrorBody {
    /// What went wrong, for a person.
    error: String,
    /// Each validation error, when there were several.
    errors: Option<Vec<String>>,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    /// Extra fields beside `error` (e.g. the list of validation `errors`).
    extra: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), extra: Map::new() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 502: an upstream the request depends on (a component's data source) failed or cannot be reached.
    pub fn bad_gateway(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_GATEWAY, message)
    }

    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }

    /// A 400 whose message joins `errors`, which are also returned as a list.
    pub fn invalid(prefix: &str, errors: Vec<String>) -> Self {
        Self::bad_request(format!("{prefix}: {}", errors.join("; "))).with("errors", json!(errors))
    }

    /// Adds the field `key` beside `error`.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<PortError> for ApiError {
    fn from(e: PortError) -> Self {
        match e {
            PortError::Conflict(id) => ApiError::conflict(format!("{id} already exists")),
            PortError::Invalid(message) => ApiError::bad_request(message),
            PortError::Unavailable(_) | PortError::Timeout(_) | PortError::NoResponders(_) => {
                error!(error = %e, "storage unavailable");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "storage is unavailable; retry later")
            }
            PortError::Backend(_) => {
                error!(error = %e, "storage error");
                ApiError::internal()
            }
            // Logged where the document failed to convert.
            PortError::Malformed(_) => ApiError::internal(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".to_owned(), Value::String(self.message));
        body.extend(self.extra);
        (self.status, Json(Value::Object(body))).into_response()
    }
}
