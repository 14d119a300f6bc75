//! The gateway's figures on this machine (the whole gateway in one process on the embedded defaults: edge,
//! internal ingest over loopback HTTP, the durable queue in SQLite, the worker; the load generator runs in the
//! same process and shares the cores):
//!
//! 1. **Accepted events per second** with a warm validation cache: closed-loop HTTP/1.1 connections (the `wrk`
//!    model, keep-alive, one request at a time per connection) posting a presence event for 256 validated
//!    players; every answer is a 202 (the durable queue acknowledged the event). p50 / p99 per request.
//! 2. **Shedding at twice capacity**: an open-loop generator offering twice the measured rate; the share of 503
//!    answers (in-flight budget spent) and the p99 of the accepted ones.
//! 3. **Worker throughput**: a queue of prepared events drained into the broker (the embedded log, and Kafka
//!    when `FLOWHOST_TEST_KAFKA_BROKERS` names one).
//!
//!     cargo run --release -p flowhost-tests --bin gateway-throughput [-- SECONDS CONNECTIONS]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flowhost_bench::Report;
use flowhost_tests::gateway::{configure, presence_event, GatewayAddrs, PlayerBackend};
use flowhost_tests::{Backends, TestHost};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

const ORIGIN: &str = "https://play.example.com";
const PLAYERS: usize = 256;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// One keep-alive connection to the edge.
async fn connect(addr: std::net::SocketAddr) -> http1::SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    sender
}

fn request(addr: std::net::SocketAddr, player: usize, body: &Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post(format!("http://{addr}/api/gateway/events"))
        .header("host", addr.to_string())
        .header("origin", ORIGIN)
        .header("authorization", format!("Bearer player-{}", player % PLAYERS + 1))
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
        .unwrap()
}

/// Sends one request on `sender`, returns the status (0 when the connection failed).
async fn send(sender: &mut http1::SendRequest<Full<Bytes>>, request: hyper::Request<Full<Bytes>>) -> u16 {
    if sender.ready().await.is_err() {
        return 0;
    }
    match sender.send_request(request).await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = response.into_body().collect().await;
            status
        }
        Err(_) => 0,
    }
}

/// Phase 1: `connections` closed loops for `seconds`; returns accepted per second. Records its figures in
/// `report` when given one (not for the warm-up).
async fn closed_loop(
    addr: std::net::SocketAddr,
    connections: usize,
    seconds: u64,
    body: &Bytes,
    report: Option<&mut Report>,
) -> f64 {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for connection in 0..connections {
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(addr).await;
            let (mut latencies, mut refused) = (Vec::new(), 0u64);
            let mut n = connection;
            while Instant::now() < until {
                let started = Instant::now();
                let status = send(&mut sender, request(addr, n, &body)).await;
                if status == 202 {
                    latencies.push(started.elapsed());
                } else {
                    refused += 1;
                    if status == 0 {
                        sender = connect(addr).await;
                    }
                }
                n += connections;
            }
            (latencies, refused)
        }));
    }
    let started = Instant::now();
    let (mut latencies, mut refused) = (Vec::new(), 0);
    for task in tasks {
        let (mine, theirs) = task.await.unwrap();
        latencies.extend(mine);
        refused += theirs;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let rate = latencies.len() as f64 / elapsed;
    let (p50, p99) = (ms(percentile(&latencies, 0.5)), ms(percentile(&latencies, 0.99)));
    println!(
        "| accepted events/s, {connections} connections, {seconds} s | {} (+{refused} not 202) | {rate:.0}/s | p50 {p50:.2} ms, p99 {p99:.2} ms |",
        latencies.len(),
    );
    if let Some(report) = report {
        report.higher(&format!("accepted events/s, {connections} connections"), "/s", rate).target(50_000.0);
        report.lower(&format!("p50, {connections} connections"), "ms", p50);
        report.lower(&format!("p99, {connections} connections"), "ms", p99).target(5.0);
    }
    rate
}

/// Phase 2: requests started at `rate` per second for `seconds`, each on a connection from a pool (a new one
/// when none is idle, at most 4096 open).
async fn open_loop(addr: std::net::SocketAddr, rate: f64, seconds: u64, body: &Bytes, report: &mut Report) {
    let pool = Arc::new(tokio::sync::Mutex::new(Vec::<http1::SendRequest<Full<Bytes>>>::new()));
    let open = Arc::new(tokio::sync::Semaphore::new(4096));
    let (accepted, shed, other, dropped) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let total = (rate * seconds as f64) as u64;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..total {
        let due = started + Duration::from_secs_f64(n as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let Ok(permit) = open.clone().try_acquire_owned() else {
            dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let (pool, body, latencies) = (pool.clone(), body.clone(), latencies.clone());
        let (accepted, shed, other) = (accepted.clone(), shed.clone(), other.clone());
        tasks.spawn(async move {
            let _permit = permit;
            let sent = Instant::now();
            let mut sender = match pool.lock().await.pop() {
                Some(sender) => sender,
                None => connect(addr).await,
            };
            let status = send(&mut sender, request(addr, n as usize, &body)).await;
            match status {
                202 => {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    latencies.lock().unwrap().push(sent.elapsed());
                }
                503 => {
                    shed.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    other.fetch_add(1, Ordering::Relaxed);
                }
            }
            if status != 0 {
                pool.lock().await.push(sender);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    let (accepted, shed, other, dropped) = (
        accepted.load(Ordering::Relaxed),
        shed.load(Ordering::Relaxed),
        other.load(Ordering::Relaxed),
        dropped.load(Ordering::Relaxed),
    );
    let offered = accepted + shed + other + dropped;
    let shed_share = shed as f64 * 100.0 / offered.max(1) as f64;
    let accepted_rate = accepted as f64 / started.elapsed().as_secs_f64();
    let (p50, p99) = (ms(percentile(&latencies, 0.5)), ms(percentile(&latencies, 0.99)));
    println!(
        "| offered at twice capacity ({rate:.0}/s), {seconds} s | {offered} | shed 503: {shed_share:.1}%, accepted {accepted_rate:.0}/s | accepted p50 {p50:.2} ms, p99 {p99:.2} ms; {other} other, {dropped} not sent (4096 open) |"
    );
    report.lower("twice capacity: shed 503 share", "%", shed_share);
    report.higher("twice capacity: accepted events/s", "/s", accepted_rate);
    report.lower("twice capacity: accepted p50", "ms", p50);
    report.lower("twice capacity: accepted p99", "ms", p99).target(10.0);
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
    let host = TestHost::start_with(config).await;
    let client = reqwest::Client::new();
    while client.get(format!("http://{}/ready", addrs.edge)).send().await.map(|r| r.status() != 200).unwrap_or(true) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = Bytes::from(presence_event("heartbeat").to_string());
    // Warm the validation cache: one validated request per player.
    let mut sender = connect(addrs.edge).await;
    for player in 0..PLAYERS {
        assert_eq!(send(&mut sender, request(addrs.edge, player, &body)).await, 202);
    }

    println!(
        "Gateway, {} cores, embedded defaults, in-flight budget 256",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| What | Requests | Figure | Latency / note |");
    println!("|---|---|---|---|");
    closed_loop(addrs.edge, connections, 2, &body, None).await;
    let capacity = closed_loop(addrs.edge, connections, seconds, &body, Some(&mut report)).await;
    open_loop(addrs.edge, capacity * 2.0, seconds.min(5), &body, &mut report).await;
    host.stop().await;
    worker_throughput(100_000, None, &mut report).await;
    if let Ok(brokers) = std::env::var("FLOWHOST_TEST_KAFKA_BROKERS") {
        worker_throughput(100_000, Some(brokers), &mut report).await;
    }
}
