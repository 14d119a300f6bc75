//! `/api/v2/flows/{id}/runs`, `/api/v2/runs/{run_id}` and `/api/v2/dead-letters`: thin handlers over
//! `flowhost_runs` (runs newest first and paged, one run with every node, dead letters and their replay).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use flowhost_runs::{replay, DeadLetterStatus, ReplayTarget, RunStatus, Runs, RunsError};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Caller, SignedV2Json, V2Error, V2Json};
use crate::v1::SharedState;

/// Runs and dead letters per page when the request does not say.
const DEFAULT_PAGE_SIZE: u64 = 50;

impl From<RunsError> for V2Error {
    fn from(error: RunsError) -> Self {
        let message = error.to_string();
        match error {
            RunsError::RunNotFound(_) => V2Error::new(StatusCode::NOT_FOUND, "RUN_NOT_FOUND", message),
            RunsError::DeadLetterNotFound(_) => V2Error::new(StatusCode::NOT_FOUND, "DEAD_LETTER_NOT_FOUND", message),
            RunsError::Invalid { field, message } => {
                V2Error::new(StatusCode::BAD_REQUEST, "INVALID_QUERY", format!("{field}: {message}"))
                    .with_details(json!({ "field": field }))
            }
            RunsError::Conflict(_) => V2Error::new(StatusCode::CONFLICT, "REPLAY_CONFLICT", message),
            RunsError::Storage(error) => error.into(),
        }
    }
}

fn invalid_query(field: &str, message: String) -> V2Error {
    V2Error::new(StatusCode::BAD_REQUEST, "INVALID_QUERY", format!("{field}: {message}"))
        .with_details(json!({ "field": field }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct RunsQuery {
    status: Option<String>,
    page: Option<String>,
    page_size: Option<String>,
}

fn number(field: &str, text: Option<&str>, default: u64) -> Result<u64, V2Error> {
    match text {
        None | Some("") => Ok(default),
        Some(text) => text.parse().map_err(|_| invalid_query(field, format!("{text:?} is not a positive integer"))),
    }
}

/// `GET /api/v2/flows/{id}/runs[?status=waiting|completed|dead_lettered&page=1&page_size=50]`: newest first.
#[utoipa::path(get, path = "/api/v2/flows/{id}/runs", tag = "v2 runs", params(RunsQuery), responses((status = 200, description = "A page of the flow's runs, newest first", body = Value)))]
pub(crate) async fn list(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    Query(query): Query<RunsQuery>,
) -> Result<Json<Value>, V2Error> {
    state.flows.get(&id).await?;
    let status =
        match query.status.as_deref() {
            None | Some("") => None,
            Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
                invalid_query("status", format!("{text:?} is not waiting, completed or dead_lettered"))
            })?),
        };
    let page = number("page", query.page.as_deref(), 1)?;
    let page_size = number("page_size", query.page_size.as_deref(), DEFAULT_PAGE_SIZE)?;
    let runs = Runs::new(&state.ports).list(&id, status, page, page_size).await?;
    Ok(Json(json!(runs)))
}

/// `GET /api/v2/runs/{run_id}`: the run with every node's input, output, outcome, attempts and timing.
#[utoipa::path(get, path = "/api/v2/runs/{run_id}", tag = "v2 runs", responses((status = 200, description = "The run with its node records", body = Value)))]
pub(crate) async fn read(State(state): State<SharedState>, Path(run_id): Path<String>) -> Result<Json<Value>, V2Error> {
    Ok(Json(Runs::new(&state.ports).get(&run_id).await?.view()?))
}

/// `POST /api/v2/runs/{run_id}/reply` with a reply envelope: an external service's answer to an action
/// (202 `{"status": "accepted" | "ignored"}`).
#[utoipa::path(post, path = "/api/v2/runs/{run_id}/reply", tag = "v2 runs", params(("flowhost-signature" = Option<String>, Header, description = "HMAC of the body when the deployment signs")), request_body = Value, responses((status = 202, description = "Accepted", body = Value), (status = 200, description = "Already applied", body = Value)))]
pub(crate) async fn reply(
    State(state): State<SharedState>,
    Path(run_id): Path<String>,
    SignedV2Json(reply): SignedV2Json<flowhost_runs::ReplyEnvelope>,
) -> Result<(StatusCode, Json<Value>), V2Error> {
    if reply.run_id != run_id {
        return Err(V2Error::invalid_field("run_id", "differs from the run in the path"));
    }
    let accepted =
        flowhost_runs::reply::accept(&state.ports, reply, state.reply_dedup).await.map_err(|error| match error {
            RunsError::Invalid { field, message } => V2Error::invalid_field(&field, message),
            other => V2Error::from(other),
        })?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "status": accepted.as_str() }))))
}

/// `POST /v2/{service}/inbound` with an inbound envelope, for a service this deployment runs in process (a
/// flow segment over `http`): 202 `{"status": "accepted"}` at once; the action runs in the background and its
/// reply goes to the envelope's `reply_to.url`. 404 `SERVICE_NOT_HERE` for a service not loaded here.
#[utoipa::path(post, path = "/v2/{service}/inbound", tag = "v2 runs", params(("flowhost-signature" = Option<String>, Header, description = "HMAC of the body when the deployment signs")), request_body = Value, responses((status = 202, description = "Accepted", body = Value), (status = 200, description = "Already applied", body = Value)))]
pub(crate) async fn inbound(
    State(state): State<SharedState>,
    Path(service): Path<String>,
    SignedV2Json(envelope): SignedV2Json<flowhost_runs::InboundEnvelope>,
) -> Result<(StatusCode, Json<Value>), V2Error> {
    if envelope.service != service {
        return Err(V2Error::invalid_field("service", "differs from the service in the path"));
    }
    let endpoint = state.endpoint.as_ref().filter(|endpoint| endpoint.serves(&service)).ok_or_else(|| {
        V2Error::new(StatusCode::NOT_FOUND, "SERVICE_NOT_HERE", format!("service {service:?} does not run here"))
    })?;
    endpoint.accept_http(envelope);
    Ok((StatusCode::ACCEPTED, Json(json!({ "status": "accepted" }))))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeadLettersQuery {
    flow_id: Option<String>,
    status: Option<String>,
    page: Option<String>,
    page_size: Option<String>,
}

/// `GET /api/v2/dead-letters[?flow_id=&status=open|replayed&page=&page_size=]`: newest first.
#[utoipa::path(get, path = "/api/v2/dead-letters", tag = "v2 runs", params(DeadLettersQuery), responses((status = 200, description = "A page of dead letters, newest first", body = Value)))]
pub(crate) async fn dead_letters(
    State(state): State<SharedState>,
    Query(query): Query<DeadLettersQuery>,
) -> Result<Json<Value>, V2Error> {
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some("open") => Some(DeadLetterStatus::Open),
        Some("replayed") => Some(DeadLetterStatus::Replayed),
        Some(text) => return Err(invalid_query("status", format!("{text:?} is not open or replayed"))),
    };
    let page = number("page", query.page.as_deref(), 1)?;
    let page_size = number("page_size", query.page_size.as_deref(), DEFAULT_PAGE_SIZE)?;
    let (letters, total) = Runs::new(&state.ports)
        .dead_letters(query.flow_id.as_deref().filter(|f| !f.is_empty()), status, page, page_size)
        .await?;
    Ok(Json(json!({ "dead_letters": letters, "total": total, "page": page, "page_size": page_size })))
}

/// `GET /api/v2/dead-letters/{id}`.
#[utoipa::path(get, path = "/api/v2/dead-letters/{id}", tag = "v2 runs", responses((status = 200, description = "The dead letter", body = Value)))]
pub(crate) async fn dead_letter(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, V2Error> {
    Ok(Json(json!(Runs::new(&state.ports).dead_letter(&id).await?.0)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayBody {
    #[serde(default)]
    ids: Vec<String>,
    /// `run` (default): the run's own version; `latest`: the flow's latest release.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "latest")]
    to: Option<ReplayTarget>,
}

/// Most dead letters one replay request takes.
const MAX_REPLAY_IDS: usize = 500;

/// `POST /api/v2/dead-letters/{id}/replay` with `{ "to"?: "run" | "latest" }`.
#[utoipa::path(post, path = "/api/v2/dead-letters/{id}/replay", tag = "v2 runs", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body(content = Option<ReplayBody>), responses((status = 200, description = "The replay", body = Value)))]
pub(crate) async fn replay_one(
    State(state): State<SharedState>,
    Path(id): Path<String>,
    caller: Caller,
    V2Json(body): V2Json<ReplayBody>,
) -> Result<Json<Value>, V2Error> {
    if !body.ids.is_empty() {
        return Err(V2Error::invalid_field("ids", "the dead letter is named in the path"));
    }
    let replayed = replay::replay(&state.ports, &id, body.to.unwrap_or(ReplayTarget::Run), caller.name()).await?;
    Ok(Json(json!(replayed)))
}

/// `POST /api/v2/dead-letters/replay` with `{ "ids": [...], "to"?: "run" | "latest" }`: each id's replay or
/// the error that refused it (`results`, in the order of `ids`).
#[utoipa::path(post, path = "/api/v2/dead-letters/replay", tag = "v2 runs", params(("X-Flowhost-User" = Option<String>, Header, description = "Who is calling (1-128 printable characters; `anonymous` when absent); claimed, not checked")), request_body = ReplayBody, responses((status = 200, description = "`results`, one per id, in order", body = Value)))]
pub(crate) async fn replay_many(
    State(state): State<SharedState>,
    caller: Caller,
    V2Json(body): V2Json<ReplayBody>,
) -> Result<Json<Value>, V2Error> {
    if body.ids.is_empty() {
        return Err(V2Error::invalid_field("ids", "name at least one dead letter"));
    }
    if body.ids.len() > MAX_REPLAY_IDS {
        return Err(V2Error::invalid_field("ids", format!("at most {MAX_REPLAY_IDS} dead letters per request")));
    }
    let to = body.to.unwrap_or(ReplayTarget::Run);
    let mut results = Vec::with_capacity(body.ids.len());
    for id in &body.ids {
        let result = match replay::replay(&state.ports, id, to, caller.name()).await {
            Ok(replayed) => json!({ "id": id, "replayed": replayed }),
            Err(RunsError::Storage(error)) => return Err(error.into()),
            Err(error) => {
                let error = V2Error::from(error);
                json!({ "id": id, "error": error.body() })
            }
        };
        results.push(result);
    }
    Ok(Json(json!({ "results": results })))
}
