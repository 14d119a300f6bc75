//! Names of the document collections, in one place so adapters, API and engine agree on them.

pub const RULES: &str = "rules";
pub const TENANT_OVERRIDES: &str = "tenant_overrides";
pub const EVENT_SOURCES: &str = "event_sources";
pub const SCHEMAS: &str = "schemas";
pub const FLOWS: &str = "flows";
pub const FLOW_VERSIONS: &str = "flow_versions";
pub const FLOW_RELEASE_ATTEMPTS: &str = "flow_release_attempts";
pub const FLOW_EDIT_LOCKS: &str = "flow_edit_locks";
/// Which released v2 flows reference which service (id: `{service}/{flow_id}`), for the drift pass and broadcasts.
pub const FLOW_SERVICE_REFS: &str = "flow_service_refs";
/// The active manifest hash of each service as of the last drift pass (id: the service).
pub const FLOW_DRIFT_HASHES: &str = "flow_drift_hashes";
/// Runs of released v2 flows (id: the run id).
pub const FLOW_RUNS: &str = "flow_runs";
/// One-time migrations of the executor, by id (e.g. `adopted-flow-group`: see `flowhost_runs::group`).
pub const EXECUTOR_MIGRATIONS: &str = "executor_migrations";
/// Terminal failures of run steps, for the API to list and replay (id: `dl-` and a hash of run and node).
pub const FLOW_DEAD_LETTERS: &str = "flow_dead_letters";
/// Registered component versions (the component catalog), one row per `(service, component, version)`.
pub const COMPONENTS: &str = "components";

/// Uploaded WebAssembly component versions (metadata; id: `{plugin id}/{version}`).
pub const COMPONENT_VERSIONS: &str = "component_versions";
/// The bytes of uploaded components, content-addressed (id: the SHA-256 of the `.wasm`).
pub const COMPONENT_BLOBS: &str = "component_blobs";
/// The chunks of components too big for one document (id: `{sha256}/{n}`; see `flowhost_components`).
pub const COMPONENT_BLOB_CHUNKS: &str = "component_blob_chunks";
/// The active version of each plugin (id: the plugin id).
pub const COMPONENT_ACTIVE: &str = "component_active";
/// Subject on which a node announces that a plugin's active version changed, so every node swaps at once.
pub const COMPONENTS_CHANGED_SUBJECT: &str = "flowhost.components.changed";

/// Documents plugins keep through the `documents` capability (id: `{plugin id}/{key}`).
pub const PLUGIN_DOCUMENTS: &str = "plugin_documents";

/// Subject on which the administration API announces that rules, schemas, sources or flows changed, so
/// engines reload at once instead of waiting for their periodic tick.
pub const CONFIG_CHANGED_SUBJECT: &str = "flowhost.config.changed";

/// Web-push subscriptions, one per browser endpoint (id: SHA-256 of the endpoint).
pub const WEBPUSH_SUBSCRIPTIONS: &str = "webpush_subscriptions";
/// Notification activity records (one per notification; expire after the retention days).
pub const WEBPUSH_ACTIVITY: &str = "webpush_activity";
/// Browser and semantic interaction events (expire after the retention days).
pub const WEBPUSH_EVENTS: &str = "webpush_events";
/// Web-push templates (id: the decimal template id).
pub const WEBPUSH_TEMPLATES: &str = "webpush_templates";
/// Tenants the push service has seen (subscriptions, templates), listed to the editor.
pub const WEBPUSH_TENANTS: &str = "webpush_tenants";
/// In-app templates (id: the decimal template id).
pub const INAPP_TEMPLATES: &str = "inapp_templates";
/// In-app messages, the players' inboxes (id: the notification id; expire after the retention days).
pub const INAPP_MESSAGES: &str = "inapp_messages";
/// Players whose in-app channel is deactivated (id: SHA-256 of tenant and player).
pub const INAPP_CHANNELS: &str = "inapp_channels";

/// Prefix of the per-player subjects of in-app delivery (`<prefix>.<hash of the player>`): a node subscribes to a
/// player's subject while it holds a websocket of that player, and the sender requests on it, so "no
/// responders" means no open socket anywhere.
pub const INAPP_PLAYER_SUBJECT_PREFIX: &str = "flowhost.inapp.player";
