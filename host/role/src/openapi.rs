//! The OpenAPI 3.1 document every socket serves at `GET /openapi.json`, generated from the handlers.
//!
//! A role builds its routes with [`ApiRouter`] and `routes!(handler, ...)` over handlers annotated with
//! `#[utoipa::path]`: the router and the document come from the same list, so a route cannot be served without
//! being documented ([`Listener::new`](crate::Listener::new) takes an `ApiRouter`). A socket's document merges the
//! documents of its listeners with its probes, `/metrics` and itself; every operation gets a unique operation id
//! (`get_api_v1_triggers_id`, from its method and path) and, unless it names one, a `default` response: the error
//! envelope of its surface ([`with_default_error`]), which every status the operation does not list answers.

use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::{ContentBuilder, Info, OpenApi, OpenApiBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::ToSchema;

pub use utoipa;
pub use utoipa_axum::router::UtoipaMethodRouterExt;
pub use utoipa_axum::routes;

/// A router that documents what it routes (utoipa-axum's `OpenApiRouter`).
pub type ApiRouter<S = ()> = utoipa_axum::router::OpenApiRouter<S>;

/// Where every socket serves its document.
pub const DOCUMENT_PATH: &str = "/openapi.json";

/// The error envelope with a code, `{ "error": { "code", "message", "details"? } }`, of the admin API v2, the push
/// service and the gateway (documentation only: each surface writes it with its own error type).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CodedError {
    error: CodedErrorDetail,
}

/// The `error` object of [`CodedError`].
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CodedErrorDetail {
    /// A stable code, such as `FLOW_NOT_FOUND`.
    code: String,
    /// What went wrong, for a person.
    message: String,
    /// More to say, where there is (the issues that blocked a release, the field of a malformed body).
    #[schema(value_type = Option<Object>)]
    details: Option<serde_json::Value>,
}

/// `router` as an [`ApiRouter`] documented by `document`: for a role that layers its routes as a plain router
/// after [`ApiRouter::split_for_parts`] (the document must come from the same routes).
pub fn documented(router: axum::Router, document: OpenApi) -> ApiRouter {
    ApiRouter::with_openapi(document).merge(ApiRouter::from(router))
}

/// `routes` with `E` (the surface's error envelope) as the `default` response of every operation that has none:
/// the answer of every status an operation does not list.
pub fn with_default_error<E: ToSchema, S: Clone + Send + Sync + 'static>(
    mut routes: ApiRouter<S>,
    description: &str,
) -> ApiRouter<S> {
    add_default_error::<E>(routes.get_openapi_mut(), description);
    routes
}

fn add_default_error<E: ToSchema>(doc: &mut OpenApi, description: &str) {
    let name = E::name().into_owned();
    let mut schemas = Vec::new();
    E::schemas(&mut schemas);
    let components = doc.components.get_or_insert_with(Default::default);
    components.schemas.insert(name.clone(), E::schema());
    for (schema_name, schema) in schemas {
        components.schemas.entry(schema_name).or_insert(schema);
    }
    let response = ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name(name))).build())
        .build();
    for item in doc.paths.paths.values_mut() {
        for (_, operation) in operations(item) {
            operation.responses.responses.entry("default".to_owned()).or_insert_with(|| RefOr::T(response.clone()));
        }
    }
}

/// The document of one socket: `parts` (its listeners' documents and its probes) merged, titled by the
/// listeners it serves, with unique operation ids.
pub(crate) fn socket_document(names: &[&'static str], parts: Vec<OpenApi>) -> OpenApi {
    let title = format!("Flowhost: {}", if names.is_empty() { "probes".to_owned() } else { names.join(", ") });
    let mut info = Info::new(title, env!("CARGO_PKG_VERSION").to_owned());
    info.description = Some(
        "Generated from the handlers of this socket. An operation's `default` response is its error envelope, \
         the answer of every status the operation does not list."
            .to_owned(),
    );
    let mut doc = OpenApiBuilder::new().info(info).build();
    for part in parts {
        doc.merge(part);
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, operation) in operations(item) {
            operation.operation_id = Some(operation_id(method, path));
            // A response object must have a description: the status's reason phrase where a handler gave none.
            for (status, response) in operation.responses.responses.iter_mut() {
                if let RefOr::T(response) = response {
                    if response.description.is_empty() {
                        response.description = reason(status);
                    }
                }
            }
        }
    }
    doc
}

/// `"OK"` for `"200"`; `"Error"` for `default`.
fn reason(status: &str) -> String {
    status
        .parse::<u16>()
        .ok()
        .and_then(|code| axum::http::StatusCode::from_u16(code).ok())
        .and_then(|code| code.canonical_reason())
        .unwrap_or("Error")
        .to_owned()
}

/// `get_api_v1_triggers_id` for `GET /api/v1/triggers/{id}`: unique per socket, stable across releases.
fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for part in path.split(|c: char| !c.is_ascii_alphanumeric()).filter(|part| !part.is_empty()) {
        id.push('_');
        id.push_str(part);
    }
    if path.len() > 1 && path.ends_with('/') {
        // `/api/v1/tenants/` beside `/api/v1/tenants`.
        id.push_str("_slash");
    }
    id
}

/// The operations of `item` with their lower-case method names.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("put", item.put.as_mut()),
        ("post", item.post.as_mut()),
        ("delete", item.delete.as_mut()),
        ("options", item.options.as_mut()),
        ("head", item.head.as_mut()),
        ("patch", item.patch.as_mut()),
        ("trace", item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.map(|operation| (method, operation)))
}

/// The `(METHOD, path)` pairs of `doc`, sorted: what a socket routes.
pub fn operations_of(doc: &OpenApi) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for (path, item) in &doc.paths.paths {
        let mut item = item.clone();
        for (method, _) in operations(&mut item) {
            pairs.push((method.to_ascii_uppercase(), path.clone()));
        }
    }
    pairs.sort();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_name_the_method_and_every_path_segment() {
        assert_eq!(operation_id("get", "/api/v1/triggers/{id}"), "get_api_v1_triggers_id");
        assert_eq!(operation_id("post", "/api/v1/templates/in-app"), "post_api_v1_templates_in_app");
        assert_eq!(operation_id("post", "/api/v1/templates/in-app/"), "post_api_v1_templates_in_app_slash");
        assert_eq!(operation_id("get", "/openapi.json"), "get_openapi_json");
    }
}
