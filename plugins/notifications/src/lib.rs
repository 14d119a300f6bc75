//! `notifications`: the notification service as a wasm service plugin (bundled with Flowhost). It registers the
//! service `notifications` with the actions `send_webpush` and `send_inapp`, the service sources `nats`, `kafka`
//! and `http`, `supports_nodes` `condition`, `lookup`, `mapping`, and the read-only data sources `templates`
//! (in-app), `tenants`, `push_templates` and `push_template_fields`.
//!
//! The plugin validates an action's input (one recipient per invocation), asks the host's `notifications`
//! capability to deliver, and classifies what the host reports into the spec's outcome tables ([`classify_webpush`],
//! [`classify_inapp`]). The host holds the VAPID private key and the interaction-token secret, renders the
//! template, resolves the recipient's subscriptions and records every delivery; the notification record is
//! upserted on the step's idempotency key, so a redelivered step reuses it and re-sends only what still needs it.
//!
//! `send_webpush` takes an optional `data` object beside the spec's fields: free-form fields passed through into
//! the delivered payload's `data` (at most [`notify::MAX_PASSTHROUGH_DATA_BYTES`] as JSON). `player_id` 0 is
//! reserved for the dashboard's smoke tests: the host accepts it only in an editor's send, so a flow step for
//! player 0 is dead-lettered as permanent. A channel the deployment does not run is permanent too (replay the
//! dead letter once it is enabled).

use std::collections::BTreeMap;

use flowhost_sdk_guest::notify::{
    self, Channel, DeliveryOutcome, InAppOutcome, InAppRequest, SendFailure, WebPushReport, WebPushRequest,
};
use flowhost_sdk_guest::{export_plugin, Action, Call, Context, Error, Manifest, Output, Plugin};
use serde::Deserialize;
use serde_json::{json, Value};

struct Notifications;

/// Longest `tenant_id`, in bytes.
const MAX_TENANT_ID: usize = 128;
/// Longest `language_enabled_id` / `language_id`, in bytes.
const MAX_LANGUAGE_ID: usize = 64;
/// Longest `vertical`, `category`, `subcategory`, in bytes.
const MAX_LABEL: usize = 128;
/// Most placeholder values one invocation may carry.
const MAX_PLACEHOLDERS: usize = 64;
/// Longest placeholder value, in bytes.
const MAX_PLACEHOLDER_VALUE: usize = 2048;

/// `SendWebPushInput`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendWebPushInput {
    tenant_id: String,
    player_id: i64,
    template_id: i64,
    language_enabled_id: String,
    #[serde(default)]
    placeholders: BTreeMap<String, String>,
    /// Free-form fields for the payload's `data`.
    #[serde(default)]
    data: Option<serde_json::Map<String, Value>>,
}

/// `SendInAppInput`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendInAppInput {
    tenant_id: String,
    template_id: i64,
    player_id: i64,
    #[serde(default)]
    language_id: Option<String>,
    #[serde(default)]
    placeholders: BTreeMap<String, String>,
    #[serde(default)]
    vertical: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    subcategory: Option<String>,
}

fn placeholders_schema() -> Value {
    json!({
        "type": "object",
        "description": "Values of the template's placeholders.",
        "maxProperties": MAX_PLACEHOLDERS,
        "additionalProperties": { "type": "string", "maxLength": MAX_PLACEHOLDER_VALUE },
    })
}

fn webpush_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["tenant_id", "player_id", "template_id", "language_enabled_id"],
        "properties": {
            "tenant_id": { "type": "string", "minLength": 1, "maxLength": MAX_TENANT_ID,
                           "x-data-source": "tenants" },
            "player_id": { "type": "integer", "minimum": 0 },
            "template_id": { "type": "integer", "minimum": 1, "x-data-source": "push_templates" },
            "language_enabled_id": { "type": "string", "minLength": 1, "maxLength": MAX_LANGUAGE_ID },
            "placeholders": placeholders_schema(),
            "data": {
                "type": "object",
                "description": format!(
                    "Free-form fields passed through into the delivered payload's data (at most {} bytes as JSON; \
                     notification_id is always the service's).",
                    notify::MAX_PASSTHROUGH_DATA_BYTES
                ),
            },
        },
    })
}

fn inapp_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["tenant_id", "template_id", "player_id"],
        "properties": {
            "tenant_id": { "type": "string", "minLength": 1, "maxLength": MAX_TENANT_ID,
                           "x-data-source": "tenants" },
            "template_id": { "type": "integer", "minimum": 1, "x-data-source": "templates" },
            "player_id": { "type": "integer", "minimum": 0 },
            "language_id": { "type": "string", "minLength": 1, "maxLength": MAX_LANGUAGE_ID },
            "placeholders": placeholders_schema(),
            "vertical": { "type": "string", "maxLength": MAX_LABEL },
            "category": { "type": "string", "maxLength": MAX_LABEL },
            "subcategory": { "type": "string", "maxLength": MAX_LABEL },
        },
    })
}

/// Checks the fields serde cannot: lengths, ranges, counts. Every problem is named; bad input is permanent.
fn check(problems: Vec<String>) -> Result<(), Error> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::permanent(format!("invalid input: {}", problems.join("; "))))
    }
}

fn check_common(
    tenant_id: &str,
    player_id: i64,
    template_id: i64,
    placeholders: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    if tenant_id.trim().is_empty() || tenant_id.len() > MAX_TENANT_ID {
        problems.push(format!("tenant_id must be 1 to {MAX_TENANT_ID} bytes"));
    }
    if player_id < 0 {
        problems.push("player_id must not be negative".to_owned());
    }
    if template_id < 1 {
        problems.push("template_id must be positive".to_owned());
    }
    if placeholders.len() > MAX_PLACEHOLDERS {
        problems.push(format!("at most {MAX_PLACEHOLDERS} placeholders"));
    }
    if placeholders.values().any(|value| value.len() > MAX_PLACEHOLDER_VALUE) {
        problems.push(format!("a placeholder value is longer than {MAX_PLACEHOLDER_VALUE} bytes"));
    }
    problems
}

fn optional_label(name: &str, value: &Option<String>, max: usize, problems: &mut Vec<String>) {
    if value.as_ref().is_some_and(|v| v.len() > max) {
        problems.push(format!("{name} must be at most {max} bytes"));
    }
}

/// How a host failure is treated: a request that cannot succeed is permanent, and so is a channel the deployment
/// does not run (a deliberate setting; the dead letter can be replayed once it runs); the host being unavailable
/// or not ready (no sender, no keys) is retryable, so the engine retries and dead-letters on exhaustion.
fn host_failure(failure: SendFailure) -> Error {
    match failure {
        SendFailure::Invalid(message) => Error::permanent(message),
        SendFailure::Unavailable(message) => Error::retryable(message),
        SendFailure::NotReady(message) => Error::retryable(format!("the sender is not ready: {message}")),
        SendFailure::ChannelDisabled(message) => Error::permanent(format!("the channel is disabled: {message}")),
    }
}

/// The classification of a web-push report.
#[derive(Debug, Clone, PartialEq)]
enum WebPushVerdict {
    /// Forward the result: `status`, `delivered`, and the endpoints the push services reported expired.
    Success { status: &'static str, delivered: bool, invalidated: Vec<String> },
    /// No active subscription: acknowledged, not forwarded, no dead letter.
    SkipForward,
    /// Try again (some subscription asked for it and none was delivered).
    Retry(String),
    /// Every subscription refused the message for good.
    Permanent(String),
}

/// The spec's `send_webpush` outcome table over the host's report:
///
/// | Report | Verdict |
/// |---|---|
/// | at least one subscription delivered | success, `status` `delivered`, `delivered: true` |
/// | no active subscription | skip-forward |
/// | every subscription skipped (`WEB_PUSH_DRY_RUN`) | success, `status` `dry_run`, `delivered: false` |
/// | some subscription retryable (429, 5xx, no answer), none delivered | retryable |
/// | only expired subscriptions remain | success, `status` `subscription_expired`, `delivered: false` |
/// | none delivered, the rest refused for good | permanent |
///
/// Expired endpoints are listed in `invalidated_subscriptions` whatever the verdict (the host deactivated them).
fn classify_webpush(report: &WebPushReport) -> WebPushVerdict {
    let count = |outcome: DeliveryOutcome| report.deliveries.iter().filter(|d| d.outcome == outcome).count();
    let invalidated: Vec<String> = report
        .deliveries
        .iter()
        .filter(|d| d.outcome == DeliveryOutcome::Expired)
        .map(|d| d.endpoint.clone())
        .collect();
    let total = report.deliveries.len();
    if total == 0 {
        return WebPushVerdict::SkipForward;
    }
    if count(DeliveryOutcome::Delivered) > 0 {
        return WebPushVerdict::Success { status: "delivered", delivered: true, invalidated };
    }
    if count(DeliveryOutcome::Skipped) == total {
        return WebPushVerdict::Success { status: "dry_run", delivered: false, invalidated };
    }
    if count(DeliveryOutcome::Retry) > 0 {
        let reasons: Vec<&str> = report
            .deliveries
            .iter()
            .filter(|d| d.outcome == DeliveryOutcome::Retry)
            .filter_map(|d| d.reason.as_deref())
            .collect();
        return WebPushVerdict::Retry(format!("push delivery to retry: {}", reasons.join("; ")));
    }
    if invalidated.len() == total {
        return WebPushVerdict::Success { status: "subscription_expired", delivered: false, invalidated };
    }
    let reasons: Vec<&str> = report
        .deliveries
        .iter()
        .filter(|d| d.outcome == DeliveryOutcome::Rejected)
        .filter_map(|d| d.reason.as_deref())
        .collect();
    WebPushVerdict::Permanent(format!("every subscription refused the message: {}", reasons.join("; ")))
}

/// `send_inapp`'s outcome table: stored in the inbox is a success, `delivered` when an open socket took it; a
/// deactivated channel is a skip-forward.
fn classify_inapp(outcome: InAppOutcome) -> Result<bool, Error> {
    match outcome {
        InAppOutcome::Delivered => Ok(true),
        InAppOutcome::Stored => Ok(false),
        InAppOutcome::Inactive => Err(Error::skip_forward("the player's in-app channel is deactivated")),
    }
}

fn pairs(placeholders: BTreeMap<String, String>) -> Vec<(String, String)> {
    placeholders.into_iter().collect()
}

fn send_webpush(input: SendWebPushInput, context: &Context) -> Result<Output, Error> {
    let mut problems = check_common(&input.tenant_id, input.player_id, input.template_id, &input.placeholders);
    if input.language_enabled_id.trim().is_empty() || input.language_enabled_id.len() > MAX_LANGUAGE_ID {
        problems.push(format!("language_enabled_id must be 1 to {MAX_LANGUAGE_ID} bytes"));
    }
    let data = input.data.map(|fields| Value::Object(fields).to_string());
    if data.as_ref().is_some_and(|data| data.len() > notify::MAX_PASSTHROUGH_DATA_BYTES) {
        problems.push(format!("data must be at most {} bytes as JSON", notify::MAX_PASSTHROUGH_DATA_BYTES));
    }
    check(problems)?;
    let player_id = input.player_id;
    let request = WebPushRequest {
        tenant_id: input.tenant_id,
        player_id,
        template_id: input.template_id,
        language_enabled_id: input.language_enabled_id,
        placeholders: pairs(input.placeholders),
        idempotency_key: context.idempotency_key.clone(),
        run_id: context.run_id.clone(),
        data,
    };
    let report = notify::send_webpush(&request).map_err(host_failure)?;
    let id = report.notification_id.clone();
    match classify_webpush(&report) {
        WebPushVerdict::Success { status, delivered, invalidated } => {
            notify::complete(&id, status, delivered).map_err(host_failure)?;
            Output::json(&json!({
                "notification_id": id,
                "player_id": player_id,
                "status": status,
                "delivered": delivered,
                "invalidated_subscriptions": invalidated,
            }))
        }
        WebPushVerdict::SkipForward => {
            notify::complete(&id, "no_active_subscriptions", false).map_err(host_failure)?;
            Err(Error::skip_forward("the player has no active web-push subscription"))
        }
        WebPushVerdict::Retry(message) => {
            // The record says so until a later attempt settles it; failing to say so changes nothing.
            let _ = notify::complete(&id, "retrying", false);
            Err(Error::retryable(message))
        }
        WebPushVerdict::Permanent(message) => {
            notify::complete(&id, "rejected", false).map_err(host_failure)?;
            Err(Error::permanent(message))
        }
    }
}

fn send_inapp(input: SendInAppInput, context: &Context) -> Result<Output, Error> {
    let mut problems = check_common(&input.tenant_id, input.player_id, input.template_id, &input.placeholders);
    if input.language_id.as_ref().is_some_and(|l| l.trim().is_empty() || l.len() > MAX_LANGUAGE_ID) {
        problems.push(format!("language_id must be 1 to {MAX_LANGUAGE_ID} bytes"));
    }
    optional_label("vertical", &input.vertical, MAX_LABEL, &mut problems);
    optional_label("category", &input.category, MAX_LABEL, &mut problems);
    optional_label("subcategory", &input.subcategory, MAX_LABEL, &mut problems);
    check(problems)?;
    let request = InAppRequest {
        tenant_id: input.tenant_id,
        player_id: input.player_id,
        template_id: input.template_id,
        language_id: input.language_id,
        placeholders: pairs(input.placeholders),
        vertical: input.vertical,
        category: input.category,
        subcategory: input.subcategory,
        idempotency_key: context.idempotency_key.clone(),
        run_id: context.run_id.clone(),
    };
    let report = notify::send_inapp(&request).map_err(host_failure)?;
    let delivered = classify_inapp(report.outcome)?;
    Output::json(&json!({ "notification_id": report.notification_id, "delivered": delivered }))
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str()).filter(|v| !v.is_empty())
}

fn template_id_param(params: &[(String, String)]) -> Result<i64, Error> {
    let text = param(params, "template_id").ok_or_else(|| Error::permanent("template_id is required"))?;
    text.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| Error::permanent("template_id must be a positive integer"))
}

impl Plugin for Notifications {
    fn manifest() -> Manifest {
        Manifest::new("notifications", env!("CARGO_PKG_VERSION"))
            .description("Sends web-push and in-app notifications to one player per invocation.")
            .service("notifications")
            .capability("notifications")
            // Every call stands alone (what it sends is in its input), so the host may run it in a kept instance.
            .reuse_instances()
            .action(
                Action::new("send_webpush")
                    .description(
                        "Renders a web-push template and delivers it to every active subscription of the player.",
                    )
                    .config_schema(webpush_schema()),
            )
            .action(
                Action::new("send_inapp")
                    .description("Renders an in-app template and delivers it to the player's inbox and open sessions.")
                    .config_schema(inapp_schema()),
            )
            .service_source("nats")
            .service_source("kafka")
            .service_source("http")
            .supports_node("condition")
            .supports_node("lookup")
            .supports_node("mapping")
            .data_source("templates", &["tenant_id"])
            .data_source("tenants", &[])
            .data_source("push_templates", &["tenant_id"])
            .data_source("push_template_fields", &["template_id"])
    }

    fn invoke(call: Call) -> Result<Output, Error> {
        let context = call.context().clone();
        match call.action() {
            "send_webpush" => send_webpush(call.input()?, &context),
            "send_inapp" => send_inapp(call.input()?, &context),
            _ => Err(call.unknown_action()),
        }
    }

    fn data_source(name: &str, params: &[(String, String)]) -> Result<Output, Error> {
        let tenant = param(params, "tenant_id");
        let json = match name {
            "templates" => notify::templates(Channel::InApp, tenant),
            "push_templates" => notify::templates(Channel::WebPush, tenant),
            "push_template_fields" => notify::template_fields(Channel::WebPush, template_id_param(params)?),
            "tenants" => notify::tenants(),
            _ => return Err(Error::permanent(format!("unknown data source {name:?}"))),
        };
        json.map(Output::raw).map_err(host_failure)
    }
}

export_plugin!(Notifications);

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_sdk_guest::notify::Delivery;

    fn delivery(endpoint: &str, outcome: DeliveryOutcome) -> Delivery {
        Delivery {
            delivery_id: format!("d-{endpoint}"),
            endpoint: endpoint.to_owned(),
            outcome,
            status_code: None,
            retry_after_ms: None,
            reason: Some(format!("{endpoint} said so")),
        }
    }

    fn report(deliveries: Vec<Delivery>) -> WebPushReport {
        WebPushReport { notification_id: "n".into(), deliveries }
    }

    #[test]
    fn the_outcome_table_of_send_webpush() {
        use DeliveryOutcome::*;
        assert_eq!(classify_webpush(&report(vec![])), WebPushVerdict::SkipForward);
        assert_eq!(
            classify_webpush(&report(vec![delivery("a", Delivered), delivery("b", Expired), delivery("c", Retry)])),
            WebPushVerdict::Success { status: "delivered", delivered: true, invalidated: vec!["b".into()] }
        );
        assert_eq!(
            classify_webpush(&report(vec![delivery("a", Expired), delivery("b", Expired)])),
            WebPushVerdict::Success {
                status: "subscription_expired",
                delivered: false,
                invalidated: vec!["a".into(), "b".into()]
            }
        );
        assert!(matches!(
            classify_webpush(&report(vec![delivery("a", Expired), delivery("b", Retry)])),
            WebPushVerdict::Retry(_)
        ));
        assert!(matches!(
            classify_webpush(&report(vec![delivery("a", Expired), delivery("b", Rejected)])),
            WebPushVerdict::Permanent(_)
        ));
        assert_eq!(
            classify_webpush(&report(vec![delivery("a", Skipped)])),
            WebPushVerdict::Success { status: "dry_run", delivered: false, invalidated: vec![] }
        );
    }

    /// `send_inapp`: stored is a success whether or not a socket took it; a disabled channel is permanent, a
    /// sender without keys retryable.
    #[test]
    fn the_outcome_table_of_send_inapp_and_host_failures() {
        use flowhost_sdk_guest::Outcome;
        assert!(classify_inapp(InAppOutcome::Delivered).unwrap());
        assert!(!classify_inapp(InAppOutcome::Stored).unwrap());
        assert_eq!(classify_inapp(InAppOutcome::Inactive).unwrap_err().outcome, Outcome::SkipForward);
        assert_eq!(host_failure(SendFailure::ChannelDisabled("off".into())).outcome, Outcome::Permanent);
        assert_eq!(host_failure(SendFailure::NotReady("no keys".into())).outcome, Outcome::Retryable);
        assert_eq!(host_failure(SendFailure::Invalid("player 0".into())).outcome, Outcome::Permanent);
    }
}
