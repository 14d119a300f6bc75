//! Every secret setting planted with a value found nowhere else, every role that uses one exercised in one host,
//! then looked for where it must never appear: the log (every line at `debug`), `/metrics` of every socket,
//! every answer (success and error alike), and what a guest can see (`plugins/fixtures/snoop` answers its
//! environment, arguments, files, input and context). Zero hits, on the embedded defaults and on the real servers.
//!
//! Planted: the admin token, the metrics token, the service signing key, the VAPID private key, the interaction
//! token secrets (current and previous), the in-app editor token, the push-platform callers' tokens, the campaign
//! API's bearer and the tokens of its external and support sources (both unreachable: their failures are logged),
//! the gateway's cache HMAC key and the Redis password. (Key Vault's client secret is `secrets.rs`'s: its errors
//! never carry it.)
//!
//! The exercise: a web push delivered to the local push service and an editor send, wrong tokens on every
//! surface, the snoop plugin uploaded and invoked, an unsigned service envelope, a gateway event accepted, the
//! campaign API read, and schemathesis over every socket with the right credentials.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use flowhost_core::config::Secret;
use flowhost_tests::every_role::{configure_presence_and_campaigns, ORIGIN};
use flowhost_tests::gateway::{configure as configure_gateway, GatewayAddrs, PlayerBackend};
use flowhost_tests::process::free_addr;
use flowhost_tests::push::{
    send, subscription, EDITOR_TOKEN, INTERACTION_SECRET, INTERACTION_SECRET_PREVIOUS, OPS_TOKEN, SOURCE_APP, TENANT_A,
};
use flowhost_tests::push_service::PushService;
use flowhost_tests::{on_both_backends, sender, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(no_secret_leaves_its_place);

/// Everything the process logged, at `debug`, from the first host on.
fn captured_log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log: Arc<Mutex<Vec<u8>>> = Arc::default();
        let writer = log.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter("debug,hyper=info,hyper_util=info,h2=info,reqwest=info,rustls=info,tower=info")
            .with_writer(move || Capture(writer.clone()))
            .try_init();
        log
    })
}

struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A value for `setting` that appears nowhere else.
fn planted(setting: &str) -> String {
    format!("planted-{}-{}", setting.to_ascii_lowercase(), uuid::Uuid::new_v4().simple())
}

/// What every search looks for: each secret by the setting that holds it.
struct Secrets(Vec<(&'static str, String)>);

impl Secrets {
    /// The secrets found in `text`, by setting.
    fn found_in(&self, text: &str) -> Vec<&'static str> {
        self.0.iter().filter(|(_, value)| text.contains(value.as_str())).map(|(setting, _)| *setting).collect()
    }
}

async fn no_secret_leaves_its_place(backends: Backends) {
    let log = captured_log();
    let service = PushService::start().await;
    let player_backend = PlayerBackend::start().await;
    let gateway = GatewayAddrs::free();
    let (push_addr, campaigns_addr, presence_addr) = (free_addr(), free_addr(), free_addr());
    let closed = free_addr();
    let admin_token = planted("FLOWHOST_ADMIN_TOKEN");
    let metrics_token = planted("FLOWHOST_METRICS_TOKEN");
    let signing_key = planted("FLOWHOST_SERVICE_SIGNING_KEY");
    let campaigns_bearer = planted("CAMPAIGN_EVENTS_API_BEARER_TOKEN");
    let external_token = planted("FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN");
    let support_token = planted("FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN");
    let hmac_key = planted("GATEWAY_EDGE_CACHE_HMAC_KEY");
    let redis_password = planted("FLOWHOST_REDIS_PASSWORD");
    let host = TestHost::start_configured(backends, None, |config| {
        configure_gateway(config, &gateway, &[ORIGIN], &player_backend);
        sender::configure(config, &service);
        config.roles = vec![
            "admin".to_owned(),
            "engine".to_owned(),
            "push-api".to_owned(),
            "sender".to_owned(),
            "gateway".to_owned(),
            "presence".to_owned(),
            "campaigns".to_owned(),
        ];
        config.api.admin_token = Some(Secret::new(&admin_token));
        config.metrics_token = Some(Secret::new(&metrics_token));
        config.service_signing_key = Some(Secret::new(&signing_key));
        config.section_mut::<flowhost_gateway::GatewayConfig>().cache_hmac_key = Some(Secret::new(&hmac_key));
        config.redis.password = Some(Secret::new(&redis_password));
        config.section_mut::<flowhost_push_api::PushConfig>().listen = Some(push_addr.clone());
        configure_presence_and_campaigns(config, backends, &presence_addr, &campaigns_addr);
        let campaigns = config.section_mut::<flowhost_campaigns::CampaignsConfig>();
        campaigns.bearer_token = Some(Secret::new(&campaigns_bearer));
        campaigns.external_url = Some(format!("http://{closed}/campaigns"));
        campaigns.external_token = Some(Secret::new(&external_token));
        campaigns.support_url = Some(format!("http://{closed}/support"));
        campaigns.support_token = Some(Secret::new(&support_token));
        campaigns.sync_interval_ms = 200;
        // Outbound calls to names a made-up request carries go nowhere but loopback.
        config.egress.allowed = vec!["127.0.0.1".to_owned()];
    })
    .await;
    let vapid_private_key =
        host.config.section::<flowhost_push_api::PushConfig>().vapid_private_key.as_ref().unwrap().expose().to_owned();
    let secrets = Secrets(vec![
        ("FLOWHOST_ADMIN_TOKEN", admin_token.clone()),
        ("FLOWHOST_METRICS_TOKEN", metrics_token.clone()),
        ("FLOWHOST_SERVICE_SIGNING_KEY", signing_key),
        ("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY", vapid_private_key),
        ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET", INTERACTION_SECRET.to_owned()),
        ("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_PREVIOUS", INTERACTION_SECRET_PREVIOUS.to_owned()),
        ("INAPP_EDITOR_API_AUTH_TOKEN", EDITOR_TOKEN.to_owned()),
        ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", OPS_TOKEN.to_owned()),
        ("FLOWHOST_API_PUSH_PLATFORM_CALLERS_JSON", flowhost_tests::push::BRIDGE_TOKEN.to_owned()),
        ("CAMPAIGN_EVENTS_API_BEARER_TOKEN", campaigns_bearer.clone()),
        ("FLOWHOST_CAMPAIGNS_EXTERNAL_TOKEN", external_token),
        ("FLOWHOST_CAMPAIGNS_SUPPORT_TOKEN", support_token),
        ("GATEWAY_EDGE_CACHE_HMAC_KEY", hmac_key),
        ("FLOWHOST_REDIS_PASSWORD", redis_password),
    ]);
    let http = host.http.clone();
    let push = format!("http://{push_addr}");
    let campaigns = format!("http://{campaigns_addr}");
    let admin =
        |method: &str, path: &str| http.request(method.parse().unwrap(), host.url(path)).bearer_auth(&admin_token);
    let mut answers: Vec<String> = Vec::new();
    let mut keep = |what: &str, status: u16, body: String| answers.push(format!("{what} {status} {body}"));
    let until_ready = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ready = http.get(host.url("/ready")).send().await.map(|r| r.status().as_u16()).unwrap_or(0);
        if ready == 200 || tokio::time::Instant::now() > until_ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Web push: a template, a subscription at the local push service, an editor send delivered.
    let editor_headers =
        [("authorization", format!("Bearer {EDITOR_TOKEN}")), ("x-svc-client-id", TENANT_A.to_owned())];
    let editor_headers: Vec<(&str, &str)> =
        editor_headers.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let caller = format!("Bearer {OPS_TOKEN}");
    let caller_headers = [("authorization", caller.as_str()), ("x-source-app", SOURCE_APP)];
    let template = Some(sender::template());
    let (status, body) =
        send(&host, "POST", &format!("{push}/api/v1/templates/web-push"), &editor_headers, template.into()).await;
    assert_eq!(status, 201, "{body}");
    let browser = service.subscribe(&[201], None).await;
    let mut body = subscription(TENANT_A, 4242, &browser.endpoint);
    body["keys"] = json!({ "p256dh": browser.p256dh, "auth": browser.auth });
    let url = format!("{push}/api/v1/service/webpush/subscriptions");
    let (status, stored) = send(&host, "POST", &url, &caller_headers, Some(body).into()).await;
    assert_eq!(status, 201, "{stored}");
    let request = json!({"tenant_id": TENANT_A, "player_id": 4242, "template_id": 1, "language_enabled_id": "en",
        "placeholders": {"game": "roulette"}});
    let url = format!("{push}/api/v1/webpush/send");
    let (status, sent) = send(&host, "POST", &url, &editor_headers, Some(request).into()).await;
    keep("editor send", status, sent.to_string());
    let until = tokio::time::Instant::now() + Duration::from_secs(20);
    while service.received(&browser).await.is_empty() {
        assert!(tokio::time::Instant::now() < until, "the push never reached the local push service: {sent}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for message in service.received(&browser).await {
        keep("delivered push", 200, message.to_string());
    }

    // Wrong credentials on every surface.
    for (url, header) in [
        (host.url("/api/v1/triggers"), "Bearer wrong-admin-token"),
        (host.url("/metrics"), "Bearer wrong-metrics-token"),
        (format!("{push}/api/v1/tenants"), "Bearer wrong-editor-token"),
        (format!("{push}/api/v1/webpush/client-config"), "Bearer wrong-caller-token"),
        (format!("{campaigns}/api/v1/overview?tenant_id=7"), "Bearer wrong-campaigns-token"),
        (format!("{campaigns}/explorer/api/v1/overview?tenant_id=7"), "Bearer wrong-campaigns-token"),
    ] {
        let response =
            http.get(&url).header("authorization", header).header("x-source-app", SOURCE_APP).send().await.unwrap();
        keep(
            &url,
            response.status().as_u16(),
            format!("{:?} {}", response.headers().clone(), response.text().await.unwrap()),
        );
    }

    // The snoop plugin: uploaded, invoked; what it saw is an answer like any other.
    let snoop = flowhost_runtime_fixtures::bytes("snoop");
    let response = admin("PUT", "/api/v1/plugins/snoop/versions/0.1.0").body(snoop).send().await.unwrap();
    assert!(response.status().is_success(), "snoop upload: {}", response.text().await.unwrap());
    let response = admin("POST", "/api/v1/plugins/snoop/invoke")
        .json(&json!({"action": "look", "input": {"hello": "world"}, "tenant_id": TENANT_A}))
        .send()
        .await
        .unwrap();
    let (status, seen) = (response.status().as_u16(), response.text().await.unwrap());
    assert_eq!(status, 200, "{seen}");
    assert!(seen.contains("hello") && seen.contains("\"env\""), "the snoop's answer carries what it saw: {seen}");
    keep("what a guest sees", status, seen);

    // An unsigned and a wrongly signed service envelope.
    for signature in [None, Some("sha256=00")] {
        let mut request = http.post(host.url("/v2/notifications/inbound")).json(&json!({"run_id": "x"}));
        if let Some(signature) = signature {
            request = request.header("flowhost-signature", signature);
        }
        let response = request.send().await.unwrap();
        keep("inbound", response.status().as_u16(), response.text().await.unwrap());
    }

    // A gateway event accepted (the HMAC key names the player cache entries), and one refused.
    for token in ["player-42", "invalid"] {
        let response = http
            .post(gateway.edge_url("/api/gateway/events"))
            .header("origin", ORIGIN)
            .bearer_auth(token)
            .json(&flowhost_tests::gateway::presence_event("heartbeat"))
            .send()
            .await
            .unwrap();
        keep("gateway", response.status().as_u16(), response.text().await.unwrap());
    }

    // The campaign API with its bearer, while its external sources keep failing.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for path in ["/api/v1/overview?tenant_id=7", "/api/v1/campaigns?tenant_id=7", "/api/v1/live-events?tenant_id=7"] {
        let response = http.get(format!("{campaigns}{path}")).bearer_auth(&campaigns_bearer).send().await.unwrap();
        keep(path, response.status().as_u16(), response.text().await.unwrap());
    }

    // Schemathesis over every socket with its credentials; every answer it got is kept (its HAR report).
    let mut sockets = vec![
        (host.base_url.clone(), vec![format!("Authorization: Bearer {admin_token}")]),
        (push.clone(), vec![format!("Authorization: Bearer {OPS_TOKEN}"), format!("X-Source-App: {SOURCE_APP}")]),
        (push.clone(), vec![format!("Authorization: Bearer {EDITOR_TOKEN}")]),
        (campaigns.clone(), vec![format!("Authorization: Bearer {campaigns_bearer}")]),
        (format!("http://{presence_addr}"), vec![format!("Authorization: Bearer {metrics_token}")]),
    ];
    for addr in [gateway.edge, gateway.ingest, gateway.admin, gateway.private, gateway.metrics] {
        sockets.push((format!("http://{addr}"), vec![format!("Authorization: Bearer {metrics_token}")]));
    }
    for (base, headers) in sockets {
        answers.extend(schemathesis_answers(&base, &headers).await);
    }

    // Metrics of every socket, with the metrics token.
    for base in [
        host.base_url.clone(),
        format!("http://{presence_addr}"),
        campaigns.clone(),
        format!("http://{}", gateway.metrics),
    ] {
        let response = http.get(format!("{base}/metrics")).bearer_auth(&metrics_token).send().await.unwrap();
        let (status, text) = (response.status().as_u16(), response.text().await.unwrap());
        assert_eq!(status, 200, "{base}/metrics");
        answers.push(format!("{base}/metrics {text}"));
    }

    host.stop().await;
    let log = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
    assert!(log.contains("campaign") && log.lines().count() > 1000, "the log was captured ({} bytes)", log.len());
    assert!(answers.len() > 1000, "only {} answers were searched", answers.len());
    let mut leaks = Vec::new();
    for setting in secrets.found_in(&log) {
        let line = log.lines().find(|line| secrets.found_in(line).contains(&setting)).unwrap_or_default();
        leaks.push(format!("the log holds {setting}: {line}"));
    }
    for answer in &answers {
        for setting in secrets.found_in(answer) {
            leaks.push(format!("an answer holds {setting}: {}", &answer[..answer.len().min(300)]));
        }
    }
    assert!(leaks.is_empty(), "secrets left their place ({} answers searched):\n{}", answers.len(), leaks.join("\n"));
}

/// Runs schemathesis (a small budget) over `base`'s document with `headers`; answers every response it got
/// (status, headers and body), read from its HAR report. Routes that would make the host call addresses a
/// made-up request names (a web-push subscription's endpoint, a catalog registration's) are left out.
async fn schemathesis_answers(base: &str, headers: &[String]) -> Vec<String> {
    let st = std::env::var("FLOWHOST_TEST_SCHEMATHESIS")
        .expect("FLOWHOST_TEST_SCHEMATHESIS names schemathesis' `st`: run the suite through tests/run.sh");
    let report = tempfile::tempdir().unwrap();
    let har = report.path().join("answers.har");
    let (base, headers, har_path) = (base.to_owned(), headers.to_vec(), har.clone());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(st)
            .arg("run")
            .arg(format!("{base}/openapi.json"))
            .args(headers.iter().flat_map(|header| ["--header", header.as_str()]))
            .args(["--max-examples", "3", "--seed", "29", "--workers", "2", "--no-color", "--request-timeout", "10"])
            .args(["--phases", "examples,coverage,fuzzing", "--checks", "not_a_server_error"])
            .args(["--exclude-operation-id", "post_api_v1_components_register"])
            .args(["--exclude-operation-id", "post_api_v1_service_webpush_subscriptions"])
            .args(["--generation-database", "none", "--suppress-health-check", "all", "--report", "har"])
            .arg("--report-har-path")
            .arg(&har_path)
            .current_dir(har_path.parent().expect("the report's folder"))
            .output()
            .expect("schemathesis runs")
    })
    .await
    .unwrap();
    let har: Value = match std::fs::read(&har) {
        Ok(bytes) => serde_json::from_slice(&bytes).expect("a HAR report"),
        Err(error) => panic!("no HAR report ({error}): {}", String::from_utf8_lossy(&output.stdout)),
    };
    har["log"]["entries"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|entry| {
                    let response = &entry["response"];
                    format!("{} {} {}", response["status"], response["headers"], response["content"]["text"])
                })
                .collect()
        })
        .unwrap_or_default()
}
