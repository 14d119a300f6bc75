//! `TestHost`: Flowhost started in process on `127.0.0.1:0`, over the embedded backends (in a temporary data
//! directory) or the real servers (a unique MongoDB database and consumer group per host), with a fast
//! reload tick. The same `flowhost::serve` the binary runs; tests drive it over HTTP and the topics port.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flowhost_core::config::Config;
use flowhost_core::ports::{ConsumerConfig, OutRecord, Ports, Record, StartFrom, TopicConsumer};
use flowhost_core::Clock;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{servers, unique};

/// The grants test hosts give the fixtures that use more than a log and a clock (`FLOWHOST_PLUGINS_GRANTS`).
pub const FIXTURE_GRANTS: [(&str, &[&str]); 2] =
    [("greeter", &["log", "clock", "documents"]), ("ledger", &["log", "clock", "documents"])];

/// [`FIXTURE_GRANTS`] as `FLOWHOST_PLUGINS_GRANTS` writes them, for a process a test starts.
pub fn fixture_grants_env() -> String {
    FIXTURE_GRANTS
        .iter()
        .map(|(fixture, granted)| format!("{fixture}={}", granted.join(",")))
        .collect::<Vec<_>>()
        .join(";")
}

/// A deployment's name on the shared servers: short (it prefixes every topic and subject) and unique.
pub fn deployment_name() -> String {
    format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// Which backends a host runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backends {
    /// SQLite documents and log, in-process subjects and cache.
    Embedded,
    /// MongoDB, Kafka, NATS and Redis (the servers `tests/run.sh` starts).
    Distributed,
}

/// The plugin-call deadline of a test host (the product's default is 1 s): generous, so a loaded machine never
/// turns a slow service call into a dead-lettered action.
pub const TEST_PLUGIN_TIMEOUT_MS: u64 = 10_000;

pub struct TestHost {
    pub base_url: String,
    pub ports: Ports,
    pub config: Config,
    pub http: reqwest::Client,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    _data_dir: Option<Arc<tempfile::TempDir>>,
}

impl TestHost {
    /// A configuration for `backends` with a fresh data directory / database and consumer group.
    pub fn config(backends: Backends, data_dir: &Path) -> Config {
        let mut config = Config { data_dir: data_dir.to_path_buf(), ..Config::default() };
        config.api.port = 0;
        config.section_mut::<flowhost_runs::EngineConfig>().reload_interval_ms = 200;
        config.section_mut::<flowhost_runs::EngineConfig>().group_id = unique("engine");
        config.section_mut::<flowhost_runs::EngineConfig>().invalid_events_topic = unique("invalid");
        // Suites that test plugins turn the bundled ones on; the others start with an empty component catalog
        // (and without compiling three components per host).
        config.plugins.bundled = false;
        config.plugins.sync_interval_ms = 200;
        // The deadline counts the time a guest waits on the host's services (a push sent across NATS, say); the
        // suites that test the deadline set their own.
        config.plugins.timeout_ms = TEST_PLUGIN_TIMEOUT_MS;
        // Hosts share one compile cache when `tests/run.sh` names one: compiling the same components again for
        // every host was most of the suite's CPU.
        config.plugins.compile_cache_dir =
            std::env::var_os(flowhost_core::config::COMPILE_CACHE_DIR_ENV).map(std::path::PathBuf::from);
        // The fixtures that keep documents are granted them, as an operator grants a plugin it trusts.
        for (fixture, granted) in FIXTURE_GRANTS {
            config.plugins.grants.insert(fixture.to_owned(), granted.iter().map(|c| c.to_string()).collect());
        }
        if backends == Backends::Distributed {
            config.mongodb.uri = Some(servers::mongodb_uri());
            config.mongodb.database = unique("db").replace('-', "_");
            config.kafka.brokers = Some(servers::kafka_brokers());
            config.kafka.properties.insert("session.timeout.ms".into(), "6000".into());
            config.nats.url = Some(servers::nats_url());
            config.redis.url = Some(servers::redis_url());
            // Each host is a deployment of its own on the shared servers: nothing it sends reaches another
            // test's host (the same `triggers.v2.*` subjects, `triggers_v2_*` topics, queue keys). Hosts of one
            // test that make one deployment start from one configuration (`start_with(config.clone())`), or
            // copy it with `join_deployment`.
            let deployment = deployment_name();
            config.nats.subject_prefix = Some(deployment.clone());
            config.kafka.topic_prefix = Some(deployment.clone());
            config.redis.key_prefix = Some(deployment);
        }
        crate::push::configure(&mut config);
        config
    }

    /// The settings that make `config` a node of `deployment`'s deployment on the shared servers: its
    /// namespaces, database and consumer group (so a second replica shares the first one's work).
    pub fn join_deployment(config: &mut Config, deployment: &Config) {
        config.mongodb.database = deployment.mongodb.database.clone();
        config.section_mut::<flowhost_runs::EngineConfig>().group_id =
            deployment.section::<flowhost_runs::EngineConfig>().group_id.clone();
        config.nats.subject_prefix = deployment.nats.subject_prefix.clone();
        config.kafka.topic_prefix = deployment.kafka.topic_prefix.clone();
        config.redis.key_prefix = deployment.redis.key_prefix.clone();
    }

    /// The environment that makes a `flowhost` process started by a test a node of `config`'s deployment:
    /// its consumer group and plugin deadline, and the servers it names, its database and namespaces (none of
    /// these for the embedded backends).
    pub fn deployment_env(config: &Config) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("FLOWHOST_ENGINE_GROUP_ID", config.section::<flowhost_runs::EngineConfig>().group_id.clone()),
            ("FLOWHOST_PLUGINS_TIMEOUT_MS", config.plugins.timeout_ms.to_string()),
        ];
        let settings = [
            ("FLOWHOST_MONGODB_URI", config.mongodb.uri.clone()),
            ("FLOWHOST_MONGODB_DATABASE", config.mongodb.uri.as_ref().map(|_| config.mongodb.database.clone())),
            ("FLOWHOST_KAFKA_BROKERS", config.kafka.brokers.clone()),
            ("FLOWHOST_KAFKA_TOPIC_PREFIX", config.kafka.topic_prefix.clone()),
            ("FLOWHOST_NATS_URL", config.nats.url.clone()),
            ("FLOWHOST_NATS_SUBJECT_PREFIX", config.nats.subject_prefix.clone()),
            ("FLOWHOST_REDIS_URL", config.redis.url.clone()),
            ("FLOWHOST_REDIS_KEY_PREFIX", config.redis.key_prefix.clone()),
        ];
        env.extend(settings.into_iter().filter_map(|(name, value)| Some((name, value?))));
        env
    }

    pub async fn start(backends: Backends) -> TestHost {
        let dir = Arc::new(tempfile::tempdir().expect("temporary data directory"));
        let config = Self::config(backends, dir.path());
        let mut host = Self::start_with(config).await;
        host._data_dir = Some(dir);
        host
    }

    /// Starts on `backends` with the test configuration changed by `configure`, and optionally another clock
    /// (e.g. a `ManualClock` to move time for expiry).
    pub async fn start_configured(
        backends: Backends,
        clock: Option<Arc<dyn Clock>>,
        configure: impl FnOnce(&mut Config),
    ) -> TestHost {
        init_logging();
        let dir = Arc::new(tempfile::tempdir().expect("temporary data directory"));
        let mut config = Self::config(backends, dir.path());
        configure(&mut config);
        let clock = clock.unwrap_or_else(|| Arc::new(flowhost_core::SystemClock));
        let ports = flowhost::connect_with_clock(&config, clock).await.expect("connect ports");
        let mut host = Self::start_on(config, ports).await;
        host._data_dir = Some(dir);
        host
    }

    /// Starts with exactly `config` (port 0 is honoured).
    pub async fn start_with(config: Config) -> TestHost {
        init_logging();
        let ports = flowhost::connect(&config).await.expect("connect ports");
        Self::start_on(config, ports).await
    }

    /// Starts with exactly `config` over `ports` (e.g. a port wrapped to inject faults).
    pub async fn start_on(config: Config, ports: Ports) -> TestHost {
        init_logging();
        // Bound as the binary binds its main socket (the accept queue's length included).
        let listener = flowhost_role::bind(&format!("127.0.0.1:{}", config.api.port)).await.expect("bind");
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        // Services reply to the API where it really listens (port 0 was only asked for); the kept config stays
        // as given, so a restart from it binds afresh.
        let mut serving = config.clone();
        serving.api.public_base_url.get_or_insert_with(|| base_url.clone());
        let shutdown = CancellationToken::new();
        let serve = flowhost::serve(serving, ports.clone(), listener, shutdown.clone());
        let task = tokio::spawn(async move {
            // What stopped the host, in the test's output (a failing test's later requests only see a reset).
            serve.await.inspect_err(|error| eprintln!("flowhost::serve ended: {error:#}"))
        });
        TestHost { base_url, ports, config, http: reqwest::Client::new(), shutdown, task: Some(task), _data_dir: None }
    }

    /// Whether the host's `serve` has ended (e.g. a listener it was given could not bind).
    pub fn ended(&self) -> bool {
        self.task.as_ref().is_none_or(|task| task.is_finished())
    }

    /// Stops the host and waits for its roles to finish.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("serve task").expect("serve result");
        }
    }

    /// How long to keep reading before concluding that nothing more arrives: longer on Kafka, where a new
    /// reader's group join alone takes seconds.
    pub fn quiet_period(&self) -> Duration {
        if self.config.kafka.brokers.is_some() {
            Duration::from_secs(10)
        } else {
            Duration::from_secs(2)
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.config.data_dir.clone()
    }

    /// Waits until `/ready` answers 200 (every role's readiness check passes), for at most a minute.
    pub async fn wait_ready(&self) {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = self.call("GET", "/ready", None).await;
            if status == 200 {
                return;
            }
            assert!(tokio::time::Instant::now() < until, "never ready: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Sends a request with an optional JSON body; returns status and parsed body (`Null` when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        response_parts(request.send().await.expect("request")).await
    }

    /// Creates the v2 flow `body` (which must validate) and releases it; answers its id.
    pub async fn release_flow(&self, body: Value) -> String {
        let (status, created) = self.call("POST", "/api/v2/flows", Some(body)).await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["validation"]["valid"], true, "{created:#}");
        let id = created["id"].as_str().unwrap().to_owned();
        let (status, released) =
            self.call("POST", &format!("/api/v2/flows/{id}/release"), Some(serde_json::json!({}))).await;
        assert_eq!(status, 200, "{released}");
        id
    }

    /// Uploads `wasm` as version `version` of plugin `id` (activated), which must succeed.
    pub async fn upload_plugin(&self, id: &str, version: &str, wasm: Vec<u8>) {
        let url = self.url(&format!("/api/v1/plugins/{id}/versions/{version}"));
        let response = self.http.put(url).body(wasm).send().await.expect("upload");
        assert!(response.status().is_success(), "upload {id} {version}: {}", response.text().await.unwrap_or_default());
    }

    /// Waits (at most 30 s) until flow `flow_id` has `count` completed runs, and answers that page of runs. An
    /// output is published before its run is stored as completed (by design), so a test that read the output
    /// waits here for the store.
    pub async fn completed_runs(&self, flow_id: &str, count: u64) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (_, page) = self.call("GET", &format!("/api/v2/flows/{flow_id}/runs?status=completed"), None).await;
            if page["total"] == count {
                return page;
            }
            assert!(tokio::time::Instant::now() < until, "{count} completed runs of {flow_id}: {page}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Sends raw bytes (for malformed-body tests).
    pub async fn call_raw(&self, method: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = self
            .http
            .request(method, self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    /// The current value of a counter or gauge on `/metrics` (0 when absent).
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.http.get(self.url("/metrics")).send().await.unwrap().text().await.unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Creates rule `r`, passing every `deposit` event of a new source topic to a new output topic, and waits
    /// until the engine has it; answers the two topics.
    pub async fn pass_through_rule(&self) -> (String, String) {
        let (source, out) = (crate::unique("in"), crate::unique("out"));
        let rule = serde_json::json!({
            "id": "r", "source": {"type": "kafka", "topic": source},
            "conditions": {"event_type": "deposit", "expression": "true"}, "output_topic": out
        });
        assert_eq!(self.call("POST", "/api/v1/triggers", Some(rule)).await.0, 201);
        self.wait_for_reload().await;
        (source, out)
    }

    /// Waits until the engine completed a rule reload that started after this call, so every change made
    /// through the API before it is in the engine's rules.
    pub async fn wait_for_reload(&self) {
        let start = self.metric("flowhost_engine_rule_cache_reloads_total").await;
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        while self.metric("flowhost_engine_rule_cache_reloads_total").await < start + 2.0 {
            assert!(tokio::time::Instant::now() < until, "the engine did not reload its rules");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn publish(&self, topic: &str, values: &[Value]) {
        let records: Vec<OutRecord> =
            values.iter().map(|v| OutRecord::new(topic, v.to_string()).with_key("k")).collect();
        self.ports.topics.publish(&records).await.expect("publish");
    }

    /// Reads `topic` from the beginning in a fresh group until `count` records arrived or `deadline` passed.
    pub async fn read(&self, topic: &str, count: usize, deadline: Duration) -> Vec<Record> {
        read_topic(&self.ports, topic, count, deadline).await
    }
}

/// Logs of the host under test, shown for failing tests: FLOWHOST_TEST_LOG=debug cargo test ...
fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FLOWHOST_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .try_init();
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A response's status and its body parsed as JSON (`Null` when empty, a JSON string when not JSON).
pub async fn response_parts(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    (status, body)
}

/// Reads `topic` from the beginning in a fresh group until `count` records arrived or `deadline` passed.
pub async fn read_topic(ports: &Ports, topic: &str, count: usize, deadline: Duration) -> Vec<Record> {
    ports.topics.create_topic(topic, 1).await.expect("create topic");
    let mut consumer = reader(ports, topic).await;
    let until = tokio::time::Instant::now() + deadline;
    let mut records = Vec::new();
    while records.len() < count && tokio::time::Instant::now() < until {
        records.extend(consumer.poll(count - records.len(), Duration::from_millis(200)).await.expect("poll"));
    }
    records
}

/// A consumer of `topic` from the beginning, in a group of its own.
pub async fn reader(ports: &Ports, topic: &str) -> Box<dyn TopicConsumer> {
    let config = ConsumerConfig { group: unique("reader"), topics: vec![topic.to_owned()], start: StartFrom::Earliest };
    ports.topics.consumer(config).await.expect("consumer")
}

/// Parses a record value as JSON.
pub fn json_value(record: &Record) -> Value {
    serde_json::from_slice(&record.value).expect("record value is JSON")
}
