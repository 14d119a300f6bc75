//! Latency under load of the push API's and the administration API's routes (one Flowhost in this process on
//! the embedded defaults; the load generator shares its cores). For each route: its capacity from closed-loop
//! HTTP/1.1 connections, then open loops at 50% and 90% of it, p50 / p99 / p99.9 from each request's scheduled
//! start (`flowhost_tests::load`). The gateway's and the campaign events API's routes are measured the same
//! way by `gateway-throughput` and `campaigns-throughput`, beside their own data.
//!
//! - push API, push platform: `GET /api/v1/webpush/client-config` and `POST /api/v1/service/webpush/subscriptions`
//!   (a new player's subscription each time, so every request writes);
//! - administration API reads, beside 1,000 stored v2 flows: `GET /api/v2/flows/{id}` and `GET /api/v2/flows`
//!   (every flow's summary).
//!
//!     cargo run --release -p flowhost-tests --bin server-latency [-- SECONDS CONNECTIONS]

use std::time::Duration;

use bytes::Bytes;
use flowhost_bench::Report;
use flowhost_flows::{FlowInput, Flows};
use flowhost_tests::load::{self, HttpTarget};
use flowhost_tests::push::{self, BRIDGE_TOKEN, SOURCE_APP, TENANT_A};
use flowhost_tests::{Backends, TestHost};
use http_body_util::Full;

const FLOWS: u64 = 1_000;

/// A push-platform request as the `bridge` caller.
fn platform(method: &str, path: &str, body: Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {BRIDGE_TOKEN}"))
        .header("x-source-app", SOURCE_APP)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .expect("a valid request")
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(5);
    let connections: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(16);
    let duration = Duration::from_secs(seconds);
    let mut report = Report::new("server-latency");
    let host = TestHost::start(Backends::Embedded).await;
    host.wait_ready().await;
    let flows = Flows::new(host.ports.clone());
    for n in 0..FLOWS {
        let input =
            FlowInput { id: Some(format!("flow-{n:04}")), name: Some(format!("Flow {n}")), ..FlowInput::default() };
        flows.create(input, Some("bench")).await.expect("a draft flow is stored");
    }
    let addr = host.base_url.trim_start_matches("http://").parse().expect("the host's address");

    let routes = [
        (
            "push API: GET client-config",
            HttpTarget::new(addr, 200, |_| platform("GET", "/api/v1/webpush/client-config", Bytes::new())),
        ),
        (
            "push API: POST a subscription",
            HttpTarget::new(addr, 201, |n| {
                let endpoint = format!("https://push.example.com/send/{n}");
                let body = push::subscription(TENANT_A, n as i64 + 1, &endpoint).to_string();
                platform("POST", "/api/v1/service/webpush/subscriptions", Bytes::from(body))
            }),
        ),
        ("admin API: GET a v2 flow", HttpTarget::get(addr, |n| format!("/api/v2/flows/flow-{:04}", n % FLOWS))),
        ("admin API: GET the v2 flows (1,000)", HttpTarget::get(addr, |_| "/api/v2/flows".to_owned())),
    ];
    println!(
        "Push API and administration API, {} cores, embedded defaults, {connections} connections, {seconds} s per loop",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| Route | Rate | Latency | Not served |");
    println!("|---|---|---|---|");
    for (name, target) in &routes {
        load::under_load(&mut report, name, target, connections, duration).await;
    }
    host.stop().await;
}
