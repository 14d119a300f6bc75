//! [`PushService`]: the local HTTPS web-push service of `tests/scripts/push_service.py`, run with the test
//! tools' Python: it decrypts every message and verifies every VAPID token with implementations independent of
//! Flowhost's, and answers each subscription with the statuses a test asks for.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

/// A subscription as a browser would hand it to the bridge.
#[derive(Debug, Clone)]
pub struct PushSubscription {
    pub id: String,
    pub endpoint: String,
    pub p256dh: String,
    pub auth: String,
}

pub struct PushService {
    child: Child,
    pub base_url: String,
    /// The certificate to trust (what `SSL_CERT_FILE` would name).
    pub ca_path: PathBuf,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl PushService {
    pub async fn start() -> PushService {
        let dir = tempfile::tempdir().expect("push service directory");
        let script = crate::cli::repository_root().join("tests/scripts/push_service.py");
        let mut child = Command::new(crate::servers::python())
            .arg(&script)
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the push service");
        let stdout = child.stdout.take().expect("stdout");
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await
        .expect("read task")
        .expect("the push service's first line");
        let port: u16 = line.trim().strip_prefix("LISTENING ").and_then(|p| p.parse().ok()).unwrap_or_else(|| {
            panic!("the push service did not start: {line:?}");
        });
        let ca_path = dir.path().join("ca.pem");
        let certificate = reqwest::Certificate::from_pem(&std::fs::read(&ca_path).expect("ca.pem")).expect("PEM");
        let http = reqwest::Client::builder().add_root_certificate(certificate).build().expect("client");
        PushService { child, base_url: format!("https://127.0.0.1:{port}"), ca_path, http, _dir: dir }
    }

    /// A new subscription whose pushes are answered with `statuses` in turn (the last repeats), 429s with
    /// `Retry-After: retry_after`.
    pub async fn subscribe(&self, statuses: &[u16], retry_after: Option<&str>) -> PushSubscription {
        let body = json!({"statuses": statuses, "retry_after": retry_after});
        let answer: Value = self
            .http
            .post(format!("{}/subscriptions", self.base_url))
            .json(&body)
            .send()
            .await
            .expect("subscribe")
            .json()
            .await
            .expect("subscription");
        PushSubscription {
            id: answer["id"].as_str().unwrap().to_owned(),
            endpoint: answer["endpoint"].as_str().unwrap().to_owned(),
            p256dh: answer["keys"]["p256dh"].as_str().unwrap().to_owned(),
            auth: answer["keys"]["auth"].as_str().unwrap().to_owned(),
        }
    }

    /// Every push the subscription received: `{status, payload, claims, headers, error?}`.
    pub async fn received(&self, subscription: &PushSubscription) -> Vec<Value> {
        let answer: Value = self
            .http
            .get(format!("{}/received/{}", self.base_url, subscription.id))
            .send()
            .await
            .expect("received")
            .json()
            .await
            .expect("JSON");
        answer.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for PushService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
