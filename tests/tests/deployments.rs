//! Two deployments on one NATS server at once (issue: deployments sharing a NATS server answer each other):
//! `blue` and `green`, each a whole Flowhost with the bundled `notifications` service, a template of its own
//! and a released flow whose segment reaches the service over NATS, run side by side on the specification's
//! subjects. Isolated by NATS accounts (each signs in to its own), or in one account by subject prefixes
//! (`FLOWHOST_NATS_SUBJECT_PREFIX`), neither receives the other's envelopes, broadcasts or data-source requests:
//! - each flow run delivers its push, its envelope seen on `triggers.v2.notifications.inbound` in its own
//!   deployment and in no message of the other;
//! - a data-source request is always answered from the asker's own store (its template's name);
//! - a flow-broadcast request lists the asker's own flows only.
//!
//! Each deployment's view of the server is watched by a subscription to everything (`>`) in its account or
//! under its prefix.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowhost_core::ports::{Namespace, SubjectMessage, Subjects};
use flowhost_nats::NatsSubjects;
use flowhost_tests::push::{editor, TENANT_A};
use flowhost_tests::push_service::PushService;
use flowhost_tests::sender::{release_push_flow, subscribe, template};
use flowhost_tests::{servers, Backends, TestHost};
use futures::StreamExt;
use serde_json::{json, Value};

/// One deployment: its host, what it released, and every message its view of the NATS server carried.
struct Deployment {
    name: &'static str,
    host: TestHost,
    flow_id: String,
    source: String,
    out: String,
    seen: Arc<Mutex<Vec<SubjectMessage>>>,
}

impl Deployment {
    /// A host on `nats_url` (its account) under `prefix`, whose template 1 is named `Bonus <name>`.
    async fn start(name: &'static str, service: &PushService, nats_url: String, prefix: Option<String>) -> Deployment {
        let host = TestHost::start_configured(Backends::Distributed, None, |config| {
            flowhost_tests::sender::configure(config, service);
            config.nats.url = Some(nats_url.clone());
            config.nats.subject_prefix = prefix.clone();
        })
        .await;
        host.wait_ready().await;
        let spy = NatsSubjects::connect_in(&nats_url, Namespace::from_setting(prefix.as_deref(), '.')).await.unwrap();
        let mut everything = spy.subscribe(">").await.unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        tokio::spawn(async move {
            let _spy = spy;
            while let Some(message) = everything.next().await {
                into.lock().unwrap().push(message);
            }
        });
        let mut bonus = template();
        bonus["name"] = json!(format!("Bonus {name}"));
        let (status, created) = editor(&host, Some(TENANT_A), "POST", "/api/v1/templates/web-push", Some(bonus)).await;
        assert_eq!((status, created["id"].as_i64()), (201, Some(1)), "{created}");
        let (flow_id, source, out) = release_push_flow(&host, Some("nats")).await;
        Deployment { name, host, flow_id, source, out, seen }
    }

    /// Messages this deployment's view carried that mention `text` (in the subject or the payload).
    fn mentioning(&self, text: &str) -> Vec<SubjectMessage> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|m| m.subject.contains(text) || String::from_utf8_lossy(&m.payload).contains(text))
            .cloned()
            .collect()
    }

    /// Asks `subject` `times` times; answers every reply's JSON.
    async fn ask(&self, subject: &str, payload: &Value, times: usize) -> Vec<Value> {
        let mut answers = Vec::new();
        for _ in 0..times {
            let request = payload.to_string().into_bytes();
            let answer = self.host.ports.subjects.request(subject, request, Duration::from_secs(10)).await.unwrap();
            answers.push(serde_json::from_slice(&answer.payload).unwrap());
        }
        answers
    }
}

async fn neither_sees_the_other(blue_url: String, green_url: String, prefixes: Option<(String, String)>) {
    let service = PushService::start().await;
    let (blue_prefix, green_prefix) = prefixes.unzip();
    let (blue, green) = tokio::join!(
        Deployment::start("blue", &service, blue_url, blue_prefix),
        Deployment::start("green", &service, green_url, green_prefix),
    );
    let pairs = [(&blue, &green, 101), (&green, &blue, 202)];

    // A run in each at once: the envelope crosses NATS inside its deployment and the push is delivered.
    for (ours, _, player) in pairs {
        let sub = service.subscribe(&[201], None).await;
        subscribe(&ours.host, player, &sub).await;
        let event = json!({"event_type": "big_win", "tenant_id": TENANT_A, "player_id": player, "game": ours.name});
        ours.host.publish(&ours.source, &[event]).await;
    }
    for (ours, _, _) in pairs {
        let outputs = ours.host.read(&ours.out, 1, Duration::from_secs(60)).await;
        assert_eq!(outputs.len(), 1, "{}: no output", ours.name);
        let value: Value = serde_json::from_slice(&outputs[0].value).unwrap();
        assert_eq!(value["result"]["status"], "delivered", "{}: {value}", ours.name);
    }

    // The data sources and the flow broadcasts answer from the asker's own deployment, every time.
    for (ours, _, _) in pairs {
        let templates = "triggers.v2.service.notifications.data.push_templates";
        for answer in ours.ask(templates, &json!({"tenant_id": TENANT_A}), 10).await {
            assert_eq!(answer["items"][0]["name"], format!("Bonus {}", ours.name), "{}: {answer}", ours.name);
        }
        for answer in ours.ask("triggers.v2.service.notifications.flows", &json!({}), 10).await {
            let flows: Vec<&str> =
                answer["flows"].as_array().unwrap().iter().filter_map(|f| f["flow_id"].as_str()).collect();
            assert_eq!(flows, [ours.flow_id.as_str()], "{}: {answer}", ours.name);
        }
    }

    // What crossed NATS in each deployment stayed there.
    for (ours, theirs, _) in pairs {
        let envelopes = ours.mentioning(&ours.flow_id);
        assert!(
            envelopes.iter().any(|m| m.subject == "triggers.v2.notifications.inbound"),
            "{}: its own envelope was not seen on its subjects: {envelopes:?}",
            ours.name
        );
        for marker in [ours.flow_id.clone(), format!("Bonus {}", ours.name)] {
            let crossed = theirs.mentioning(&marker);
            assert!(crossed.is_empty(), "{} saw {}'s {marker:?}: {crossed:?}", theirs.name, ours.name);
        }
    }
    blue.host.stop().await;
    green.host.stop().await;
}

/// Each deployment signs in to its own NATS account; both use the specification's subjects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_in_their_own_nats_accounts_never_meet() {
    neither_sees_the_other(servers::nats_blue_url(), servers::nats_green_url(), None).await;
}

/// Both deployments in one account, each under a subject prefix of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_under_their_own_subject_prefixes_never_meet() {
    let prefixes = (flowhost_tests::host::deployment_name(), flowhost_tests::host::deployment_name());
    neither_sees_the_other(servers::nats_url(), servers::nats_url(), Some(prefixes)).await;
}
