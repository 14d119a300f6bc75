//! The campaign events read API end to end (spec 002 part C): campaigns are v2 flows with campaign metadata,
//! created and edited through the admin API; the `campaigns` role syncs them into its read models and answers
//! the overview, list and detail routes with their buckets, pagination edges, filters, errors, `X-Request-Id`
//! and freshness; a slice whose source fails keeps serving and its gauges say so. On the embedded store and on
//! MongoDB.
//!
//! tidy: over the line budget: one acceptance suite for one part of the specification, its routes in order.

use std::sync::Arc;
use std::time::Duration;

use flowhost_tests::faulty::FaultyDocuments;
use flowhost_tests::gateway::free_port;
use flowhost_tests::{eventually, Backends, TestHost};
use serde_json::{json, Value};

struct Campaigns {
    host: TestHost,
    faulty: Arc<FaultyDocuments>,
    addr: String,
    tenant: String,
    _dir: tempfile::TempDir,
}

impl Campaigns {
    async fn start(backends: Backends) -> Campaigns {
        Campaigns::start_with(backends, &["admin".to_owned(), "campaigns".to_owned()]).await
    }

    async fn start_with(backends: Backends, roles: &[String]) -> Campaigns {
        Campaigns::start_configured(backends, roles, |_| {}).await
    }

    async fn start_configured(
        backends: Backends,
        roles: &[String],
        change: impl FnOnce(&mut flowhost_core::config::Config),
    ) -> Campaigns {
        let addr = format!("127.0.0.1:{}", free_port());
        let dir = tempfile::tempdir().unwrap();
        let mut config = TestHost::config(backends, dir.path());
        config.roles = roles.to_vec();
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().listen = addr.clone();
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().sync_interval_ms = 200;
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().fresh_for_seconds = 2;
        // The MongoDB server is shared by every test: each host has its own read models.
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().database =
            format!("campaigns_{}", uuid::Uuid::new_v4().simple());
        change(&mut config);
        let mut ports = flowhost::connect(&config).await.unwrap();
        let faulty = FaultyDocuments::new(ports.documents.clone());
        ports.documents = faulty.clone();
        let host = TestHost::start_on(config, ports).await;
        let schema = json!({"fields": [{"name": "amount", "type": "double"}]});
        assert_eq!(host.call("PUT", "/api/v1/schemas/deposit", Some(schema)).await.0, 200);
        let tenant = format!("t{}", uuid::Uuid::new_v4().simple());
        Campaigns { host, faulty, addr, tenant: tenant[..20].to_owned(), _dir: dir }
    }

    /// A direct call, with the bearer when one is configured (as an in-cluster client holding it).
    async fn get(&self, path: &str) -> (u16, Value) {
        let mut request = self.host.http.get(format!("http://{}{path}", self.addr));
        if let Some(token) = &self.host.config.section::<flowhost_campaigns::CampaignsConfig>().bearer_token {
            request = request.bearer_auth(token.expose());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Creates a v2 flow (source to output topic) with `campaign` metadata; `release` releases it.
    async fn flow(&self, id: &str, campaign: Option<Value>, release: bool) {
        let mut body = json!({
            "id": id, "name": format!("Campaign {id}"), "description": format!("About {id}"),
            "nodes": [
                {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}},
                {"id": "out", "kind": "output-topic", "config": {"topic": "deposits-out"}},
            ],
            "edges": [{"from": "src", "to": "out"}],
        });
        if let Some(campaign) = campaign {
            body["campaign"] = campaign;
        }
        let (status, created) = self.host.call("POST", "/api/v2/flows", Some(body)).await;
        assert_eq!(status, 201, "{created}");
        if release {
            let path = format!("/api/v2/flows/{id}/release");
            let response = self
                .host
                .http
                .post(self.host.url(&path))
                .header("x-flowhost-user", "ana")
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
        }
    }

    /// Waits until the tenant's list has `count` campaigns.
    async fn wait_total(&self, tenant: &str, count: u64) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (status, list) = self.get(&format!("/api/v1/campaigns?tenant_id={tenant}")).await;
            if status == 200 && list["total_items"] == count {
                return list;
            }
            assert!(tokio::time::Instant::now() < until, "never {count} campaigns: {status} {list}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `path` answers a body that satisfies `done` (every answer a 200); answers that body. A slice's
    /// state is written at a pass's end and is fresh for 2 s on this host, so a pass that took longer on a loaded
    /// machine leaves it stale until the next one: a state is waited for, never sampled once.
    async fn wait_answer(&self, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let done = &done;
        eventually(what, 60, || async move {
            let (status, body) = self.get(path).await;
            assert_eq!(status, 200, "{path}: {body}");
            done(&body).then_some(body)
        })
        .await
    }

    async fn metrics(&self) -> String {
        self.host.http.get(format!("http://{}/metrics", self.addr)).send().await.unwrap().text().await.unwrap()
    }

    /// Waits until the `campaigns` slice's gauges of `tenant` satisfy `state`; answers the scrape. A sync cycle
    /// on a loaded test server can outlast the slice's freshness, so a state is waited for, never sampled once.
    async fn wait_gauges(&self, tenant: &str, what: &str, state: impl Fn(&dyn Fn(&str) -> Option<f64>) -> bool) {
        let state = &state;
        eventually(what, 60, || async move {
            let metrics = self.metrics().await;
            state(&|measure| Campaigns::gauge(&metrics, tenant, "campaigns", measure)).then_some(())
        })
        .await
    }

    fn gauge(metrics: &str, tenant: &str, slice: &str, measure: &str) -> Option<f64> {
        let series = format!("sync_state{{measure=\"{measure}\",slice=\"{slice}\",tenant_id=\"{tenant}\"}}");
        metrics.lines().find_map(|line| line.strip_prefix(&series).and_then(|rest| rest.trim().parse().ok()))
    }
}

fn campaign(tenant: &str) -> Value {
    json!({"tenant_id": tenant, "offering": "50 free spins", "starts_at": "2026-01-01T00:00:00Z",
        "ends_at": "2099-01-01T00:00:00Z"})
}

async fn buckets_filters_pages_and_details(backends: Backends) {
    let c = Campaigns::start(backends).await;
    let t = c.tenant.clone();
    let past = json!({"tenant_id": t, "ends_at": "2020-01-01T00:00:00Z"});
    c.flow("c-draft", Some(campaign(&t)), false).await;
    c.flow("c-running", Some(campaign(&t)), true).await;
    c.flow("c-paused", Some(campaign(&t)), true).await;
    assert_eq!(c.host.call("PUT", "/api/v2/flows/c-paused/enabled", Some(json!({"enabled": false}))).await.0, 200);
    c.flow("c-over", Some(past), true).await;
    c.flow("c-archived", Some(json!({"tenant_id": t, "archived": true})), false).await;
    c.flow("plain-flow", None, false).await;
    c.flow("c-other", Some(campaign("other-tenant")), false).await;

    c.wait_total(&t, 5).await;
    let fresh = |slice: &'static str| move |body: &Value| body["freshness"][slice]["state"] == "fresh";
    let list = c.wait_answer(&format!("/api/v1/campaigns?tenant_id={t}"), "the list fresh", fresh("campaigns")).await;
    assert_eq!(list["total_items"], 5, "{list}");
    assert_eq!(list["status_counts"], json!({"suggestions": 1, "running": 1, "paused": 1, "ended": 2}));
    assert_eq!(list["summary"]["campaigns_total"], 5);
    assert_eq!(
        (list["page"].clone(), list["page_size"].clone(), list["total_pages"].clone()),
        (json!(1), json!(20), json!(1))
    );
    assert_eq!(list["applied_filters"]["tenant_id"], t.as_str());
    let status_of = |list: &Value, id: &str| {
        list["items"].as_array().unwrap().iter().find(|row| row["campaign_id"] == id).unwrap()["ui_status"].clone()
    };
    for (id, bucket) in [
        ("c-draft", "suggestions"),
        ("c-running", "running"),
        ("c-paused", "paused"),
        ("c-over", "ended"),
        ("c-archived", "ended"),
    ] {
        assert_eq!(status_of(&list, id), bucket, "{id}");
    }
    let row = &list["items"][0];
    assert_eq!(row["campaign_origin"], "flow");
    for detail_only in ["description", "offering", "players_engaged"] {
        assert!(row.get(detail_only).is_none(), "rows carry metadata only: {detail_only}");
    }

    // Filters: the summary follows them, the bucket counts follow the origin filter only.
    let (status, ended) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&ui_status=ended&campaign_origin=flow")).await;
    assert_eq!(status, 200, "{ended}");
    assert_eq!((ended["total_items"].clone(), ended["summary"]["campaigns_total"].clone()), (json!(2), json!(2)));
    assert_eq!(ended["status_counts"]["running"], 1);
    assert_eq!(ended["applied_filters"]["ui_status"], "ended");
    let (_, external) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&campaign_origin=external")).await;
    assert_eq!((external["total_items"].clone(), external["status_counts"]["running"].clone()), (json!(0), json!(0)));

    // Pages: sorted by name; the last page is short; past the end is empty with the same totals.
    let page = |n: u64| {
        let path = format!("/api/v1/campaigns?tenant_id={t}&page_size=2&page={n}&sort=name");
        let c = &c;
        async move { c.get(&path).await }
    };
    let names = |list: &Value| -> Vec<String> {
        list["items"].as_array().unwrap().iter().map(|row| row["campaign_id"].as_str().unwrap().to_owned()).collect()
    };
    let (_, first) = page(1).await;
    assert_eq!((first["total_items"].clone(), first["total_pages"].clone()), (json!(5), json!(3)));
    assert_eq!(names(&first), ["c-archived", "c-draft"]);
    let (_, last) = page(3).await;
    assert_eq!(names(&last), ["c-running"]);
    let (status, beyond) = page(4).await;
    assert_eq!(status, 200);
    assert_eq!(
        (beyond["items"].clone(), beyond["total_items"].clone(), beyond["total_pages"].clone()),
        (json!([]), json!(5), json!(3))
    );
    let (_, descending) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&sort=name&order=desc&page_size=1")).await;
    assert_eq!(names(&descending), ["c-running"]);

    // Bad parameters: 400 naming the parameter.
    for (query, named) in [
        ("page=0", "page"),
        ("page=abc", "page"),
        ("page=-1", "page"),
        ("page_size=0", "page_size"),
        ("page_size=101", "page_size"),
        ("ui_status=live", "ui_status"),
        ("campaign_origin=crm", "campaign_origin"),
        ("sort=popularity", "sort"),
        ("order=up", "order"),
        ("colour=red", "colour"),
        ("page=1&page=2", "page"),
    ] {
        let (status, error) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
        let message = error["error"].as_str().unwrap_or_else(|| panic!("{query}: {error}"));
        assert!(message.contains(named), "{query}: {message}");
        assert_eq!(error.as_object().unwrap().len(), 1, "only `error`: {error}");
    }
    for path in ["/api/v1/campaigns", "/api/v1/overview", "/api/v1/campaigns?tenant_id=a%20b"] {
        let (status, error) = c.get(path).await;
        assert_eq!(status, 400, "{path}");
        assert!(error["error"].as_str().unwrap().contains("tenant_id"), "{path}: {error}");
    }

    // The detail object, directly; with another tenant or an unknown id it is not found.
    let (status, detail) = c.get("/api/v1/campaigns/c-running").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        (detail["description"].clone(), detail["offering"].clone()),
        (json!("About c-running"), json!("50 free spins"))
    );
    assert_eq!((detail["players_engaged"].clone(), detail["ui_status"].clone()), (json!(0), json!("running")));
    assert!(detail.get("applied_filters").is_none());
    assert_eq!(c.get(&format!("/api/v1/campaigns/c-running?tenant_id={t}")).await.0, 200);
    let (status, missing) = c.get("/api/v1/campaigns/c-running?tenant_id=other-tenant").await;
    assert_eq!((status, missing), (404, json!({"error": "campaign \"c-running\" not found"})));
    assert_eq!(c.get("/api/v1/campaigns/nope").await.0, 404);
    assert_eq!(c.get("/api/v1/unknown").await, (404, json!({"error": "not found"})));

    // The overview: counters, buckets, and no support source (unknown, never a silent 0).
    let overview =
        c.wait_answer(&format!("/api/v1/overview?tenant_id={t}"), "the overview fresh", fresh("overview")).await;
    assert_eq!(overview["campaigns_total"], 5);
    assert_eq!(overview["status_counts"]["ended"], 2);
    assert_eq!(overview["support_cases_total"], Value::Null);
    assert_eq!(overview["freshness"]["support"]["state"], "not_configured");

    // Edits reach the read model: a rename, a campaign moved to another tenant, a deleted flow (the reconcile).
    let rename = json!({"name": "Renamed", "nodes": [], "edges": []});
    assert_eq!(c.host.call("PUT", "/api/v2/flows/c-draft", Some(rename)).await.0, 200);
    let moved = json!({"nodes": [], "edges": [], "campaign": {"tenant_id": "other-tenant"}});
    assert_eq!(c.host.call("PUT", "/api/v2/flows/c-archived", Some(moved)).await.0, 200);
    assert_eq!(c.host.call("DELETE", "/api/v2/flows/c-over", None).await.0, 204);
    let list = c.wait_total(&t, 3).await;
    let draft = list["items"].as_array().unwrap().iter().find(|row| row["campaign_id"] == "c-draft").cloned();
    assert_eq!(draft.unwrap()["name"], "Renamed");
    c.wait_total("other-tenant", 2).await;
    c.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_buckets_filters_pages_and_details() {
    buckets_filters_pages_and_details(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_buckets_filters_pages_and_details() {
    buckets_filters_pages_and_details(Backends::Distributed).await;
}

/// A slice whose source fails: the read model keeps answering (stale, and saying so), the failures count up in
/// the gauges and `/ready` stays ready; once the source answers, the slice is fresh again with no failures.
async fn a_failing_source_is_served_stale_with_its_gauges(backends: Backends) {
    let c = Campaigns::start(backends).await;
    let t = c.tenant.clone();
    c.flow("f-one", Some(campaign(&t)), false).await;
    c.wait_total(&t, 1).await;
    c.wait_gauges(&t, "fresh", |gauge| {
        gauge("consecutive_failures") == Some(0.0)
            && gauge("fresh_until_age_seconds").is_some_and(|age| age < 0.0)
            && gauge("last_success_age_seconds").is_some_and(|age| age >= 0.0)
            && gauge("lag_seconds") == Some(0.0)
    })
    .await;

    c.faulty.fail_queries("flows", true);
    c.flow("f-two", Some(campaign(&t)), false).await;
    c.wait_gauges(&t, "stale after three failures", |gauge| {
        gauge("consecutive_failures").unwrap_or(0.0) >= 3.0 && gauge("fresh_until_age_seconds").unwrap_or(-1.0) > 0.0
    })
    .await;
    let (status, list) = c.get(&format!("/api/v1/campaigns?tenant_id={t}")).await;
    assert_eq!((status, list["total_items"].clone()), (200, json!(1)), "stale data is still served");
    assert_eq!(list["freshness"]["campaigns"]["state"], "stale");
    assert!(list["freshness"]["campaigns"]["consecutive_failures"].as_u64().unwrap() >= 3);
    let ready = c.host.http.get(format!("http://{}/ready", c.addr)).send().await.unwrap();
    assert_eq!(ready.status(), 200, "a failing source does not take the API out of service");

    c.faulty.fail_queries("flows", false);
    c.wait_total(&t, 2).await;
    // The new flow may reach the list by its change signal before the slice's next query succeeds; the failures
    // reset with that query.
    eventually("the failures reset", 60, || async {
        let (_, list) = c.get(&format!("/api/v1/campaigns?tenant_id={t}")).await;
        (list["freshness"]["campaigns"]["consecutive_failures"] == 0).then_some(list)
    })
    .await;
    // Fresh again: the list says so as long as the slice's last success is recent (waited for, see above).
    let list = eventually("the list fresh again", 60, || async {
        let (_, list) = c.get(&format!("/api/v1/campaigns?tenant_id={t}")).await;
        (list["freshness"]["campaigns"]["state"] == "fresh").then_some(list)
    })
    .await;
    assert_eq!(list["freshness"]["campaigns"]["consecutive_failures"], 0, "{list}");
    c.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_a_failing_source_is_served_stale_with_its_gauges() {
    a_failing_source_is_served_stale_with_its_gauges(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_a_failing_source_is_served_stale_with_its_gauges() {
    a_failing_source_is_served_stale_with_its_gauges(Backends::Distributed).await;
}

/// `X-Request-Id`: the caller's value comes back (also on probes, errors and 404s); without one (or with an
/// unusable one) a UUID is generated. `/health` is plain `ok`, `/ready` plain `ready`; other methods 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_probes_and_methods() {
    let c = Campaigns::start(Backends::Embedded).await;
    let url = |path: &str| format!("http://{}{path}", c.addr);
    let t = c.tenant.clone();
    for path in ["/health", "/metrics", "/api/v1/campaigns", "/api/v1/nope", &format!("/api/v1/overview?tenant_id={t}")]
    {
        let response = c.host.http.get(url(path)).header("x-request-id", "trace-4711").send().await.unwrap();
        assert_eq!(response.headers()["x-request-id"], "trace-4711", "{path}");
        let response = c.host.http.get(url(path)).send().await.unwrap();
        let generated = response.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{path}: {generated}");
    }
    let unusable = c.host.http.get(url("/health")).header("x-request-id", "a".repeat(200)).send().await.unwrap();
    assert!(uuid::Uuid::parse_str(unusable.headers()["x-request-id"].to_str().unwrap()).is_ok());

    let health = c.host.http.get(url("/health")).send().await.unwrap();
    assert_eq!((health.status().as_u16(), health.text().await.unwrap()), (200, "ok".to_owned()));
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ready = c.host.http.get(url("/ready")).send().await.unwrap();
        if ready.status() == 200 {
            assert_eq!(ready.text().await.unwrap(), "ready");
            break;
        }
        assert_eq!(ready.text().await.unwrap(), "not ready");
        assert!(tokio::time::Instant::now() < until, "never ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let post = c.host.http.post(url(&format!("/api/v1/campaigns?tenant_id={t}"))).send().await.unwrap();
    assert_eq!(post.status(), 405);
    assert!(post.headers().contains_key("x-request-id"));
    assert_eq!(post.json::<Value>().await.unwrap(), json!({"error": "method not allowed"}));
    c.host.stop().await;
}

/// A delivered notification of `run_id`, as the sender stores it.
async fn delivered(host: &TestHost, tenant: &str, notification: &str, player: i64, run_id: &str) {
    let activity = flowhost_notifications::records::NotificationActivity {
        notification_id: notification.to_owned(),
        tenant_id: tenant.to_owned(),
        player_id: player,
        channel: "WEB_PUSH".to_owned(),
        template_id: None,
        language_enabled_id: None,
        status: "delivered".to_owned(),
        delivered: true,
        delivery_ids: vec![format!("d-{notification}")],
        invalidated_subscriptions: Vec::new(),
        deliveries: Vec::new(),
        run_id: Some(run_id.to_owned()),
        attempts: 1,
        content: json!({}),
        created_at_ms: flowhost_core::Clock::now_ms(&flowhost_core::SystemClock),
        created_at: String::new(),
        updated_at: String::new(),
    };
    let retention = Duration::from_secs(86_400);
    flowhost_notifications::records::store_activity(&host.ports, retention, &activity).await.unwrap();
}

/// A player's click on a notification, as the push API stores it.
async fn clicked(host: &TestHost, tenant: &str, notification: &str, player: i64) {
    let event = flowhost_notifications::events::InteractionEvent {
        source: flowhost_notifications::events::EventSource::Semantic,
        event_id: uuid::Uuid::new_v4().to_string(),
        event_type: "opened".to_owned(),
        tenant_id: tenant.to_owned(),
        player_id: player,
        notification_id: notification.to_owned(),
        delivery_id: format!("d-{notification}"),
        occurred_at: flowhost_core::digest::iso_utc(flowhost_core::Clock::now_ms(&flowhost_core::SystemClock)),
        received_at_ms: flowhost_core::Clock::now_ms(&flowhost_core::SystemClock),
        metadata: json!({}),
        caller_id: "tests".to_owned(),
        source_app: "tests".to_owned(),
    };
    let retention = Duration::from_secs(86_400);
    flowhost_notifications::events::store_event(host.ports.documents.as_ref(), retention, event).await.unwrap();
}

/// Live events and engagement: a released campaign's runs (a real engine run per deposit), two deliveries of
/// its notifications and one interaction become the tenant's live events, newest first, filterable by kind and
/// campaign; the campaign's detail counts two engaged players, two deliveries and one interaction.
async fn live_events_and_engagement(backends: Backends) {
    let c = Campaigns::start_with(backends, &["admin".to_owned(), "engine".to_owned(), "campaigns".to_owned()]).await;
    let t = c.tenant.clone();
    let topic = flowhost_tests::unique("deposits");
    let body = json!({
        "id": "c-live", "name": "Live", "campaign": campaign(&t),
        "nodes": [
            {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": topic}},
            {"id": "out", "kind": "output-topic", "config": {"topic": flowhost_tests::unique("out")}},
        ],
        "edges": [{"from": "src", "to": "out"}],
    });
    assert_eq!(c.host.call("POST", "/api/v2/flows", Some(body)).await.0, 201);
    assert_eq!(c.host.call("POST", "/api/v2/flows/c-live/release", Some(json!({}))).await.0, 200);
    // Runs start once the runner consumes the source: deposits until three runs completed.
    let until = tokio::time::Instant::now() + Duration::from_secs(90);
    let runs = loop {
        let (_, page) = c.host.call("GET", "/api/v2/flows/c-live/runs?status=completed", None).await;
        let runs = page["runs"].as_array().cloned().unwrap_or_default();
        if runs.len() >= 3 {
            break runs;
        }
        assert!(tokio::time::Instant::now() < until, "no runs: {page}");
        c.host.publish(&topic, &[json!({"event_type": "deposit", "tenant_id": t, "amount": 5.0})]).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();
    delivered(&c.host, &t, "n-1", 501, &run_id).await;
    delivered(&c.host, &t, "n-2", 502, &run_id).await;
    clicked(&c.host, &t, "n-1", 501).await;

    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let detail = loop {
        let (_, detail) = c.get("/api/v1/campaigns/c-live").await;
        if detail["interactions"] == 1 && detail["deliveries"] == 2 {
            break detail;
        }
        assert!(tokio::time::Instant::now() < until, "{detail}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(detail["players_engaged"], 2, "{detail}");

    // The totals are kept per tenant and kind, counted at the end of the pass that wrote the events, as the
    // slice's state is: the two are waited for together.
    let live = c
        .wait_answer(&format!("/api/v1/live-events?tenant_id={t}&page_size=100"), "the totals fresh", |live| {
            live["total_items"].as_u64() == live["items"].as_array().map(|items| items.len() as u64)
                && live["freshness"]["live_events"]["state"] == "fresh"
        })
        .await;
    let items = live["items"].as_array().unwrap();
    let count = |kind: &str| items.iter().filter(|item| item["kind"] == kind).count();
    assert!(count("run_completed") >= 3, "{live}");
    assert_eq!((count("notification_delivered"), count("interaction")), (2, 1), "{live}");
    let times: Vec<&str> = items.iter().map(|item| item["occurred_at"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|pair| pair[0] >= pair[1]), "newest first: {times:?}");
    let click = items.iter().find(|item| item["kind"] == "interaction").unwrap();
    assert_eq!((click["campaign_id"].clone(), click["player_id"].clone()), (json!("c-live"), json!(501)));
    assert_eq!(click["interaction_type"], "opened");
    assert_eq!(live["freshness"]["live_events"]["state"], "fresh");

    let (_, deliveries) =
        c.get(&format!("/api/v1/live-events?tenant_id={t}&kind=notification_delivered&campaign_id=c-live")).await;
    assert_eq!(deliveries["total_items"], 2, "{deliveries}");
    assert_eq!(
        deliveries["applied_filters"],
        json!({"tenant_id": t, "kind": "notification_delivered", "campaign_id": "c-live"})
    );
    let (_, runs) = c.get(&format!("/api/v1/live-events?tenant_id={t}&kind=run_completed&page_size=1")).await;
    assert_eq!(runs["total_items"].as_u64(), Some(count("run_completed") as u64), "{runs}");
    let (_, beyond) = c.get(&format!("/api/v1/live-events?tenant_id={t}&kind=interaction&page=2")).await;
    assert_eq!(
        (beyond["items"].clone(), beyond["total_items"].clone(), beyond["total_pages"].clone()),
        (json!([]), json!(1), json!(1))
    );
    for query in ["kind=opened", "campaign_id=a%20b", "page=0", "page_size=500", "sort=name"] {
        let (status, error) = c.get(&format!("/api/v1/live-events?tenant_id={t}&{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
    }
    let (_, overview) = c.get(&format!("/api/v1/overview?tenant_id={t}")).await;
    assert!(overview["live_events_total"].as_u64().unwrap() >= 6, "{overview}");
    assert_eq!(overview["players_engaged_total"], 2);
    assert_eq!((overview["deliveries_total"].clone(), overview["interactions_total"].clone()), (json!(2), json!(1)));
    c.host.stop().await;
}

/// The sync reads each source again from 5 s before its cursor until that window has closed, then from the
/// cursor (see `flowhost_campaigns::overlap`): changes written after the window closed are still synced, in the
/// campaigns slice and in the live-events slice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_after_the_overlap_closed_are_synced() {
    let c = Campaigns::start(Backends::Embedded).await;
    let t = c.tenant.clone();
    let live_total = || async {
        let (status, live) = c.get(&format!("/api/v1/live-events?tenant_id={t}")).await;
        (status == 200).then(|| live["total_items"].as_u64()).flatten()
    };
    c.flow("c-before", Some(campaign(&t)), false).await;
    delivered(&c.host, &t, "n-before", 601, "r-unknown").await;
    c.wait_total(&t, 1).await;
    eventually("the first delivery listed", 60, || async { (live_total().await == Some(1)).then_some(()) }).await;
    // Passes run every 200 ms: the windows close once a pass began 5 s after their cursors were first read.
    tokio::time::sleep(Duration::from_secs(6)).await;
    c.flow("c-after", Some(campaign(&t)), false).await;
    delivered(&c.host, &t, "n-after", 602, "r-unknown").await;
    c.wait_total(&t, 2).await;
    eventually("the second delivery listed", 60, || async { (live_total().await == Some(2)).then_some(()) }).await;
    c.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_live_events_and_engagement() {
    live_events_and_engagement(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_live_events_and_engagement() {
    live_events_and_engagement(Backends::Distributed).await;
}

/// The OpenAPI document against the routes: every documented GET path answers (neither 404 nor 405) with the
/// parameters it declares; the explorer page is served; through the explorer the bearer is needed and the
/// answer is the direct one; direct callers need it too, unless the operator keeps the specification's
/// in-cluster model (`FLOWHOST_CAMPAIGNS_DIRECT_WITHOUT_BEARER`); without a configured token the proxy is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_and_the_explorer_bearer() {
    const TOKEN: &str = "explorer-token-0123456789";
    let c = Campaigns::start_configured(Backends::Embedded, &["admin".to_owned(), "campaigns".to_owned()], |config| {
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().bearer_token =
            Some(flowhost_core::config::Secret::new(TOKEN));
    })
    .await;
    let t = c.tenant.clone();
    c.flow("doc-one", Some(campaign(&t)), false).await;
    c.wait_total(&t, 1).await;

    let (status, document) = c.get("/openapi.json").await;
    assert_eq!((status, document["openapi"].clone()), (200, json!("3.1.0")));
    let paths = document["paths"].as_object().unwrap();
    let routes = ["/api/v1/overview", "/api/v1/campaigns", "/api/v1/campaigns/{campaign_id}", "/api/v1/live-events"];
    for route in routes {
        assert!(paths.contains_key(route), "{route} undocumented");
    }
    for (path, item) in paths {
        let parameters = item["get"]["parameters"].as_array().cloned().unwrap_or_default();
        let mut url = path.replace("{campaign_id}", "doc-one");
        let required: Vec<String> = parameters
            .iter()
            .filter(|p| p["in"] == "query" && p["required"] == true)
            .map(|p| format!("{}={t}", p["name"].as_str().unwrap()))
            .collect();
        if !required.is_empty() {
            url = format!("{url}?{}", required.join("&"));
        }
        let response = c.host.http.get(format!("http://{}{url}", c.addr)).bearer_auth(TOKEN).send().await.unwrap();
        let status = response.status().as_u16();
        assert!(status == 200 || (path == "/ready" && status == 503), "{path} ({url}) answered {status}");
        let documented: Vec<&String> = item["get"]["responses"].as_object().unwrap().keys().collect();
        assert!(
            documented.contains(&&status.to_string()) || documented.contains(&&"default".to_owned()),
            "{path}: {status} is not documented"
        );
    }

    let page = c.host.http.get(format!("http://{}/explorer", c.addr)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("/openapi.json") && !html.contains("https://"), "self-contained page");

    let overview = format!("/api/v1/overview?tenant_id={t}");
    let through = |bearer: Option<&str>| {
        let mut request = c.host.http.get(format!("http://{}/explorer{overview}", c.addr));
        if let Some(bearer) = bearer {
            request = request.header("authorization", bearer);
        }
        request.send()
    };
    let missing = through(None).await.unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    assert!(missing.headers().contains_key("x-request-id"));
    assert!(missing.json::<Value>().await.unwrap()["error"].is_string());
    for wrong in ["Bearer nope", &format!("Bearer {TOKEN}x"), &format!("Basic {TOKEN}"), TOKEN] {
        assert_eq!(through(Some(wrong)).await.unwrap().status(), 401, "{wrong}");
    }
    let proxied = through(Some(&format!("Bearer {TOKEN}"))).await.unwrap();
    assert_eq!(proxied.status(), 200);
    let mut proxied: Value = proxied.json().await.unwrap();
    let direct = |bearer: Option<&str>| {
        let mut request = c.host.http.get(format!("http://{}{overview}", c.addr));
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        request.send()
    };
    let refused = direct(None).await.unwrap();
    assert_eq!((refused.status().as_u16(), refused.headers()["www-authenticate"].to_str().unwrap()), (401, "Bearer"));
    assert_eq!(direct(Some("nope")).await.unwrap().status(), 401);
    let answered = direct(Some(TOKEN)).await.unwrap();
    assert_eq!(answered.status(), 200, "direct callers with the bearer");
    let mut direct: Value = answered.json().await.unwrap();
    proxied["freshness"] = Value::Null;
    direct["freshness"] = Value::Null;
    assert_eq!(proxied, direct, "the proxy answers what the API answers");
    let unknown = c
        .host
        .http
        .get(format!("http://{}/explorer/api/v1/nope", c.addr))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    c.host.stop().await;

    let closed = Campaigns::start(Backends::Embedded).await;
    let response = closed
        .host
        .http
        .get(format!("http://{}/explorer/api/v1/overview?tenant_id=x", closed.addr))
        .header("authorization", "Bearer anything")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503, "no token configured: the proxy is closed");
    closed.host.stop().await;

    // The specification's in-cluster model: direct callers need no bearer, the explorer's path still does.
    let open =
        Campaigns::start_configured(Backends::Embedded, &["admin".to_owned(), "campaigns".to_owned()], |config| {
            config.section_mut::<flowhost_campaigns::CampaignsConfig>().bearer_token =
                Some(flowhost_core::config::Secret::new(TOKEN));
            config.section_mut::<flowhost_campaigns::CampaignsConfig>().direct_without_bearer = true;
        })
        .await;
    let direct = open.host.http.get(format!("http://{}/api/v1/overview?tenant_id=x", open.addr)).send();
    assert_eq!(direct.await.unwrap().status(), 200, "direct callers need no bearer in the in-cluster model");
    let response = open.host.http.get(format!("http://{}/explorer/api/v1/overview?tenant_id=x", open.addr)).send();
    assert_eq!(response.await.unwrap().status(), 401);
    open.host.stop().await;
}

/// An external HTTP JSON source a test controls (the support-case source, the external campaign source): it
/// answers `{"<key>": [...]}` with its items changed since `updated_since` (and of `tenant_id`, when asked, by
/// their `tenant` field), or 503 while failing; it keeps the bearers it saw.
#[derive(Clone)]
struct FakeSource {
    key: &'static str,
    items: Arc<std::sync::Mutex<Vec<Value>>>,
    failing: Arc<std::sync::atomic::AtomicBool>,
    bearers: Arc<std::sync::Mutex<Vec<String>>>,
}

impl FakeSource {
    /// Serves the source on a loopback port: its URL and the server's task.
    async fn serve(key: &'static str) -> (FakeSource, String, tokio::task::JoinHandle<()>) {
        let source = FakeSource { key, items: Arc::default(), failing: Arc::default(), bearers: Arc::default() };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/{key}", listener.local_addr().unwrap());
        let app =
            axum::Router::new().route(&format!("/{key}"), axum::routing::get(fake_source)).with_state(source.clone());
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (source, url, server)
    }

    fn push(&self, item: Value) {
        self.items.lock().unwrap().push(item);
    }

    fn fail(&self, failing: bool) {
        self.failing.store(failing, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn fake_source(
    axum::extract::State(source): axum::extract::State<FakeSource>,
    headers: axum::http::HeaderMap,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    source.bearers.lock().unwrap().push(bearer);
    if source.failing.load(std::sync::atomic::Ordering::SeqCst) {
        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let since = query.get("updated_since").cloned().unwrap_or_default();
    let tenant = query.get("tenant_id");
    let items: Vec<Value> = source
        .items
        .lock()
        .unwrap()
        .iter()
        .filter(|item| item["updated_at"].as_str().unwrap() >= since.as_str())
        .filter(|item| tenant.is_none_or(|tenant| item["tenant"] == tenant.as_str()))
        .cloned()
        .collect();
    axum::Json(json!({ source.key: items })).into_response()
}

/// The support slice: chat conversations of the tenant are counted (other channels are not); a failing source
/// counts failures and keeps the last count, stale; it recovers with the new cases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn support_cases_count_chat_conversations_from_the_external_source() {
    let (source, url, server) = FakeSource::serve("cases").await;
    let c = Campaigns::start_configured(Backends::Embedded, &["admin".to_owned(), "campaigns".to_owned()], |config| {
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().support_url = Some(url);
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().support_token =
            Some(flowhost_core::config::Secret::new("support-secret"));
    })
    .await;
    let t = c.tenant.clone();
    let now = || flowhost_core::digest::iso_utc(flowhost_core::Clock::now_ms(&flowhost_core::SystemClock));
    for (id, channel) in [("c1", "chat"), ("c2", "email"), ("c3", "chat")] {
        source.push(json!({"tenant": t, "id": id, "channel": channel, "updated_at": now()}));
    }
    source.push(json!({"tenant": "someone-else", "id": "x", "channel": "chat", "updated_at": now()}));
    c.flow("s-one", Some(campaign(&t)), false).await;
    // A pass writes the count before the slice's sync state (at the pass's end), so a read between the two sees
    // the new count beside the last state: wait for both.
    let fresh_count = |expected: Value| {
        let c = &c;
        let path = format!("/api/v1/overview?tenant_id={t}");
        async move {
            let until = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                let (_, overview) = c.get(&path).await;
                let support = &overview["freshness"]["support"];
                if overview["support_cases_total"] == expected
                    && support["state"] == "fresh"
                    && support["consecutive_failures"] == 0
                {
                    return overview;
                }
                assert!(tokio::time::Instant::now() < until, "{overview}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    fresh_count(json!(2)).await;
    assert!(source.bearers.lock().unwrap().iter().all(|b| b == "Bearer support-secret"));

    source.fail(true);
    source.push(json!({"tenant": t, "id": "c4", "channel": "chat", "updated_at": now()}));
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, overview) = c.get(&format!("/api/v1/overview?tenant_id={t}")).await;
        let failures = overview["freshness"]["support"]["consecutive_failures"].as_u64().unwrap_or(0);
        if failures >= 2 {
            assert_eq!(overview["support_cases_total"], 2, "the last count stays while the source fails");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{overview}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = c.metrics().await;
    assert!(Campaigns::gauge(&metrics, &t, "support", "consecutive_failures").unwrap() >= 2.0, "{metrics}");

    source.fail(false);
    fresh_count(json!(3)).await;
    c.host.stop().await;
    server.abort();
}

/// Live events written before their tenant's totals were kept (an upgrade) are counted, hour by hour, once
/// the tenant shows new activity; the list's totals and the overview then count history and news alike.
async fn history_predating_the_totals_is_counted(backends: Backends) {
    let c = Campaigns::start(backends).await;
    let t = c.tenant.clone();
    let read_models = c
        .host
        .ports
        .documents
        .database(&c.host.config.section::<flowhost_campaigns::CampaignsConfig>().database)
        .await
        .unwrap();
    let now = flowhost_core::Clock::now_ms(&flowhost_core::SystemClock);
    let docs = (0..50i64)
        .map(|n| {
            let at = now - 3 * 3_600_000 + n * 200_000;
            let id = format!("delivery:old-{n}");
            let event = json!({"event_id": id, "tenant_id": t, "kind": "notification_delivered",
                "occurred_at": flowhost_core::digest::iso_utc(at), "occurred_ms": at, "campaign_id": null,
                "run_id": null, "notification_id": format!("old-{n}"), "player_id": n, "channel": "WEB_PUSH",
                "interaction_type": null});
            (id, event)
        })
        .collect();
    read_models.upsert_many(flowhost_campaigns::live_model::LIVE_EVENTS, docs).await.unwrap();
    delivered(&c.host, &t, "n-new", 7, "no-such-run").await;

    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, live) = c.get(&format!("/api/v1/live-events?tenant_id={t}&page=3&page_size=20")).await;
        if live["total_items"] == 51 {
            assert_eq!((live["total_pages"].clone(), live["items"].as_array().unwrap().len()), (json!(3), 11));
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{live}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, newest) =
        c.get(&format!("/api/v1/live-events?tenant_id={t}&kind=notification_delivered&page_size=1")).await;
    assert_eq!(
        (newest["items"][0]["notification_id"].clone(), newest["total_items"].clone()),
        (json!("n-new"), json!(51))
    );
    let (_, none) = c.get(&format!("/api/v1/live-events?tenant_id={t}&kind=interaction")).await;
    assert_eq!(none["total_items"], 0);
    let (_, overview) = c.get(&format!("/api/v1/overview?tenant_id={t}")).await;
    assert_eq!(overview["live_events_total"], 51, "{overview}");
    // The answers above would also come from counting on the fly: the tenant's kept totals hold the history.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let totals = read_models.get(flowhost_campaigns::live_model::LIVE_EVENT_TOTALS, &t).await.unwrap();
        if totals.as_ref().is_some_and(|totals| totals["counts"]["notification_delivered"] == 51) {
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{totals:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Quiet passes (every 200 ms) read the newest events again but write nothing: neither the event nor the
    // totals counted from it.
    let versions = || async {
        let totals = read_models.get_versioned(flowhost_campaigns::live_model::LIVE_EVENT_TOTALS, &t).await.unwrap();
        let newest =
            read_models.get_versioned(flowhost_campaigns::live_model::LIVE_EVENTS, "delivery:n-new").await.unwrap();
        (totals.unwrap().version, newest.unwrap().version)
    };
    // (The pass that counted the history may still be adding the newest hour.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = versions().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(versions().await, before, "a quiet pass wrote");
    c.host.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_history_predating_the_totals_is_counted() {
    history_predating_the_totals_is_counted(Backends::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongodb_history_predating_the_totals_is_counted() {
    history_predating_the_totals_is_counted(Backends::Distributed).await;
}

/// Campaigns of the external source are listed beside the flows' (`campaign_origin` `external`, id
/// `external:<id>`), filtered, detailed and removed by a tombstone; the reconcile of flow rows leaves them; a
/// failing source fails the campaigns slice while the flows' campaigns keep syncing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaigns_of_the_external_source() {
    let (source, url, server) = FakeSource::serve("campaigns").await;
    let c = Campaigns::start_configured(Backends::Embedded, &["admin".to_owned(), "campaigns".to_owned()], |config| {
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().external_url = Some(url);
        config.section_mut::<flowhost_campaigns::CampaignsConfig>().external_token =
            Some(flowhost_core::config::Secret::new("crm-secret"));
    })
    .await;
    let t = c.tenant.clone();
    let now = || flowhost_core::digest::iso_utc(flowhost_core::Clock::now_ms(&flowhost_core::SystemClock));
    let push = |campaign: Value| source.push(campaign);
    push(json!({"id": "spring", "tenant_id": t, "name": "Spring", "state": "active", "updated_at": now(),
        "description": "From the CRM", "offering": "10 spins", "ends_at": "2099-01-01T00:00:00Z"}));
    push(json!({"id": "idea", "tenant_id": t, "name": "Idea", "state": "draft", "updated_at": now()}));
    c.flow("f-one", Some(campaign(&t)), true).await;

    c.wait_total(&t, 3).await;
    let (_, external) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&campaign_origin=external&sort=name")).await;
    assert_eq!(external["total_items"], 2, "{external}");
    let names: Vec<&str> = external["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Idea", "Spring"]);
    assert!(external["items"].as_array().unwrap().iter().all(|item| item["campaign_origin"] == "external"));
    assert_eq!(
        external["status_counts"],
        json!({"suggestions": 1, "running": 1, "paused": 0, "ended": 0}),
        "{external}"
    );
    let (_, flows) = c.get(&format!("/api/v1/campaigns?tenant_id={t}&campaign_origin=flow")).await;
    assert_eq!(flows["items"][0]["campaign_id"], "f-one", "{flows}");

    let (status, detail) = c.get("/api/v1/campaigns/external:spring").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        (detail["campaign_origin"].clone(), detail["ui_status"].clone(), detail["flow_status"].clone()),
        (json!("external"), json!("running"), Value::Null)
    );
    assert_eq!((detail["description"].clone(), detail["offering"].clone()), (json!("From the CRM"), json!("10 spins")));
    let (status, _) = c.get(&format!("/api/v1/live-events?tenant_id={t}&campaign_id=external:spring")).await;
    assert_eq!(status, 200);
    assert!(source.bearers.lock().unwrap().iter().all(|bearer| bearer == "Bearer crm-secret"));

    // A tombstone removes; an update moves the bucket.
    push(json!({"id": "idea", "tenant_id": t, "state": "draft", "updated_at": now(), "deleted": true}));
    push(json!({"id": "spring", "tenant_id": t, "name": "Spring", "state": "paused", "updated_at": now()}));
    c.wait_total(&t, 2).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while c.get("/api/v1/campaigns/external:spring").await.1["ui_status"] != "paused" {
        assert!(tokio::time::Instant::now() < until, "the update never arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Several reconciles (every 12 passes of 200 ms) later the external campaign is still there.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(c.get("/api/v1/campaigns/external:spring").await.0, 200);

    // A failing source fails the slice; the flows' campaigns keep arriving.
    source.fail(true);
    c.flow("f-two", Some(campaign(&t)), false).await;
    let list = c.wait_total(&t, 3).await;
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut freshness = list["freshness"]["campaigns"].clone();
    while freshness["consecutive_failures"].as_u64().unwrap_or(0) < 2 {
        assert!(tokio::time::Instant::now() < until, "{freshness}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        freshness = c.get(&format!("/api/v1/campaigns?tenant_id={t}")).await.1["freshness"]["campaigns"].clone();
    }
    source.fail(false);
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    while c.get(&format!("/api/v1/campaigns?tenant_id={t}")).await.1["freshness"]["campaigns"]["consecutive_failures"]
        != 0
    {
        assert!(tokio::time::Instant::now() < until, "the slice never recovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.host.stop().await;
    server.abort();
}

/// A tenant with more campaigns than the list cache holds is paged by the store: every filter, order and page
/// must come out as the cache gives them (ties by id, a missing date first ascending and last descending).
async fn a_tenant_too_large_to_hold_lists_as_a_held_one(backends: Backends) {
    use flowhost_campaigns::list_cache::ListCache;
    use flowhost_campaigns::model::{CampaignDoc, Origin, UiStatus};
    use flowhost_campaigns::read_model::{Aggregate, CampaignFilter, ReadModels, SortKey};
    use flowhost_core::ports::Direction;

    let dir = tempfile::tempdir().unwrap();
    let ports = flowhost::connect(&TestHost::config(backends, dir.path())).await.unwrap();
    let read_models = ReadModels { documents: ports.documents.clone() };
    read_models.ensure_indexes().await.unwrap();
    let tenant = "large";
    // Names, dates and statuses repeat so that every order has ties; some dates are missing.
    let rows: Vec<CampaignDoc> = (0..23)
        .map(|n: usize| CampaignDoc {
            campaign_id: format!("c{:02}", (n * 7) % 23),
            tenant_id: tenant.into(),
            name: ["Spring", "autumn", "Spring bonus", "Ärger"][n % 4].into(),
            campaign_origin: Origin::ALL[n % 2],
            ui_status: UiStatus::ALL[n % 3],
            flow_status: None,
            external_state: None,
            enabled: true,
            released_version: None,
            starts_at: (!n.is_multiple_of(3)).then(|| format!("2026-0{}-01T00:00:00Z", 1 + n % 5)),
            ends_at: (!n.is_multiple_of(4)).then(|| format!("2026-1{}-01T00:00:00Z", n % 3)),
            archived: false,
            description: String::new(),
            offering: String::new(),
            broken_reasons: Vec::new(),
            created_at: String::new(),
            updated_at: format!("2026-05-{:02}T00:00:00Z", 1 + n % 6),
            players_engaged: 0,
            deliveries: 0,
            interactions: 0,
        })
        .collect();
    read_models.put_rows(&rows).await.unwrap();
    read_models.put_aggregate(&Aggregate::of(tenant, &rows)).await.unwrap();

    let held = ListCache::default();
    let too_small = ListCache::with_budget(rows.len() - 1);
    let page_size = 4;
    for origin in [None, Some(Origin::Flow), Some(Origin::External)] {
        for status in [None, Some(UiStatus::Running), Some(UiStatus::Ended)] {
            for sort in [SortKey::UpdatedAt, SortKey::Name, SortKey::StartsAt, SortKey::EndsAt] {
                for direction in [Direction::Asc, Direction::Desc] {
                    let filter = CampaignFilter {
                        tenant_id: tenant.into(),
                        ui_status: status,
                        campaign_origin: origin,
                        sort,
                        direction,
                    };
                    for page in 1..=7 {
                        let ids = |rows: Vec<CampaignDoc>| rows.into_iter().map(|r| r.campaign_id).collect::<Vec<_>>();
                        let from_cache = held.page(&read_models, &filter, page, page_size).await.unwrap();
                        let from_store = too_small.page(&read_models, &filter, page, page_size).await.unwrap();
                        assert_eq!(from_store.total, from_cache.total, "{filter:?}");
                        assert_eq!(ids(from_store.rows), ids(from_cache.rows), "{filter:?} page {page}");
                    }
                }
            }
        }
    }
    assert_eq!(held.held(), [tenant]);
    assert!(too_small.held().is_empty(), "a tenant beyond the budget is never held");

    // Tenants beyond the budget go least recently used first.
    let two_tenants = ListCache::with_budget(rows.len() + 5);
    let small: Vec<CampaignDoc> =
        rows[..5].iter().map(|row| CampaignDoc { tenant_id: "small".into(), ..row.clone() }).collect();
    read_models.put_rows(&small).await.unwrap();
    read_models.put_aggregate(&Aggregate::of("small", &small)).await.unwrap();
    let first_page = |tenant: &str| CampaignFilter {
        tenant_id: tenant.into(),
        ui_status: None,
        campaign_origin: None,
        sort: SortKey::UpdatedAt,
        direction: Direction::Desc,
    };
    two_tenants.page(&read_models, &first_page("small"), 1, 10).await.unwrap();
    two_tenants.page(&read_models, &first_page(tenant), 1, 10).await.unwrap();
    assert_eq!(two_tenants.held(), [tenant, "small"], "both fit");
    let third: Vec<CampaignDoc> =
        rows[..1].iter().map(|row| CampaignDoc { tenant_id: "third".into(), ..row.clone() }).collect();
    read_models.put_rows(&third).await.unwrap();
    read_models.put_aggregate(&Aggregate::of("third", &third)).await.unwrap();
    two_tenants.page(&read_models, &first_page("third"), 1, 10).await.unwrap();
    assert_eq!(two_tenants.held(), [tenant, "third"], "the least recently used tenant went");

    // A sync that wrote a tenant's rows but not yet its aggregate: a page lists the newer rows and counts them,
    // never a total that its status counts disagree with.
    let racing: Vec<CampaignDoc> =
        rows[..6].iter().map(|row| CampaignDoc { tenant_id: "racing".into(), ..row.clone() }).collect();
    read_models.put_aggregate(&Aggregate::of("racing", &racing[..2])).await.unwrap();
    read_models.put_rows(&racing).await.unwrap();
    let counts_of = |page: &flowhost_campaigns::list_cache::ListPage| {
        let counts = page.aggregate.status_counts(None);
        counts.as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum::<u64>()
    };
    let page = held.page(&read_models, &first_page("racing"), 1, 10).await.unwrap();
    assert_eq!((page.total, counts_of(&page)), (6, 6), "the rows listed are the rows counted");
    assert_eq!(page.aggregate.counters(None, None).campaigns, 6);
    // Once the aggregate catches up, it is what a page counts with.
    read_models.put_aggregate(&Aggregate::of("racing", &racing)).await.unwrap();
    let page = held.page(&read_models, &first_page("racing"), 1, 10).await.unwrap();
    assert_eq!((page.total, counts_of(&page)), (6, 6));
}

#[tokio::test]
async fn embedded_a_tenant_too_large_to_hold_lists_as_a_held_one() {
    a_tenant_too_large_to_hold_lists_as_a_held_one(Backends::Embedded).await;
}

#[tokio::test]
async fn mongodb_a_tenant_too_large_to_hold_lists_as_a_held_one() {
    a_tenant_too_large_to_hold_lists_as_a_held_one(Backends::Distributed).await;
}

/// A deep page of a live-event list read from a mark (where an earlier page showed time step down) is the page
/// read by skipping every row before it: with many events sharing an instant, for every kind filter, paged
/// forwards and backwards, and again after new events moved every offset (the totals' rewrite retires the marks).
async fn a_live_events_page_from_a_mark_is_the_page_without_one(backends: Backends) {
    use flowhost_campaigns::live_marks::LiveMarks;
    use flowhost_campaigns::live_model::{LiveCounts, LiveEvent, LIVE_EVENT_TOTALS};
    use flowhost_campaigns::read_model::ReadModels;
    use flowhost_core::stored::Collection;

    let dir = tempfile::tempdir().unwrap();
    let ports = flowhost::connect(&TestHost::config(backends, dir.path())).await.unwrap();
    let read_models = ReadModels { documents: ports.documents.clone() };
    flowhost_campaigns::live::ensure_indexes(&read_models, ports.documents.as_ref()).await.unwrap();
    let tenant = "marked";
    let kinds = ["notification_delivered", "interaction"];
    let event = |n: i64, at: i64| LiveEvent {
        event_id: format!("e-{n:04}"),
        tenant_id: tenant.into(),
        kind: kinds[(n % 2) as usize].into(),
        occurred_at: String::new(),
        occurred_ms: at,
        campaign_id: None,
        run_id: None,
        notification_id: None,
        player_id: Some(n),
        channel: None,
        interaction_type: None,
    };
    // Three events per instant, so pages and marks meet ties.
    let mut events: Vec<LiveEvent> = (0..600).map(|n| event(n, 1_000_000 - (n / 3) * 1000)).collect();
    let events_store = Collection::<LiveEvent>::new(read_models.documents.clone());
    let totals_store = Collection::<LiveCounts>::named(read_models.documents.clone(), LIVE_EVENT_TOTALS);
    let totals = |events: &[LiveEvent]| {
        let mut counts = std::collections::BTreeMap::new();
        for event in events {
            *counts.entry(event.kind.clone()).or_default() += 1;
        }
        LiveCounts { tenant_id: tenant.into(), hour_ms: None, counts }
    };
    events_store.upsert_many(&events).await.unwrap();
    totals_store.upsert(&totals(&events)).await.unwrap();

    let marks = LiveMarks::default();
    /// Every page of every kind filter, forwards then backwards, from `marks` and without.
    async fn compare(read_models: &ReadModels, marks: &LiveMarks, tenant: &str, kinds: [&str; 2], events: usize) {
        let page_size = 20;
        for kind in [None, Some(kinds[0]), Some(kinds[1])] {
            let pages = (events as u64 / if kind.is_some() { 2 } else { 1 }).div_ceil(page_size) + 1;
            for page in (1..=pages).chain((1..=pages).rev()) {
                let ids = |events: Vec<LiveEvent>| events.into_iter().map(|e| e.event_id).collect::<Vec<_>>();
                let (marked, marked_total) =
                    read_models.live_events(marks, tenant, kind, None, page, page_size).await.unwrap();
                let (whole, whole_total) =
                    read_models.live_events(&LiveMarks::default(), tenant, kind, None, page, page_size).await.unwrap();
                assert_eq!(marked_total, whole_total);
                assert_eq!(ids(marked), ids(whole), "kind {kind:?}, page {page}");
            }
        }
    }
    compare(&read_models, &marks, tenant, kinds, events.len()).await;
    let version = read_models.documents.get_versioned(LIVE_EVENT_TOTALS, tenant).await.unwrap().unwrap().version;
    let start = marks.start(tenant, None, version, 500);
    assert!(start.at_or_before.is_some() && start.offset < 500, "the pages left marks: {start:?}");

    // New events at the top, in the middle and at an existing instant move every later offset; the sync rewrites
    // the totals after them, and the old marks go unused.
    let added = [event(600, 2_000_000), event(601, 850_500), event(602, 900_000), event(603, 900_000)];
    events.extend(added.iter().cloned());
    events_store.upsert_many(&added).await.unwrap();
    totals_store.upsert(&totals(&events)).await.unwrap();
    compare(&read_models, &marks, tenant, kinds, events.len()).await;
}

#[tokio::test]
async fn embedded_a_live_events_page_from_a_mark_is_the_page_without_one() {
    a_live_events_page_from_a_mark_is_the_page_without_one(Backends::Embedded).await;
}

#[tokio::test]
async fn mongodb_a_live_events_page_from_a_mark_is_the_page_without_one() {
    a_live_events_page_from_a_mark_is_the_page_without_one(Backends::Distributed).await;
}
