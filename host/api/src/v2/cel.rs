//! `GET /api/v2/cel/functions`: the CEL environment every expression is checked and run in (`flowhost-cel`), as
//! an editor's completion list: each function, method and macro with its signatures, and the limits.

use axum::Json;
use serde_json::{json, Value};

#[utoipa::path(get, path = "/api/v2/cel/functions", tag = "v2 flows", responses((status = 200, description = "The CEL environment: functions, macros and types", body = Value)))]
pub(crate) async fn functions() -> Json<Value> {
    Json(json!({
        "functions": flowhost_cel::catalog(),
        "limits": {
            "max_expression_bytes": flowhost_cel::MAX_EXPRESSION_BYTES,
            "max_nesting": flowhost_cel::MAX_NESTING,
            "max_depth": flowhost_cel::MAX_DEPTH,
            "max_comprehension_nesting": flowhost_cel::MAX_COMPREHENSION_NESTING,
            "max_range": flowhost_cel::MAX_RANGE,
        },
    }))
}
