//! The push-platform caller policy (`FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON`): who may call which of the
//! push-platform routes (the spec's five and Flowhost's in-app routes), from which source app, for which
//! tenants. Parsing is strict (unknown fields and unknown route strings fail the whole policy, so a typo such
//! as `tenant_id` for `tenant_ids` can never widen access); a failed policy is kept as an error state that
//! makes the routes answer 503 and `/health` answer 503.
//!
//! Caller tokens are compared in constant time: the presented token and every policy token are hashed with
//! SHA-256 and the digests compared with `subtle`, for every caller, so neither the content nor the length of a
//! token leaks through timing.

use std::collections::HashSet;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The five push-platform routes of the spec, exactly as `allowed_routes` names them.
pub const CLIENT_CONFIG: &str = "GET /api/v1/webpush/client-config";
pub const SUBSCRIPTIONS: &str = "POST /api/v1/service/webpush/subscriptions";
pub const DEACTIVATE: &str = "POST /api/v1/service/webpush/subscriptions/deactivate";
pub const BROWSER_EVENTS: &str = "POST /api/v1/service/webpush/events/browser";
pub const SEMANTIC_EVENTS: &str = "POST /api/v1/service/webpush/events/semantic";
/// The in-app routes a bridge calls, under the same policy (Flowhost's own; the spec names no in-app routes).
pub const INAPP_CONNECT_TOKENS: &str = "POST /api/v1/service/inapp/connect-tokens";
pub const INAPP_INBOX: &str = "GET /api/v1/service/inapp/inbox";
pub const INAPP_INBOX_READ: &str = "POST /api/v1/service/inapp/inbox/read";
pub const INAPP_SUBSCRIPTIONS: &str = "POST /api/v1/service/inapp/subscriptions";
pub const INAPP_DEACTIVATE: &str = "POST /api/v1/service/inapp/subscriptions/deactivate";
/// Every route `allowed_routes` may name.
pub const ROUTES: [&str; 10] = [
    CLIENT_CONFIG,
    SUBSCRIPTIONS,
    DEACTIVATE,
    BROWSER_EVENTS,
    SEMANTIC_EVENTS,
    INAPP_CONNECT_TOKENS,
    INAPP_INBOX,
    INAPP_INBOX_READ,
    INAPP_SUBSCRIPTIONS,
    INAPP_DEACTIVATE,
];

/// Why the policy could not be loaded; the message names the caller and the offending entry, never a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid push-platform caller policy (FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON): {0}")]
pub struct PolicyError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    callers: Vec<CallerEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallerEntry {
    caller_id: String,
    token: String,
    allowed_source_apps: Vec<String>,
    allowed_routes: Vec<String>,
    #[serde(default)]
    tenant_ids: Option<Vec<String>>,
}

/// One authorized caller.
#[derive(Clone)]
pub struct Caller {
    pub id: String,
    token_digest: [u8; 32],
    /// `None`: every source app (`[*]`).
    source_apps: Option<HashSet<String>>,
    /// `None`: every route (`*`).
    routes: Option<HashSet<&'static str>>,
    /// `None`: every tenant (field omitted).
    tenants: Option<HashSet<String>>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Caller {
    pub fn allows_route(&self, route: &str) -> bool {
        self.routes.as_ref().is_none_or(|routes| routes.contains(route))
    }

    pub fn allows_source_app(&self, app: &str) -> bool {
        self.source_apps.as_ref().is_none_or(|apps| apps.contains(app))
    }

    pub fn allows_tenant(&self, tenant_id: &str) -> bool {
        self.tenants.as_ref().is_none_or(|tenants| tenants.contains(tenant_id))
    }

    /// The tenants this caller is limited to (`None`: all).
    pub fn tenant_ids(&self) -> Option<impl Iterator<Item = &str>> {
        self.tenants.as_ref().map(|t| t.iter().map(String::as_str))
    }
}

/// The loaded policy: its callers.
#[derive(Debug, Clone, Default)]
pub struct CallerPolicy {
    callers: Vec<Caller>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A serde message with the values it quotes blanked, so no value (possibly a token) reaches a log. Messages
/// about fields (`unknown field `x``, `missing field `x``) quote only field names and stay as they are.
fn without_values(message: &str) -> String {
    if ["unknown field", "missing field", "duplicate field"].iter().any(|p| message.starts_with(p)) {
        return message.to_owned();
    }
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            None if c == '"' || c == '`' => {
                out.push(c);
                open = Some(c);
            }
            None => out.push(c),
            Some(quote) if c == quote => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
        }
    }
    out
}

impl CallerPolicy {
    /// Parses and checks a policy document `{ "callers": [...] }`.
    pub fn parse(json: &str) -> Result<CallerPolicy, PolicyError> {
        let file: PolicyFile = serde_json::from_str(json).map_err(|e| PolicyError(without_values(&e.to_string())))?;
        let mut ids = HashSet::new();
        let mut digests = HashSet::new();
        let mut callers = Vec::with_capacity(file.callers.len());
        for (index, entry) in file.callers.into_iter().enumerate() {
            let id = entry.caller_id.trim().to_owned();
            if id.is_empty() {
                return Err(PolicyError(format!("callers[{index}]: caller_id must not be empty")));
            }
            if !ids.insert(id.clone()) {
                return Err(PolicyError(format!("callers[{index}]: caller_id {id:?} appears twice")));
            }
            if entry.token.trim().is_empty() {
                return Err(PolicyError(format!("caller {id:?}: token must not be empty")));
            }
            let token_digest = digest(&entry.token);
            if !digests.insert(token_digest) {
                return Err(PolicyError(format!("caller {id:?}: its token is also another caller's token")));
            }
            // Spec 000: `X-Source-App` must be in the list unless the list is `["*"]`. A `*` beside other apps
            // would read as either; it is refused rather than guessed.
            let source_apps = if entry.allowed_source_apps == ["*"] {
                None
            } else if entry.allowed_source_apps.iter().any(|a| a == "*") {
                return Err(PolicyError(format!(
                    "caller {id:?}: allowed_source_apps is [\"*\"] for any app, or a list of apps without \"*\""
                )));
            } else {
                if let Some(app) = entry.allowed_source_apps.iter().find(|a| a.trim().is_empty()) {
                    return Err(PolicyError(format!("caller {id:?}: allowed_source_apps has an empty entry {app:?}")));
                }
                Some(entry.allowed_source_apps.into_iter().collect())
            };
            let mut routes = HashSet::new();
            let mut any_route = false;
            for route in &entry.allowed_routes {
                if route == "*" {
                    any_route = true;
                } else if let Some(known) = ROUTES.iter().find(|known| *known == route) {
                    routes.insert(*known);
                } else {
                    return Err(PolicyError(format!(
                        "caller {id:?}: unknown route {route:?} in allowed_routes (known: \"*\", {})",
                        ROUTES.map(|r| format!("{r:?}")).join(", ")
                    )));
                }
            }
            let tenants = match entry.tenant_ids {
                None => None,
                Some(tenants) => {
                    if tenants.iter().any(|t| t.trim().is_empty()) {
                        return Err(PolicyError(format!("caller {id:?}: tenant_ids has an empty entry")));
                    }
                    Some(tenants.into_iter().collect())
                }
            };
            callers.push(Caller {
                id,
                token_digest,
                source_apps,
                routes: if any_route { None } else { Some(routes) },
                tenants,
            });
        }
        Ok(CallerPolicy { callers })
    }

    /// The caller whose token equals `token`, compared in constant time against every caller.
    pub fn authenticate(&self, token: &str) -> Option<&Caller> {
        let presented = digest(token);
        let mut found = None;
        for caller in &self.callers {
            if bool::from(presented.ct_eq(&caller.token_digest)) {
                found = Some(caller);
            }
        }
        found
    }

    pub fn callers(&self) -> &[Caller] {
        &self.callers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"callers": [
        {"caller_id": "bridge", "token": "tok-bridge", "allowed_source_apps": ["casino-web"],
         "allowed_routes": ["GET /api/v1/webpush/client-config", "POST /api/v1/service/webpush/subscriptions"],
         "tenant_ids": ["t1"]},
        {"caller_id": "ops", "token": "tok-ops", "allowed_source_apps": ["*"], "allowed_routes": ["*"]}
    ]}"#;

    #[test]
    fn a_good_policy_authorizes_by_token_route_source_and_tenant() {
        let policy = CallerPolicy::parse(GOOD).unwrap();
        let bridge = policy.authenticate("tok-bridge").unwrap();
        assert_eq!(bridge.id, "bridge");
        assert!(bridge.allows_route(CLIENT_CONFIG) && bridge.allows_route(SUBSCRIPTIONS));
        assert!(!bridge.allows_route(DEACTIVATE));
        assert!(bridge.allows_source_app("casino-web") && !bridge.allows_source_app("Casino-Web"));
        assert!(bridge.allows_tenant("t1") && !bridge.allows_tenant("t2"));
        let ops = policy.authenticate("tok-ops").unwrap();
        assert!(ops.allows_route(SEMANTIC_EVENTS) && ops.allows_source_app("x") && ops.allows_tenant("any"));
        for wrong in ["", "tok", "tok-bridge ", "TOK-OPS", "tok-opsx"] {
            assert!(policy.authenticate(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn bad_policies_fail_with_a_message_naming_the_problem() {
        let cases = [
            ("{", "EOF"),
            (r#"{"callers": {}}"#, "sequence"),
            (r#"{"caller": []}"#, "unknown field"),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": [], "allowed_routes": ["GET /api/v1/webpush/Client-Config"]}]}"#,
                "unknown route",
            ),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": [], "allowed_routes": ["get /api/v1/webpush/client-config"]}]}"#,
                "unknown route",
            ),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": [], "allowed_routes": [], "tenant_id": ["x"]}]}"#,
                "unknown field",
            ),
            (r#"{"callers": [{"caller_id": "a", "allowed_source_apps": [], "allowed_routes": []}]}"#, "token"),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": [], "allowed_routes": []},
                               {"caller_id": "a", "token": "u", "allowed_source_apps": [], "allowed_routes": []}]}"#,
                "twice",
            ),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": [], "allowed_routes": []},
                               {"caller_id": "b", "token": "t", "allowed_source_apps": [], "allowed_routes": []}]}"#,
                "another caller",
            ),
            (
                r#"{"callers": [{"caller_id": " ", "token": "t", "allowed_source_apps": [], "allowed_routes": []}]}"#,
                "caller_id",
            ),
            (
                r#"{"callers": [{"caller_id": "a", "token": "", "allowed_source_apps": [], "allowed_routes": []}]}"#,
                "token",
            ),
            (
                r#"{"callers": [{"caller_id": "a", "token": "t", "allowed_source_apps": ["web", "*"], "allowed_routes": []}]}"#,
                "allowed_source_apps is [\"*\"] for any app",
            ),
        ];
        for (json, expected) in cases {
            let error = CallerPolicy::parse(json).err().unwrap_or_else(|| panic!("{json} must fail"));
            assert!(error.to_string().contains(expected), "{json}: {error}");
            assert!(error.to_string().contains("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON"));
        }
    }

    #[test]
    fn errors_never_show_values() {
        let error = CallerPolicy::parse(
            r#"{"callers": [{"caller_id": "a", "token": ["secret-token"], "allowed_source_apps": [], "allowed_routes": []}]}"#,
        )
        .unwrap_err();
        assert!(!error.to_string().contains("secret-token"), "{error}");
        let error = CallerPolicy::parse(r#"{"callers": [{"caller_id": "a", "token": 12345678}]}"#).unwrap_err();
        assert!(!error.to_string().contains("12345678"), "{error}");
        let error = CallerPolicy::parse(r#"{"callers": [], "tokens": 1}"#).unwrap_err();
        assert!(error.to_string().contains("`tokens`"), "field names stay: {error}");
    }
}
