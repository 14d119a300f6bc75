//! The engine role's section (`[engine]`, `FLOWHOST_ENGINE_*`): the flow runtime's consumer group and topics,
//! the retry policy, the reply wait, and how long runs are kept.

use flowhost_core::config::ConfigError;
use flowhost_core::settings::{at_least, keyword, not_empty, rule, topic_name, Section, Setting};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Consumer group of the rule engine (`FLOWHOST_ENGINE_GROUP_ID`; default `flowhost-engine`).
    pub group_id: String,
    /// Periodic rule-cache reload in milliseconds (`FLOWHOST_ENGINE_RELOAD_INTERVAL_MS`; default 5000).
    /// A change signal on the subjects port reloads at once; the tick is the fallback.
    pub reload_interval_ms: u64,
    /// Records per poll (`FLOWHOST_ENGINE_BATCH_SIZE`; default 500).
    pub batch_size: usize,
    /// Where records that are not events go, with headers saying where they came from
    /// (`FLOWHOST_ENGINE_INVALID_EVENTS_TOPIC`; default `flowhost.invalid-events`).
    pub invalid_events_topic: String,
    /// How rule conditions and output mappings run (`FLOWHOST_ENGINE_NODE_KINDS`; default `native`).
    pub node_kinds: NodeKindsMode,
    /// Where a record goes when a node fails on it for good or its retries are exhausted, with headers naming
    /// its origin and the cause (`FLOWHOST_ENGINE_DEAD_LETTER_TOPIC`; default `flowhost.dead-letters`).
    pub dead_letter_topic: String,
    /// Retries of one record whose node failed with a retryable error, and of one step of a flow run.
    pub retry: RetryPolicy,
    /// How long a flow run waits for an external service's reply to an action before it sends again (an attempt
    /// of the step: the retry policy applies) (`FLOWHOST_ENGINE_REPLY_TIMEOUT_MS`; default 30000).
    pub reply_timeout_ms: u64,
    /// How long a service reply taken once is remembered in the cache, so redelivery storms are ignored without
    /// reading the run (`FLOWHOST_ENGINE_DEDUP_TTL_MS`; default 60000; 0 turns it off). Optional: duplicates are
    /// ignored by the run's state either way.
    pub dedup_ttl_ms: u64,
    /// Where flow runs publish their completion events (node progress and outcomes)
    /// (`FLOWHOST_ENGINE_COMPLETIONS_TOPIC`; default `flowhost.flow-completions`).
    pub completions_topic: String,
    /// How often the runner looks for flow-run steps that are due (retries, replays)
    /// (`FLOWHOST_ENGINE_FLOWS_POLL_INTERVAL_MS`; default 500).
    pub flows_poll_interval_ms: u64,
    /// How long flow runs and their dead letters are kept (`[engine.runs]`).
    pub runs: RunStorage,
}

/// How long flow runs and their dead letters are kept (`[engine.runs]`): a sweep removes what is older, so the
/// store holds about the retention's worth of runs however long the engine runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunStorage {
    /// A run not changed for this long is removed, unless it holds an open dead letter
    /// (`FLOWHOST_ENGINE_RUNS_RETENTION_MS`; default 7 days).
    pub retention_ms: u64,
    /// A dead letter is removed this long after it was written, with its run; a replayed one goes with the run
    /// retention (`FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS`; default 30 days, at least the run retention).
    pub dead_letter_retention_ms: u64,
    /// How often the sweep runs (`FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS`; default 60000).
    pub sweep_interval_ms: u64,
    /// Which finished runs keep their nodes' inputs and outputs (`FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS`; default
    /// `all`).
    pub node_payloads: NodePayloads,
}

impl Default for RunStorage {
    fn default() -> Self {
        const DAY_MS: u64 = 24 * 60 * 60 * 1000;
        Self {
            retention_ms: 7 * DAY_MS,
            dead_letter_retention_ms: 30 * DAY_MS,
            sweep_interval_ms: 60_000,
            node_payloads: NodePayloads::All,
        }
    }
}

/// Which finished runs keep their nodes' inputs and outputs. A run always keeps its summary (status, path,
/// timing, attempts, errors) and its source event; a run still waiting keeps everything (its steps need it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodePayloads {
    /// Every run (Studio's run view shows every node's input and output).
    #[default]
    All,
    /// Dead-lettered runs only (a completed run shows its path and timing, its nodes' payloads empty).
    Failed,
    /// No run (the smallest store: the run view shows paths, timing and the source event).
    None,
}

/// How often and how patiently one record is retried (the spec's policy by default: 5 attempts, 2 s initial
/// backoff, factor 3, 1 min cap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (`FLOWHOST_ENGINE_RETRY_MAX_ATTEMPTS`; default 5, at least 1).
    pub max_attempts: u32,
    /// Delay before the second attempt (`FLOWHOST_ENGINE_RETRY_INITIAL_BACKOFF_MS`; default 2000).
    pub initial_backoff_ms: u64,
    /// Each next delay is this many times the last (`FLOWHOST_ENGINE_RETRY_BACKOFF_FACTOR`; default 3, at least 1).
    pub backoff_factor: f64,
    /// Longest delay (`FLOWHOST_ENGINE_RETRY_MAX_BACKOFF_MS`; default 60000).
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 5, initial_backoff_ms: 2000, backoff_factor: 3.0, max_backoff_ms: 60_000 }
    }
}

impl RetryPolicy {
    /// The backoff between attempts of one record.
    pub fn backoff(&self) -> flowhost_core::backoff::Backoff {
        flowhost_core::backoff::Backoff::new(
            std::time::Duration::from_millis(self.initial_backoff_ms),
            self.backoff_factor,
            std::time::Duration::from_millis(self.max_backoff_ms),
        )
    }
}

/// Where the engine runs rule conditions and output mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKindsMode {
    /// In process: CEL compiled once per rule, mappings in Rust (fastest).
    #[default]
    Native,
    /// Through the active `condition` and `mapping` components of the plugin runtime, so an operator can
    /// hot-load new versions of them.
    Wasm,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            group_id: "flowhost-engine".into(),
            reload_interval_ms: 5000,
            batch_size: 500,
            invalid_events_topic: "flowhost.invalid-events".into(),
            node_kinds: NodeKindsMode::Native,
            dead_letter_topic: "flowhost.dead-letters".into(),
            retry: RetryPolicy::default(),
            reply_timeout_ms: 30_000,
            dedup_ttl_ms: 60_000,
            completions_topic: "flowhost.flow-completions".into(),
            flows_poll_interval_ms: 500,
            runs: RunStorage::default(),
        }
    }
}
/// Every `[engine]` setting (see `crate::settings`).
pub static ENGINE_SETTINGS: &[Setting<EngineConfig>] = flowhost_core::settings!(EngineConfig, "engine.", [
    { "FLOWHOST_ENGINE_GROUP_ID", group_id, "consumer group of the flow runtime; every group it derives starts with it", check: not_empty() },
    { "FLOWHOST_ENGINE_RELOAD_INTERVAL_MS", reload_interval_ms, "periodic reload of rules and released flows besides the change signals", check: at_least(10) },
    { "FLOWHOST_ENGINE_BATCH_SIZE", batch_size, "records per poll", check: at_least(1) },
    { "FLOWHOST_ENGINE_INVALID_EVENTS_TOPIC", invalid_events_topic, "where records go that are not events", check: not_empty() },
    { "FLOWHOST_ENGINE_NODE_KINDS", node_kinds, "`native`: conditions and mappings in process; `wasm`: through the active `condition` and `mapping` components (hot-loadable; see [Runs](flows.md#runs))", parse: keyword },
    { "FLOWHOST_ENGINE_DEAD_LETTER_TOPIC", dead_letter_topic, "where records go that a node failed on for good or whose retries ran out", check: topic_name() },
    { "FLOWHOST_ENGINE_RETRY_MAX_ATTEMPTS", retry.max_attempts, "attempts of one record or run step in all", check: at_least(1) },
    { "FLOWHOST_ENGINE_RETRY_INITIAL_BACKOFF_MS", retry.initial_backoff_ms, "delay before the second attempt" },
    { "FLOWHOST_ENGINE_RETRY_BACKOFF_FACTOR", retry.backoff_factor, "growth of the delay per attempt", check: rule(|factor: &f64| if *factor >= 1.0 && factor.is_finite() { Ok(()) } else { Err("must be a number of at least 1".to_owned()) }, "at least 1") },
    { "FLOWHOST_ENGINE_RETRY_MAX_BACKOFF_MS", retry.max_backoff_ms, "longest delay" },
    { "FLOWHOST_ENGINE_REPLY_TIMEOUT_MS", reply_timeout_ms, "how long a run waits for an external service's reply before it sends again", check: at_least(1) },
    { "FLOWHOST_ENGINE_DEDUP_TTL_MS", dedup_ttl_ms, "how long a taken service reply is remembered to ignore redeliveries (`0`: off)" },
    { "FLOWHOST_ENGINE_COMPLETIONS_TOPIC", completions_topic, "where flow runs publish their completion events", check: topic_name() },
    { "FLOWHOST_ENGINE_FLOWS_POLL_INTERVAL_MS", flows_poll_interval_ms, "how often due flow-run steps (retries, replays) are looked for", check: at_least(1) },
    { "FLOWHOST_ENGINE_RUNS_RETENTION_MS", runs.retention_ms, "a run not changed for this long is removed by the sweep, unless it holds an open dead letter", check: at_least(60_000), default: "`604800000` (7 days)" },
    { "FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS", runs.dead_letter_retention_ms, "an open dead letter and its run are removed this long after it was written; a replayed one goes with the run retention (at least the run retention)", default: "`2592000000` (30 days)" },
    { "FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS", runs.sweep_interval_ms, "how often the run retention sweep runs", check: at_least(10) },
    { "FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS", runs.node_payloads, "which finished runs keep their nodes' inputs and outputs: `all`, `failed` (dead-lettered runs only) or `none`; every run keeps its summary and source event", parse: keyword },
]);

impl Section for EngineConfig {
    const NAME: &'static str = "engine";
    const PAGE: &'static str = "configuration.md";

    fn settings() -> &'static [Setting<Self>] {
        ENGINE_SETTINGS
    }

    /// A dead letter's run is kept at least as long as runs are.
    fn validate(&self) -> Result<(), ConfigError> {
        if self.runs.dead_letter_retention_ms < self.runs.retention_ms {
            return Err(ConfigError::new(
                "FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS",
                "must be at least FLOWHOST_ENGINE_RUNS_RETENTION_MS (a dead letter's run is kept as long as it)",
            ));
        }
        Ok(())
    }
}

impl EngineConfig {
    /// The reply dedup window (`dedup_ttl_ms`), `None` when turned off.
    pub fn reply_dedup(&self) -> Option<std::time::Duration> {
        (self.dedup_ttl_ms > 0).then(|| std::time::Duration::from_millis(self.dedup_ttl_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowhost_core::config::{Config, SectionEntry};

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let env = |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Config::load(None, env, &[SectionEntry::of::<EngineConfig>()])
    }

    #[test]
    fn errors_name_the_setting() {
        let cases = [
            (vec![("FLOWHOST_ENGINE_RUNS_RETENTION_MS", "1000")], "FLOWHOST_ENGINE_RUNS_RETENTION_MS"),
            (
                vec![("FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS", "86400000")],
                "FLOWHOST_ENGINE_RUNS_DEAD_LETTER_RETENTION_MS",
            ),
            (vec![("FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS", "0")], "FLOWHOST_ENGINE_RUNS_SWEEP_INTERVAL_MS"),
            (vec![("FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS", "some")], "FLOWHOST_ENGINE_RUNS_NODE_PAYLOADS"),
            (vec![("FLOWHOST_ENGINE_RETRY_MAX_ATTEMPTS", "0")], "FLOWHOST_ENGINE_RETRY_MAX_ATTEMPTS"),
            (vec![("FLOWHOST_ENGINE_RETRY_BACKOFF_FACTOR", "0.5")], "FLOWHOST_ENGINE_RETRY_BACKOFF_FACTOR"),
            (vec![("FLOWHOST_ENGINE_DEAD_LETTER_TOPIC", "bad topic")], "FLOWHOST_ENGINE_DEAD_LETTER_TOPIC"),
            (vec![("FLOWHOST_ENGINE_GROUP_ID", "   ")], "FLOWHOST_ENGINE_GROUP_ID"),
        ];
        for (vars, setting) in cases {
            // A blank value is no value: the group keeps its default.
            if vars[0].1.trim().is_empty() {
                assert!(load(&vars).is_ok());
                continue;
            }
            let error = load(&vars).unwrap_err();
            assert_eq!(error.setting, setting, "{vars:?}: {error}");
        }
        let config = load(&[("FLOWHOST_ENGINE_NODE_KINDS", "wasm"), ("FLOWHOST_ENGINE_DEDUP_TTL_MS", "0")]).unwrap();
        let engine = config.section::<EngineConfig>();
        assert_eq!((engine.node_kinds, engine.reply_dedup()), (NodeKindsMode::Wasm, None));
    }
}
