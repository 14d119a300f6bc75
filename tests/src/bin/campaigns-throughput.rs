//! The campaign events API's figures on this machine (the `campaigns` role in process, on the embedded store, or
//! on the test servers with `distributed`):
//!
//! 1. **Initial sync**: 10,000 v2 flows with campaign metadata (one tenant) become campaign rows.
//! 2. **Requests under load** (`flowhost_tests::load`): `GET /api/v1/campaigns` for that tenant (unfiltered, and
//!    filtered by `ui_status`) and `GET /api/v1/live-events`, with 1,000,000 engagement records (live events)
//!    beside its campaigns: the capacity from 16 closed-loop connections for 10 s, then open loops at 50% and 90%
//!    of it, p50 / p99 / p99.9 each.
//! 3. **Catch-up**: 100,000 delivered notifications written to the source store as the sender writes them;
//!    the time until the live-events read model counts them all.
//!
//!     cargo run --release -p flowhost-tests --bin campaigns-throughput [embedded|distributed] [engagement records]

use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::{Clock, SystemClock};
use flowhost_flows::{CampaignMeta, FlowInput, Flows};
use flowhost_tests::load::{self, HttpTarget};
use flowhost_tests::{Backends, TestHost};
use serde_json::{json, Value};

const CAMPAIGNS: usize = 10_000;
const NEW_RECORDS: usize = 100_000;
const CONNECTIONS: usize = 16;
const LOAD: Duration = Duration::from_secs(10);

/// The JSON answer of `url`; `null` while the listener is not up yet.
async fn get(http: &reqwest::Client, url: &str) -> Value {
    match http.get(url).send().await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

#[tokio::main]
async fn main() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOWHOST_TEST_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let backends = match std::env::args().nth(1).as_deref() {
        None | Some("embedded") => Backends::Embedded,
        Some("distributed") => Backends::Distributed,
        Some(other) => panic!("unknown backends {other:?}: embedded or distributed"),
    };
    let engagement: usize = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
    let mut report = Report::new("campaigns-throughput");
    // The figures' names start with the backends (the test server's figures are no performance reference).
    let on = match backends {
        Backends::Embedded => "embedded",
        Backends::Distributed => "distributed",
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(backends, dir.path());
    config.roles = vec!["admin".to_owned(), "campaigns".to_owned()];
    config.section_mut::<flowhost_campaigns::CampaignsConfig>().listen =
        format!("127.0.0.1:{}", flowhost_tests::gateway::free_port());
    config.section_mut::<flowhost_campaigns::CampaignsConfig>().sync_interval_ms = 250;
    config.section_mut::<flowhost_campaigns::CampaignsConfig>().sync_batch = 5000;
    let ports = flowhost::connect(&config).await.unwrap();
    let tenant = "7";
    println!(
        "Campaign events API, {}, {} cores",
        match backends {
            Backends::Embedded => "embedded store",
            Backends::Distributed => "MongoDB-protocol test server (nx-27017, not MongoDB)",
        },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // 10,000 campaigns, as the admin API creates them.
    let flows = Flows::new(ports.clone());
    let started = Instant::now();
    for n in 0..CAMPAIGNS {
        let input = FlowInput {
            id: Some(format!("campaign-{n:05}")),
            name: Some(format!("Campaign {n}")),
            description: Some("Benchmark campaign".to_owned()),
            campaign: Some(CampaignMeta {
                tenant_id: tenant.to_owned(),
                offering: "50 free spins".to_owned(),
                starts_at: None,
                ends_at: None,
                archived: n % 4 == 0,
            }),
            ..FlowInput::default()
        };
        flows.create(input, Some("bench")).await.unwrap();
    }
    let created = started.elapsed();

    // 1,000,000 engagement records of the tenant's campaigns (the live-events read model's history).
    let read_models =
        ports.documents.database(&config.section::<flowhost_campaigns::CampaignsConfig>().database).await.unwrap();
    let now = SystemClock.now_ms();
    let started = Instant::now();
    for chunk in (0..engagement).collect::<Vec<_>>().chunks(20_000) {
        let docs = chunk
            .iter()
            .map(|n| {
                let id = format!("delivery:bench-{n}");
                let at = now - 86_400_000 + (*n as i64);
                let event = json!({"event_id": id, "tenant_id": tenant, "kind": "notification_delivered",
                    "occurred_at": flowhost_core::digest::iso_utc(at), "occurred_ms": at,
                    "campaign_id": format!("campaign-{:05}", n % CAMPAIGNS), "run_id": null,
                    "notification_id": format!("bench-{n}"), "player_id": (n % 50_000) as i64,
                    "channel": "WEB_PUSH", "interaction_type": null});
                (id, event)
            })
            .collect();
        read_models.upsert_many(flowhost_campaigns::live_model::LIVE_EVENTS, docs).await.unwrap();
    }
    let seeded = started.elapsed();

    let started = Instant::now();
    let host = TestHost::start_on(config.clone(), ports.clone()).await;
    let base = format!("http://{}", config.section::<flowhost_campaigns::CampaignsConfig>().listen);
    let http = reqwest::Client::new();
    let list = format!("{base}/api/v1/campaigns?tenant_id={tenant}&page_size=1");
    while get(&http, &list).await["total_items"] != CAMPAIGNS {
        assert!(started.elapsed() < Duration::from_secs(600), "the campaigns never synced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let synced = started.elapsed();
    println!("| What | Records | Time |");
    println!("|---|---|---|");
    println!("| create the flows (admin store) | {CAMPAIGNS} | {:.1} s |", created.as_secs_f64());
    println!("| seed the engagement history (read model) | {engagement} | {:.1} s |", seeded.as_secs_f64());
    println!("| initial campaign sync (start to all rows listed) | {CAMPAIGNS} | {:.1} s |", synced.as_secs_f64());
    report.lower(&format!("{on}: create 10k campaign flows"), "s", created.as_secs_f64());
    report.lower(&format!("{on}: seed the engagement history"), "s", seeded.as_secs_f64());
    report.lower(&format!("{on}: initial sync of 10k campaigns"), "s", synced.as_secs_f64());
    println!();
    println!("| Request, {CONNECTIONS} connections, then open loops | Rate | Latency | Not served |");
    println!("|---|---|---|---|");
    let addr: std::net::SocketAddr =
        config.section::<flowhost_campaigns::CampaignsConfig>().listen.parse().expect("a socket address");
    let requests: [(&str, HttpTarget); 3] = [
        (
            "campaigns list, pages 1 to 500",
            HttpTarget::get(addr, move |n| {
                format!("/api/v1/campaigns?tenant_id={tenant}&page={}&page_size=20", n % 500 + 1)
            }),
        ),
        (
            "campaigns list, filtered by ui_status, sorted by name",
            HttpTarget::get(addr, move |n| {
                format!("/api/v1/campaigns?tenant_id={tenant}&ui_status=ended&sort=name&page={}", n % 100 + 1)
            }),
        ),
        (
            "live events, pages 1 to 500",
            HttpTarget::get(addr, move |n| format!("/api/v1/live-events?tenant_id={tenant}&page={}", n % 500 + 1)),
        ),
    ];
    for (what, target) in &requests {
        load::under_load(&mut report, &format!("{on}: {what}"), target, CONNECTIONS, LOAD).await;
    }
    if backends == Backends::Embedded {
        report.set_target(&format!("{on}: live events, pages 1 to 500: p99 at 90% of capacity"), 20.0);
    }

    // 100,000 new delivered notifications, as the sender stores them; the time until all are live events.
    let overview = format!("{base}/api/v1/overview?tenant_id={tenant}");
    let before = get(&http, &overview).await["live_events_total"].as_u64().unwrap();
    let started = Instant::now();
    let retention = Duration::from_secs(86_400);
    for n in 0..NEW_RECORDS {
        let activity = flowhost_notifications::records::NotificationActivity {
            notification_id: format!("new-{n}"),
            tenant_id: tenant.to_owned(),
            player_id: (n % 50_000) as i64,
            channel: "WEB_PUSH".to_owned(),
            template_id: None,
            language_enabled_id: None,
            status: "delivered".to_owned(),
            delivered: true,
            delivery_ids: vec![format!("d-{n}")],
            invalidated_subscriptions: Vec::new(),
            deliveries: Vec::new(),
            run_id: None,
            attempts: 1,
            content: json!({}),
            created_at_ms: SystemClock.now_ms(),
            created_at: String::new(),
            updated_at: String::new(),
        };
        flowhost_notifications::records::store_activity(&ports, retention, &activity).await.unwrap();
    }
    let written = started.elapsed();
    while get(&http, &overview).await["live_events_total"].as_u64().unwrap() < before + NEW_RECORDS as u64 {
        assert!(started.elapsed() < Duration::from_secs(900), "the sync never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught_up = started.elapsed();
    println!();
    println!("| Catch-up | Records | Written in | All listed after | After the last write |");
    println!("|---|---|---|---|---|");
    println!(
        "| delivered notifications to live events | {NEW_RECORDS} | {:.1} s | {:.1} s | {:.1} s |",
        written.as_secs_f64(),
        caught_up.as_secs_f64(),
        (caught_up - written).as_secs_f64()
    );
    let catch_up = format!("{on}: catch-up of 100k deliveries");
    report.lower(&format!("{catch_up}, written in"), "s", written.as_secs_f64());
    report.lower(&format!("{catch_up}, all listed after"), "s", caught_up.as_secs_f64());
    report.lower(&format!("{catch_up}, after the last write"), "s", (caught_up - written).as_secs_f64());
    host.stop().await;
}
