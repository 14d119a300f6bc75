//! External services in flow runs (spec 001: the v2 loop, the service's canonical ingress targets, a Kafka
//! retarget failing closed): a service registered over the catalog receives the inbound envelope over NATS,
//! Kafka and HTTP, and its reply on the same channel continues the run; a released flow whose retarget topic is
//! missing stops consuming its source (`/ready` says so) and loses nothing once the topic exists; a service that
//! never replies is asked again with the same idempotency key and dead-lettered when the attempts run out. The
//! service here is this test, speaking the documented envelope. Every case runs on both backend sets.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use flowhost_core::ports::{ConsumerConfig, OutRecord, StartFrom};
use flowhost_tests::{on_both_backends, unique, Backends, TestHost};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

on_both_backends!(
    an_external_service_answers_over_nats_kafka_and_http,
    external_data_sources_answer_lookups_over_http_and_nats,
    a_missing_retarget_topic_fails_closed,
    a_service_that_never_replies_is_asked_again_then_dead_lettered,
    a_signing_key_guards_the_service_transports,
    a_kafka_reply_the_store_cannot_take_yet_is_not_lost
);

async fn start(backends: Backends, configure: impl FnOnce(&mut flowhost_core::config::Config)) -> TestHost {
    let host = TestHost::start_configured(backends, None, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50;
        configure(config);
    })
    .await;
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    host
}

async fn register(host: &TestHost, service: &str, sources: &[&str], endpoint: &str) {
    let manifest = json!({
        "service": service,
        "components": [{"id": format!("{service}-tags"), "version": "1.0.0"}],
        "actions": [{"name": "tag_player", "config_schema": {"type": "object",
            "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}],
        "service_sources": sources,
        "supports_nodes": ["condition"],
        "transports": {"http": {"endpoint": endpoint}}
    });
    let (status, body) = host.call("POST", "/api/v1/components/register", Some(manifest)).await;
    assert_eq!(status, 200, "{body}");
}

/// source -> segment of `service` over `transport` (retargeted to `kafka_topic`) -> tag_player -> output.
fn flow(source: &str, out: &str, service: &str, transport: &str, kafka_topic: Option<&str>) -> Value {
    let mut segment = json!({"service": service, "transport": transport});
    if let Some(topic) = kafka_topic {
        segment["kafka_topic"] = json!(topic);
    }
    json!({
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
            {"id": "seg", "kind": "service-in", "config": segment},
            {"id": "tag", "kind": "action", "config": {"action_ref": "tag_player", "tag": "vip-{{player_id}}"}},
            {"id": "out", "kind": "output-topic", "config": {"topic": out}}
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "tag"}, {"from": "tag", "to": "out"}]
    })
}

fn deposit(player: &str) -> Value {
    json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": 50.0, "player_id": player})
}

/// The reply this test's service gives to `envelope`, saying which transport carried it.
fn answer(envelope: &Value, via: &str) -> Value {
    json!({
        "run_id": envelope["run_id"], "node_id": envelope["node_id"],
        "idempotency_key": envelope["idempotency_key"], "attempt": envelope["attempt"],
        "outcome": "success",
        "result": {"tagged": envelope["input"]["tag"], "via": via, "player": envelope["payload"]["player_id"]}
    })
}

/// The HTTP side of the test service: `POST /v2/crm/inbound` takes the envelope (202) and replies to
/// `reply_to.url` from a task of its own, as a real service would.
async fn http_service() -> (String, CancellationToken) {
    async fn inbound(State(http): State<reqwest::Client>, Json(envelope): Json<Value>) -> StatusCode {
        let url = envelope["reply_to"]["url"].as_str().unwrap_or_default().to_owned();
        tokio::spawn(async move {
            let response = http.post(&url).json(&answer(&envelope, "http")).send().await.expect("reply over HTTP");
            assert_eq!(response.status().as_u16(), 202, "{}", response.text().await.unwrap_or_default());
        });
        StatusCode::ACCEPTED
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let app = Router::new().route("/v2/crm/inbound", post(inbound)).with_state(reqwest::Client::new());
    let shutdown = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await.unwrap();
    });
    (url, stop)
}

async fn first_output(host: &TestHost, topic: &str) -> Value {
    let records = host.read(topic, 1, Duration::from_secs(60)).await;
    assert_eq!(records.len(), 1, "no output on {topic}");
    serde_json::from_slice(&records[0].value).unwrap()
}

async fn an_external_service_answers_over_nats_kafka_and_http(backends: Backends) {
    let host = start(backends, |_| {}).await;
    let (endpoint, stop_http) = http_service().await;
    register(&host, "crm", &["nats", "kafka", "http"], &endpoint).await;

    // The NATS side: take envelopes from the canonical subject, reply on the reply subject.
    let mut inbound = host.ports.subjects.subscribe("triggers.v2.crm.inbound").await.unwrap();
    let subjects = host.ports.subjects.clone();
    let nats_service = tokio::spawn(async move {
        while let Some(message) = inbound.next().await {
            let envelope: Value = serde_json::from_slice(&message.payload).unwrap();
            let reply_subject = envelope["reply_to"]["subject"].as_str().unwrap().to_owned();
            subjects.publish(&reply_subject, answer(&envelope, "nats").to_string().into_bytes()).await.unwrap();
        }
    });
    // The Kafka side: consume the canonical topic, reply on the reply topic.
    let topics = host.ports.topics.clone();
    topics.create_topic("triggers_v2_crm_inbound", 1).await.unwrap();
    let group = unique("crm-service");
    let kafka_service = tokio::spawn(async move {
        let config =
            ConsumerConfig { group, topics: vec!["triggers_v2_crm_inbound".into()], start: StartFrom::Earliest };
        let mut consumer = topics.consumer(config).await.unwrap();
        loop {
            for record in consumer.poll(10, Duration::from_millis(200)).await.unwrap() {
                let envelope: Value = serde_json::from_slice(&record.value).unwrap();
                let reply_topic = envelope["reply_to"]["topic"].as_str().unwrap().to_owned();
                let reply = OutRecord::new(reply_topic, answer(&envelope, "kafka").to_string());
                topics.publish(&[reply]).await.unwrap();
            }
        }
    });
    // One round trip through the Kafka side before any run: a consumer group's first join can take seconds on
    // a loaded broker, which would otherwise show as a timed-out first attempt (the retry is the product
    // working, but this test checks the one-attempt path).
    let warm_up = unique("crm-warm-up");
    host.ports.topics.create_topic(&warm_up, 1).await.unwrap();
    let probe = json!({"reply_to": {"topic": warm_up}}).to_string();
    host.ports.topics.publish(&[OutRecord::new("triggers_v2_crm_inbound".to_owned(), probe)]).await.unwrap();
    assert_eq!(host.read(&warm_up, 1, Duration::from_secs(120)).await.len(), 1, "the Kafka side never answered");

    let mut flows = Vec::new();
    for transport in ["nats", "kafka", "http"] {
        let (source, out) = (unique("deposits"), unique("tagged"));
        let id = host.release_flow(flow(&source, &out, "crm", transport, None)).await;
        flows.push((transport, id, source, out));
    }
    for (transport, _, source, _) in &flows {
        host.publish(source, &[deposit(&format!("p-{transport}"))]).await;
    }
    for (transport, id, _, out) in &flows {
        let value = first_output(&host, out).await;
        assert_eq!(
            value["result"],
            json!({"tagged": format!("vip-p-{transport}"), "via": transport, "player": format!("p-{transport}")}),
            "{value}"
        );
        let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs"), None).await;
        let run_id = page["runs"][0]["run_id"].as_str().unwrap().to_owned();
        // The output is published before the run is stored as completed (by design): wait for the store.
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        let run = loop {
            let (_, run) = host.call("GET", &format!("/api/v2/runs/{run_id}"), None).await;
            if run["status"] == "completed" || tokio::time::Instant::now() > until {
                break run;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(run["status"], "completed", "{run:#}");
        let tag = run["nodes"].as_array().unwrap().iter().find(|n| n["node_id"] == "tag").unwrap();
        let outcomes: Vec<&str> =
            tag["attempts"].as_array().unwrap().iter().map(|a| a["outcome"].as_str().unwrap()).collect();
        assert_eq!(outcomes, ["sent", "success"], "{tag}");
    }

    // A reply whose key is not the run's and node's is refused; one for a step that no longer waits is ignored.
    let (_, page) = host.call("GET", &format!("/api/v2/flows/{}/runs", flows[2].1), None).await;
    let run_id = page["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let reply = |key: &str| json!({"run_id": run_id, "node_id": "tag", "idempotency_key": key, "outcome": "success"});
    let path = format!("/api/v2/runs/{run_id}/reply");
    let (status, refused) = host.call("POST", &path, Some(reply("forged"))).await;
    assert_eq!((status, refused["error"]["details"]["field"].as_str()), (400, Some("idempotency_key")), "{refused}");
    let key = flowhost_core::digest::sha256_bytes_hex(format!("{run_id}tag").as_bytes());
    assert_eq!(host.call("POST", &path, Some(reply(&key))).await, (202, json!({"status": "ignored"})));
    stop_http.cancel();
    nats_service.abort();
    kafka_service.abort();
    host.stop().await;
}

async fn ready(host: &TestHost) -> (u16, String) {
    let response = host.http.get(host.url("/ready")).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn a_missing_retarget_topic_fails_closed(backends: Backends) {
    let host = start(backends, |_| {}).await;
    register(&host, "crm", &["kafka"], "http://127.0.0.1:9").await;
    let (source, out, retarget) = (unique("deposits"), unique("tagged"), unique("crm-retarget"));
    host.ports.topics.create_topic(&retarget, 1).await.unwrap();
    let id = host.release_flow(flow(&source, &out, "crm", "kafka", Some(&retarget))).await;

    // The topic disappears under the released flow (here: the released version is pointed at one that was
    // never created, as if it had been deleted).
    let missing = unique("crm-gone");
    let documents = &host.ports.documents;
    let mut version = documents.get("flow_versions", &format!("{id}/1")).await.unwrap().unwrap();
    version["body"]["nodes"][1]["config"]["kafka_topic"] = json!(missing);
    assert!(documents.replace("flow_versions", &format!("{id}/1"), version).await.unwrap());
    host.ports.subjects.publish("flowhost.config.changed", b"{}".to_vec()).await.unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while ready(&host).await.0 != 503 {
        assert!(tokio::time::Instant::now() < until, "/ready never failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, body) = ready(&host).await;
    assert!(body.contains("flow_runs"), "{body}");
    assert_eq!(host.metric("flowhost_flow_retarget_topics_missing").await, 1.0);

    // Fails closed: the source is not consumed, so the event waits instead of being lost.
    host.publish(&source, &[deposit("p1")]).await;
    tokio::time::sleep(host.quiet_period()).await;
    let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs"), None).await;
    assert_eq!(page["total"], 0, "{page}");

    // Once the topic exists, ingestion resumes and the waiting event runs: its envelope goes to the retarget.
    host.ports.topics.create_topic(&missing, 1).await.unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while ready(&host).await.0 != 200 {
        assert!(tokio::time::Instant::now() < until, "/ready never recovered: {:?}", ready(&host).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let envelopes = host.read(&missing, 1, Duration::from_secs(60)).await;
    let envelope: Value = serde_json::from_slice(&envelopes[0].value).unwrap();
    assert_eq!((envelope["flow_id"].as_str(), envelope["action"].as_str()), (Some(id.as_str()), Some("tag_player")));
    assert_eq!(envelope["input"]["tag"], "vip-p1");
    assert_eq!(host.metric("flowhost_flow_retarget_topics_missing").await, 0.0);
    host.stop().await;
}

async fn a_service_that_never_replies_is_asked_again_then_dead_lettered(backends: Backends) {
    let host = start(backends, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().reply_timeout_ms = 300;
        config.section_mut::<flowhost_runs::EngineConfig>().retry.max_attempts = 2;
        config.section_mut::<flowhost_runs::EngineConfig>().retry.initial_backoff_ms = 100;
    })
    .await;
    let service = format!("quiet{}", &unique("s")[2..10]);
    register(&host, &service, &["nats"], "http://127.0.0.1:9").await;
    let mut inbound = host.ports.subjects.subscribe(&format!("triggers.v2.{service}.inbound")).await.unwrap();
    let mut letters = host.ports.subjects.subscribe(&format!("triggers.v2.dlq.{service}.tag_player")).await.unwrap();
    let (source, out) = (unique("deposits"), unique("tagged"));
    let id = host.release_flow(flow(&source, &out, &service, "nats", None)).await;
    host.publish(&source, &[deposit("p1")]).await;

    let mut seen = Vec::new();
    for _ in 0..2 {
        let message =
            tokio::time::timeout(Duration::from_secs(60), inbound.next()).await.expect("an envelope").unwrap();
        seen.push(serde_json::from_slice::<Value>(&message.payload).unwrap());
    }
    assert_eq!((seen[0]["attempt"].as_u64(), seen[1]["attempt"].as_u64()), (Some(1), Some(2)));
    assert_eq!(seen[0]["idempotency_key"], seen[1]["idempotency_key"], "the same key on every attempt");
    let letter = tokio::time::timeout(Duration::from_secs(60), letters.next()).await.expect("a dead letter").unwrap();
    let letter: Value = serde_json::from_slice(&letter.payload).unwrap();
    assert_eq!((letter["reason"].as_str(), letter["attempts"].as_u64()), (Some("exhausted"), Some(2)));
    assert!(letter["error"].as_str().unwrap().contains("did not reply"), "{letter}");
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs"), None).await;
        if page["runs"][0]["status"] == "dead_lettered" {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    host.stop().await;
}

/// A data source over HTTP: `GET /data/segments?player_id=` answers `{"segment": "whale-<player>"}`.
async fn data_server() -> (String, CancellationToken) {
    async fn segments(
        axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
    ) -> Json<Value> {
        Json(json!({"segment": format!("whale-{}", query.get("player_id").cloned().unwrap_or_default())}))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let app = Router::new().route("/data/segments", axum::routing::get(segments));
    let shutdown = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned()).await.unwrap();
    });
    (url, stop)
}

async fn external_data_sources_answer_lookups_over_http_and_nats(backends: Backends) {
    let host = start(backends, |_| {}).await;
    let (endpoint, stop) = data_server().await;
    let service = |name: &str, endpoint: Option<&str>, source: &str| {
        let mut manifest = json!({
            "service": name,
            "components": [{"id": format!("{name}-data"), "version": "1.0.0"}],
            "service_sources": ["nats"],
            "supports_nodes": ["lookup"],
            "data_sources": [{"name": source, "path": format!("/data/{source}"), "params": ["player_id"]}]
        });
        if let Some(endpoint) = endpoint {
            manifest["transports"] = json!({"http": {"endpoint": endpoint}});
        }
        manifest
    };
    let registered =
        host.call("POST", "/api/v1/components/register", Some(service("crm", Some(&endpoint), "segments"))).await;
    assert_eq!(registered.0, 200, "{registered:?}");
    let registered = host.call("POST", "/api/v1/components/register", Some(service("scores", None, "levels"))).await;
    assert_eq!(registered.0, 200, "{registered:?}");
    // The NATS side: `scores` answers requests on its data subject.
    let mut requests = host.ports.subjects.subscribe("triggers.v2.service.scores.data.levels").await.unwrap();
    let subjects = host.ports.subjects.clone();
    let responder = tokio::spawn(async move {
        while let Some(request) = requests.next().await {
            let params: Value = serde_json::from_slice(&request.payload).unwrap();
            let answer = json!({"level": format!("gold-{}", params["player_id"].as_str().unwrap_or_default())});
            subjects.respond(&request.reply.unwrap(), answer.to_string().into_bytes()).await.unwrap();
        }
    });

    let (source, out) = (unique("deposits"), unique("enriched"));
    let lookup = |id: &str, service: &str, source: &str, target: &str| {
        json!({"id": id, "kind": "lookup", "config": {"service": service, "data_source": source,
            "params": {"player_id": "{{player_id}}"}, "target": target}})
    };
    let body = json!({
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source}},
            lookup("segment", "crm", "segments", "segment"),
            lookup("level", "scores", "levels", "level"),
            {"id": "out", "kind": "output-topic", "config": {"topic": out}}
        ],
        "edges": [{"from": "src", "to": "segment"}, {"from": "segment", "to": "level"}, {"from": "level", "to": "out"}]
    });
    host.release_flow(body).await;
    host.publish(&source, &[deposit("p7")]).await;
    let value = first_output(&host, &out).await;
    assert_eq!(value["segment"], json!({"segment": "whale-p7"}), "{value}");
    assert_eq!(value["level"], json!({"level": "gold-p7"}), "{value}");
    stop.cancel();
    responder.abort();
    host.stop().await;
}

const SIGNING_KEY: &str = "service-signing-key-0123456789abcdef";

/// With `FLOWHOST_SERVICE_SIGNING_KEY`, an envelope reaches the service signed over its exact bytes, and a
/// reply that is not signed with the key is refused on every channel (NATS: counted and dropped; HTTP: 401),
/// while the signed one completes the run.
async fn a_signing_key_guards_the_service_transports(backends: Backends) {
    use flowhost_core::signing::{ServiceSigning, SIGNATURE_HEADER};
    let host = start(backends, |config| {
        config.service_signing_key = Some(flowhost_core::config::Secret::new(SIGNING_KEY));
    })
    .await;
    let signing = ServiceSigning::new(Some(&flowhost_core::config::Secret::new(SIGNING_KEY)));
    register(&host, "crm", &["nats"], "http://127.0.0.1:9").await;
    let mut inbound = host.ports.subjects.subscribe("triggers.v2.crm.inbound").await.unwrap();
    let (source, out) = (unique("deposits"), unique("tagged"));
    let id = host.release_flow(flow(&source, &out, "crm", "nats", None)).await;
    host.publish(&source, &[deposit("p-signed")]).await;

    let message = tokio::time::timeout(Duration::from_secs(60), inbound.next()).await.unwrap().unwrap();
    assert_eq!(signing.verify(message.header(SIGNATURE_HEADER), &message.payload), Ok(()), "the envelope is signed");
    let envelope: Value = serde_json::from_slice(&message.payload).unwrap();
    let reply = answer(&envelope, "nats").to_string().into_bytes();

    // Unsigned, and signed with another key: refused over NATS and over HTTP.
    let refused = "flowhost_flow_replies_total{channel=\"nats\",outcome=\"refused\"}";
    host.ports.subjects.publish("triggers.v2.replies", reply.clone()).await.unwrap();
    let other = ServiceSigning::new(Some(&flowhost_core::config::Secret::new("another-key-0123456789abcdefghijkl")));
    host.ports
        .subjects
        .publish_with_headers("triggers.v2.replies", other.headers(&reply), reply.clone())
        .await
        .unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while host.metric(refused).await < 2.0 {
        assert!(tokio::time::Instant::now() < until, "the forged replies were never refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let run_id = envelope["run_id"].as_str().unwrap().to_owned();
    let path = format!("/api/v2/runs/{run_id}/reply");
    let response =
        host.http.post(host.url(&path)).header("content-type", "application/json").body(reply.clone()).send();
    let (status, body) = flowhost_tests::host::response_parts(response.await.unwrap()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("INVALID_SIGNATURE")), "{body}");
    let (_, run) = host.call("GET", &format!("/api/v2/runs/{run_id}"), None).await;
    assert_ne!(run["status"], "completed", "a forged reply changed the run: {run}");

    // Signed with the key: accepted.
    host.ports.subjects.publish_with_headers("triggers.v2.replies", signing.headers(&reply), reply).await.unwrap();
    let value = first_output(&host, &out).await;
    assert_eq!(value["result"]["via"], "nats", "{value}");
    let (_, page) = host.call("GET", &format!("/api/v2/flows/{id}/runs"), None).await;
    assert_eq!(page["runs"][0]["run_id"], run_id.as_str());
    host.stop().await;
}

/// A reply on the Kafka reply topic that arrives while the run store refuses writes is taken once the store is
/// back: its offset is not committed past it, and the run goes on without asking the service again (one
/// `sent` attempt, well inside the 30 s reply timeout that would otherwise resend).
async fn a_kafka_reply_the_store_cannot_take_yet_is_not_lost(backends: Backends) {
    use flowhost_core::collections::FLOW_RUNS;
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50;
    let mut ports = flowhost::connect(&config).await.unwrap();
    let faulty = flowhost_tests::faulty::FaultyDocuments::new(ports.documents.clone());
    ports.documents = faulty.clone();
    let host = TestHost::start_on(config, ports).await;
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    register(&host, "crm", &["kafka"], "http://127.0.0.1:9").await;
    host.ports.topics.create_topic("triggers_v2_crm_inbound", 1).await.unwrap();
    let config = ConsumerConfig {
        group: unique("crm-service"),
        topics: vec!["triggers_v2_crm_inbound".into()],
        start: StartFrom::Earliest,
    };
    let mut inbound = host.ports.topics.consumer(config).await.unwrap();
    let (source, out) = (unique("deposits"), unique("tagged"));
    host.release_flow(flow(&source, &out, "crm", "kafka", None)).await;
    host.publish(&source, &[deposit("p-later")]).await;

    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    let envelope: Value = loop {
        assert!(tokio::time::Instant::now() < until, "no envelope reached the service");
        if let Some(record) = inbound.poll(1, Duration::from_millis(200)).await.unwrap().into_iter().next() {
            break serde_json::from_slice(&record.value).unwrap();
        }
    };
    let run_id = envelope["run_id"].as_str().unwrap().to_owned();
    loop {
        let (_, run) = host.call("GET", &format!("/api/v2/runs/{run_id}"), None).await;
        if run["status"] == "waiting" {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the run was never stored waiting: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    faulty.fail_writes(FLOW_RUNS, 3);
    let reply = OutRecord::new(envelope["reply_to"]["topic"].as_str().unwrap(), answer(&envelope, "kafka").to_string());
    host.ports.topics.publish(&[reply]).await.unwrap();

    let records = host.read(&out, 1, Duration::from_secs(20)).await;
    assert_eq!(records.len(), 1, "the reply taken while the store failed was lost");
    assert!(
        host.metric("flowhost_flow_errors_total{kind=\"replies\"}").await >= 1.0,
        "the store's refusals are counted"
    );
    // The output is published before the run is stored (at-least-once): the run says so a moment later.
    let run_url = format!("/api/v2/runs/{run_id}");
    flowhost_tests::eventually("the run records the reply's success", 10, || async {
        let (_, run) = host.call("GET", &run_url, None).await;
        let tag = run["nodes"].as_array()?.iter().find(|n| n["node_id"] == "tag")?.clone();
        let outcomes: Vec<String> =
            tag["attempts"].as_array()?.iter().filter_map(|a| a["outcome"].as_str().map(str::to_owned)).collect();
        (outcomes == ["sent", "success"]).then_some(())
    })
    .await;
    host.stop().await;
}
