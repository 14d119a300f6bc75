//! The gateway's figures on this machine (the whole gateway in one process on the embedded defaults: edge,
//! internal ingest over loopback HTTP, the durable queue in SQLite, the worker; the load generator runs in the
//! same process and shares the cores):
//!
//! 1. **Capacity and latency under load** (`flowhost_tests::load`): accepted events per second with a warm
//!    validation cache from closed-loop HTTP/1.1 connections (the `wrk` model, keep-alive) posting a presence
//!    event for 256 validated players, every answer a 202 (the durable queue acknowledged the event); then open
//!    loops at 50% and 90% of that capacity, p50 / p99 / p99.9 from each request's scheduled start.
//! 2. **Shedding at twice capacity**: an open loop offering twice the measured rate; the share of 503 answers
//!    (in-flight budget spent) and the p99 of the accepted ones.
//! 3. **Worker throughput**: a queue of prepared events drained into the broker (the embedded log, and Kafka
//!    when `FLOWHOST_TEST_KAFKA_BROKERS` names one).
//!
//!     cargo run --release -p flowhost-tests --bin gateway-throughput [-- SECONDS CONNECTIONS]
//!
//! `GATEWAY_EDGE_MAX_INFLIGHT` sets the edge's in-flight budget as it does for the product (default 256): the
//! accepted events' latency at twice capacity follows it (Little's law: the budget over the accepted rate).

use std::time::{Duration, Instant};

use bytes::Bytes;
use flowhost_bench::Report;
use flowhost_tests::gateway::{configure, presence_event, GatewayAddrs, PlayerBackend};
use flowhost_tests::load::{self, HttpTarget};
use flowhost_tests::{Backends, TestHost};
use http_body_util::Full;

const ORIGIN: &str = "https://play.example.com";
const PLAYERS: u64 = 256;

/// The edge's event route: the `n`th request posts `body` for player `n % 256 + 1`.
fn events(addr: std::net::SocketAddr, body: Bytes) -> HttpTarget {
    HttpTarget::new(addr, 202, move |n| {
        hyper::Request::post("/api/gateway/events")
            .header("origin", ORIGIN)
            .header("authorization", format!("Bearer player-{}", n % PLAYERS + 1))
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .expect("a valid request")
    })
}

/// The anchor: a plain axum handler on loopback in this process that reads the body and answers 202, the floor
/// of an HTTP route on this stack and these cores.
async fn axum_echo() -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/api/gateway/events",
        axum::routing::post(|body: Bytes| async move { (axum::http::StatusCode::ACCEPTED, body) }),
    );
    // Bound as the gateway's sockets are (the accept queue's length included).
    let listener = flowhost_role::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the echo server runs") });
    addr
}

/// Connections of the shedding phase: four times the edge's in-flight budget (256), so that twice the capacity
/// can exceed it.
const SHEDDING_CONNECTIONS: usize = 1024;

/// Phase 2: twice `capacity` offered for `seconds`; then the same offered to `echo`, the anchor: the load
/// generator shares the cores (and the runtime), so past capacity its own sends can fall behind schedule, and the
/// open loop charges that delay to every request. The echo's p99 at the same rate and connections is that floor.
async fn shedding(target: &HttpTarget, echo: &HttpTarget, capacity: f64, seconds: u64, report: &mut Report) {
    let rate = capacity * 2.0;
    let open = load::open_loop(target, rate, SHEDDING_CONNECTIONS, Duration::from_secs(seconds)).await;
    let offered = open.offered();
    let shed_share = open.refused as f64 * 100.0 / offered.max(1) as f64;
    let (accepted, p50, p99) = (open.rate(), open.ms(0.5), open.ms(0.99));
    println!(
        "| offered at twice capacity ({rate:.0}/s), {seconds} s, {SHEDDING_CONNECTIONS} connections | {offered} | shed (not 202): {shed_share:.1}%, accepted {accepted:.0}/s | accepted p50 {p50:.2} ms, p99 {p99:.2} ms; {} failed, {} not sent |",
        open.failed,
        open.not_sent,
    );
    report.lower("twice capacity: shed 503 share", "%", shed_share);
    report.higher("twice capacity: accepted events/s", "/s", accepted);
    report.lower("twice capacity: accepted p50", "ms", p50);
    report.lower("twice capacity: accepted p99", "ms", p99).target(10.0);
    let floor = load::open_loop(echo, rate, SHEDDING_CONNECTIONS, Duration::from_secs(seconds)).await;
    println!(
        "| anchor: axum echo offered the same ({rate:.0}/s), {SHEDDING_CONNECTIONS} connections | {} | served {:.0}/s | p50 {:.2} ms, p99 {:.2} ms; {} failed, {} not sent |",
        floor.offered(),
        floor.rate(),
        floor.ms(0.5),
        floor.ms(0.99),
        floor.failed,
        floor.not_sent,
    );
    report.anchor("twice capacity: accepted p99", "axum echo offered the same", floor.ms(0.99));
}

/// Phase 3: `count` prepared events drained by a worker alone.
async fn worker_throughput(count: usize, kafka: Option<String>, report: &mut Report) {
    let dir = tempfile::tempdir().unwrap();
    let backends = if kafka.is_some() { Backends::Distributed } else { Backends::Embedded };
    let mut config = TestHost::config(backends, dir.path());
    config.roles = vec!["gateway-worker".to_owned()];
    config.mongodb.uri = None;
    config.nats.url = None;
    config.redis.url = None;
    config.section_mut::<flowhost_gateway::GatewayConfig>().metrics_port = flowhost_tests::gateway::free_port();
    config.section_mut::<flowhost_gateway::GatewayConfig>().analytics_topic =
        flowhost_tests::unique("gateway.analytics");
    let ports = flowhost::connect(&config).await.unwrap();
    let event = presence_event("heartbeat");
    let record = serde_json::json!({"topic": "gateway.player-casino-presence.v1", "key": "12:1", "envelope": {
        "envelope_version": 1, "event_type": "player.casino-presence.v1", "source": "casino-web",
        "metadata": {"event_id": event["event_id"], "received_at": "2026-11-24T10:00:00.000Z", "occurred_at": "2026-11-24T10:00:00.000Z"},
        "body": {"schema_version": 1, "tenant_id": "12", "site_id": "34", "user": {"user_id": "1"}},
        "event_payload": event["event_payload"]}})
    .to_string()
    .into_bytes();
    for _ in 0..count / 1000 {
        ports.queue.enqueue_batch("gateway-events", vec![record.clone(); 1000]).await.unwrap();
    }
    let started = Instant::now();
    let host = TestHost::start_on(config, ports.clone()).await;
    loop {
        let stats = ports.queue.stats("gateway-events").await.unwrap();
        if stats.pending == 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the worker did not drain the queue: {stats:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    let broker = if kafka.is_some() { "Kafka" } else { "embedded log" };
    let drained = count / 1000 * 1000;
    let rate = drained as f64 / elapsed.as_secs_f64();
    println!("| worker: queue -> {broker} | {drained} | {rate:.0}/s | includes start-up and topic creation |");
    report.higher(&format!("worker: events/s, queue to {broker}"), "/s", rate);
    host.stop().await;
}

#[tokio::main]
async fn main() {
    let mut report = Report::new("gateway-throughput");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10);
    let connections: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let backend = PlayerBackend::start().await;
    let addrs = GatewayAddrs::free();
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    configure(&mut config, &addrs, &[ORIGIN], &backend);
    config.section_mut::<flowhost_gateway::GatewayConfig>().requests_per_minute = Default::default();
    config.section_mut::<flowhost_gateway::GatewayConfig>().validations_per_minute = Default::default();
    let budget = std::env::var("GATEWAY_EDGE_MAX_INFLIGHT")
        .ok()
        .map(|v| v.parse::<usize>().ok().filter(|budget| *budget >= 1).expect("GATEWAY_EDGE_MAX_INFLIGHT: 1 or more"));
    if let Some(budget) = budget {
        config.section_mut::<flowhost_gateway::GatewayConfig>().max_inflight = budget;
    }
    let budget = config.section::<flowhost_gateway::GatewayConfig>().max_inflight;
    let host = TestHost::start_with(config).await;
    let client = reqwest::Client::new();
    while client.get(format!("http://{}/ready", addrs.edge)).send().await.map(|r| r.status() != 200).unwrap_or(true) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = Bytes::from(presence_event("heartbeat").to_string());
    let target = events(addrs.edge, body.clone());
    // Warm the validation cache: one validated request per player.
    let warm = load::sequential(&target, PLAYERS).await;
    assert_eq!(warm.served.len(), PLAYERS, "every warm-up event is accepted");

    println!(
        "Gateway, {} cores, embedded defaults, in-flight budget {budget}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| What | Rate | Latency | Not served |");
    println!("|---|---|---|---|");
    let name = "gateway edge";
    let capacity = load::under_load(&mut report, name, &target, connections, Duration::from_secs(seconds)).await;
    let (capacity_figure, p99_figure) =
        (format!("{name}: capacity, {connections} connections"), format!("{name}: p99 at 90% of capacity"));
    report.set_target(&capacity_figure, 50_000.0);
    report.set_target(&p99_figure, 5.0);
    let echo = events(axum_echo().await, body);
    load::closed_loop(&echo, connections, Duration::from_secs(1)).await;
    let echo_capacity = load::closed_loop(&echo, connections, Duration::from_secs(seconds)).await.rate();
    let echo_at_gateway_rate = load::open_loop(&echo, capacity * 0.9, connections, Duration::from_secs(seconds)).await;
    println!(
        "| anchor: axum echo handler, same requests | {echo_capacity:.0}/s (closed loop) | at the gateway's 90% ({:.0}/s): p99 {:.2} ms | |",
        capacity * 0.9,
        echo_at_gateway_rate.ms(0.99)
    );
    report.anchor(&capacity_figure, "axum echo", echo_capacity);
    report.anchor(&p99_figure, "axum echo at the same rate", echo_at_gateway_rate.ms(0.99));
    shedding(&target, &echo, capacity, seconds.min(5), &mut report).await;
    host.stop().await;
    worker_throughput(100_000, None, &mut report).await;
    if let Ok(brokers) = std::env::var("FLOWHOST_TEST_KAFKA_BROKERS") {
        worker_throughput(100_000, Some(brokers), &mut report).await;
    }
}
