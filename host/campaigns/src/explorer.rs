//! The API explorer: Flowhost's own documentation proxy for this API.
//!
//! - `GET /api/v1/openapi.json` is the OpenAPI 3.1 document of every route (open, like the API itself).
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
use axum::routing::{any, get};
use axum::{Json, Router};
use flowhost_core::config::Secret;
use flowhost_core::digest::TokenDigest;
use serde_json::{json, Value};
use tower::ServiceExt;

/// The path prefix of requests through the explorer.
pub const PROXY_PREFIX: &str = "/explorer";

#[derive(Clone)]
struct Proxy {
    token: Option<TokenDigest>,
    api: Router,
}

/// The explorer's routes: the OpenAPI document, the page, and the proxy path in front of `api`.
pub fn router(api: Router, token: Option<&Secret>) -> Router {
    let token = token.map(TokenDigest::new);
    Router::new()
        .route("/api/v1/openapi.json", get(|| async { Json(document()) }))
        .route(PROXY_PREFIX, get(|| async { Html(PAGE) }))
        .route(&format!("{PROXY_PREFIX}/api/{{*rest}}"), any(proxy))
        .with_state(Proxy { token, api })
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

fn page_parameters() -> Value {
    json!([
        {"name": "page", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1_000_000, "default": 1}},
        {"name": "page_size", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
    ])
}

fn tenant_parameter(required: bool) -> Value {
    json!({"name": "tenant_id", "in": "query", "required": required,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"}})
}

fn query(name: &str, values: &[&str]) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "enum": values}})
}

fn json_answer(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn errors() -> Value {
    let error = json_answer("An error", json!({"$ref": "#/components/schemas/Error"}));
    let unauthorized =
        json_answer("A bearer is configured and this request lacks it", json!({"$ref": "#/components/schemas/Error"}));
    json!({"400": error, "401": unauthorized, "404": error, "500": error})
}

fn with_errors(success: Value) -> Value {
    let mut responses = errors();
    responses["200"] = success;
    responses
}

fn text_answer(description: &str, example: &str) -> Value {
    json!({"description": description, "content": {"text/plain": {"schema": {"type": "string", "example": example}}}})
}

/// The OpenAPI 3.1 document of this API.
pub fn document() -> Value {
    let freshness = json!({"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Freshness"}});
    let paged = |items: Value| {
        json!({"type": "object", "required": ["items", "applied_filters", "page", "page_size", "total_items", "total_pages", "freshness"],
            "properties": {"items": {"type": "array", "items": items}, "applied_filters": {"type": "object"},
                "page": {"type": "integer"}, "page_size": {"type": "integer"}, "total_items": {"type": "integer"},
                "total_pages": {"type": "integer"}, "freshness": freshness}})
    };
    let mut campaign_list = paged(json!({"$ref": "#/components/schemas/CampaignRow"}));
    campaign_list["properties"]["summary"] = json!({"$ref": "#/components/schemas/Summary"});
    campaign_list["properties"]["status_counts"] = json!({"$ref": "#/components/schemas/StatusCounts"});
    let mut campaign_params = vec![tenant_parameter(true)];
    campaign_params.extend(page_parameters().as_array().cloned().unwrap_or_default());
    campaign_params.extend([
        query("ui_status", &["suggestions", "running", "paused", "ended"]),
        query("campaign_origin", &["flow", "external"]),
        query("sort", &["updated_at", "name", "starts_at", "ends_at"]),
        query("order", &["asc", "desc"]),
    ]);
    let mut live_params = vec![tenant_parameter(true)];
    live_params.extend(page_parameters().as_array().cloned().unwrap_or_default());
    live_params.extend([
        query("kind", &crate::live::KINDS),
        json!({"name": "campaign_id", "in": "query", "schema": {"type": "string", "pattern": "^(external:)?[A-Za-z0-9._-]{1,128}$"}}),
    ]);
    let string = json!({"type": "string"});
    let nullable_string = json!({"type": ["string", "null"]});
    let integer = json!({"type": "integer"});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Flowhost campaign events API", "version": "1",
            "description": "Read-only campaigns, live events and overview per tenant, served from synchronized read models. \
                Every response carries X-Request-Id. Requests through the explorer (/explorer/api/...) need the bearer, \
                and direct ones too when one is configured (unless FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER)."},
        "servers": [{"url": "/", "description": "direct"}, {"url": PROXY_PREFIX, "description": "through the explorer (bearer)"}],
        "paths": {
            "/api/v1/overview": {"get": {"summary": "A tenant's counters", "parameters": [tenant_parameter(true)],
                "responses": with_errors(json_answer("The overview", json!({"$ref": "#/components/schemas/Overview"})))}},
            "/api/v1/campaigns": {"get": {"summary": "A tenant's campaigns, a page at a time", "parameters": campaign_params,
                "responses": with_errors(json_answer("A page of campaign rows", campaign_list))}},
            "/api/v1/campaigns/{campaign_id}": {"get": {"summary": "One campaign",
                "parameters": [{"name": "campaign_id", "in": "path", "required": true, "schema": string,
                    "description": "A flow's id, or external:<id> for a campaign of the external campaign source"}, tenant_parameter(false)],
                "responses": with_errors(json_answer("The detail object", json!({"$ref": "#/components/schemas/CampaignDetail"})))}},
            "/api/v1/live-events": {"get": {"summary": "A tenant's live events, newest first", "parameters": live_params,
                "responses": with_errors(json_answer("A page of live events", paged(json!({"$ref": "#/components/schemas/LiveEvent"}))))}},
            "/api/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": json_answer("OpenAPI 3.1", json!({"type": "object"}))}}},
            "/health": {"get": {"summary": "Liveness; reads nothing", "responses": {"200": text_answer("Alive", "ok")}}},
            "/ready": {"get": {"summary": "Readiness: the read-model store answers and the slices synced once since the start",
                "responses": {"200": text_answer("Ready", "ready"), "503": text_answer("Not ready", "not ready")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics with the sync_state gauges",
                "responses": {"200": text_answer("Metrics", "sync_state{measure=\"lag_seconds\",slice=\"campaigns\",tenant_id=\"7\"} 0")}}},
        },
        "components": {
            "securitySchemes": {"explorerBearer": {"type": "http", "scheme": "bearer",
                "description": "Needed only through the explorer (/explorer/api/...)"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": string}},
                "Freshness": {"type": "object", "properties": {
                    "state": {"enum": ["fresh", "stale", "never_synced", "not_configured"]},
                    "last_success_at": nullable_string, "fresh_until": nullable_string,
                    "lag_seconds": {"type": "number"}, "consecutive_failures": integer}},
                "StatusCounts": {"type": "object", "properties": {"suggestions": integer, "running": integer, "paused": integer, "ended": integer}},
                "Summary": {"type": "object", "properties": {"campaigns_total": integer, "players_engaged_total": integer,
                    "deliveries_total": integer, "interactions_total": integer}},
                "Overview": {"type": "object", "properties": {"tenant_id": string, "campaigns_total": integer,
                    "players_engaged_total": integer, "deliveries_total": integer, "interactions_total": integer,
                    "status_counts": {"$ref": "#/components/schemas/StatusCounts"}, "live_events_total": integer,
                    "support_cases_total": {"type": ["integer", "null"], "description": "Chat conversations only; null while no support source is configured"},
                    "freshness": freshness}},
                "CampaignRow": {"type": "object", "properties": {"campaign_id": string, "tenant_id": string, "name": string,
                    "campaign_origin": {"enum": ["flow", "external"]}, "ui_status": {"enum": ["suggestions", "running", "paused", "ended"]},
                    "flow_status": {"enum": ["draft", "valid", "invalid", null], "description": "null for an external campaign"},
                    "external_state": {"enum": ["draft", "active", "paused", null], "description": "an external campaign's own state; null for a flow"},
                    "enabled": {"type": "boolean"},
                    "released_version": {"type": ["integer", "null"]}, "starts_at": nullable_string, "ends_at": nullable_string,
                    "archived": {"type": "boolean"}, "broken_reasons_count": integer, "created_at": string, "updated_at": string}},
                "CampaignDetail": {"allOf": [{"$ref": "#/components/schemas/CampaignRow"}, {"type": "object", "properties": {
                    "description": string, "offering": string, "players_engaged": integer, "deliveries": integer,
                    "interactions": integer, "broken_reasons": {"type": "array"}, "freshness": freshness}}]},
                "LiveEvent": {"type": "object", "properties": {"event_id": string, "kind": {"enum": crate::live::KINDS},
                    "occurred_at": string, "campaign_id": nullable_string, "run_id": nullable_string,
                    "notification_id": nullable_string, "player_id": {"type": ["integer", "null"]}, "channel": nullable_string,
                    "interaction_type": nullable_string}},
            },
        },
    })
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
fetch('/api/v1/openapi.json').then(r => r.json()).then(doc => {
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
    fn every_route_is_documented() {
        let document = document();
        for route in crate::api::ROUTES {
            assert!(document["paths"].get(route).is_some(), "{route} is not in the OpenAPI document");
        }
        for path in ["/health", "/ready", "/metrics", "/api/v1/openapi.json"] {
            assert!(document["paths"].get(path).is_some(), "{path}");
        }
    }

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
