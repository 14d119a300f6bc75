//! The sender's delivery figures on this machine:
//!
//! 1. **Pushes per second**: the push client alone (RFC 8291 encryption with a fresh ephemeral key per message,
//!    the VAPID header from the per-origin cache, the HTTPS POST over pooled connections) against a local HTTPS
//!    push service written here in Rust (hyper + rustls, answering 201 without decrypting, so the service is not
//!    the bottleneck; its certificate comes from `tests/scripts/push_service.py`), 256 in flight, each push on
//!    a task of its own as the pushes of concurrent steps run. Its anchor, built with `--features anchors` (as
//!    `tests/bench.sh` does): the same pushes through the `web-push` crate's own send.
//! 2. **Fan-out latency**: `send_webpush` through the host's sender (render, resolve the recipient's 5 active
//!    subscriptions, 5 concurrent pushes, the notification record written) for players one after another and
//!    64 at a time: p50 / p99 per notification.
//! 3. **In-app messages per second to 10k websockets**: a whole Flowhost (embedded backends) with 10,000 players
//!    connected (the clients run in a child process, each process has its own descriptor limit), 20,000
//!    `send_inapp` (inbox write, the hand-over request on the player's subject, the socket's queue, the activity
//!    record; each must report `delivered`: an open socket took it), from the first send until the
//!    clients received every message.
//!
//!     cargo run --release -p flowhost-tests --features anchors --bin sender-throughput [-- PUSHES]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::config::Secret;
use flowhost_core::notify::{InAppOutcome, InAppRequest, Notifications, WebPushRequest};
use flowhost_core::SystemClock;
use flowhost_notifications::push::{PushClient, PushMessage, PushServiceHosts, Urgency, VapidSigner};
use flowhost_notifications::sender::{Sender, SenderSettings};
use flowhost_notifications::targets::TargetPolicy;
use flowhost_notifications::vapid::{generate, VapidKeys};
use flowhost_notifications::Channel;
use flowhost_tests::push::{editor, platform, subscription, INTERACTION_SECRET, OPS_TOKEN, TENANT_A};
use flowhost_tests::push_service::{PushService, PushSubscription};
use flowhost_tests::{Backends, TestHost};
use futures::StreamExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const WEBSOCKETS: usize = 10_000;
const INAPP_MESSAGES: usize = 20_000;
/// In-app sends in flight at once.
const INAPP_IN_FLIGHT: usize = 64;
/// Pushes in flight at once.
const PUSHES_IN_FLIGHT: usize = 256;
const SUBSCRIPTIONS_PER_PLAYER: usize = 5;

/// A local HTTPS push service answering every POST with 201, on the certificate `push_service.py` made.
async fn sink(certificates: &std::path::Path) -> (String, Arc<AtomicU64>) {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(certificates.join("server.pem"))
        .expect("server.pem")
        .collect::<Result<_, _>>()
        .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(certificates.join("server-key.pem")).expect("server-key.pem");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (acceptor, counter) = (acceptor.clone(), counter.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let counter = counter.clone();
                    async move {
                        use http_body_util::BodyExt;
                        let _ = request.into_body().collect().await;
                        counter.fetch_add(1, Ordering::Relaxed);
                        let mut response = hyper::Response::new(http_body_util::Empty::<bytes::Bytes>::new());
                        *response.status_mut() = hyper::StatusCode::CREATED;
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(tls);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    (url, received)
}

fn client(ca: &std::path::Path) -> (PushClient, VapidKeys) {
    let (public, private) = generate().unwrap();
    let keys = VapidKeys { public_key: public, private_key: Secret::new(private), temporary: false };
    let signer = VapidSigner::new(&keys, "mailto:bench@casino.example", Arc::new(SystemClock)).unwrap();
    let hosts = PushServiceHosts::parse("127.0.0.1").unwrap();
    (PushClient::new(Arc::new(signer), hosts, Some(ca)).unwrap(), keys)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// RFC 8291 encryption of one payload, on one core: the part of a push no connection reuse can save.
fn encryption_alone(keys: &PushSubscription, report: &mut Report) {
    let p256dh = flowhost_notifications::vapid::decode_base64url(&keys.p256dh).unwrap();
    let auth = flowhost_notifications::vapid::decode_base64url(&keys.auth).unwrap();
    let payload = vec![b'x'; 600];
    let count = 20_000;
    let started = Instant::now();
    for _ in 0..count {
        flowhost_notifications::push::ece::encrypt(&payload, &p256dh, &auth).unwrap();
    }
    let each = started.elapsed() / count;
    println!(
        "| RFC 8291 encryption of a 600-byte payload, one core | {count} | {:.1} µs each | {:.0}/s per core |",
        each.as_secs_f64() * 1e6,
        1.0 / each.as_secs_f64()
    );
    report.lower("RFC 8291 encryption of a 600-byte payload", "µs", each.as_secs_f64() * 1e6);
}

/// The payload of every push: about the size the sender's rendered notifications have.
fn push_payload() -> String {
    json!({"payload_version": "v1", "delivery_id": "d", "title": "Bonus", "body": "50 free spins",
        "interaction_token": "v1.".to_owned() + &"x".repeat(220), "data": {"notification_id": "n"}})
    .to_string()
}

/// Records its figure in `report` when given one (not for the warm-up).
async fn pushes_per_second(
    pushes: usize,
    url: &str,
    received: &AtomicU64,
    client: &PushClient,
    keys: &PushSubscription,
    report: Option<&mut Report>,
) {
    let payload = push_payload();
    let endpoint = format!("{url}/push/bench");
    // Each push on a task of its own, as the sender's deliveries of concurrent steps run; pushes driven from one
    // task (`for_each_concurrent`) encrypted one at a time on that task's thread and left a core idle.
    let shared = Arc::new((client.clone(), keys.clone(), endpoint, payload));
    let pushing = in_flight(pushes, PUSHES_IN_FLIGHT, move |_| {
        let shared = shared.clone();
        async move {
            let (client, keys, endpoint, payload) = &*shared;
            let message = PushMessage {
                endpoint,
                p256dh: &keys.p256dh,
                auth: &keys.auth,
                payload: payload.as_bytes(),
                ttl_seconds: 3600,
                urgency: Urgency::Normal,
                topic: None,
            };
            let outcome = client.send(&message).await;
            assert_eq!(outcome.as_str(), "delivered", "{outcome:?}");
        }
    });
    let rate =
        timed_pushes("pushes (encrypt + cached VAPID + HTTPS POST, 256 in flight)", pushes, received, pushing).await;
    if let Some(report) = report {
        report.higher(PUSHES_FIGURE, "/s", rate).target(20_000.0);
    }
}

const PUSHES_FIGURE: &str = "web pushes/s, 256 in flight";

/// The anchor of the pushes/s figure: the same pushes (payload, subscription, push service, 256 in flight, a task
/// each) through the `web-push` crate's own send, as its users call it: one VAPID key parsed once, a JWT signed
/// and a message encrypted per push, its hyper 0.14 client (native-tls) over pooled connections. Returns the
/// pushes per second.
#[cfg(feature = "anchors")]
async fn web_push_crate_alone(
    pushes: usize,
    url: &str,
    received: &AtomicU64,
    ca: &std::path::Path,
    keys: &PushSubscription,
) -> f64 {
    use tokio_native_tls::native_tls;
    use web_push::{
        ContentEncoding, HyperWebPushClient, SubscriptionInfo, VapidSignatureBuilder, WebPushClient,
        WebPushMessageBuilder,
    };
    let pem = std::fs::read(ca).expect("the push service's CA");
    let tls = native_tls::TlsConnector::builder()
        .add_root_certificate(native_tls::Certificate::from_pem(&pem).expect("a PEM certificate"))
        .build()
        .expect("a TLS connector");
    let mut http = hyper014::client::HttpConnector::new();
    http.enforce_http(false);
    let https = hyper_tls::HttpsConnector::from((http, tokio_native_tls::TlsConnector::from(tls)));
    let client = HyperWebPushClient::from(hyper014::Client::builder().build(https));
    let (_, private) = generate().unwrap();
    let signer = VapidSignatureBuilder::from_base64_no_sub(&private).expect("a VAPID key");
    let subscription = SubscriptionInfo::new(format!("{url}/push/bench"), keys.p256dh.clone(), keys.auth.clone());
    let payload = push_payload();
    let shared = Arc::new((client, signer, subscription, payload));
    let push = move |count: usize| {
        let shared = shared.clone();
        in_flight(count, PUSHES_IN_FLIGHT, move |_| {
            let shared = shared.clone();
            async move {
                let (client, signer, subscription, payload) = &*shared;
                let mut signature = signer.clone().add_sub_info(subscription);
                signature.add_claim("sub", "mailto:bench@casino.example");
                let mut message = WebPushMessageBuilder::new(subscription);
                message.set_payload(ContentEncoding::Aes128Gcm, payload.as_bytes());
                message.set_vapid_signature(signature.build().expect("a VAPID signature"));
                message.set_ttl(3600);
                client.send(message.build().expect("a message")).await.expect("delivered");
            }
        })
    };
    // Warm its connection pool as the sender's was.
    push(2_000).await;
    let what = "anchor: the `web-push` crate's send (encrypt + VAPID JWT per push + HTTPS POST, 256 in flight)";
    timed_pushes(what, pushes, received, push(pushes)).await
}

/// Runs `pushing` (`pushes` pushes), checks that the push service received every one, prints the table row
/// `what` and returns the pushes per second.
async fn timed_pushes(
    what: &str,
    pushes: usize,
    received: &AtomicU64,
    pushing: impl std::future::Future<Output = ()>,
) -> f64 {
    let started = Instant::now();
    let before = received.load(Ordering::Relaxed);
    pushing.await;
    let elapsed = started.elapsed();
    assert_eq!(received.load(Ordering::Relaxed) - before, pushes as u64);
    let rate = pushes as f64 / elapsed.as_secs_f64();
    println!(
        "| {what} | {pushes} | {rate:.0}/s | {:.1} µs CPU-time share per push |",
        elapsed.as_micros() as f64 * 2.0 / pushes as f64
    );
    rate
}

async fn fan_out(host: &TestHost, sender: &Sender, url: &str, keys: &PushSubscription, report: &mut Report) {
    let players = 400;
    for player in 1..=players {
        for n in 0..SUBSCRIPTIONS_PER_PLAYER {
            let mut body = subscription(TENANT_A, player, &format!("{url}/push/p{player}-{n}"));
            body["keys"] = json!({"p256dh": keys.p256dh, "auth": keys.auth});
            let (status, _) =
                platform(host, OPS_TOKEN, "POST", "/api/v1/service/webpush/subscriptions", Some(body)).await;
            assert_eq!(status, 201);
        }
    }
    let request = |player: i64, key: String| WebPushRequest {
        tenant_id: TENANT_A.into(),
        player_id: player,
        template_id: 1,
        language_enabled_id: "en".into(),
        placeholders: vec![("game".into(), "slots".into())],
        idempotency_key: key,
        run_id: None,
        data: None,
    };
    for (label, concurrency) in [("one at a time", 1), ("64 at a time", 64)] {
        let latencies = futures::stream::iter(1..=players)
            .map(|player| {
                let request = request(player, format!("{label}-{player}"));
                async move {
                    let started = Instant::now();
                    let report = sender.send_webpush(request).await.expect("send");
                    assert_eq!(report.deliveries.len(), SUBSCRIPTIONS_PER_PLAYER);
                    started.elapsed()
                }
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await;
        let mut sorted = latencies;
        sorted.sort();
        let total: Duration = sorted.iter().sum();
        let p50 = percentile(&sorted, 0.5).as_secs_f64() * 1000.0;
        let p99 = percentile(&sorted, 0.99).as_secs_f64() * 1000.0;
        let rate = players as f64 / (total.as_secs_f64() / concurrency as f64);
        println!(
            "| send_webpush to a player with {SUBSCRIPTIONS_PER_PLAYER} subscriptions, {label} | {players} | p50 {p50:.1} ms, p99 {p99:.1} ms | {rate:.0} notifications/s |"
        );
        let figure = format!("send_webpush to {SUBSCRIPTIONS_PER_PLAYER} subscriptions, {label}");
        report.lower(&format!("{figure}: p50"), "ms", p50);
        report.lower(&format!("{figure}: p99"), "ms", p99);
        report.higher(&format!("{figure}: notifications/s"), "/s", rate);
    }
}

/// The child process: connects `count` players to `ws_url`, prints `CONNECTED`, then prints the Unix time in
/// milliseconds at which `expected` messages had arrived.
async fn websocket_clients(ws_url: String, count: usize, expected: usize) {
    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let connected = Arc::new(AtomicU64::new(0));
    let all_connected = Arc::new(tokio::sync::Notify::new());
    for player in 1..=count {
        let expires_at_ms = flowhost_core::Clock::now_ms(&SystemClock) + 600_000;
        let claims = flowhost_notifications::token::ConnectClaims::new(TENANT_A.into(), player as i64, expires_at_ms);
        let token = flowhost_notifications::token::mint_connect(INTERACTION_SECRET.as_bytes(), &claims);
        let url = format!("{ws_url}?token={token}");
        let (received, done, connected, all_connected) =
            (received.clone(), done.clone(), connected.clone(), all_connected.clone());
        tokio::spawn(async move {
            // A browser's small read buffer, not tungstenite's 128 KiB, which it zeroes before every read: the
            // clients share the cores with the server, and 10,000 of them would measure that instead.
            let config = WebSocketConfig::default().read_buffer_size(4096);
            let (mut stream, _) =
                tokio_tungstenite::connect_async_with_config(url, Some(config), false).await.expect("connect");
            let _hello = stream.next().await;
            if connected.fetch_add(1, Ordering::Relaxed) + 1 == count as u64 {
                all_connected.notify_one();
            }
            while let Some(Ok(message)) = stream.next().await {
                if message.to_text().is_ok_and(|t| t.contains("\"type\":\"message\""))
                    && received.fetch_add(1, Ordering::Relaxed) + 1 == expected as u64
                {
                    done.notify_one();
                }
            }
        });
        if player % 500 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    all_connected.notified().await;
    println!("CONNECTED");
    done.notified().await;
    println!("DONE {}", flowhost_core::Clock::now_ms(&SystemClock));
}

/// The child process of `websocket_clients`, connected: `count` sockets to `ws_url`.
struct Clients {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// How long the sockets took to connect.
    connect_time: Duration,
}

impl Clients {
    async fn connect(ws_url: &str, count: usize, expected: usize) -> Clients {
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args(["--websocket-clients", ws_url, &count.to_string(), &expected.to_string()])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("client process");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
        let connecting = Instant::now();
        assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("CONNECTED"));
        Clients { child, lines, connect_time: connecting.elapsed() }
    }

    /// Waits until every expected message arrived; answers when (Unix milliseconds), and ends the clients.
    async fn received_all(mut self) -> i64 {
        let done = self.lines.next_line().await.unwrap().unwrap();
        let _ = self.child.kill().await;
        done.strip_prefix("DONE ").unwrap().parse().unwrap()
    }
}

/// Runs `send(n)` for every n below `count` on `tasks` tasks of the runtime's workers, each taking the next n
/// until none is left (as the engine's flow steps and the push API's handlers run).
async fn in_flight<F, Fut>(count: usize, tasks: usize, send: F)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..tasks)
        .map(|_| {
            let (send, next) = (send.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                    if n >= count {
                        break;
                    }
                    send(n).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a sending task panicked");
    }
}

async fn inapp_fan_out(host: &TestHost, sender: &Arc<Sender>, report: &mut Report) {
    let (status, created) = editor(
        host,
        Some(TENANT_A),
        "POST",
        "/api/v1/templates/in-app",
        Some(json!({"name": "Bonus", "contents": {"en": {"title": "Bonus", "body": "A bonus for you"}}})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let ws_url = format!("{}/api/v1/inapp/ws", host.base_url.replacen("http", "ws", 1));
    let resident_before = resident_kib();
    let clients = Clients::connect(&ws_url, WEBSOCKETS, INAPP_MESSAGES).await;
    // What the server holds per open websocket (this process runs the push API; the clients run in the child).
    let per_socket_kib = resident_kib().saturating_sub(resident_before) as f64 / WEBSOCKETS as f64;
    let connect_time = clients.connect_time;
    let started_ms = flowhost_core::Clock::now_ms(&SystemClock);
    let sender = sender.clone();
    in_flight(INAPP_MESSAGES, INAPP_IN_FLIGHT, move |n| {
        let sender = sender.clone();
        async move {
            let request = InAppRequest {
                tenant_id: TENANT_A.into(),
                player_id: (n % WEBSOCKETS) as i64 + 1,
                template_id: 1,
                language_id: None,
                placeholders: vec![],
                vertical: Some("casino".into()),
                category: None,
                subcategory: None,
                idempotency_key: format!("bench-{n}"),
                run_id: None,
            };
            let report = sender.send_inapp(request).await.expect("send_inapp");
            assert_eq!(report.outcome, InAppOutcome::Delivered, "every player has an open socket");
        }
    })
    .await;
    let sent_ms = flowhost_core::Clock::now_ms(&SystemClock);
    let done_ms = clients.received_all().await;
    let rate = INAPP_MESSAGES as f64 / ((done_ms - started_ms) as f64 / 1000.0);
    println!(
        "| in-app messages to {WEBSOCKETS} connected websockets (inbox + hand-over + socket + activity) | {INAPP_MESSAGES} | {rate:.0} messages/s delivered | sent in {:.1} s, the last received {:+} ms from the last send's answer; {WEBSOCKETS} sockets connected in {:.1} s, {per_socket_kib:.0} KiB resident per socket |",
        (sent_ms - started_ms) as f64 / 1000.0,
        done_ms - sent_ms,
        connect_time.as_secs_f64()
    );
    let figure = format!("in-app messages/s to {WEBSOCKETS} websockets");
    report.higher(&figure, "/s", rate).target(20_000.0);
    report.lower("in-app: last received after the last send's answer", "ms", (done_ms - sent_ms) as f64);
    report.lower(&format!("in-app: {WEBSOCKETS} websockets connected"), "s", connect_time.as_secs_f64());
    report.lower("in-app: server memory per open websocket", "KiB", per_socket_kib);

    let anchor = frames_alone().await;
    println!(
        "| anchor: axum websockets alone, a frame of the same size written to each socket | {INAPP_MESSAGES} | {anchor:.0} messages/s delivered | no store, no hand-over; the same client process and sockets |"
    );
    report.anchor(&figure, "axum websockets alone", anchor);
}

/// The anchor of the in-app figure: a plain axum websocket server in this process whose sockets write the frames
/// they are given, to the same client process, from the same number of tasks. It is the floor of delivering
/// frames to 10,000 sockets on this stack and these cores: no store, no hand-over, no rendering.
async fn frames_alone() -> f64 {
    use axum::extract::ws::{Message, Utf8Bytes, WebSocketUpgrade};
    use futures::SinkExt;
    type Sockets = Arc<std::sync::Mutex<Vec<tokio::sync::mpsc::Sender<Utf8Bytes>>>>;
    let sockets: Sockets = Arc::default();
    let route = {
        let sockets = sockets.clone();
        axum::routing::get(move |upgrade: WebSocketUpgrade| async move {
            // The product's read buffer.
            upgrade.read_buffer_size(flowhost_push_api::inapp::READ_BUFFER).on_upgrade(move |socket| async move {
                let (sender, mut queue) = tokio::sync::mpsc::channel::<Utf8Bytes>(256);
                sockets.lock().unwrap().push(sender);
                let (mut sink, mut incoming) = socket.split();
                if sink.send(Message::Text(r#"{"type":"hello"}"#.into())).await.is_err() {
                    return;
                }
                loop {
                    tokio::select! {
                        frame = queue.recv() => {
                            let Some(frame) = frame else { return };
                            if sink.send(Message::Text(frame)).await.is_err() {
                                return;
                            }
                        }
                        incoming = incoming.next() => if !matches!(incoming, Some(Ok(_))) { return },
                    }
                }
            })
        })
    };
    let listener = flowhost_role::bind("127.0.0.1:0").await.expect("a loopback port");
    let ws_url = format!("ws://{}/ws", listener.local_addr().expect("bound"));
    let server = tokio::spawn(async move {
        axum::serve(listener, axum::Router::new().route("/ws", route)).await.expect("the websocket server runs")
    });
    let clients = Clients::connect(&ws_url, WEBSOCKETS, INAPP_MESSAGES).await;
    let started_ms = flowhost_core::Clock::now_ms(&SystemClock);
    let sockets: Arc<Vec<_>> = Arc::new(std::mem::take(&mut *sockets.lock().unwrap()));
    assert_eq!(sockets.len(), WEBSOCKETS);
    in_flight(INAPP_MESSAGES, INAPP_IN_FLIGHT, move |n| {
        let sockets = sockets.clone();
        async move {
            // The size of the product's frame of the benchmark's message (about 400 bytes).
            let frame = format!(
                r#"{{"type":"message","message":{{"notification_id":"{n:064x}","cursor":"000001764496800000-{n:064x}","template_id":1,"language_id":"en","content":{{"title":"Bonus","body":"A bonus for you","actions":[],"data":{{"notification_id":"{n:064x}"}}}},"vertical":"casino","category":null,"subcategory":null,"status":"unread","read_at":null,"created_at":"2026-11-30T10:00:00.000Z"}}}}"#
            );
            sockets[n % WEBSOCKETS].send(frame.into()).await.expect("the socket is open");
        }
    })
    .await;
    let done_ms = clients.received_all().await;
    server.abort();
    INAPP_MESSAGES as f64 / ((done_ms - started_ms) as f64 / 1000.0)
}

/// This process's resident memory (`VmRSS`), in KiB; 0 where `/proc` does not say.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find_map(|line| line.strip_prefix("VmRSS:")).unwrap_or("0 kB");
    line.trim().trim_end_matches("kB").trim().parse().unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--websocket-clients") {
        websocket_clients(args[1].clone(), args[2].parse().unwrap(), args[3].parse().unwrap()).await;
        return;
    }
    let pushes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(50_000);
    let mut report = Report::new("sender-throughput");
    let certificates = PushService::start().await;
    let keys = certificates.subscribe(&[201], None).await;
    let (url, received) = sink(certificates.ca_path.parent().unwrap()).await;
    let (client, vapid) = client(&certificates.ca_path);

    println!("Sender delivery, {} cores", std::thread::available_parallelism().map_or(0, |n| n.get()));
    println!();
    println!("| What | Count | Figure | Note |");
    println!("|---|---|---|---|");
    encryption_alone(&keys, &mut report);
    // Warm the connection pool and the VAPID cache.
    pushes_per_second(2_000, &url, &received, &client, &keys, None).await;
    pushes_per_second(pushes, &url, &received, &client, &keys, Some(&mut report)).await;
    #[cfg(feature = "anchors")]
    {
        let anchor = web_push_crate_alone(pushes, &url, &received, &certificates.ca_path, &keys).await;
        report.anchor(PUSHES_FIGURE, "web-push crate", anchor);
    }
    #[cfg(not(feature = "anchors"))]
    println!("| anchor: the `web-push` crate's send | | not built | run with `--features anchors` |");

    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    config.roles = vec!["admin".to_owned(), "push-api".to_owned()];
    config.section_mut::<flowhost_push_api::PushConfig>().max_inapp_connections = WEBSOCKETS + 100;
    let host = TestHost::start_with(config).await;
    let (status, _) = editor(
        &host,
        Some(TENANT_A),
        "POST",
        "/api/v1/templates/web-push",
        Some(
            json!({"name": "Bonus", "placeholders": [{"name": "game"}], "target_url": "https://casino.example/{{game}}",
                    "contents": {"en": {"title": "Bonus", "body": "Try {{game}}"}}}),
        ),
    )
    .await;
    assert_eq!(status, 201);
    let settings = SenderSettings {
        channels: vec![Channel::WebPush, Channel::InApp],
        dry_run: false,
        retention: Duration::from_secs(30 * 24 * 3600),
        targets: TargetPolicy::new(&["casino.example".to_owned()]),
        token_secret: Secret::new(INTERACTION_SECRET),
        ttl_seconds: 3600,
        max_concurrent_pushes: 256,
        tenants: vec![],
        tenant_languages: Default::default(),
    };
    let _ = vapid;
    let sender = Arc::new(Sender::new(host.ports.clone(), settings, client.clone()).await.unwrap());
    fan_out(&host, &sender, &url, &keys, &mut report).await;
    inapp_fan_out(&host, &sender, &mut report).await;
    host.stop().await;
}
