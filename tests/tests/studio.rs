//! Studio, the flow editor served by the admin listener: its pure graph rules and types (the web app's own
//! tests, run with Node), its page and headers, the refusal of cross-site writes, and editing sessions in
//! headless Chromium (Debian's, never a downloaded browser; every request off loopback refused; a console error
//! fails the session): wiring with merged client and server problems, typed-connection refusal, keyboard
//! wiring, undo and redo, save and release; an action configured from its plugin's `config_schema` with the
//! server's error on the right field; a condition's CEL type error shown and fixed as it is typed; a released
//! flow turned `invalid` by its service's new manifest, shown with its broken reason and fixed; a run shown on
//! the graph; a flow built from nothing around an uploaded wasm plugin, released, run, dead-lettered, replayed
//! to both targets and diffed between its versions; a plugin's node kind placed from the palette, configured in
//! the form made from its declared `config_schema`, released, and shown drifted once a new version drops the
//! kind; and, behind an admin token, the sign-in and the editing of
//! schemas, event sources, v1 rules and plugin versions (upload, refusal, rollback). Each session ends with an
//! axe-core check (no serious or critical finding). Screenshots are kept in `target/test-artifacts/browser/`.

use std::time::Duration;

use flowhost_core::config::Secret;
use flowhost_tests::browser::studio_session;
use flowhost_tests::cli::repository_root;
use flowhost_tests::{unique, Backends, TestHost};
use serde_json::{json, Value};

/// `npm run <script>` in Studio's web app (its packages were installed by the build).
fn npm(script: &str) -> std::process::Output {
    std::process::Command::new("npm")
        .args(["run", "--silent", script])
        .current_dir(repository_root().join("host/studio/web"))
        .output()
        .expect("npm (Node.js) must be installed")
}

#[test]
fn the_graph_rules_and_types_hold() {
    for script in ["check", "test"] {
        let output = npm(script);
        assert!(
            output.status.success(),
            "npm run {script}:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_served_locked_down_and_cross_site_writes_are_refused() {
    let host = TestHost::start(Backends::Embedded).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let redirect = http.get(host.url("/studio")).send().await.unwrap();
    assert_eq!((redirect.status().as_u16(), redirect.headers()["location"].to_str().unwrap()), (308, "/studio/"));
    let page = http.get(host.url("/studio/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    assert!(page.text().await.unwrap().contains("/studio/studio.js"));
    let script = http.get(host.url("/studio/studio.js")).send().await.unwrap();
    assert_eq!(script.headers()["content-type"], "text/javascript; charset=utf-8");
    assert_eq!(http.get(host.url("/studio/nothing.js")).send().await.unwrap().status(), 404);

    let schema = json!({"fields": [{"name": "amount", "type": "double"}]});
    let write = |headers: &[(&'static str, &'static str)]| {
        let mut request = http.put(host.url("/api/v1/schemas/deposit")).json(&schema);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    for headers in [
        &[("sec-fetch-site", "cross-site")][..],
        &[("sec-fetch-site", "same-site")],
        &[("origin", "http://evil.example")],
    ] {
        let response = write(headers).await.unwrap();
        assert_eq!(response.status(), 403, "{headers:?}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("cross-site"), "{body}");
    }
    let origin: &'static str = Box::leak(host.base_url.clone().into_boxed_str());
    let same_origin = [("sec-fetch-site", "same-origin"), ("origin", origin)];
    assert_eq!(write(&same_origin).await.unwrap().status(), 200, "Studio's own writes pass");
    assert_eq!(write(&[]).await.unwrap().status(), 200, "callers that are not browsers pass");
    let read = http.get(host.url("/api/v1/schemas")).header("sec-fetch-site", "cross-site").send().await.unwrap();
    assert_eq!(read.status(), 200, "reads are not writes (CORS keeps their answers from other sites)");
    host.stop().await;
}

/// DNS rebinding: a page on `rebind.example` whose name the attacker points at 127.0.0.1 sends requests that
/// are same-origin for the browser (`Host` and `Origin` agree). Without an admin token, every admin request
/// (upload, activate, register, flow edit, reads, Studio's page) whose `Host` is not a loopback name with the
/// listener's port is refused with 403, unless the operator lists the name; with a token, the token decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_host_name_is_refused_without_a_token() {
    let host = TestHost::start(Backends::Embedded).await;
    let port = host.base_url.rsplit(':').next().unwrap().to_owned();
    let forged = format!("rebind.example:{port}");
    let origin = format!("http://{forged}");
    let manifest = json!({"service": "crm", "components": [{"id": "crm-tags", "version": "1.0.0"}],
        "actions": [{"name": "tag"}], "service_sources": ["http"], "supports_nodes": [],
        "transports": {"http": {"endpoint": "http://127.0.0.1:9/"}}});
    let flow = json!({"name": "f", "source": {"node_id": "s", "event_type": "e", "source_topic": "t"},
        "conditions": [], "outputs": [], "edges": []});
    let requests: Vec<(reqwest::Method, &str, Option<Vec<u8>>)> = vec![
        (
            reqwest::Method::PUT,
            "/api/v1/plugins/greeter/versions/0.1.0",
            Some(flowhost_runtime_fixtures::bytes("greeter")),
        ),
        (reqwest::Method::POST, "/api/v1/plugins/greeter/activate", Some(br#"{"version": "0.1.0"}"#.to_vec())),
        (reqwest::Method::POST, "/api/v1/components/register", Some(manifest.to_string().into_bytes())),
        (reqwest::Method::PUT, "/api/v1/flows/f1", Some(flow.to_string().into_bytes())),
        (reqwest::Method::GET, "/api/v1/triggers", None),
        (reqwest::Method::GET, "/api/v2/flows", None),
        (reqwest::Method::GET, "/studio/", None),
    ];
    let send = |host_header: &str, method: reqwest::Method, path: &str, body: Option<Vec<u8>>| {
        let mut request = host.http.request(method, host.url(path)).header("host", host_header);
        if host_header.starts_with("rebind") {
            request = request.header("origin", &origin).header("sec-fetch-site", "same-origin");
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        request.send()
    };
    for (method, path, body) in &requests {
        let response = send(&forged, method.clone(), path, body.clone()).await.unwrap();
        assert_eq!(response.status(), 403, "{method} {path} with Host {forged}");
    }
    assert_eq!(host.call("GET", "/api/v1/plugins", None).await.1, json!([]), "nothing was uploaded");
    // Addressed by a loopback name, the same requests are answered.
    for name in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let response = send(&name, reqwest::Method::GET, "/api/v1/triggers", None).await.unwrap();
        assert_eq!(response.status(), 200, "Host {name}");
    }
    host.stop().await;

    // A name the operator lists is answered; a token replaces the check.
    for (listed, token) in [(vec!["rebind.example".to_owned()], None), (vec![], Some("admin-secret-0123456789"))] {
        let host = TestHost::start_configured(Backends::Embedded, None, |config| {
            config.api.allowed_hosts = listed.clone();
            config.api.admin_token = token.map(flowhost_core::config::Secret::new);
        })
        .await;
        let port = host.base_url.rsplit(':').next().unwrap().to_owned();
        let mut request = host.http.get(host.url("/api/v1/triggers")).header("host", format!("rebind.example:{port}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        assert_eq!(request.send().await.unwrap().status(), 200, "listed {listed:?}, token {token:?}");
        host.stop().await;
    }
}

/// Creates a v2 flow; answers the created flow with its validation.
async fn create_flow(host: &TestHost, flow: serde_json::Value) -> serde_json::Value {
    let (status, created) = host.call("POST", "/api/v2/flows", Some(flow)).await;
    assert_eq!(status, 201, "{created}");
    created
}

/// Asserts that flow `id` is valid with `version` released; answers the flow.
async fn assert_released(host: &TestHost, id: &str, version: u64) -> serde_json::Value {
    let (_, flow) = host.call("GET", &format!("/api/v2/flows/{id}"), None).await;
    assert_eq!((flow["status"].clone(), flow["released_version"].clone()), (json!("valid"), json!(version)), "{flow}");
    flow
}

/// A host with the bundled plugins loaded and the `deposit` schema.
async fn bundled_host() -> TestHost {
    let host = TestHost::start_configured(Backends::Embedded, None, |config| config.plugins.bundled = true).await;
    host.wait_ready().await;
    deposit_schema(&host).await;
    host
}

async fn deposit_schema(host: &TestHost) {
    let schema = json!({"fields": [{"name": "amount", "type": "double"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_is_wired_checked_and_released_in_chromium() {
    let host = TestHost::start(Backends::Embedded).await;
    deposit_schema(&host).await;
    let flow = json!({
        "id": "welcome", "name": "Welcome",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}, "position": {"x": 40, "y": 80}},
            {"id": "out", "kind": "output-topic", "config": {"topic": "deposits-out"}, "position": {"x": 320, "y": 80}},
        ],
        "edges": [],
    });
    create_flow(&host, flow).await;
    studio_session(&host, "wiring", &[]).await;
    assert_released(&host, "welcome", 1).await;
    host.stop().await;
}

/// The bundled `notifications` plugin's `send_webpush`: its `config_schema` makes the form, its data sources
/// fill the pickers (through the catalog's proxy into the wasm component), and the server's schema error lands
/// on the right field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_is_configured_from_its_schema_in_chromium() {
    let host = bundled_host().await;
    let flow = json!({
        "id": "notify", "name": "Notify",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}},
            {"id": "seg", "kind": "service-in", "config": {"service": "notifications"}},
            {"id": "push", "kind": "action", "config": {"action_ref": "send_webpush", "tenant_id": "casino-1",
                "player_id": -5, "template_id": 1, "language_enabled_id": "en"}},
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "push"}],
    });
    let created = create_flow(&host, flow).await;
    let codes: Vec<&str> =
        created["validation"]["issues"].as_array().unwrap().iter().map(|i| i["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["ACTION_CONFIG_INVALID"], "{created}");
    studio_session(&host, "config", &[]).await;
    assert_released(&host, "notify", 1).await;
    host.stop().await;
}

/// A condition's CEL: the server's type error (an int literal against a double field) under the expression,
/// completion of the schema's fields with their types, the fix clearing the error as it is typed, and "Test
/// this node" against the bundled condition plugin with a generated, an edited and a pinned sample.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_is_type_checked_as_it_is_typed_in_chromium() {
    // The bundled `condition` plugin answers "Test this node".
    let host = bundled_host().await;
    let flow = json!({
        "id": "cel", "name": "CEL",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}},
            {"id": "cond", "kind": "condition", "config": {"expression": "amount > 100"}},
            {"id": "out", "kind": "output-topic", "config": {"topic": "big-deposits"}},
        ],
        "edges": [{"from": "src", "to": "cond"}, {"from": "cond", "to": "out"}],
    });
    let created = create_flow(&host, flow).await;
    assert_eq!(created["validation"]["issues"][0]["code"], "CEL_INVALID", "{created}");
    studio_session(&host, "cel", &[]).await;
    assert_released(&host, "cel", 1).await;
    host.stop().await;
}

/// Registers `service` with one action, `action` (a string `tag` in its config), over HTTP.
async fn register_crm(host: &TestHost, version: &str, action: &str) {
    let manifest = json!({
        "service": "crm",
        "components": [{"id": "crm-tags", "version": version}],
        "actions": [{"name": action, "config_schema": {"type": "object",
            "properties": {"tag": {"type": "string"}}, "required": ["tag"]}}],
        "service_sources": ["http"],
        "supports_nodes": ["condition"],
        "transports": {"http": {"endpoint": "http://127.0.0.1:9"}}
    });
    let (status, body) = host.call("POST", "/api/v1/components/register", Some(manifest)).await;
    assert_eq!(status, 200, "{body}");
}

/// A released flow turns `invalid` when its service registers a manifest without its action; Studio shows it,
/// with the broken reason on the action's node, and the draft is fixed and released again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_flow_is_shown_and_fixed_in_chromium() {
    let host = TestHost::start(Backends::Embedded).await;
    deposit_schema(&host).await;
    register_crm(&host, "1.0.0", "tag_player").await;
    let flow = json!({
        "id": "drift", "name": "Drift",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}},
            {"id": "seg", "kind": "service-in", "config": {"service": "crm", "transport": "http"}},
            {"id": "tag", "kind": "action", "config": {"action_ref": "tag_player", "tag": "vip"}},
            {"id": "out", "kind": "output-topic", "config": {"topic": "tagged"}},
        ],
        "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "tag"}, {"from": "tag", "to": "out"}],
    });
    create_flow(&host, flow).await;
    assert_eq!(host.call("POST", "/api/v2/flows/drift/release", Some(json!({}))).await.0, 200);
    register_crm(&host, "2.0.0", "tag_vip").await;
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, flow) = host.call("GET", "/api/v2/flows/drift", None).await;
        if flow["status"] == "invalid" {
            assert_eq!(flow["broken_reasons"][0]["node_id"], "tag", "{flow}");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the flow never turned invalid: {flow}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    studio_session(&host, "drift", &[]).await;
    let fixed = assert_released(&host, "drift", 2).await;
    assert_eq!(fixed["broken_reasons"], json!([]));
    host.stop().await;
}

/// A run on the graph: a released flow's real run (an event published to its source topic) is listed, its
/// path marked on the canvas, and its node's input, output and outcome shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_shown_on_the_graph_in_chromium() {
    let host = TestHost::start(Backends::Embedded).await;
    deposit_schema(&host).await;
    let topic = flowhost_tests::unique("deposits");
    let flow = json!({
        "id": "runs", "name": "Runs",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": topic}},
            {"id": "out", "kind": "output-topic", "config": {"topic": flowhost_tests::unique("out")}},
        ],
        "edges": [{"from": "src", "to": "out"}],
    });
    create_flow(&host, flow).await;
    assert_eq!(host.call("POST", "/api/v2/flows/runs/release", Some(json!({}))).await.0, 200);
    // Runs start once the runner consumes the source: deposits until one run completed.
    let until = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let (_, page) = host.call("GET", "/api/v2/flows/runs/runs?status=completed", None).await;
        if page["runs"].as_array().is_some_and(|runs| !runs.is_empty()) {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "no run: {page}");
        host.publish(&topic, &[json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": 250.5})]).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    studio_session(&host, "runs", &[]).await;
    host.stop().await;
}

/// The named fixture components (`flowhost-runtime-fixtures`) in a temporary directory, as `<name>.wasm`, for
/// the browser to upload.
fn components(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in names {
        std::fs::write(dir.path().join(format!("{name}.wasm")), flowhost_runtime_fixtures::bytes(name)).unwrap();
    }
    dir
}

/// Item 1 of Studio end to end: the `ledger` plugin uploaded from the browser, a flow around its `limit` action
/// built, validated and released; a deposit under the limit runs through the wasm action and one over it is
/// dead-lettered; the letter replayed to the run's version, then (after a second release) to the latest; the
/// two versions diffed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_flow_is_built_run_replayed_and_diffed_in_chromium() {
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        config.section_mut::<flowhost_runs::EngineConfig>().flows_poll_interval_ms = 50
    })
    .await;
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    let wasm = components(&["ledger"]);
    let (source, out) = (unique("deposits"), unique("accepted"));
    let publisher = async {
        // Once Studio released the flow: one deposit under the limit (100) and one over it.
        let until = tokio::time::Instant::now() + Duration::from_secs(170);
        loop {
            let (_, flow) = host.call("GET", "/api/v2/flows/ledger-flow", None).await;
            if flow["released_version"] == 1 {
                break;
            }
            assert!(tokio::time::Instant::now() < until, "Studio never released the flow: {flow}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let deposit = |amount: f64| json!({"event_type": "deposit", "tenant_id": "casino-1", "amount": amount, "player_id": "p1"});
        host.publish(&source, &[deposit(50.0), deposit(150.0)]).await;
    };
    let env = [
        ("STUDIO_WASM_DIR", wasm.path().to_str().unwrap()),
        ("STUDIO_SOURCE_TOPIC", source.as_str()),
        ("STUDIO_OUTPUT_TOPIC", out.as_str()),
    ];
    tokio::join!(studio_session(&host, "plugin", &env), publisher);

    assert_released(&host, "ledger-flow", 2).await;
    let (_, letters) = host.call("GET", "/api/v2/dead-letters?flow_id=ledger-flow", None).await;
    assert_eq!(letters["total"], 1, "{letters}");
    let replays: Vec<&str> = letters["dead_letters"][0]["replays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|replay| replay["to"].as_str().unwrap())
        .collect();
    assert_eq!((letters["dead_letters"][0]["status"].as_str(), replays), (Some("replayed"), vec!["run", "latest"]));
    let outputs = host.read(&out, 2, Duration::from_secs(30)).await;
    let accepted: Vec<f64> = outputs
        .iter()
        .map(|record| {
            serde_json::from_slice::<serde_json::Value>(&record.value).unwrap()["result"]["accepted"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(accepted, [50.0, 150.0], "the first run, then the replay on version 2");
    host.stop().await;
}

/// A plugin node kind in Studio: the `score` fixture (component `score` 0.1.0, declaring the node kind `score`:
/// a required number `min`, answers `continue` and `stop`, adds the double `score`) uploaded and active is listed
/// in the palette; Studio places it between the flow's source and an output topic, fills `min` in the form made
/// from its `config_schema` (after the server's error on a wrong value), and releases the flow. Then `score`
/// 0.3.0, which declares `rank` instead, is activated: the flow turns `invalid`, and Studio shows the drift on
/// the node and in its inspector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_node_kind_is_placed_from_the_palette_in_chromium() {
    let host = TestHost::start(Backends::Embedded).await;
    let schema = json!({"fields": [{"name": "amount", "type": "double"}, {"name": "player_id", "type": "string"}]});
    assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
    // Stored, then activated: the palette lists the node kinds of active versions only.
    let url = host.url("/api/v1/plugins/score/versions/0.1.0?activate=false");
    let wasm = flowhost_runtime_fixtures::bytes("score");
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload score: {}", response.text().await.unwrap());
    let (status, body) = host.call("POST", "/api/v1/plugins/score/activate", Some(json!({"version": "0.1.0"}))).await;
    assert_eq!(status, 200, "{body}");
    let (status, kinds) = host.call("GET", "/api/v2/node-kinds", None).await;
    assert_eq!(status, 200, "{kinds}");
    let listed: Vec<(&str, &str, &str)> = kinds
        .as_array()
        .unwrap()
        .iter()
        .map(|kind| {
            (kind["plugin"].as_str().unwrap(), kind["name"].as_str().unwrap(), kind["version"].as_str().unwrap())
        })
        .collect();
    assert!(listed.contains(&("score", "score", "0.1.0")), "{kinds}");
    let source = unique("deposits");
    let flow = json!({
        "id": "scored", "name": "Scored",
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": source},
                "position": {"x": 40, "y": 80}},
        ],
        "edges": [],
    });
    create_flow(&host, flow).await;
    let out = unique("scored");
    studio_session(&host, "plugin-node-kind", &[("STUDIO_OUTPUT_TOPIC", out.as_str())]).await;

    let released = assert_released(&host, "scored", 1).await;
    let (_, version) = host.call("GET", "/api/v2/flows/scored/versions/1", None).await;
    for body in [&released["draft"], &version["body"]] {
        let nodes = body["nodes"].as_array().unwrap_or_else(|| panic!("{body}"));
        let scored = nodes.iter().find(|node| node["kind"] == "node-kind").unwrap_or_else(|| panic!("{body}"));
        assert_eq!(scored["config"], json!({"plugin": "score", "kind": "score", "min": 5}), "{body}");
        let edges: Vec<(&str, &str)> = body["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["from"].as_str().unwrap(), e["to"].as_str().unwrap()))
            .collect();
        let id = scored["id"].as_str().unwrap();
        assert!(edges.contains(&("src", id)) && edges.iter().any(|(from, _)| *from == id), "{body}");
    }
    // The released flow runs the kind: 100 scores 10 (at least the 5 set in the form) and goes on with its
    // score; 20 scores 2 and stops at the node.
    let deposit = |amount: f64| json!({"event_type": "deposit", "tenant_id": "t1", "amount": amount, "player_id": "p"});
    host.publish(&source, &[deposit(20.0), deposit(100.0)]).await;
    host.read(&out, 1, Duration::from_secs(60)).await;
    let outputs = host.read(&out, 2, host.quiet_period()).await;
    let scores: Vec<Value> =
        outputs.iter().map(|r| serde_json::from_slice::<Value>(&r.value).unwrap()["score"].clone()).collect();
    assert_eq!(scores, vec![json!(10.0)], "only the high score reaches the output");

    let url = host.url("/api/v1/plugins/score/versions/0.3.0");
    let wasm = flowhost_runtime_fixtures::bytes("score_v3");
    let response = host.http.put(url).header("content-type", "application/wasm").body(wasm).send().await.unwrap();
    assert!(response.status().is_success(), "upload score 0.3.0: {}", response.text().await.unwrap());
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, flow) = host.call("GET", "/api/v2/flows/scored", None).await;
        if flow["status"] == "invalid" {
            assert_eq!(flow["broken_reasons"][0]["code"], "NODE_KIND_NOT_DECLARED", "{flow}");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "the flow never turned invalid: {flow}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    studio_session(&host, "plugin-node-kind-drift", &[]).await;
    host.stop().await;
}

/// Item 8 behind an admin token: Studio asks for the token and signs in; a schema, an event source and a rule
/// are made in their forms (the server's refusals shown there), a schema in use is not deleted, and the
/// `greeter` plugin gets two versions, refuses another plugin's component as a third and is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_schemas_sources_and_plugins_are_edited_after_signing_in_in_chromium() {
    const TOKEN: &str = "studio-admin-token";
    let host = TestHost::start_configured(Backends::Embedded, None, |config| {
        config.api.admin_token = Some(Secret::new(TOKEN));
    })
    .await;
    let wasm = components(&["greeter", "greeter_v2", "garbage"]);
    let env = [("STUDIO_WASM_DIR", wasm.path().to_str().unwrap()), ("STUDIO_TOKEN", TOKEN)];
    studio_session(&host, "admin", &env).await;

    let get = |path: &str| host.http.get(host.url(path)).bearer_auth(TOKEN).send();
    let rule: serde_json::Value = get("/api/v1/triggers/adults").await.unwrap().json().await.unwrap();
    assert_eq!((rule["enabled"].clone(), rule["conditions"]["event_type"].clone()), (json!(false), json!("login")));
    let plugin: serde_json::Value = get("/api/v1/plugins/greeter").await.unwrap().json().await.unwrap();
    let versions: Vec<&str> =
        plugin["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!((plugin["active_version"].as_str(), versions), (Some("0.1.0"), vec!["0.1.0", "0.2.0"]), "{plugin}");
    host.stop().await;
}
