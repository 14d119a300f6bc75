//! Notification templates of both channels: the model (localized content per language, declared placeholders,
//! icon, badge, image, target URL, actions, tag, require_interaction, silent, renotify, a default language), its
//! validation ([`parse_template`]), rendering with placeholder values (`{{name}}`, checked against the allowed
//! target hosts after substitution) and storage (load, list, create with a new integer id, replace, delete).
//! Template ids are integers, as the send actions' `template_id`, counted per channel; every template belongs to
//! one tenant. Web-push and in-app templates share the model and live in a collection each; an in-app template
//! needs no `target_url` (a message without a call to action).

use flowhost_core::stored;
use std::collections::{BTreeMap, HashSet};

use crate::channel::Channel;
use flowhost_core::collections::{INAPP_TEMPLATES, WEBPUSH_TEMPLATES};
use flowhost_core::placeholders::{is_placeholder_name, pieces, used_placeholders, Piece};
use flowhost_core::ports::{DocumentStore, PortError, Ports};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::error::{FieldError, WebPushError};
use crate::fields::Fields;
use crate::records::{iso, register_tenant};
use crate::targets::{check_scheme, TargetPolicy};
use crate::PAYLOAD_VERSION;

const MAX_URL_LEN: usize = 2048;
const MAX_ACTIONS: usize = 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placeholder {
    pub name: String,
    /// Used when a send or preview gives no value.
    #[serde(default)]
    pub default: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub id: String,
    pub label: String,
    pub target_url: String,
    #[serde(default)]
    pub icon: Option<String>,
}

/// The content of one language; `image`, `target_url` and `actions` override the template's when set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalizedContent {
    pub title: String,
    pub body: String,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
    #[serde(default)]
    pub actions: Option<Vec<Action>>,
}

/// The collection of `channel`'s templates.
pub fn collection(channel: Channel) -> &'static str {
    match channel {
        Channel::WebPush => WEBPUSH_TEMPLATES,
        Channel::InApp => INAPP_TEMPLATES,
    }
}

fn web_push() -> Channel {
    Channel::WebPush
}

/// A stored template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub id: i64,
    /// `WEB_PUSH` or `IN_APP` (templates stored before in-app existed are web-push ones).
    #[serde(default = "web_push")]
    pub channel: Channel,
    pub tenant_id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub placeholders: Vec<Placeholder>,
    #[serde(default)]
    pub icon: Option<String>,
    #[serde(default)]
    pub badge: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub target_url: Option<String>,
    #[serde(default)]
    pub actions: Vec<Action>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub require_interaction: bool,
    #[serde(default)]
    pub silent: bool,
    #[serde(default)]
    pub renotify: bool,
    /// Content per `language_enabled_id`.
    pub contents: BTreeMap<String, LocalizedContent>,
    /// The language an in-app send without `language_id` renders (one of `contents`); without it, the only or
    /// the first language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_language: Option<String>,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub updated_at: String,
    #[serde(default)]
    pub created_by: Option<String>,
    #[serde(default)]
    pub updated_by: Option<String>,
}

/// Substitutes every placeholder; a name without a value is an error naming it.
fn substitute(text: &str, value: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text)? {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Placeholder(name) => out.push_str(&value(name).ok_or_else(|| name.to_owned())?),
        }
    }
    Ok(out)
}

/// The fields a template body may carry (editor bodies reject others).
const TEMPLATE_FIELDS: [&str; 16] = [
    "tenant_id",
    "name",
    "description",
    "placeholders",
    "icon",
    "badge",
    "image",
    "target_url",
    "actions",
    "tag",
    "require_interaction",
    "silent",
    "renotify",
    "contents",
    "default_language",
    "id",
];

/// Checks a template URL field: placeholders must be declared; without placeholders the URL is checked now
/// (the scheme, and the allowlist for navigation targets), with them after rendering.
fn check_url(f: &mut Fields<'_>, field: &str, value: &str, declared: &HashSet<String>, target: Option<&TargetPolicy>) {
    if !used_placeholders(value).is_ok_and(|used| used.is_empty()) {
        return check_text(f, field, value, declared);
    }
    let result = match target {
        Some(policy) => policy.check_target(value),
        None => check_scheme(value).map(|_| ()),
    };
    if let Err(message) = result {
        f.error(field, message);
    }
}

fn check_text(f: &mut Fields<'_>, field: &str, value: &str, declared: &HashSet<String>) {
    match used_placeholders(value) {
        Err(message) => f.error(field, message),
        Ok(used) => {
            for name in used.into_iter().filter(|n| !declared.contains(*n)) {
                f.error(field, format!("uses the undeclared placeholder {{{{{name}}}}}"));
            }
        }
    }
}

fn parse_actions(
    f: &mut Fields<'_>,
    name: &str,
    declared: &HashSet<String>,
    targets: &TargetPolicy,
) -> Option<Vec<Action>> {
    let items = f.optional_array(name)?;
    if items.len() > MAX_ACTIONS {
        f.error(name, format!("must have at most {MAX_ACTIONS} actions"));
        return None;
    }
    let mut actions = Vec::new();
    let mut ids = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("{name}[{index}]");
        let Some(map) = item.as_object() else {
            f.error(&path, "must be an object");
            continue;
        };
        let action = f.nested(&path, map, |a| {
            a.deny_unknown(&["id", "label", "target_url", "icon"]);
            let id = a.required_str("id", 64);
            let label = a.required_str("label", 128);
            let target_url = a.required_str("target_url", MAX_URL_LEN);
            let icon = a.optional_str("icon", MAX_URL_LEN);
            if let Some(label) = &label {
                check_text(a, "label", label, declared);
            }
            if let Some(url) = &target_url {
                check_url(a, "target_url", url, declared, Some(targets));
            }
            if let Some(icon) = &icon {
                check_url(a, "icon", icon, declared, None);
            }
            Some(Action { id: id?, label: label?, target_url: target_url?, icon })
        });
        if let Some(action) = action {
            if !ids.insert(action.id.clone()) {
                f.error(&format!("{path}.id"), "appears twice");
            }
            actions.push(action);
        }
    }
    Some(actions)
}

/// Validates a template body (create, replace, or inline preview); [`WebPushError::Invalid`] names every
/// offending field. `tenant_id` is decided by the caller; id, times and authors are left for [`create`] and
/// [`replace`] to stamp.
pub fn parse_template(
    channel: Channel,
    body: &Map<String, Value>,
    tenant_id: String,
    targets: &TargetPolicy,
) -> Result<Template, WebPushError> {
    let mut f = Fields::new(body);
    f.deny_unknown(&TEMPLATE_FIELDS);
    let name = f.required_str("name", 200);
    let description = f.optional_text("description", 2000);
    let mut placeholders = Vec::new();
    if let Some(items) = f.optional_array("placeholders") {
        let mut seen = HashSet::new();
        for (index, item) in items.iter().enumerate() {
            let path = format!("placeholders[{index}]");
            let Some(map) = item.as_object() else {
                f.error(&path, "must be an object { name, default? }");
                continue;
            };
            let placeholder = f.nested(&path, map, |p| {
                p.deny_unknown(&["name", "default"]);
                let name = p.required_str("name", 64);
                let default = p.optional_text("default", 2000);
                match name {
                    Some(name) if !is_placeholder_name(&name) => {
                        p.error("name", "must be letters, digits and underscores, not starting with a digit");
                        None
                    }
                    Some(name) => Some(Placeholder { name, default }),
                    None => None,
                }
            });
            if let Some(placeholder) = placeholder {
                if !seen.insert(placeholder.name.clone()) {
                    f.error(&format!("{path}.name"), "appears twice");
                }
                placeholders.push(placeholder);
            }
        }
    }
    let declared: HashSet<String> = placeholders.iter().map(|p| p.name.clone()).collect();
    let url = |f: &mut Fields<'_>, field: &str, target: bool| {
        let value = f.optional_str(field, MAX_URL_LEN)?;
        check_url(f, field, &value, &declared, target.then_some(targets));
        Some(value)
    };
    let icon = url(&mut f, "icon", false);
    let badge = url(&mut f, "badge", false);
    let image = url(&mut f, "image", false);
    let target_url = url(&mut f, "target_url", true);
    let actions = parse_actions(&mut f, "actions", &declared, targets).unwrap_or_default();
    let tag = f.optional_str("tag", 128);
    if let Some(tag) = &tag {
        check_text(&mut f, "tag", tag, &declared);
    }
    let require_interaction = f.optional_bool("require_interaction").unwrap_or(false);
    let silent = f.optional_bool("silent").unwrap_or(false);
    let renotify = f.optional_bool("renotify").unwrap_or(false);
    if renotify && tag.is_none() {
        f.error("renotify", "needs a tag (browsers refuse renotify without one)");
    }
    let mut contents = BTreeMap::new();
    if let Some(map) = f.required_object("contents") {
        if map.is_empty() {
            f.error("contents", "needs the content of at least one language_enabled_id");
        }
        for (language, value) in map {
            let path = format!("contents.{language}");
            if language.trim().is_empty() || language.len() > 64 {
                f.error(&path, "language_enabled_id must be 1 to 64 characters");
                continue;
            }
            let Some(content) = value.as_object() else {
                f.error(&path, "must be an object { title, body, image?, target_url?, actions? }");
                continue;
            };
            let parsed = f.nested(&path, content, |c| {
                c.deny_unknown(&["title", "body", "image", "target_url", "actions"]);
                let title = c.required_str("title", 256);
                let body = c.required_text("body", 4096);
                if let Some(title) = &title {
                    check_text(c, "title", title, &declared);
                }
                if let Some(body) = &body {
                    check_text(c, "body", body, &declared);
                }
                let image = c.optional_str("image", MAX_URL_LEN);
                if let Some(image) = &image {
                    check_url(c, "image", image, &declared, None);
                }
                let own_target = c.optional_str("target_url", MAX_URL_LEN);
                if let Some(target) = &own_target {
                    check_url(c, "target_url", target, &declared, Some(targets));
                }
                if own_target.is_none() && target_url.is_none() && channel == Channel::WebPush {
                    c.error("target_url", "is required here or on the template");
                }
                let actions = parse_actions(c, "actions", &declared, targets);
                Some(LocalizedContent { title: title?, body: body?, image, target_url: own_target, actions })
            });
            if let Some(parsed) = parsed {
                contents.insert(language.clone(), parsed);
            }
        }
    }
    let default_language = f.optional_str("default_language", 64);
    if default_language.as_ref().is_some_and(|language| !contents.contains_key(language)) {
        f.error("default_language", "must be one of the languages in contents");
    }
    f.finish()?;
    Ok(Template {
        id: 0,
        channel,
        tenant_id,
        name: name.ok_or_else(|| WebPushError::Internal("a validated template has no name".into()))?,
        description,
        placeholders,
        icon,
        badge,
        image,
        target_url,
        actions,
        tag,
        require_interaction,
        silent,
        renotify,
        contents,
        default_language,
        created_at: String::new(),
        updated_at: String::new(),
        created_by: None,
        updated_by: None,
    })
}

impl Template {
    /// The language to render for an asked `language` (in-app's optional `language_id`): the asked one, else
    /// the template's `default_language`, else its first language.
    pub fn language_or_default<'a>(&'a self, language: Option<&'a str>) -> Option<&'a str> {
        language.or(self.default_language.as_deref()).or_else(|| self.contents.keys().next().map(String::as_str))
    }

    /// Renders the content of `language` with `values` (then each placeholder's default), checking the
    /// rendered URLs: navigation targets against the allowlist, images for the scheme. Errors name the field.
    pub fn render(
        &self,
        language: &str,
        values: &Map<String, Value>,
        targets: &TargetPolicy,
    ) -> Result<Value, Vec<FieldError>> {
        let Some(content) = self.contents.get(language) else {
            let known: Vec<&str> = self.contents.keys().map(String::as_str).collect();
            return Err(vec![FieldError::new(
                "language_enabled_id",
                format!("the template has no content for {language:?} (it has: {})", known.join(", ")),
            )]);
        };
        let defaults: BTreeMap<&str, Option<&str>> =
            self.placeholders.iter().map(|p| (p.name.as_str(), p.default.as_deref())).collect();
        let value = |name: &str| {
            values
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| defaults.get(name).copied().flatten().map(str::to_owned))
        };
        let mut errors = Vec::new();
        let mut render = |field: &str, text: &str| -> String {
            substitute(text, &value).unwrap_or_else(|name| {
                errors.push(FieldError::new(
                    format!("placeholders.{name}"),
                    format!("no value and no default ({field})"),
                ));
                String::new()
            })
        };
        let title = render("title", &content.title);
        let body = render("body", &content.body);
        let icon = self.icon.as_deref().map(|v| render("icon", v));
        let badge = self.badge.as_deref().map(|v| render("badge", v));
        let image = content.image.as_deref().or(self.image.as_deref()).map(|v| render("image", v));
        let target_url = content.target_url.as_deref().or(self.target_url.as_deref()).map(|v| render("target_url", v));
        let tag = self.tag.as_deref().map(|v| render("tag", v));
        let actions: Vec<(String, String, String, Option<String>)> = content
            .actions
            .as_ref()
            .unwrap_or(&self.actions)
            .iter()
            .map(|a| {
                (
                    a.id.clone(),
                    render("actions.label", &a.label),
                    render("actions.target_url", &a.target_url),
                    a.icon.as_deref().map(|v| render("actions.icon", v)),
                )
            })
            .collect();
        if !errors.is_empty() {
            errors.dedup();
            return Err(errors);
        }
        if target_url.is_none() && self.channel == Channel::WebPush {
            return Err(vec![FieldError::new("target_url", "the template has no target_url")]);
        }
        if let Some(Err(message)) = target_url.as_deref().map(|url| targets.check_target(url)) {
            errors.push(FieldError::new("target_url", message));
        }
        for (field, value) in [("icon", &icon), ("badge", &badge), ("image", &image)] {
            if let Some(Err(message)) = value.as_deref().map(check_scheme) {
                errors.push(FieldError::new(field, message));
            }
        }
        let mut rendered_actions = Vec::new();
        for (index, (id, label, target, icon)) in actions.into_iter().enumerate() {
            if let Err(message) = targets.check_target(&target) {
                errors.push(FieldError::new(format!("actions[{index}].target_url"), message));
            }
            if let Some(Err(message)) = icon.as_deref().map(check_scheme) {
                errors.push(FieldError::new(format!("actions[{index}].icon"), message));
            }
            let mut action = json!({ "id": id, "label": label, "target_url": target });
            if let Some(icon) = icon {
                action["icon"] = json!(icon);
            }
            rendered_actions.push(action);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut payload = json!({
            "payload_version": PAYLOAD_VERSION,
            "title": title,
            "body": body,
            "require_interaction": self.require_interaction,
            "silent": self.silent,
            "renotify": self.renotify,
            "actions": rendered_actions,
            "data": {},
        });
        for (field, value) in
            [("target_url", target_url), ("icon", icon), ("badge", badge), ("image", image), ("tag", tag)]
        {
            if let Some(value) = value {
                payload[field] = json!(value);
            }
        }
        Ok(payload)
    }
}

/// The `channel` template `id` if it exists within `scope` (a tenant; `None`: every tenant), else
/// [`WebPushError::NotFound`].
pub async fn load(
    documents: &dyn DocumentStore,
    channel: Channel,
    id: i64,
    scope: Option<&str>,
) -> Result<Template, WebPushError> {
    let doc = documents.get(collection(channel), &id.to_string()).await?;
    let template = doc
        .map(|doc| stored::decode::<Template>(collection(channel), doc))
        .transpose()?
        .filter(|t| scope.is_none_or(|tenant| tenant == t.tenant_id));
    template.ok_or(WebPushError::NotFound("template"))
}

/// The `channel` templates of `tenant` (`None`: of every tenant), sorted by id.
pub async fn list(
    documents: &dyn DocumentStore,
    channel: Channel,
    tenant: Option<&str>,
) -> Result<Vec<Template>, WebPushError> {
    let docs = match tenant {
        Some(tenant) => documents.find(collection(channel), "tenant_id", &json!(tenant)).await?,
        None => documents.list(collection(channel)).await?,
    };
    let mut templates: Vec<Template> = stored::decode_all(collection(channel), docs)?;
    templates.sort_by_key(|t| t.id);
    Ok(templates)
}

/// Stores a new template (as [`parse_template`] gave it) under a new id, created and updated now by `author`,
/// and registers its tenant. [`WebPushError::Conflict`] when no id could be allocated.
pub async fn create(ports: &Ports, mut template: Template, author: Option<String>) -> Result<Template, WebPushError> {
    let now = ports.clock.now_ms();
    template.created_at = iso(now);
    template.updated_at = iso(now);
    template.created_by = author.clone();
    template.updated_by = author;
    let documents = &ports.documents;
    let collection = collection(template.channel);
    // Ids are integers: the next after the largest; `insert` refuses a taken one, so racing creators retry.
    for _ in 0..8 {
        let next = documents.list(collection).await?.iter().filter_map(|doc| doc["id"].as_i64()).max().unwrap_or(0) + 1;
        template.id = next;
        match documents.insert(collection, &next.to_string(), stored::encode(collection, &template)?).await {
            Ok(()) => {
                register_tenant(documents.as_ref(), &template.tenant_id, now).await?;
                return Ok(template);
            }
            Err(PortError::Conflict(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(WebPushError::Conflict("could not allocate a template id; retry".to_owned()))
}

/// Replaces the content of `existing` (as [`load`] gave it) with `template`'s, updated now by `author`; id,
/// tenant and creation stay. [`WebPushError::NotFound`] when it was deleted meanwhile.
pub async fn replace(
    ports: &Ports,
    existing: Template,
    mut template: Template,
    author: Option<String>,
) -> Result<Template, WebPushError> {
    template.id = existing.id;
    template.channel = existing.channel;
    template.tenant_id = existing.tenant_id;
    template.created_at = existing.created_at;
    template.created_by = existing.created_by;
    template.updated_at = iso(ports.clock.now_ms());
    template.updated_by = author;
    if !ports
        .documents
        .replace(
            collection(template.channel),
            &template.id.to_string(),
            stored::encode(collection(template.channel), &template)?,
        )
        .await?
    {
        return Err(WebPushError::NotFound("template"));
    }
    Ok(template)
}

/// Deletes the `channel` template `id`; [`WebPushError::NotFound`] when there is none.
pub async fn delete(documents: &dyn DocumentStore, channel: Channel, id: i64) -> Result<(), WebPushError> {
    if documents.delete(collection(channel), &id.to_string()).await? {
        Ok(())
    } else {
        Err(WebPushError::NotFound("template"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(body: Value, targets: &TargetPolicy) -> Result<Template, WebPushError> {
        parse_template(Channel::WebPush, body.as_object().unwrap(), "t1".into(), targets)
    }

    fn welcome() -> Value {
        json!({
            "name": "Welcome",
            "placeholders": [{ "name": "first_name", "default": "friend" }, { "name": "game" }],
            "icon": "https://cdn.casino.example/icon.png",
            "target_url": "https://casino.example/play/{{game}}",
            "tag": "welcome",
            "renotify": true,
            "actions": [{ "id": "play", "label": "Play {{game}}", "target_url": "https://casino.example/{{game}}" }],
            "contents": {
                "en": { "title": "Hi {{first_name}}", "body": "Try {{ game }}" },
                "de": { "title": "Hallo {{first_name}}", "body": "", "target_url": "https://casino.example/de" }
            }
        })
    }

    #[test]
    fn render_substitutes_and_checks_targets() {
        let targets = TargetPolicy::new(&["casino.example".into()]);
        let t = template(welcome(), &targets).unwrap();
        let values = json!({ "game": "slots", "unused": "x" });
        let content = t.render("en", values.as_object().unwrap(), &targets).unwrap();
        assert_eq!(content["title"], "Hi friend");
        assert_eq!(content["body"], "Try slots");
        assert_eq!(content["target_url"], "https://casino.example/play/slots");
        assert_eq!(
            content["actions"][0],
            json!({ "id": "play", "label": "Play slots", "target_url": "https://casino.example/slots" })
        );
        assert_eq!((content["tag"].as_str(), content["renotify"].as_bool()), (Some("welcome"), Some(true)));
        assert_eq!(content["payload_version"], "v1");
        let de = t.render("de", values.as_object().unwrap(), &targets).unwrap();
        assert_eq!((de["target_url"].as_str(), de["body"].as_str()), (Some("https://casino.example/de"), Some("")));

        let missing = t.render("en", &Map::new(), &targets).unwrap_err();
        assert_eq!(missing[0].field, "placeholders.game");
        // A placeholder value cannot move the rendered target to another host: the check runs after rendering.
        let mut body = welcome();
        body["target_url"] = json!("https://casino.example{{game}}");
        let loose = template(body, &targets).unwrap();
        let escape = json!({ "game": "@evil.test/" });
        let errors = loose.render("en", escape.as_object().unwrap(), &targets).unwrap_err();
        assert_eq!(errors[0].field, "target_url", "{errors:?}");
        assert!(errors[0].message.contains("evil.test"), "{errors:?}");
        let fine = json!({ "game": "/slots" });
        assert!(loose.render("en", fine.as_object().unwrap(), &targets).is_ok());
        let other_host = json!({ "game": "slots" });
        let strict = TargetPolicy::new(&["other.example".into()]);
        let errors = t.render("en", other_host.as_object().unwrap(), &strict).unwrap_err();
        assert_eq!(
            errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["target_url", "actions[0].target_url"]
        );
        assert_eq!(t.render("fr", &Map::new(), &targets).unwrap_err()[0].field, "language_enabled_id");
    }

    #[test]
    fn template_validation_names_fields() {
        let targets = TargetPolicy::new(&["casino.example".into()]);
        let with = |f: &dyn Fn(&mut Value)| {
            let mut body = welcome();
            f(&mut body);
            body
        };
        let cases: Vec<(Value, &str)> = vec![
            (with(&|b| drop(b.as_object_mut().unwrap().remove("name"))), "name"),
            (with(&|b| b["contents"] = json!({})), "contents"),
            (with(&|b| drop(b["contents"]["en"].as_object_mut().unwrap().remove("title"))), "contents.en.title"),
            (with(&|b| drop(b["contents"]["en"].as_object_mut().unwrap().remove("body"))), "contents.en.body"),
            (with(&|b| b["contents"]["en"]["title"] = json!("Hi {{nobody}}")), "contents.en.title"),
            (with(&|b| b["contents"]["en"]["title"] = json!("Hi {{first_name")), "contents.en.title"),
            (with(&|b| b["target_url"] = json!("https://evil.test/")), "target_url"),
            (with(&|b| b["icon"] = json!("http://cdn.casino.example/i.png")), "icon"),
            (with(&|b| b["renotify"] = json!(true)).tap_remove("tag"), "renotify"),
            (with(&|b| b["actions"][0]["id"] = json!("")), "actions[0].id"),
            (with(&|b| b["actions"] = json!([b["actions"][0].clone(), b["actions"][0].clone()])), "actions[1].id"),
            (with(&|b| b["placeholders"] = json!([{ "name": "1x" }])), "placeholders[0].name"),
            (with(&|b| b["silent"] = json!("yes")), "silent"),
            (with(&|b| b["require_interation"] = json!(true)), "require_interation"),
            (
                with(&|b| {
                    b.as_object_mut().unwrap().remove("target_url");
                }),
                "contents.en.target_url",
            ),
        ];
        for (body, field) in cases {
            let error = template(body.clone(), &targets).err().unwrap_or_else(|| panic!("{field}: {body} must fail"));
            let WebPushError::Invalid(errors) = error else { panic!("{field}: {error:?} is not a validation error") };
            let fields: Vec<String> = errors.into_iter().map(|e| e.field).collect();
            assert!(fields.iter().any(|f| f == field), "{field}: got {fields:?}");
        }
    }

    trait TapRemove {
        fn tap_remove(self, key: &str) -> Self;
    }
    impl TapRemove for Value {
        fn tap_remove(mut self, key: &str) -> Self {
            self.as_object_mut().unwrap().remove(key);
            self
        }
    }
}
