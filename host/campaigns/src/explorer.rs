//! The API explorer: Flowhost's own documentation proxy for this API.
//!
//! - `GET /openapi.json` (the listener's) is the OpenAPI 3.1 document of every route, generated from the handlers.
//! - `GET /explorer` is a page that reads that document and sends requests through the proxy path. It loads
//!   nothing from elsewhere: no request leaves the host.
//! - **A request comes through the proxy when its path starts with `/explorer/api/`.** Those requests need
//!   `Authorization: Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>` (compared in constant time); with the right
//!   bearer the rest of the path (`/api/...`) is answered by the API's own routes, so the answer is the same as
//!   a direct call's. A missing or wrong bearer is 401; with no token configured the proxy path is 503 (closed).
//! - Direct callers (`/api/v1/...`) need the same bearer when one is set ([`require_bearer`]), unless the
//!   operator keeps the specification's in-cluster model (`FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER`: callers
//!   behind network isolation need none).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use flowhost_core::config::Secret;
use flowhost_core::digest::TokenDigest;
use flowhost_role::{routes, ApiRouter};
use serde_json::json;
use tower::ServiceExt;
use utoipa::openapi::server::{Server, ServerBuilder};

/// The path prefix of requests through the explorer.
pub const PROXY_PREFIX: &str = "/explorer";

#[derive(Clone)]
struct Proxy {
    token: Option<TokenDigest>,
    api: Router,
}

/// The explorer's routes: the page, and the proxy path in front of `api`. The proxy mirrors every `/api/...`
/// route under `/explorer`, which the document says as its second server (OpenAPI has no path wildcard).
pub fn router(api: Router, token: Option<&Secret>) -> ApiRouter {
    let token = token.map(TokenDigest::new);
    let mut routes = ApiRouter::new().routes(routes!(page));
    routes.get_openapi_mut().servers = Some(vec![
        Server::new("/"),
        ServerBuilder::new()
            .url(PROXY_PREFIX)
            .description(Some("Through the explorer: every /api/... route, with the bearer"))
            .build(),
    ]);
    routes.route(&format!("{PROXY_PREFIX}/api/{{*rest}}"), any(proxy)).with_state(Proxy { token, api })
}

/// The explorer page: a form per `GET /api/...` route of `/openapi.json`; requests go through `/explorer/api/`.
#[utoipa::path(get, path = "/explorer", tag = "campaigns", responses(
    (status = 200, description = "The page", body = String, content_type = "text/html"),
))]
async fn page() -> Html<&'static str> {
    Html(PAGE)
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Whether `presented` (the whole `Authorization` value) is `Bearer <token>`, in constant time.
fn bearer_matches(presented: Option<&HeaderValue>, token: &TokenDigest) -> bool {
    token.matches_bearer(presented.and_then(|value| value.to_str().ok()))
}

/// `api` with every request needing `Authorization: Bearer <token>` (401 otherwise).
pub fn require_bearer(api: Router, token: &Secret) -> Router {
    api.layer(axum::middleware::from_fn_with_state(TokenDigest::new(token), check_bearer))
}

async fn check_bearer(State(token): State<TokenDigest>, request: Request, next: axum::middleware::Next) -> Response {
    if bearer_matches(request.headers().get(header::AUTHORIZATION), &token) {
        return next.run(request).await;
    }
    unauthorized("this API needs Authorization: Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>")
}

fn unauthorized(message: &str) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

async fn proxy(State(proxy): State<Proxy>, mut request: Request) -> Response {
    let Some(token) = &proxy.token else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the API explorer is closed: CAMPAIGN_EVENTS_API_BEARER_TOKEN is not set",
        );
    };
    if !bearer_matches(request.headers().get(header::AUTHORIZATION), token) {
        return unauthorized("requests through the API explorer need the bearer");
    }
    let path_and_query = request.uri().path_and_query().map_or("", |p| p.as_str());
    let inner = path_and_query.strip_prefix(PROXY_PREFIX).unwrap_or(path_and_query).to_owned();
    match inner.parse::<Uri>() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return error(StatusCode::BAD_REQUEST, "the path is not valid"),
    }
    match proxy.api.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// The explorer page: the document's GET routes, a form per route, the bearer kept for the tab only.
const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Campaign events API explorer</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; margin: 2rem; max-width: 60rem; color: #1b1b1b; }
section { border: 1px solid #ccc; border-radius: 6px; padding: 1rem; margin: 1rem 0; }
label { display: inline-block; margin: 0.25rem 1rem 0.25rem 0; }
input, select { font: inherit; }
pre { background: #f4f4f4; padding: 0.75rem; overflow: auto; max-height: 24rem; }
button { font: inherit; padding: 0.25rem 0.75rem; }
</style>
</head>
<body>
<h1>Campaign events API explorer</h1>
<p>Requests from this page go through <code>/explorer/api/…</code> and need the API bearer
(<code>CAMPAIGN_EVENTS_API_BEARER_TOKEN</code>); it is kept in this tab only.</p>
<label>Bearer <input id="bearer" type="password" autocomplete="off" size="40"></label>
<div id="routes"></div>
<script>
const bearer = document.getElementById('bearer');
bearer.value = sessionStorage.getItem('bearer') || '';
bearer.addEventListener('change', () => sessionStorage.setItem('bearer', bearer.value));
fetch('/openapi.json').then(r => r.json()).then(doc => {
  const routes = document.getElementById('routes');
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!path.startsWith('/api/') || !item.get) continue;
    const op = item.get;
    const section = document.createElement('section');
    const title = document.createElement('h2');
    title.textContent = 'GET ' + path;
    section.appendChild(title);
    const summary = document.createElement('p');
    summary.textContent = op.summary || '';
    section.appendChild(summary);
    const inputs = {};
    for (const p of op.parameters || []) {
      const label = document.createElement('label');
      label.textContent = p.name + (p.required ? ' *' : '') + ' ';
      let input;
      if (p.schema && p.schema.enum) {
        input = document.createElement('select');
        input.appendChild(new Option('', ''));
        for (const v of p.schema.enum) input.appendChild(new Option(v, v));
      } else {
        input = document.createElement('input');
        input.size = 16;
      }
      input.setAttribute('aria-label', p.name);
      label.appendChild(input);
      section.appendChild(label);
      inputs[p.name] = [p, input];
    }
    const send = document.createElement('button');
    send.textContent = 'Send';
    const out = document.createElement('pre');
    send.addEventListener('click', async () => {
      let url = path;
      const query = new URLSearchParams();
      for (const [name, [p, input]] of Object.entries(inputs)) {
        if (!input.value) continue;
        if (p.in === 'path') url = url.replace('{' + name + '}', encodeURIComponent(input.value));
        else query.set(name, input.value);
      }
      const qs = query.toString();
      const response = await fetch('/explorer' + url + (qs ? '?' + qs : ''),
        { headers: { 'Authorization': 'Bearer ' + bearer.value } });
      const text = await response.text();
      let body = text;
      try { body = JSON.stringify(JSON.parse(text), null, 2); } catch (e) {}
      out.textContent = response.status + ' (X-Request-Id ' + response.headers.get('x-request-id') + ')\n' + body;
    });
    section.appendChild(send);
    section.appendChild(out);
    routes.appendChild(section);
  }
});
</script>
</body>
</html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_is_compared_whole() {
        let token = TokenDigest::new(&Secret::new("0123456789abcdef"));
        let header = |text: &str| Some(HeaderValue::from_str(text).unwrap());
        assert!(bearer_matches(header("Bearer 0123456789abcdef").as_ref(), &token));
        for wrong in [
            "Bearer 0123456789abcde",
            "Bearer 0123456789abcdefg",
            "bearer 0123456789abcdef",
            "0123456789abcdef",
            "Bearer ",
        ] {
            assert!(!bearer_matches(header(wrong).as_ref(), &token), "{wrong}");
        }
        assert!(!bearer_matches(None, &token));
    }
}
