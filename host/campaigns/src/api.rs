//! The routes of the campaign events API (spec 002 part C) under `/api/v1`, their query parsing and errors.
//!
//! - Errors are `{ "error": string }`. Validation, authentication and not-found messages are public; an
//!   unexpected failure answers 500 `{ "error": "internal server error" }` and its detail goes to the log only,
//!   under the request's id.
//! - Every response carries `X-Request-Id`: the request's own value when it is 1 to 128 visible ASCII
//!   characters (reused as the trace id of the request's log lines), else a generated UUID.
//! - Query parameters are checked: an unknown or repeated parameter, a bad `page` or `page_size` or an unknown
//!   filter value is a 400 naming the parameter. A page past the end is an empty page with the right totals.

use std::collections::BTreeMap;

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use flowhost_core::model::{is_slug, MAX_FLOW_ID_LEN, MAX_TENANT_ID_LEN};
use flowhost_core::ports::Direction;
use flowhost_core::Clock;
use flowhost_role::openapi::{documented, with_default_error};
use flowhost_role::{routes, ApiRouter};
use serde_json::{json, Value};
use std::sync::Arc;
use tracing::{error, Instrument};

use crate::external::is_external_id;
use crate::list_cache::{ListCache, ListPage};
use crate::live_marks::LiveMarks;
use crate::live_model::{LiveEvent, KINDS, LIVE_EVENTS};
use crate::model::{Origin, UiStatus};
use crate::read_model::{CampaignFilter, ReadModels, SortKey};
use crate::sync::{CAMPAIGNS, OVERVIEW, SUPPORT};

/// The request header (and response header) carrying the request's id.
pub const REQUEST_ID: &str = "x-request-id";
/// Default and largest `page_size`.
pub const DEFAULT_PAGE_SIZE: u64 = 20;
pub const MAX_PAGE_SIZE: u64 = 100;
/// Largest `page` (far beyond any real list; keeps the offset arithmetic small).
const MAX_PAGE: u64 = 1_000_000;

#[derive(Clone)]
pub struct Api {
    pub read_models: ReadModels,
    pub clock: Arc<dyn Clock>,
    /// Whether a support-case source is configured (else `support_cases_total` is unknown).
    pub support_configured: bool,
    pub lists: Arc<ListCache>,
    /// Where deep pages of the live-event lists start.
    pub live_marks: Arc<LiveMarks>,
}

/// An answer other than success.
#[derive(Debug)]
pub enum ApiError {
    /// 400 with a public message.
    BadRequest(String),
    /// 404 with a public message.
    NotFound(String),
    /// 500; the detail is logged, never sent.
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::BadRequest(message) => (StatusCode::BAD_REQUEST, message),
            ApiError::NotFound(message) => (StatusCode::NOT_FOUND, message),
            ApiError::Internal(detail) => {
                error!(%detail, "campaign events API request failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal server error".to_owned())
            }
        };
        (status, Json(json!({ "error": message }))).into_response()
    }
}

impl From<flowhost_core::ports::PortError> for ApiError {
    fn from(error: flowhost_core::ports::PortError) -> Self {
        ApiError::Internal(error.to_string())
    }
}

pub const OVERVIEW_PATH: &str = "/api/v1/overview";
pub const CAMPAIGNS_PATH: &str = "/api/v1/campaigns";
pub const CAMPAIGN_PATH: &str = "/api/v1/campaigns/{campaign_id}";
pub const LIVE_EVENTS_PATH: &str = "/api/v1/live-events";

/// The API's routes, state applied; what no route matches answers 404 `{"error": "not found"}`.
pub fn router(api: Api) -> ApiRouter {
    let routes = ApiRouter::new()
        .routes(routes!(overview))
        .routes(routes!(campaigns))
        .routes(routes!(campaign))
        .routes(routes!(live_events));
    let (routes, document) =
        with_default_error::<crate::openapi::ErrorBody, _>(routes, "`{ \"error\": message }`").split_for_parts();
    documented(routes.method_not_allowed_fallback(method_not_allowed).with_state(api), document)
}

/// Answers what no route matched.
pub fn fallback() -> Router {
    Router::new().fallback(not_found)
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "error": "not found" }))).into_response()
}

async fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, Json(json!({ "error": "method not allowed" }))).into_response()
}

/// Wraps a whole socket's router: every response carries `X-Request-Id`.
pub fn with_request_id(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(request_id))
}

fn usable_request_id(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    let ok = !text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_graphic());
    ok.then(|| text.to_owned())
}

async fn request_id(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(usable_request_id)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let span = tracing::info_span!("request", trace_id = %id, method = %request.method(), path = %request.uri().path());
    let mut response = next.run(request).instrument(span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The query string's parameters, each at most once and each one of `known`.
fn parameters(raw: Option<String>, known: &[&str]) -> Result<BTreeMap<String, String>, ApiError> {
    let mut found = BTreeMap::new();
    let raw = raw.unwrap_or_default();
    for (name, value) in form_urlencoded::parse(raw.as_bytes()) {
        if !known.contains(&name.as_ref()) {
            return Err(ApiError::BadRequest(format!(
                "unknown query parameter `{name}` (known: {})",
                known.join(", ")
            )));
        }
        if found.insert(name.to_string(), value.to_string()).is_some() {
            return Err(ApiError::BadRequest(format!("query parameter `{name}` is given more than once")));
        }
    }
    Ok(found)
}

fn tenant(value: &str) -> Result<String, ApiError> {
    if !is_slug(value, MAX_TENANT_ID_LEN) {
        return Err(ApiError::BadRequest("tenant_id must be 1 to 64 letters, digits, '-', '_' or '.'".to_owned()));
    }
    Ok(value.to_owned())
}

fn required_tenant(params: &BTreeMap<String, String>) -> Result<String, ApiError> {
    let value = params.get("tenant_id").ok_or_else(|| ApiError::BadRequest("tenant_id is required".to_owned()))?;
    tenant(value)
}

/// A positive integer parameter at most `max`, `default` when absent.
fn number(params: &BTreeMap<String, String>, name: &str, default: u64, max: u64) -> Result<u64, ApiError> {
    let Some(text) = params.get(name) else { return Ok(default) };
    match text.parse::<u64>() {
        Ok(value) if (1..=max).contains(&value) => Ok(value),
        _ => Err(ApiError::BadRequest(format!("{name} must be an integer from 1 to {max}"))),
    }
}

/// One of the allowed values of a filter parameter.
fn choice<T: Copy>(
    params: &BTreeMap<String, String>,
    name: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &[&str],
) -> Result<Option<T>, ApiError> {
    let Some(text) = params.get(name) else { return Ok(None) };
    match parse(text) {
        Some(value) => Ok(Some(value)),
        None => Err(ApiError::BadRequest(format!("{name} must be one of: {}", allowed.join(", ")))),
    }
}

impl Api {
    /// The freshness of `slices` for `tenant` (a tenant never synced shows `never_synced`).
    async fn freshness(&self, tenant: &str, slices: &[&str]) -> Result<Value, ApiError> {
        let now = self.clock.now_ms();
        let mut freshness = serde_json::Map::new();
        for slice in slices {
            let state = self.read_models.sync_state(slice, tenant).await?.unwrap_or_default();
            freshness.insert((*slice).to_owned(), state.freshness(now));
        }
        Ok(Value::Object(freshness))
    }
}

/// `GET /api/v1/overview?tenant_id=`
#[utoipa::path(get, path = OVERVIEW_PATH, tag = "campaigns", params(crate::openapi::OverviewQuery, ("Authorization" = Option<String>, Header, description = "`Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>` when one is configured")), responses((status = 200, description = "The tenant's counters with their freshness", body = Value)))]
async fn overview(State(api): State<Api>, RawQuery(raw): RawQuery) -> Result<Json<Value>, ApiError> {
    let params = parameters(raw, &["tenant_id"])?;
    let tenant = required_tenant(&params)?;
    let aggregate = api.read_models.aggregate(&tenant).await?.unwrap_or_default();
    let counters = aggregate.counters(None, None);
    let mut overview = json!({ "tenant_id": tenant });
    overview.as_object_mut().expect("an object").extend(counters.summary().as_object().cloned().unwrap_or_default());
    overview["status_counts"] = aggregate.status_counts(None);
    overview["live_events_total"] = json!(api.read_models.live_events_total(&tenant).await?);
    // Unknown (never a silent 0) until a configured source answered for this tenant; the freshness says why.
    let support = api.read_models.sync_state(SUPPORT, &tenant).await?;
    let synced = support.is_some_and(|state| state.last_success_ms.is_some());
    overview["support_cases_total"] = match api.support_configured && synced {
        true => json!(crate::support::chat_cases(&api.read_models, &tenant).await?),
        false => Value::Null,
    };
    overview["freshness"] = api.freshness(&tenant, &[CAMPAIGNS, LIVE_EVENTS, OVERVIEW, SUPPORT]).await?;
    Ok(Json(overview))
}

/// `GET /api/v1/campaigns?tenant_id=&page=&page_size=&ui_status=&campaign_origin=&sort=&order=`
#[utoipa::path(get, path = CAMPAIGNS_PATH, tag = "campaigns", params(crate::openapi::CampaignsQuery, ("Authorization" = Option<String>, Header, description = "`Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>` when one is configured")), responses((status = 200, description = "A page of campaign rows with summary, status counts and freshness", body = Value)))]
async fn campaigns(State(api): State<Api>, RawQuery(raw): RawQuery) -> Result<Json<Value>, ApiError> {
    let params = parameters(raw, &["tenant_id", "page", "page_size", "ui_status", "campaign_origin", "sort", "order"])?;
    let tenant = required_tenant(&params)?;
    let page = number(&params, "page", 1, MAX_PAGE)?;
    let page_size = number(&params, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let statuses: Vec<&str> = UiStatus::ALL.iter().map(|s| s.as_str()).collect();
    let ui_status = choice(&params, "ui_status", UiStatus::parse, &statuses)?;
    let origins: Vec<&str> = Origin::ALL.iter().map(|o| o.as_str()).collect();
    let campaign_origin = choice(&params, "campaign_origin", Origin::parse, &origins)?;
    let sorts: Vec<&str> = SortKey::ALL.iter().map(|s| s.as_str()).collect();
    let sort = choice(&params, "sort", SortKey::parse, &sorts)?.unwrap_or_default();
    let direction = choice(&params, "order", parse_order, &["asc", "desc"])?.unwrap_or(match sort {
        SortKey::UpdatedAt => Direction::Desc,
        _ => Direction::Asc,
    });
    let filter = CampaignFilter { tenant_id: tenant.clone(), ui_status, campaign_origin, sort, direction };
    let ListPage { rows, total, aggregate } = api.lists.page(&api.read_models, &filter, page, page_size).await?;
    Ok(Json(json!({
        "items": rows.iter().map(|row| row.row()).collect::<Vec<_>>(),
        "summary": aggregate.counters(campaign_origin, ui_status).summary(),
        "status_counts": aggregate.status_counts(campaign_origin),
        "applied_filters": {
            "tenant_id": tenant,
            "ui_status": ui_status,
            "campaign_origin": campaign_origin,
            "sort": sort.as_str(),
            "order": if direction == Direction::Asc { "asc" } else { "desc" },
        },
        "page": page,
        "page_size": page_size,
        "total_items": total,
        "total_pages": total.div_ceil(page_size),
        "freshness": api.freshness(&tenant, &[CAMPAIGNS, OVERVIEW]).await?,
    })))
}

/// `GET /api/v1/live-events?tenant_id=&page=&page_size=&kind=&campaign_id=`: newest first.
#[utoipa::path(get, path = LIVE_EVENTS_PATH, tag = "campaigns", params(crate::openapi::LiveEventsQuery, ("Authorization" = Option<String>, Header, description = "`Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>` when one is configured")), responses((status = 200, description = "A page of live events, newest first", body = Value)))]
async fn live_events(State(api): State<Api>, RawQuery(raw): RawQuery) -> Result<Json<Value>, ApiError> {
    let params = parameters(raw, &["tenant_id", "page", "page_size", "kind", "campaign_id"])?;
    let tenant = required_tenant(&params)?;
    let page = number(&params, "page", 1, MAX_PAGE)?;
    let page_size = number(&params, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let kind = choice(&params, "kind", |text| KINDS.into_iter().find(|kind| *kind == text), &KINDS)?;
    let campaign_id = params.get("campaign_id").map(|id| campaign_id(id)).transpose()?;
    let (events, total) =
        api.read_models.live_events(&api.live_marks, &tenant, kind, campaign_id.as_deref(), page, page_size).await?;
    Ok(Json(json!({
        "items": events.iter().map(LiveEvent::item).collect::<Vec<_>>(),
        "applied_filters": { "tenant_id": tenant, "kind": kind, "campaign_id": campaign_id },
        "page": page,
        "page_size": page_size,
        "total_items": total,
        "total_pages": total.div_ceil(page_size),
        "freshness": api.freshness(&tenant, &[LIVE_EVENTS]).await?,
    })))
}

/// A flow's id, or `external:<id>` for an external campaign.
fn campaign_id(value: &str) -> Result<String, ApiError> {
    if !(is_slug(value, MAX_FLOW_ID_LEN) || is_external_id(value)) {
        return Err(ApiError::BadRequest(
            "campaign_id must be 1 to 128 letters, digits, '-', '_' or '.', or external:<that>".to_owned(),
        ));
    }
    Ok(value.to_owned())
}

fn parse_order(text: &str) -> Option<Direction> {
    match text {
        "asc" => Some(Direction::Asc),
        "desc" => Some(Direction::Desc),
        _ => None,
    }
}

/// `GET /api/v1/campaigns/:campaign_id?tenant_id=`: the detail object itself.
#[utoipa::path(get, path = CAMPAIGN_PATH, tag = "campaigns", params(("campaign_id" = String, Path, description = "A flow's id, or `external:<id>`"), crate::openapi::CampaignQuery, ("Authorization" = Option<String>, Header, description = "`Bearer <CAMPAIGN_EVENTS_API_BEARER_TOKEN>` when one is configured")), responses((status = 200, description = "The campaign's detail", body = Value)))]
async fn campaign(
    State(api): State<Api>,
    Path(campaign_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let params = parameters(raw, &["tenant_id"])?;
    let tenant = params.get("tenant_id").map(|value| tenant(value)).transpose()?;
    let found = api.read_models.campaign(&campaign_id, tenant.as_deref()).await?;
    let row = found.ok_or_else(|| ApiError::NotFound(format!("campaign {campaign_id:?} not found")))?;
    let mut detail = row.detail();
    detail["freshness"] = api.freshness(&row.tenant_id, &[CAMPAIGNS]).await?;
    Ok(Json(detail))
}
