//! The push-api role of the web-push notification service: the five push-platform routes a bridge calls (caller
//! policy, subscriptions, browser and semantic events, client config) and the editor routes Studio and the
//! dashboard call (tenants, web-push templates, preview, activity, notification records, send), as thin handlers
//! over `flowhost-notifications`, which owns the domain (templates and rendering, subscriptions, events, activity,
//! interaction tokens, VAPID keys, target hosts, the caller policy, the retention sweep). Here: request parsing,
//! authentication (`auth.rs`), the settings resolved from the configuration ([`PushState`]), and the spec's
//! envelope `{ "error": { code, message, details? } }` for every error, the domain's included (`error.rs`). It
//! sees only the ports (`flowhost_core::Ports`), never a backend.
//!
//! [`PushRole`] is the role `flowhost serve` composes: its [`router`] shares the main listener by default or
//! serves `FLOWHOST_PUSH_API_LISTEN`; [`run_retention`] runs beside it; a broken caller policy fails the
//! process's `/health` (the liveness check [`POLICY_CHECK`]).

mod auth;
mod body;
mod config;
mod editor;
pub mod error;
pub mod inapp;
mod platform;
mod role;
mod send;
mod sender_role;
mod templates;

/// The domain modules, where they lived before `flowhost-notifications` owned them; new code imports them from there.
pub use flowhost_notifications::{policy, records, targets, token, vapid};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::MethodRouter;
use axum::Router;
use flowhost_core::config::{Config, ConfigError, Secret};
use flowhost_core::digest::TokenDigest;
use flowhost_core::ports::Ports;
use flowhost_notifications::Channel;
use flowhost_role::openapi::{documented, with_default_error};
use flowhost_role::ApiRouter;
use tracing::{error, info, warn};
use utoipa::openapi::path::{Operation, PathItem, Paths};
use utoipa::openapi::{RefOr, Schema};

pub use body::parse_object;
pub use config::{PushConfig, PushSecrets, DEFAULT_VAPID_SUBJECT, MAX_PUSH_TTL_SECONDS, PUSH_SETTINGS};
pub use error::PushError;
pub use flowhost_notifications::policy::{CallerPolicy, PolicyError};
pub use flowhost_notifications::retention::{run_retention, sweep_once};
pub use flowhost_notifications::token::InteractionClaims;
pub use flowhost_notifications::vapid::VapidKeys;
pub use flowhost_notifications::PAYLOAD_VERSION;
pub use platform::new_subscription;
pub use role::PushRole;
pub use sender_role::{SenderRole, NOTIFICATIONS_PLUGIN, SENDER_CHECK};

/// The name `/health` reports when the caller policy failed to load.
pub const POLICY_CHECK: &str = "push_caller_policy";

/// The push-api settings, resolved from the configuration at start.
#[derive(Debug)]
pub struct PushSettings {
    pub max_body_bytes: usize,
    pub dry_run: bool,
    pub channels: Vec<Channel>,
    /// The VAPID pair in use: configured, or temporary under `FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID`.
    pub vapid: Option<VapidKeys>,
    /// The current and (during a rotation) previous interaction-token secrets.
    pub token_secrets: Option<(Secret, Option<Secret>)>,
    pub targets: targets::TargetPolicy,
    /// SHA-256 of the editor token (compared in constant time); `None` when unset.
    editor_token_digest: Option<TokenDigest>,
    pub retention: Duration,
    pub sweep_interval: Duration,
    pub tenants: Vec<String>,
    /// Each tenant's default language, listed with the tenants.
    pub tenant_languages: std::collections::BTreeMap<String, String>,
    pub smoke_test_callers: HashSet<String>,
    /// Websockets one node keeps open at most (`FLOWHOST_INAPP_MAX_CONNECTIONS`).
    pub max_inapp_connections: usize,
    /// Websockets one player keeps open on one node at most (`FLOWHOST_INAPP_MAX_CONNECTIONS_PER_PLAYER`).
    pub max_inapp_connections_per_player: usize,
}

/// Everything the push handlers need, passed as one value.
#[derive(Debug)]
pub struct PushState {
    pub ports: Ports,
    pub settings: PushSettings,
    /// The caller policy, or why it failed to load (push-platform routes then answer 503).
    pub policy: Result<CallerPolicy, PolicyError>,
    /// This node's in-app websockets.
    pub inapp: Arc<inapp::InAppHub>,
}

fn config_error(setting: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { setting: setting.to_owned(), message: message.into() }
}

impl PushState {
    /// Resolves the push settings. A bad VAPID pair or an unresolvable secret fails the start (naming the
    /// setting); a bad caller policy does not: it is kept as an error state, logged once here.
    pub fn from_config(config: &Config, ports: Ports) -> Result<PushState, ConfigError> {
        let push = config.section::<PushConfig>();
        let secrets = push.secret_values(config)?;
        let policy = match &secrets.callers_json {
            None => {
                info!("no push-platform callers configured (FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON); every caller gets 401");
                Ok(CallerPolicy::default())
            }
            Some(json) => CallerPolicy::parse(json.expose()),
        };
        if let Err(policy_error) = &policy {
            error!(
                setting = "FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON",
                error = %policy_error,
                "caller policy failed to load: the push-platform routes answer 503 and /health answers 503"
            );
        }
        let vapid = match (&secrets.vapid_public_key, &secrets.vapid_private_key) {
            (Some(public), Some(private)) => {
                vapid::check_pair(public, private.expose()).map_err(|message| {
                    let setting = if message.starts_with("the public key") {
                        "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY"
                    } else {
                        "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY"
                    };
                    config_error(setting, message)
                })?;
                Some(VapidKeys {
                    public_key: public.trim().trim_end_matches('=').to_owned(),
                    private_key: private.clone(),
                    temporary: false,
                })
            }
            _ if push.allow_auto_vapid => {
                let (public_key, private_key) =
                    vapid::generate().map_err(|e| config_error("FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID", e))?;
                warn!(
                    "FLOWHOST_WEBPUSH_ALLOW_AUTO_VAPID: generated a temporary VAPID keypair for local development; \
                     client-config stays not ready; never enable this in shared or production environments"
                );
                Some(VapidKeys { public_key, private_key: Secret::new(private_key), temporary: true })
            }
            _ => None,
        };
        let token_secrets =
            secrets.interaction_token_secret.map(|current| (current, push.interaction_token_secret_previous.clone()));
        Ok(PushState {
            settings: PushSettings {
                max_body_bytes: config.api.max_body_bytes,
                dry_run: push.dry_run,
                channels: push.channels_enabled.clone(),
                vapid,
                token_secrets,
                targets: targets::TargetPolicy::new(&push.allowed_target_hosts),
                editor_token_digest: secrets.editor_token.as_ref().map(TokenDigest::new),
                retention: records::retention(push.retention_days),
                sweep_interval: Duration::from_millis(push.retention_sweep_interval_ms),
                tenants: push.tenants.clone(),
                tenant_languages: push.tenant_default_languages.clone(),
                smoke_test_callers: push.smoke_test_callers.iter().cloned().collect(),
                max_inapp_connections: push.max_inapp_connections,
                max_inapp_connections_per_player: push.max_inapp_connections_per_player,
            },
            inapp: Arc::new(inapp::InAppHub::new(ports.subjects.clone())),
            ports,
            policy,
        })
    }

    /// Whether the role is healthy: false when the caller policy failed to load.
    pub fn healthy(&self) -> bool {
        self.policy.is_ok()
    }

    /// The failing checks, by name, for `/health`.
    pub fn failing_checks(&self) -> Vec<&'static str> {
        if self.healthy() {
            Vec::new()
        } else {
            vec![POLICY_CHECK]
        }
    }

    /// The secrets an interaction token may be signed with, current first; `None` when unset.
    pub fn interaction_secrets(&self) -> Option<Vec<&[u8]>> {
        let (current, previous) = self.settings.token_secrets.as_ref()?;
        let mut secrets = vec![current.expose().as_bytes()];
        secrets.extend(previous.as_ref().map(|p| p.expose().as_bytes()));
        Some(secrets)
    }

    /// Mints an interaction token with the current secret (the sender does this per delivery); `None` when no
    /// secret is configured.
    pub fn mint_interaction_token(&self, claims: &InteractionClaims) -> Option<String> {
        let (current, _) = self.settings.token_secrets.as_ref()?;
        Some(token::mint(current.expose().as_bytes(), claims))
    }

    pub fn channel_enabled(&self, channel: Channel) -> bool {
        self.settings.channels.contains(&channel)
    }
}

/// The push-platform and editor routes, body-limited, without `/health` and without a fallback, so the
/// administration API's router can merge them onto its listener; documented, every operation with the push
/// envelope as its `default` response.
pub fn router(state: Arc<PushState>) -> ApiRouter {
    let max_body_bytes = state.settings.max_body_bytes;
    let routes = ApiRouter::new()
        .merge(platform::routes())
        .merge(inapp::routes())
        .merge(editor::routes())
        .merge(templates::routes());
    let (routes, document) = with_default_error::<error::ErrorBody, _>(
        routes,
        "The push error envelope `{ \"error\": { code, message, details? } }` (`Retry-After` on a 503 to retry)",
    )
    .split_for_parts();
    let router = routes
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state);
    documented(router, document)
}

/// What `routes!(handler, ...)` makes: the schemas, the paths and the method router of one path.
pub(crate) type Routes<S> = (Vec<(String, RefOr<Schema>)>, Paths, MethodRouter<S>);

/// `routes` served and documented under `to` instead of `from` (a prefix of every path they were annotated
/// with): one handler routed at several paths without repeating it, as `#[utoipa::path]` takes a literal path.
/// The router routes the keys of the paths, so both move; summaries and descriptions that name `from` name `to`.
pub(crate) fn moved<S>((schemas, paths, method_router): Routes<S>, from: &str, to: &str) -> Routes<S> {
    let rename = |text: &mut Option<String>| {
        if let Some(text) = text {
            *text = text.replace(from, to);
        }
    };
    let mut moved = Paths::new();
    for (path, mut item) in paths.paths {
        let rest = path.strip_prefix(from).unwrap_or_else(|| panic!("{path} is not under {from}"));
        for operation in operations(&mut item) {
            rename(&mut operation.summary);
            rename(&mut operation.description);
        }
        moved.paths.insert(format!("{to}{rest}"), item);
    }
    moved.extensions = paths.extensions;
    (schemas, moved, method_router)
}

/// The operations of `item`, whatever their method.
fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

/// The push service's answer to an unknown route: 404 in its envelope (used when its routes have a listener of
/// their own).
pub fn fallback() -> Router {
    Router::new().fallback(not_found)
}

async fn method_not_allowed() -> PushError {
    PushError::new(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed on this route")
}

async fn not_found() -> PushError {
    PushError::not_found("no such route")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::ManualClock;
    use flowhost_embedded::EmbeddedStore;

    fn ports(dir: &std::path::Path) -> Ports {
        let clock: Arc<dyn flowhost_core::Clock> = Arc::new(ManualClock::new(0));
        EmbeddedStore::open(dir, 1, clock.clone()).unwrap().ports(clock)
    }

    fn state(edit: impl FnOnce(&mut Config)) -> Result<PushState, ConfigError> {
        let dir = std::env::temp_dir().join(format!(
            "flowhost-push-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut config = Config::default();
        edit(&mut config);
        let state = PushState::from_config(&config, ports(&dir));
        let _ = std::fs::remove_dir_all(&dir);
        state
    }

    /// Every route of the push API, as routed before the routes were documented.
    const ROUTES: [(&str, &str); 33] = [
        ("GET", "/api/v1/webpush/client-config"),
        ("POST", "/api/v1/service/webpush/subscriptions"),
        ("POST", "/api/v1/service/webpush/subscriptions/deactivate"),
        ("POST", "/api/v1/service/webpush/events/browser"),
        ("POST", "/api/v1/service/webpush/events/semantic"),
        ("POST", "/api/v1/service/inapp/connect-tokens"),
        ("GET", "/api/v1/service/inapp/inbox"),
        ("POST", "/api/v1/service/inapp/inbox/read"),
        ("POST", "/api/v1/service/inapp/subscriptions"),
        ("POST", "/api/v1/service/inapp/subscriptions/deactivate"),
        ("GET", inapp::WEBSOCKET_PATH),
        ("GET", "/api/v1/tenants"),
        ("GET", "/api/v1/tenants/"),
        ("GET", "/api/v1/webpush/activity"),
        ("GET", "/api/v1/webpush/notifications/{id}"),
        ("POST", "/api/v1/webpush/send"),
        ("POST", "/api/v1/templates/in-app/send"),
        ("GET", "/api/v1/templates/web-push"),
        ("POST", "/api/v1/templates/web-push"),
        ("GET", "/api/v1/templates/web-push/"),
        ("POST", "/api/v1/templates/web-push/"),
        ("POST", "/api/v1/templates/web-push/preview"),
        ("GET", "/api/v1/templates/web-push/{id}"),
        ("PUT", "/api/v1/templates/web-push/{id}"),
        ("DELETE", "/api/v1/templates/web-push/{id}"),
        ("GET", "/api/v1/templates/in-app"),
        ("POST", "/api/v1/templates/in-app"),
        ("GET", "/api/v1/templates/in-app/"),
        ("POST", "/api/v1/templates/in-app/"),
        ("POST", "/api/v1/templates/in-app/preview"),
        ("GET", "/api/v1/templates/in-app/{id}"),
        ("PUT", "/api/v1/templates/in-app/{id}"),
        ("DELETE", "/api/v1/templates/in-app/{id}"),
    ];

    #[test]
    fn every_route_is_documented_with_the_push_envelope_as_default() {
        let mut document = router(Arc::new(state_default())).into_openapi();
        let mut expected: Vec<(String, String)> =
            ROUTES.iter().map(|(method, path)| (method.to_string(), path.to_string())).collect();
        expected.sort();
        assert_eq!(flowhost_role::openapi::operations_of(&document), expected);
        for (path, item) in document.paths.paths.iter_mut() {
            for operation in operations(item) {
                let default = operation.responses.responses.get("default");
                let default = serde_json::to_value(default).unwrap();
                assert_eq!(default["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/PushError");
                assert_eq!(operation.tags.as_ref().map(Vec::len), Some(1), "{path}: one tag");
                // The template routes moved from the web-push base name their own path.
                let summary = operation.summary.as_deref().unwrap_or_default();
                assert!(!path.contains("/in-app") || !summary.contains("/web-push"), "{path}: {summary}");
            }
        }
        let schemas = &document.components.as_ref().unwrap().schemas;
        assert!(schemas.contains_key("PushError") && schemas.contains_key("PushErrorDetail"));
        let websocket = serde_json::to_value(&document.paths.paths[inapp::WEBSOCKET_PATH]).unwrap();
        assert!(websocket["get"]["responses"]["101"].is_object());
        let parameters: Vec<&str> =
            websocket["get"]["parameters"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
        assert!(parameters.contains(&"token") && parameters.contains(&"after"), "{parameters:?}");
    }

    #[tokio::test]
    async fn every_documented_route_is_routed() {
        use tower::ServiceExt;
        let app: Router = router(Arc::new(state_default())).into();
        for (method, path) in ROUTES {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(path.replace("{id}", "1"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{}"))
                .unwrap();
            let status = app.clone().oneshot(request).await.unwrap().status();
            // No caller policy and no editor token: 401 and 503 from the extractors, before any handler.
            assert!(
                ![StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED].contains(&status),
                "{method} {path}: {status}"
            );
        }
        let unrouted = axum::http::Request::get("/api/v1/templates/in-app//").body(axum::body::Body::empty()).unwrap();
        assert_eq!(app.oneshot(unrouted).await.unwrap().status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_bad_policy_is_a_state_not_a_start_failure() {
        let state =
            state(|c| c.section_mut::<PushConfig>().callers_json = Some(Secret::new("{\"callers\": [}"))).unwrap();
        assert!(!state.healthy());
        assert_eq!(state.failing_checks(), [POLICY_CHECK]);
        let state = state_default();
        assert!(state.healthy() && state.failing_checks().is_empty());
    }

    fn state_default() -> PushState {
        state(|_| {}).unwrap()
    }

    #[test]
    fn vapid_settings() {
        let (public, private) = vapid::generate().unwrap();
        let (_, other_private) = vapid::generate().unwrap();
        let ok = state(|c| {
            c.section_mut::<PushConfig>().vapid_public_key = Some(public.clone());
            c.section_mut::<PushConfig>().vapid_private_key = Some(Secret::new(private.clone()));
        })
        .unwrap();
        assert!(ok.settings.vapid.as_ref().is_some_and(|k| !k.temporary && k.public_key == public));
        let mismatch = state(|c| {
            c.section_mut::<PushConfig>().vapid_public_key = Some(public.clone());
            c.section_mut::<PushConfig>().vapid_private_key = Some(Secret::new(other_private));
        })
        .unwrap_err();
        assert_eq!(mismatch.setting, "FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY");
        let bad_public = state(|c| {
            c.section_mut::<PushConfig>().vapid_public_key = Some("abc".into());
            c.section_mut::<PushConfig>().vapid_private_key = Some(Secret::new(private.clone()));
        })
        .unwrap_err();
        assert_eq!(bad_public.setting, "FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY");
        let auto = state(|c| c.section_mut::<PushConfig>().allow_auto_vapid = true).unwrap();
        assert!(auto.settings.vapid.as_ref().is_some_and(|k| k.temporary));
        assert!(state_default().settings.vapid.is_none());
    }

    #[test]
    fn debug_shows_no_secret() {
        let (public, private) = vapid::generate().unwrap();
        let state = state(|c| {
            c.section_mut::<PushConfig>().vapid_public_key = Some(public);
            c.section_mut::<PushConfig>().vapid_private_key = Some(Secret::new(private.clone()));
            c.section_mut::<PushConfig>().interaction_token_secret = Some(Secret::new("hmac-secret-value"));
            c.section_mut::<PushConfig>().editor_token = Some(Secret::new("editor-token-value"));
            c.section_mut::<PushConfig>().callers_json = Some(Secret::new(
                r#"{"callers": [{"caller_id": "a", "token": "caller-token-value", "allowed_source_apps": ["*"], "allowed_routes": ["*"]}]}"#,
            ));
        })
        .unwrap();
        let debug = format!("{state:?}");
        for secret in [private.as_str(), "hmac-secret-value", "editor-token-value", "caller-token-value"] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        use sha2::{Digest, Sha256};
        let editor_digest: String =
            Sha256::digest(b"editor-token-value").iter().map(|b| format!("{b}, ")).collect::<String>();
        assert!(!debug.contains(editor_digest.trim_end_matches(", ")), "digest in Debug");
    }

    #[test]
    fn tokens_minted_by_the_state_verify_with_its_secrets() {
        let state = state(|c| {
            c.section_mut::<PushConfig>().interaction_token_secret = Some(Secret::new("new"));
            c.section_mut::<PushConfig>().interaction_token_secret_previous = Some(Secret::new("old"));
        })
        .unwrap();
        let claims = InteractionClaims {
            tenant_id: "t".into(),
            player_id: 1,
            notification_id: "n".into(),
            delivery_id: "d".into(),
            expires_at_ms: 10,
        };
        let minted = state.mint_interaction_token(&claims).unwrap();
        assert_eq!(token::verify(&minted, &state.interaction_secrets().unwrap(), 0), Ok(claims.clone()));
        assert_eq!(token::verify(&minted, &[b"new"], 0), Ok(claims.clone()), "minted with the current secret");
        assert!(state_default().mint_interaction_token(&claims).is_none());
    }
}
