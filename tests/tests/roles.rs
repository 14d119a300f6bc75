//! Roles as an operator meets them: every listener answers `/health` and `/ready`, readiness names what is
//! not ready, a process without the admin role still answers its probes, the admin token guards the admin
//! routes (and only them), and an admin API open to other hosts is refused unless allowed explicitly.

use std::time::{Duration, Instant};

use flowhost_core::config::Secret;
use flowhost_tests::process::free_port;
use flowhost_tests::{on_both_backends, Backends, TestHost};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

on_both_backends!(every_listener_answers_health_and_ready, admin_token_guards_the_admin_routes);

async fn get(http: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, Value, Option<String>) {
    let mut request = http.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), challenge)
}

/// Polls `url` until it answers 200 (the engine is ready once its first rule set loaded); panics with the last
/// answer after 30 s.
async fn wait_ready(http: &reqwest::Client, url: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body, _) = match http.get(url).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json::<Value>().await.unwrap_or(Value::Null), None::<String>)
            }
            Err(error) => (0, Value::String(error.to_string()), None),
        };
        if status == 200 {
            return body;
        }
        assert!(Instant::now() < until, "{url} never became ready: {status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A host whose push-platform listener is on a port `free_port` picked, configured further by `configure`. The
/// port is free when picked but bound only when the host starts, so another test may take it in between: the
/// host's serve then ends at once (it cannot listen) and the host is started again on another port.
async fn start_with_push_listener(
    backends: Backends,
    configure: impl Fn(&mut flowhost_core::config::Config),
) -> (TestHost, u16) {
    for _ in 0..5 {
        let port = free_port();
        let host = TestHost::start_configured(backends, None, |config| {
            config.section_mut::<flowhost_push_api::PushConfig>().listen = Some(format!("127.0.0.1:{port}"));
            configure(config);
        })
        .await;
        // Serve binds its listeners as it starts; one that cannot bind ends it within moments.
        tokio::time::sleep(Duration::from_secs(2)).await;
        if !host.ended() {
            return (host, port);
        }
        drop(host);
    }
    panic!("no free port for the push-platform listener after 5 attempts");
}

async fn every_listener_answers_health_and_ready(backends: Backends) {
    let (host, push_port) = start_with_push_listener(backends, |_| {}).await;
    let push = |path: &str| format!("http://127.0.0.1:{push_port}{path}");
    assert_eq!(wait_ready(&host.http, &host.url("/ready")).await, json!({"status": "ready"}));
    assert_eq!(wait_ready(&host.http, &push("/ready")).await, json!({"status": "ready"}));
    assert_eq!(get(&host.http, &host.url("/health"), None).await.0, 200);
    assert_eq!(get(&host.http, &push("/health"), None).await.1, json!({"status": "ok"}));
    // /metrics is the main listener's.
    assert_eq!(get(&host.http, &host.url("/metrics"), None).await.0, 200);
    host.stop().await;

    // A broken caller policy is a liveness failure: /health and /ready of every listener name it.
    let (host, push_port) = start_with_push_listener(backends, |config| {
        config.section_mut::<flowhost_push_api::PushConfig>().callers_json = Some(Secret::new("[]"))
    })
    .await;
    let push = |path: &str| format!("http://127.0.0.1:{push_port}{path}");
    let expected = json!({"status": "not_ready", "failing": ["push_caller_policy"]});
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        // Wait for the listener to bind and the engine's first rule load, so only the policy fails.
        let answer = match host.http.get(push("/ready")).send().await {
            Ok(response) => (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null)),
            Err(error) => (0, Value::String(error.to_string())),
        };
        if answer.1 == expected {
            assert_eq!(answer.0, 503);
            break;
        }
        assert!(Instant::now() < until, "push /ready: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(get(&host.http, &host.url("/ready"), None).await.1, expected);
    assert_eq!(
        get(&host.http, &host.url("/health"), None).await.1,
        json!({"status": "unavailable", "failing": ["push_caller_policy"]})
    );
    host.stop().await;
}

async fn admin_token_guards_the_admin_routes(backends: Backends) {
    const TOKEN: &str = "admin-token-for-tests";
    let host = TestHost::start_configured(backends, None, |config| {
        config.api.admin_token = Some(Secret::new(TOKEN));
    })
    .await;
    let http = &host.http;
    for path in ["/api/v1/triggers", "/api/v1/flows", "/api/v1/components", "/api/v1/plugins", "/api/v1/schemas"] {
        let (status, body, challenge) = get(http, &host.url(path), None).await;
        assert_eq!(status, 401, "{path} without a token: {body}");
        assert!(body["error"].as_str().is_some_and(|m| m.contains("admin token")), "{path}: {body}");
        assert_eq!(challenge.as_deref(), Some("Bearer"), "{path}");
        let (status, body, _) = get(http, &host.url(path), Some("not-the-token")).await;
        assert_eq!(status, 401, "{path} with a wrong token: {body}");
        assert!(!body.to_string().contains(TOKEN), "the answer never shows the token: {body}");
        assert_eq!(get(http, &host.url(path), Some(TOKEN)).await.0, 200, "{path} with the token");
    }
    // Writes too: a rule is not created without the token.
    let rule = json!({
        "id": "guarded", "name": "Guarded", "source": {"type": "kafka", "topic": "t"},
        "conditions": {"event_type": "deposit", "expression": "true"}, "output_topic": "o"
    });
    let response = http.post(host.url("/api/v1/triggers")).json(&rule).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(get(http, &host.url("/api/v1/triggers/guarded"), Some(TOKEN)).await.0, 404, "nothing was stored");
    let response = http.post(host.url("/api/v1/triggers")).bearer_auth(TOKEN).json(&rule).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 201, "{:?}", response.text().await);
    // Probes and metrics stay open; the push routes keep their own caller policy.
    assert_eq!(get(http, &host.url("/health"), None).await.0, 200);
    assert_eq!(get(http, &host.url("/metrics"), None).await.0, 200);
    assert_ne!(get(http, &host.url("/ready"), None).await.0, 401);
    let (status, body, _) = get(http, &host.url("/api/v1/webpush/client-config"), None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["code"].is_string(), "the push envelope, not the admin one: {body}");
    host.stop().await;
}

/// A process running only the engine has no admin routes, but its main listener still answers the probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_only_process_answers_its_probes() {
    let host =
        TestHost::start_configured(Backends::Embedded, None, |config| config.roles = vec!["engine".to_owned()]).await;
    assert_eq!(wait_ready(&host.http, &host.url("/ready")).await, json!({"status": "ready"}));
    assert_eq!(get(&host.http, &host.url("/health"), None).await.1, json!({"status": "ok"}));
    assert!(host.metric("flowhost_engine_rule_cache_reloads_total").await >= 1.0);
    assert_eq!(get(&host.http, &host.url("/api/v1/triggers"), None).await.0, 404);
    host.stop().await;
}

/// Without an admin token, an admin address other hosts can reach is refused at start, naming what to set;
/// `FLOWHOST_ADMIN_ALLOW_UNAUTHENTICATED` accepts it. (The socket itself stays on loopback: `serve` is handed
/// one bound to 127.0.0.1, as tests bind nothing else.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_admin_api_off_loopback_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.api.host = "0.0.0.0".into();
    let ports = flowhost::connect(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = flowhost::serve(config.clone(), ports.clone(), listener, CancellationToken::new())
        .await
        .expect_err("an open admin API on 0.0.0.0 is refused");
    let message = format!("{error:#}");
    assert!(message.contains("FLOWHOST_ADMIN_TOKEN") && message.contains("FLOWHOST_API_HOST"), "{message}");

    config.api.allow_unauthenticated = true;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/health", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(flowhost::serve(config, ports, listener, shutdown.clone()));
    let http = reqwest::Client::new();
    let until = Instant::now() + Duration::from_secs(30);
    while http.get(&url).send().await.map(|r| r.status().as_u16()).unwrap_or(0) != 200 {
        assert!(Instant::now() < until, "the allowed open admin API did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    serving.await.unwrap().unwrap();
}
