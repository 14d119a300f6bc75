//! Studio, the flow editor, served by the admin listener under `/studio/`: the web app of `web/` (TypeScript,
//! React and React Flow, bundled by esbuild at build time) embedded in the binary, so Studio needs no install
//! and loads nothing from elsewhere. The page's Content-Security-Policy allows only this origin, and no other
//! site may frame it. Studio calls the admin API on the same origin with the admin token as a bearer.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use flowhost_role::{routes, ApiRouter};

#[derive(rust_embed::Embed)]
#[folder = "$OUT_DIR/studio"]
struct Assets;

/// What the page may load: this origin only (styles also inline, which React Flow's node positions use).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// The routes: `/studio` (redirected to `/studio/`), `/studio/` (the page) and `/studio/{file}` (its assets).
pub fn router() -> ApiRouter {
    ApiRouter::new().routes(routes!(redirect)).routes(routes!(page)).routes(routes!(file))
}

/// Studio lives under `/studio/`.
#[utoipa::path(get, path = "/studio", tag = "studio", responses((status = 308, description = "To `/studio/`")))]
async fn redirect() -> Redirect {
    Redirect::permanent("/studio/")
}

/// Studio's page.
#[utoipa::path(get, path = "/studio/", tag = "studio", responses(
    (status = 200, description = "The page", body = String, content_type = "text/html"),
))]
async fn page() -> Response {
    asset("index.html")
}

/// One of Studio's files (scripts, styles, images).
#[utoipa::path(get, path = "/studio/{file}", tag = "studio", responses(
    (status = 200, description = "The file", body = Vec<u8>, content_type = "application/octet-stream"),
    (status = 404, description = "No such file", body = String, content_type = "text/plain"),
))]
async fn file(Path(file): Path<String>) -> Response {
    asset(&file)
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

fn asset(file: &str) -> Response {
    let Some(found) = Assets::get(file) else {
        return (StatusCode::NOT_FOUND, "no such Studio file").into_response();
    };
    let mut response = found.data.into_owned().into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(file)));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // File names do not change between releases: revalidate instead of caching.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Every file Studio is made of, with its size (the bundle's measure).
pub fn files() -> Vec<(String, usize)> {
    Assets::iter().map(|name| (name.to_string(), Assets::get(&name).map_or(0, |file| file.data.len()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_bundle_are_embedded() {
        let names: Vec<String> = files().into_iter().map(|(name, _)| name).collect();
        for expected in ["index.html", "studio.js", "studio.css"] {
            assert!(names.iter().any(|name| name == expected), "{expected} in {names:?}");
        }
        let page = asset("index.html");
        assert_eq!(page.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(page.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("frame-ancestors 'none'"));
        assert_eq!(asset("missing.js").status(), StatusCode::NOT_FOUND);
        assert_eq!(content_type("studio.js"), "text/javascript; charset=utf-8");
    }
}
