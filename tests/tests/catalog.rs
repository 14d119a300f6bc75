//! The component catalog as a registering service and an integrator see it (spec 001): registration and
//! heartbeats, immutability by `(service, id, version)`, malformed manifests, the 1 MiB limit, listing order,
//! the compatibility report of a new version, the data-source proxy against a real local HTTP upstream, and
//! the v2 service read. Every case runs on the embedded store and on MongoDB.

use std::sync::Arc;

use axum::extract::{Path, RawQuery};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use flowhost_core::ManualClock;
use flowhost_tests::{on_both_backends, Backends, TestHost};
use serde_json::{json, Value};

on_both_backends!(
    registration_heartbeat_and_immutability,
    malformed_manifests,
    listing_and_compatibility,
    data_source_proxy
);

const REGISTER: &str = "/api/v1/components/register";

fn manifest(version: &str, endpoint: &str) -> Value {
    json!({
        "service": "notifications",
        "components": [{"id": "sender", "version": version}],
        "actions": [
            {"name": "send_webpush", "config_schema": {"type": "object", "properties": {
                "template_id": {"type": "integer"}, "language_enabled_id": {"type": "string"}},
                "required": ["template_id"]}},
            {"name": "send_inapp"}
        ],
        "service_sources": ["nats", "kafka", "http"],
        "supports_nodes": ["condition", "lookup", "mapping"],
        "data_sources": [
            {"name": "templates", "path": "/data/templates", "params": ["tenant_id"]},
            {"name": "missing", "path": "/data/missing", "params": []},
            {"name": "elsewhere", "path": "/data/elsewhere", "params": []},
            {"name": "page", "path": "/data/page", "params": []},
            {"name": "huge", "path": "/data/huge", "params": []}
        ],
        "transports": {"http": {"endpoint": endpoint}}
    })
}

async fn start(backends: Backends) -> (TestHost, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000)); // 2026-01-01T00:00:00Z
    let host = TestHost::start_configured(backends, Some(clock.clone()), |_| {}).await;
    (host, clock)
}

async fn rows(host: &TestHost) -> Vec<Value> {
    let (status, body) = host.call("GET", "/api/v1/components", None).await;
    assert_eq!(status, 200);
    body.as_array().unwrap().clone()
}

async fn registration_heartbeat_and_immutability(backends: Backends) {
    let (host, clock) = start(backends).await;
    assert_eq!(
        host.call("POST", REGISTER, Some(manifest("1.0.0", "http://127.0.0.1:1"))).await,
        (200, json!({"status": "ok"}))
    );
    let listed = rows(&host).await;
    assert_eq!(listed.len(), 1);
    let row = &listed[0];
    assert_eq!(
        (row["service"].as_str(), row["component_id"].as_str(), row["version"].as_str()),
        (Some("notifications"), Some("sender"), Some("1.0.0"))
    );
    assert_eq!(row["first_registered_at"], "2026-01-01T00:00:00.000Z");
    assert_eq!(row["last_seen_at"], "2026-01-01T00:00:00.000Z");
    assert!(row.get("server_compatibility").is_none(), "no previous version: {row}");
    assert_eq!(row["actions"][0]["name"], "send_webpush", "service-level actions apply to the component");

    // An identical re-post five minutes later is a heartbeat.
    clock.advance_ms(5 * 60 * 1000);
    assert_eq!(host.call("POST", REGISTER, Some(manifest("1.0.0", "http://127.0.0.1:1"))).await.0, 200);
    let row = &rows(&host).await[0];
    assert_eq!(row["first_registered_at"], "2026-01-01T00:00:00.000Z");
    assert_eq!(row["last_seen_at"], "2026-01-01T00:05:00.000Z");

    // Same triple, different content: 409, nothing changes.
    let (status, body) = host.call("POST", REGISTER, Some(manifest("1.0.0", "http://127.0.0.1:2"))).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"].as_str().unwrap().contains("different content"), "{body}");
    assert_eq!(rows(&host).await[0]["transports"]["http"]["endpoint"], "http://127.0.0.1:1");

    // v2: the service's current manifest.
    let (status, body) = host.call("GET", "/api/v2/services/notifications", None).await;
    assert_eq!((status, body["registered"].clone()), (200, json!(true)), "{body}");
    assert_eq!(body["components"][0]["version"], "1.0.0");
    let (status, body) = host.call("GET", "/api/v2/services/nobody", None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "SERVICE_NOT_FOUND", "{body}");
    host.stop().await;
}

async fn malformed_manifests(backends: Backends) {
    let (host, _) = start(backends).await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut m = manifest("1.0.0", "http://127.0.0.1:1");
        f(&mut m);
        m
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no service", with(&|m| drop(m.as_object_mut().unwrap().remove("service"))), "service"),
        ("empty service", with(&|m| m["service"] = json!(" ")), "service must not be empty"),
        ("no components", with(&|m| m["components"] = json!([])), "at least one component"),
        ("component without version", with(&|m| m["components"] = json!([{"id": "x"}])), "version"),
        (
            "invalid config_schema",
            with(&|m| m["actions"][0]["config_schema"] = json!({"type": "nope"})),
            "invalid config_schema",
        ),
        ("duplicate action", with(&|m| m["actions"][1]["name"] = json!("send_webpush")), "declared twice"),
        ("unknown node kind", with(&|m| m["supports_nodes"] = json!(["teleport"])), "teleport"),
        ("unknown service source", with(&|m| m["service_sources"] = json!(["carrier-pigeon"])), "carrier-pigeon"),
        ("bad endpoint", with(&|m| m["transports"]["http"]["endpoint"] = json!("ftp://x")), "endpoint"),
        ("bad data source path", with(&|m| m["data_sources"][0]["path"] = json!("data")), "path must start"),
        ("wrong type", with(&|m| m["components"] = json!("sender")), "components"),
    ];
    for (name, body, needle) in cases {
        let (status, response) = host.call("POST", REGISTER, Some(body)).await;
        assert_eq!(status, 400, "{name}: {response}");
        let message = response["error"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{name}: {message:?} lacks {needle:?}");
    }
    let (status, _) = host.call_raw("POST", REGISTER, b"{oops".to_vec()).await;
    assert_eq!(status, 400);
    let mut huge = manifest("1.0.0", "http://127.0.0.1:1");
    huge["padding"] = json!("x".repeat(1024 * 1024 + 1));
    huge["components"][0]["padding"] = huge["padding"].clone();
    let response = host.http.post(host.url(REGISTER)).json(&huge).send().await.unwrap();
    // The refused body is read to its end (within a bound) before the refusal, and the server closes that
    // connection, and says so.
    assert_eq!(response.headers().get("connection").and_then(|v| v.to_str().ok()), Some("close"));
    let (status, body) = flowhost_tests::host::response_parts(response).await;
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].as_str().is_some());
    assert!(rows(&host).await.is_empty(), "nothing was registered");
    // Every v2 node kind is a name `supports_nodes` may hold, `action` and `source` too.
    let every_kind = with(&|m| m["supports_nodes"] = json!(flowhost_catalog::NODE_KINDS));
    let (status, response) = host.call("POST", REGISTER, Some(every_kind)).await;
    assert_eq!(status, 200, "{response}");
    host.stop().await;
}

async fn listing_and_compatibility(backends: Backends) {
    let (host, clock) = start(backends).await;
    for version in ["1.9.0", "1.10.0"] {
        clock.advance_ms(1000);
        let mut m = manifest(version, "http://127.0.0.1:1");
        if version == "1.10.0" {
            // send_inapp removed, a property of send_webpush made required.
            m["actions"] = json!([{"name": "send_webpush", "config_schema": {"type": "object", "properties": {
                "template_id": {"type": "integer"}, "language_enabled_id": {"type": "string"}},
                "required": ["template_id", "language_enabled_id"]}}]);
        }
        assert_eq!(host.call("POST", REGISTER, Some(m)).await.0, 200);
    }
    let other = json!({"service": "analytics", "components": [{"id": "zeta", "version": "0.1.0"}, {"id": "alpha", "version": "2.0.0"}]});
    assert_eq!(host.call("POST", REGISTER, Some(other)).await.0, 200);

    let listed = rows(&host).await;
    let order: Vec<String> = listed
        .iter()
        .map(|r| {
            format!(
                "{}/{}/{}",
                r["service"].as_str().unwrap(),
                r["component_id"].as_str().unwrap(),
                r["version"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        order,
        ["analytics/alpha/2.0.0", "analytics/zeta/0.1.0", "notifications/sender/1.9.0", "notifications/sender/1.10.0"]
    );
    let report = &listed[3]["server_compatibility"];
    assert_eq!(report["previous_version"], "1.9.0");
    assert_eq!(report["removed_actions"], json!(["send_inapp"]));
    assert_eq!(report["changed_actions"], json!(["send_webpush"]));
    assert_eq!(report["compatible"], false);
    assert_eq!(
        report["breaking_changes"],
        json!([
            "action \"send_inapp\" was removed",
            "action \"send_webpush\": config property \"language_enabled_id\" became required"
        ])
    );
    let (_, service) = host.call("GET", "/api/v2/services/notifications", None).await;
    assert_eq!(service["components"][0]["version"], "1.10.0", "the latest registration is current");
    host.stop().await;
}

/// A real upstream: echoes the path and the query it received, with its own content type.
async fn upstream() -> String {
    let app = axum::Router::new().route(
        "/data/{name}",
        get(|Path(name): Path<String>, RawQuery(query): RawQuery| async move {
            if name == "missing" {
                return (StatusCode::NOT_FOUND, "no such thing").into_response();
            }
            if name == "elsewhere" {
                return (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, "http://127.0.0.1:9/data/templates")])
                    .into_response();
            }
            if name == "page" {
                let page = "<html><script>fetch('/api/v1/plugins')</script></html>";
                return ([(header::CONTENT_TYPE, "text/html")], page).into_response();
            }
            if name == "huge" {
                return ([(header::CONTENT_TYPE, "application/json")], vec![b' '; 2 << 20]).into_response();
            }
            let body = json!({"path": name, "query": query.unwrap_or_default()}).to_string();
            ([(header::CONTENT_TYPE, "application/vnd.flowhost-test+json")], body).into_response()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

async fn data_source_proxy(backends: Backends) {
    let (host, _) = start(backends).await;
    let endpoint = upstream().await;
    assert_eq!(host.call("POST", REGISTER, Some(manifest("1.0.0", &endpoint))).await.0, 200);

    let response = host
        .http
        .get(host.url("/api/v1/components/sender/data/templates?tenant_id=t1&secret=s3&tenant_id=t2"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/vnd.flowhost-test+json");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"path": "templates", "query": "tenant_id=t1&tenant_id=t2"}),
        "only declared params are forwarded"
    );

    for (path, needle) in [
        ("/api/v1/components/sender/data/missing", "upstream answered 404"),
        ("/api/v1/components/sender/data/elsewhere", "upstream answered 307"),
        ("/api/v1/components/nobody/data/templates", "unknown component"),
        ("/api/v1/components/sender/data/nothing", "declares no data source"),
        ("/api/v1/components/sender/data/huge", "larger than 1048576 bytes"),
    ] {
        let (status, body) = host.call("GET", path, None).await;
        assert_eq!(status, 502, "{path}: {body}");
        assert!(body["error"].as_str().unwrap().contains(needle), "{path}: {body}");
    }

    // An upstream's HTML never renders on the API's origin: bytes, not a page.
    let page = host.http.get(host.url("/api/v1/components/sender/data/page")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "application/octet-stream");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert!(page.headers()["content-security-policy"].to_str().unwrap().starts_with("sandbox"));

    // A component id another service registers too: the proxy does not pick one of them silently.
    let mut shadow = manifest("9.9.9", "http://127.0.0.1:9");
    shadow["service"] = json!("shadow");
    assert_eq!(host.call("POST", REGISTER, Some(shadow)).await.0, 200);
    let (status, body) = host.call("GET", "/api/v1/components/sender/data/templates", None).await;
    assert_eq!(status, 502, "{body}");
    assert!(body["error"].as_str().unwrap().contains("several services"), "{body}");
    let (status, body) =
        host.call("GET", "/api/v1/components/sender/data/templates?service=notifications&tenant_id=t1", None).await;
    assert_eq!((status, body["query"].clone()), (200, json!("tenant_id=t1")), "{body}");

    // An endpoint at a link-local or metadata address is refused before any connection is tried.
    for (service, endpoint) in [("metadata", "http://169.254.169.254"), ("linklocal", "http://[fe80::1]:8080")] {
        let mut registered = manifest("1.0.0", endpoint);
        registered["service"] = json!(service);
        registered["components"][0]["id"] = json!(format!("{service}-data"));
        assert_eq!(host.call("POST", REGISTER, Some(registered)).await.0, 200);
        let (status, body) = host.call("GET", &format!("/api/v1/components/{service}-data/data/templates"), None).await;
        assert_eq!(status, 502, "{body}");
        assert!(body["error"].as_str().unwrap().contains("may not be reached"), "{service}: {body}");
    }
    host.stop().await;
}
