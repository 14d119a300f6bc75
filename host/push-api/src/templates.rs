//! The editor routes of templates, web-push under `/api/v1/templates/web-push/` and in-app under
//! `/api/v1/templates/in-app/` (CRUD and preview; the same handlers, told the channel by an extension): thin
//! handlers over `flowhost_notifications::templates`, which owns the model, its validation, rendering and storage.
//! A web-push preview names its language `language_enabled_id` (required), an in-app one `language_id`
//! (optional: the template's default), as the send actions do.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use flowhost_notifications::fields::Fields;
use flowhost_notifications::templates::{self, parse_template, Template};
use flowhost_notifications::Channel;
use flowhost_notifications::{FieldError, WebPushError};
use flowhost_role::{routes, ApiRouter};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::info;

use crate::auth::{Editor, EditorHeaders};
use crate::body::JsonObject;
use crate::error::PushError;
use crate::{moved, PushState, Routes};

type Shared = Arc<PushState>;

/// Where the handlers are annotated (`#[utoipa::path]` takes a literal path): the web-push templates.
/// [`channel_routes`] moves them to each channel's base.
const ANNOTATED_BASE: &str = "/api/v1/templates/web-push";

pub(crate) fn routes() -> ApiRouter<Shared> {
    ApiRouter::new().merge(channel_routes(Channel::WebPush, "web-push")).merge(channel_routes(Channel::InApp, "in-app"))
}

/// The template routes of `channel` under `/api/v1/templates/{segment}`, the list with and without its
/// trailing slash.
fn channel_routes(channel: Channel, segment: &str) -> ApiRouter<Shared> {
    let base = format!("/api/v1/templates/{segment}");
    let at_base = |routes: Routes<Shared>| moved(routes, ANNOTATED_BASE, &base);
    ApiRouter::new()
        .routes(at_base(routes!(list, create)))
        .routes(moved(routes!(list, create), &format!("{ANNOTATED_BASE}/"), &base))
        .routes(at_base(routes!(preview)))
        .routes(at_base(routes!(read, replace, remove)))
        .route_layer(Extension(channel))
}

/// A template as the editor sends it (create, replace, or unsaved in a preview). Other fields are refused. The
/// answers are the stored template: these fields with `id`, `channel` (`WEB_PUSH` or `IN_APP`), `tenant_id`,
/// `created_at`, `updated_at`, `created_by` and `updated_by`. Texts and URLs may use the declared placeholders
/// (`{{name}}`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: `flowhost_notifications::templates::parse_template` reads the fields
pub(crate) struct TemplateBody {
    /// Create: required unless `X-Svc-Client-Id` selects it (both must match). Replace: must not change.
    tenant_id: Option<String>,
    /// Assigned by the service: absent on create; on replace, the path's id if given.
    id: Option<i64>,
    #[schema(max_length = 200)]
    name: String,
    #[schema(max_length = 2000)]
    description: Option<String>,
    placeholders: Option<Vec<TemplatePlaceholder>>,
    #[schema(max_length = 2048)]
    icon: Option<String>,
    #[schema(max_length = 2048)]
    badge: Option<String>,
    #[schema(max_length = 2048)]
    image: Option<String>,
    /// Where a click leads; its host must be allowed (`FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS`). A web-push
    /// template needs it here or in every content.
    #[schema(max_length = 2048)]
    target_url: Option<String>,
    #[schema(max_items = 4)]
    actions: Option<Vec<TemplateAction>>,
    #[schema(max_length = 128)]
    tag: Option<String>,
    require_interaction: Option<bool>,
    silent: Option<bool>,
    /// Needs a `tag`.
    renotify: Option<bool>,
    /// The content per `language_enabled_id` (1 to 64 characters): at least one.
    contents: HashMap<String, TemplateContent>,
    /// The language an in-app send without `language_id` renders: one of `contents`.
    #[schema(max_length = 64)]
    default_language: Option<String>,
}

/// A placeholder a template declares.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only
pub(crate) struct TemplatePlaceholder {
    /// Letters, digits and underscores, not starting with a digit.
    #[schema(max_length = 64)]
    name: String,
    /// Used when a send or preview gives no value.
    #[schema(max_length = 2000)]
    default: Option<String>,
}

/// An action button.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only
pub(crate) struct TemplateAction {
    #[schema(max_length = 64)]
    id: String,
    #[schema(max_length = 128)]
    label: String,
    #[schema(max_length = 2048)]
    target_url: String,
    #[schema(max_length = 2048)]
    icon: Option<String>,
}

/// The content of one language; `image`, `target_url` and `actions` override the template's when set.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only
pub(crate) struct TemplateContent {
    #[schema(max_length = 256)]
    title: String,
    #[schema(max_length = 4096)]
    body: String,
    #[schema(max_length = 2048)]
    image: Option<String>,
    #[schema(max_length = 2048)]
    target_url: Option<String>,
    #[schema(max_items = 4)]
    actions: Option<Vec<TemplateAction>>,
}

/// What to preview, on both channels: `template_id` or `template`, not both. The language field is the
/// channel's: `language_enabled_id` (required) on web-push, `language_id` (optional: the template's default
/// language) on in-app; the other channel's field is refused, as is any other field.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documentation only: the handler reads the fields one by one
pub(crate) struct TemplatePreviewBody {
    /// A stored template of this channel.
    template_id: Option<i64>,
    /// An unsaved template.
    template: Option<TemplateBody>,
    /// Web-push only, required there.
    #[schema(max_length = 64)]
    language_enabled_id: Option<String>,
    /// In-app only, optional.
    #[schema(max_length = 64)]
    language_id: Option<String>,
    /// Values of the template's placeholders (strings).
    placeholders: Option<HashMap<String, String>>,
}

fn noun(channel: Channel) -> &'static str {
    match channel {
        Channel::WebPush => "web-push template",
        Channel::InApp => "in-app template",
    }
}

/// The path parameter `id` as documented (the handlers take it as text, see [`parse_id`]).
const ID_PARAMETER: &str = "The template's id: a positive integer (anything else is 404)";

fn parse_id(id: &str) -> Result<i64, PushError> {
    id.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| PushError::not_found("no such template"))
}

/// The `channel` template `id` if it exists and the editor may see it.
pub(crate) async fn load(state: &PushState, editor: &Editor, channel: Channel, id: i64) -> Result<Template, PushError> {
    Ok(templates::load(state.ports.documents.as_ref(), channel, id, editor.tenant.as_deref()).await?)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only this tenant's templates; must match `X-Svc-Client-Id` when both are given.
    tenant_id: Option<String>,
}

/// `GET /api/v1/templates/web-push/`: `{ "templates": [...] }` sorted by id, of the selected tenant (or the
/// `tenant_id` query) when there is one, else all.
#[utoipa::path(get, path = "/api/v1/templates/web-push/", tag = "templates", params(EditorHeaders, ListQuery), responses((status = 200, description = "`{ \"templates\": [...] }` sorted by id", body = Value)))]
async fn list(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, PushError> {
    let tenant = editor.tenant_for(query.tenant_id.filter(|t| !t.is_empty()), "tenant_id")?;
    let templates = templates::list(state.ports.documents.as_ref(), channel, tenant.as_deref()).await?;
    Ok(Json(json!({ "templates": templates })))
}

/// `POST /api/v1/templates/web-push/`: 201 with the stored template and its new id.
#[utoipa::path(post, path = "/api/v1/templates/web-push/", tag = "templates", params(EditorHeaders), request_body = TemplateBody, responses((status = 201, description = "The stored template with its new `id`", body = Value)))]
async fn create(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    JsonObject(body): JsonObject,
) -> Result<impl IntoResponse, PushError> {
    let requested = body.get("tenant_id").and_then(Value::as_str).map(str::to_owned);
    let Some(tenant_id) = editor.tenant_for(requested, "tenant_id")? else {
        return Err(PushError::field("tenant_id", "is required (in the body or as X-Svc-Client-Id)"));
    };
    if body.get("id").is_some_and(|v| !v.is_null()) {
        return Err(PushError::field("id", "is assigned by the service"));
    }
    let template = parse_template(channel, &body, tenant_id, &state.settings.targets)?;
    let template = templates::create(&state.ports, template, editor.admin_user.clone()).await?;
    info!(template_id = template.id, admin_user = editor.admin_user.as_deref(), "{} created", noun(channel));
    Ok((StatusCode::CREATED, Json(template)))
}

/// `GET /api/v1/templates/web-push/{id}`.
#[utoipa::path(get, path = "/api/v1/templates/web-push/{id}", tag = "templates", params(EditorHeaders, ("id" = i64, Path, description = ID_PARAMETER)), responses((status = 200, description = "The template", body = Value)))]
async fn read(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    Path(id): Path<String>,
) -> Result<Json<Template>, PushError> {
    Ok(Json(load(&state, &editor, channel, parse_id(&id)?).await?))
}

/// `PUT /api/v1/templates/web-push/{id}`: replaces the template's content; id, tenant and creation stay.
#[utoipa::path(put, path = "/api/v1/templates/web-push/{id}", tag = "templates", params(EditorHeaders, ("id" = i64, Path, description = ID_PARAMETER)), request_body = TemplateBody, responses((status = 200, description = "The stored template", body = Value)))]
async fn replace(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> Result<Json<Template>, PushError> {
    let id = parse_id(&id)?;
    let existing = load(&state, &editor, channel, id).await?;
    if body.get("tenant_id").and_then(Value::as_str).is_some_and(|t| t != existing.tenant_id) {
        return Err(PushError::field("tenant_id", "a template cannot move to another tenant"));
    }
    if body.get("id").is_some_and(|v| !v.is_null() && v.as_i64() != Some(id)) {
        return Err(PushError::field("id", "does not match the path"));
    }
    let template = parse_template(channel, &body, existing.tenant_id.clone(), &state.settings.targets)?;
    let template = templates::replace(&state.ports, existing, template, editor.admin_user.clone()).await?;
    info!(template_id = id, admin_user = editor.admin_user.as_deref(), "{} replaced", noun(channel));
    Ok(Json(template))
}

/// `DELETE /api/v1/templates/web-push/{id}`: 204.
#[utoipa::path(delete, path = "/api/v1/templates/web-push/{id}", tag = "templates", params(EditorHeaders, ("id" = i64, Path, description = ID_PARAMETER)), responses((status = 204, description = "Deleted")))]
async fn remove(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    Path(id): Path<String>,
) -> Result<StatusCode, PushError> {
    let id = parse_id(&id)?;
    load(&state, &editor, channel, id).await?;
    templates::delete(state.ports.documents.as_ref(), channel, id).await?;
    info!(template_id = id, admin_user = editor.admin_user.as_deref(), "{} deleted", noun(channel));
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/templates/web-push/preview`: renders a stored template (`template_id`) or an unsaved one
/// (`template`) for `language_enabled_id` with `placeholders`; 200 `{ template_id, language_enabled_id,
/// content }`, or 400 naming what does not render (missing placeholder, target host not allowed, ...). In-app
/// names the language `language_id`, optional (see the module documentation).
#[utoipa::path(post, path = "/api/v1/templates/web-push/preview", tag = "templates", params(EditorHeaders), request_body = TemplatePreviewBody, responses((status = 200, description = "`{ template_id, language_enabled_id (web-push) or language_id (in-app), content }`", body = Value)))]
async fn preview(
    State(state): State<Shared>,
    Extension(channel): Extension<Channel>,
    editor: Editor,
    JsonObject(body): JsonObject,
) -> Result<Json<Value>, PushError> {
    let language_field = match channel {
        Channel::WebPush => "language_enabled_id",
        Channel::InApp => "language_id",
    };
    let mut f = Fields::new(&body);
    f.deny_unknown(&["template_id", "template", language_field, "placeholders"]);
    let template_id =
        if body.get("template_id").is_some_and(|v| !v.is_null()) { f.required_i64("template_id") } else { None };
    let inline = f.optional_object("template");
    let language = match channel {
        Channel::WebPush => f.required_str(language_field, 64),
        Channel::InApp => f.optional_str(language_field, 64),
    };
    let placeholders = f.optional_string_map("placeholders").unwrap_or_default();
    match (body.get("template_id").is_some_and(|v| !v.is_null()), inline.is_some()) {
        (true, true) => f.error("template", "give template_id or template, not both"),
        (false, false) if !f.has_errors() => f.error("template_id", "is required (or an unsaved template)"),
        _ => {}
    }
    f.finish()?;
    let template = match (template_id, inline) {
        (Some(id), _) => load(&state, &editor, channel, id).await?,
        (None, Some(inline)) => {
            let tenant = editor.tenant.clone().unwrap_or_default();
            parse_template(channel, inline, tenant, &state.settings.targets).map_err(prefix_template_errors)?
        }
        (None, None) => return Err(PushError::internal()),
    };
    let language = template.language_or_default(language.as_deref()).ok_or_else(PushError::internal)?.to_owned();
    let content = template.render(&language, &placeholders, &state.settings.targets).map_err(PushError::validation)?;
    let mut answer = json!({ "template_id": template_id, "content": content });
    answer[language_field] = json!(language);
    Ok(Json(answer))
}

/// An inline template's errors with the `template.` prefix, so the fields point into the preview body.
fn prefix_template_errors(error: WebPushError) -> WebPushError {
    match error {
        WebPushError::Invalid(errors) => WebPushError::Invalid(
            errors.into_iter().map(|e| FieldError::new(format!("template.{}", e.field), e.message)).collect(),
        ),
        other => other,
    }
}
