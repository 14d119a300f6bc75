//! Load generation for the benchmarks' server paths: closed loops (the `wrk` model: each connection sends its
//! next request when the last one answered) to find a path's capacity, and open loops (requests started at a
//! fixed arrival rate whatever the answers do) to measure its latency at a share of that capacity.
//!
//! An open loop measures each request from the moment it was *scheduled* to start, not from when it went out:
//! when the server (or the generator sharing its cores) falls behind, the requests that waited count their wait.
//! A closed loop cannot show that wait (coordinated omission: a slow answer holds back the requests that would
//! have measured it), so only the open loop's latencies are the latency under load. Latencies go into an
//! HdrHistogram (microseconds, 3 significant digits), so p99.9 of a million requests costs no sorting.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flowhost_bench::Report;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

type Build = dyn Fn(u64) -> hyper::Request<Full<Bytes>> + Send + Sync;

/// One HTTP/1.1 route of a server: its address, the request numbered `n`, and the status that counts as served.
#[derive(Clone)]
pub struct HttpTarget {
    addr: SocketAddr,
    ok: u16,
    build: Arc<Build>,
}

impl HttpTarget {
    /// `build(n)` makes the `n`th request (its `host` header is set here).
    pub fn new(
        addr: SocketAddr,
        ok: u16,
        build: impl Fn(u64) -> hyper::Request<Full<Bytes>> + Send + Sync + 'static,
    ) -> Self {
        Self { addr, ok, build: Arc::new(build) }
    }

    /// A `GET` of `path(n)`, served when it answers 200.
    pub fn get(addr: SocketAddr, path: impl Fn(u64) -> String + Send + Sync + 'static) -> Self {
        Self::new(addr, 200, move |n| {
            hyper::Request::get(path(n)).body(Full::new(Bytes::new())).expect("a valid request")
        })
    }
}

/// One keep-alive connection to a target: opened when a request needs it, dropped when one fails (the next
/// request connects again).
struct Connection {
    target: HttpTarget,
    open: Option<http1::SendRequest<Full<Bytes>>>,
}

impl Connection {
    fn new(target: &HttpTarget) -> Self {
        Self { target: target.clone(), open: None }
    }

    /// Sends request `n` and reads the whole answer: its status, or `None` when connecting or the connection
    /// failed.
    async fn send(&mut self, n: u64) -> Option<u16> {
        if self.open.is_none() {
            self.open = self.connect().await;
        }
        let status = match self.open.as_mut() {
            Some(open) => Self::exchange(&self.target, open, n).await,
            None => None,
        };
        if status.is_none() {
            self.open = None;
        }
        status
    }

    async fn connect(&self) -> Option<http1::SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(self.target.addr).await.ok()?;
        stream.set_nodelay(true).ok()?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.ok()?;
        tokio::spawn(connection);
        Some(sender)
    }

    /// Sends request `n` on `open` and reads the whole answer; its status, or `None` when the connection failed.
    async fn exchange(target: &HttpTarget, open: &mut http1::SendRequest<Full<Bytes>>, n: u64) -> Option<u16> {
        open.ready().await.ok()?;
        let mut request = (target.build)(n);
        let host = target.addr.to_string().parse().expect("an address is a header value");
        request.headers_mut().insert(hyper::header::HOST, host);
        let response = open.send_request(request).await.ok()?;
        let status = response.status().as_u16();
        response.into_body().collect().await.ok()?;
        Some(status)
    }
}

/// What one loop measured.
pub struct Measured {
    /// Answers with the target's status, and their latencies (µs).
    pub served: Histogram<u64>,
    /// Answers with another status.
    pub refused: u64,
    /// Requests whose connection failed.
    pub failed: u64,
    /// Open loop only: requests still due when the loop gave up on its backlog (see [`open_loop`]).
    pub not_sent: u64,
    pub elapsed: Duration,
}

impl Measured {
    fn new() -> Self {
        Self {
            served: Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds"),
            refused: 0,
            failed: 0,
            not_sent: 0,
            elapsed: Duration::ZERO,
        }
    }

    fn add(&mut self, other: &Measured) {
        self.served.add(&other.served).expect("same bounds");
        self.refused += other.refused;
        self.failed += other.failed;
        self.not_sent += other.not_sent;
    }

    fn record(&mut self, status: Option<u16>, ok: u16, latency: Duration) {
        match status {
            Some(status) if status == ok => {
                self.served.saturating_record(latency.as_micros().try_into().unwrap_or(u64::MAX));
            }
            Some(_) => self.refused += 1,
            None => self.failed += 1,
        }
    }

    /// Served answers per second.
    pub fn rate(&self) -> f64 {
        self.served.len() as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The latency below which a share `quantile` (0.0 to 1.0) of the served answers came, in milliseconds.
    pub fn ms(&self, quantile: f64) -> f64 {
        self.served.value_at_quantile(quantile) as f64 / 1e3
    }

    /// Every request the loop started or was due to start.
    pub fn offered(&self) -> u64 {
        self.served.len() + self.refused + self.failed + self.not_sent
    }
}

/// Requests `0..count`, one after the other on one connection (a warm-up that must reach every key once).
pub async fn sequential(target: &HttpTarget, count: u64) -> Measured {
    let started = Instant::now();
    let mut measured = Measured::new();
    let mut connection = Connection::new(target);
    for n in 0..count {
        let sent = Instant::now();
        let status = connection.send(n).await;
        measured.record(status, target.ok, sent.elapsed());
    }
    measured.elapsed = started.elapsed();
    measured
}

/// `connections` closed loops for `duration`: each connection sends its next request when the last answered.
pub async fn closed_loop(target: &HttpTarget, connections: usize, duration: Duration) -> Measured {
    let started = Instant::now();
    let until = started + duration;
    let next = Arc::new(AtomicU64::new(0));
    let loops: Vec<_> = (0..connections)
        .map(|_| {
            let (mut connection, next, ok) = (Connection::new(target), next.clone(), target.ok);
            tokio::spawn(async move {
                let mut measured = Measured::new();
                while Instant::now() < until {
                    let sent = Instant::now();
                    let status = connection.send(next.fetch_add(1, Ordering::Relaxed)).await;
                    measured.record(status, ok, sent.elapsed());
                    if status.is_none() {
                        // A refused connection answers at once: no busy loop of failures.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                measured
            })
        })
        .collect();
    let mut total = Measured::new();
    for each in loops {
        total.add(&each.await.expect("a load loop does not panic"));
    }
    total.elapsed = started.elapsed();
    total
}

/// Requests scheduled at `rate` per second for `duration`, spread over `connections` keep-alive connections
/// (each connection's share at an even interval, the connections staggered): the `wrk2` model. A request is sent
/// when it is due and its connection is free, and measured from when it was due, so a connection that falls
/// behind measures its backlog. Every request due within `duration` is sent, until twice `duration` (plus 10 s)
/// has passed; those left then are counted as not sent.
pub async fn open_loop(target: &HttpTarget, rate: f64, connections: usize, duration: Duration) -> Measured {
    let started = Instant::now();
    let connections = connections.max(1);
    let interval = Duration::from_secs_f64(connections as f64 / rate);
    let per_connection = (rate * duration.as_secs_f64() / connections as f64).round() as u64;
    let give_up = started + duration * 2 + Duration::from_secs(10);
    let loops: Vec<_> = (0..connections)
        .map(|connection| {
            let (mut open, ok) = (Connection::new(target), target.ok);
            let first = started + interval.mul_f64(connection as f64 / connections as f64);
            tokio::spawn(async move {
                let mut measured = Measured::new();
                for k in 0..per_connection {
                    let due = first + interval.mul_f64(k as f64);
                    tokio::time::sleep_until(due.into()).await;
                    if Instant::now() > give_up {
                        measured.not_sent += per_connection - k;
                        break;
                    }
                    let status = open.send(k * connections as u64 + connection as u64).await;
                    measured.record(status, ok, due.elapsed());
                }
                measured
            })
        })
        .collect();
    let mut total = Measured::new();
    for each in loops {
        total.add(&each.await.expect("a load loop does not panic"));
    }
    total.elapsed = started.elapsed();
    total
}

/// The environment variable that fixes the capacity the open loops take their rates from (requests/s), so two
/// builds can be compared at the same arrival rates: each measures its own capacity, which varies from run to
/// run, and an open loop at 90% of a lucky capacity is an overload.
pub const FIXED_CAPACITY: &str = "FLOWHOST_LOAD_CAPACITY";

/// A server path's latency under load, printed as table rows and recorded in `report` as `name`'s figures: its
/// capacity from `connections` closed loops (after a one-second warm-up), then open loops over as many
/// connections at 50% and 90% of it (of [`FIXED_CAPACITY`] when that is set), p50 / p99 / p99.9 each. Returns
/// the capacity measured.
pub async fn under_load(
    report: &mut Report,
    name: &str,
    target: &HttpTarget,
    connections: usize,
    duration: Duration,
) -> f64 {
    closed_loop(target, connections, Duration::from_secs(1)).await;
    let closed = closed_loop(target, connections, duration).await;
    let capacity = closed.rate();
    println!(
        "| {name}: capacity, {connections} connections (closed loop) | {capacity:.0}/s | p50 {:.2} ms, p99 {:.2} ms | {} refused, {} failed |",
        closed.ms(0.5),
        closed.ms(0.99),
        closed.refused,
        closed.failed
    );
    report.higher(&format!("{name}: capacity, {connections} connections"), "/s", capacity);
    let fixed = std::env::var(FIXED_CAPACITY).ok().map(|value| {
        value
            .parse::<f64>()
            .ok()
            .filter(|rate| *rate > 0.0)
            .unwrap_or_else(|| panic!("{FIXED_CAPACITY} must be a rate in requests/s above 0, not {value:?}"))
    });
    if let Some(fixed) = fixed {
        println!("| {name}: open loops from {FIXED_CAPACITY} | {fixed:.0}/s | | |");
    }
    for share in [50u32, 90] {
        let rate = fixed.unwrap_or(capacity) * f64::from(share) / 100.0;
        let open = open_loop(target, rate, connections, duration).await;
        println!(
            "| {name}: open loop at {share}% ({rate:.0}/s) | {:.0}/s served | p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms | {} refused, {} failed, {} not sent |",
            open.rate(),
            open.ms(0.5),
            open.ms(0.99),
            open.ms(0.999),
            open.refused,
            open.failed,
            open.not_sent
        );
        for (label, quantile) in [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)] {
            report.lower(&format!("{name}: {label} at {share}% of capacity"), "ms", open.ms(quantile));
        }
    }
    capacity
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that answers 200 after `delay`, on every connection.
    async fn slow_server(delay: Duration) -> SocketAddr {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || async move {
                tokio::time::sleep(delay).await;
                "ok"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    #[tokio::test]
    async fn an_open_loop_keeps_its_rate_and_counts_the_wait_of_a_slow_server() {
        let addr = slow_server(Duration::from_millis(20)).await;
        let target = HttpTarget::get(addr, |_| "/".to_owned());
        // One connection serves 50/s at most; a closed loop sees every request take 20 ms.
        let closed = closed_loop(&target, 1, Duration::from_millis(500)).await;
        assert!(closed.rate() < 60.0, "{}", closed.rate());
        // 200/s offered over 4 connections (50/s each): each keeps up, so every request is served, each in about
        // the server's 20 ms.
        let open = open_loop(&target, 200.0, 4, Duration::from_millis(500)).await;
        assert_eq!((open.offered(), open.refused, open.failed, open.not_sent), (100, 0, 0, 0));
        assert!(open.ms(0.5) >= 19.0, "{}", open.ms(0.5));
    }

    #[tokio::test]
    async fn an_open_loop_counts_what_a_closed_loop_omits() {
        // A server slower than the offered rate on one connection at a time: the latency of the open loop
        // grows with the queue (measured from each request's scheduled start).
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gate = Arc::new(tokio::sync::Semaphore::new(1));
        let app = app.layer(axum::middleware::from_fn(move |request, next: axum::middleware::Next| {
            let gate = gate.clone();
            async move {
                let _one_at_a_time = gate.acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                next.run(request).await
            }
        }));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let target = HttpTarget::get(addr, |_| "/".to_owned());
        // 100 requests due within 0.5 s against 100/s of service: the last waits about 0.5 s.
        let open = open_loop(&target, 200.0, 4, Duration::from_millis(500)).await;
        assert_eq!(open.served.len(), 100);
        assert!(open.ms(0.99) > 300.0, "the queue's wait is counted: p99 {} ms", open.ms(0.99));
        let closed = closed_loop(&target, 1, Duration::from_millis(500)).await;
        assert!(closed.ms(0.99) < open.ms(0.99), "a closed loop never sees the queue: p99 {} ms", closed.ms(0.99));
    }
}
