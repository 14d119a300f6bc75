//! The listener plumbing over real sockets on 127.0.0.1: shared and separate sockets, `/health` and `/ready`
//! answering from the checks of the roles on each socket, the two health styles, the fallback, and the peer
//! address reaching handlers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use flowhost_role::{serve_listeners, Check, HealthStyle, Listener, ListenerSet};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

async fn free_addr() -> String {
    let socket = TcpListener::bind("127.0.0.1:0").await.unwrap();
    socket.local_addr().unwrap().to_string()
}

async fn get_text(url: String) -> (u16, String, Option<String>) {
    let response = reqwest::get(url).await.expect("request");
    let status = response.status().as_u16();
    let failing = response.headers().get("flowhost-failing-checks").map(|v| v.to_str().unwrap().to_owned());
    (status, response.text().await.unwrap(), failing)
}

async fn get_json(url: String) -> (u16, Value) {
    let (status, body, _) = get_text(url).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::String(body)))
}

fn flag_check(name: &'static str, flag: &Arc<AtomicBool>) -> Check {
    let flag = flag.clone();
    Check::sync(name, move || if flag.load(Ordering::SeqCst) { Ok(()) } else { Err(format!("{name} is down")) })
}

#[tokio::test]
async fn sockets_are_shared_by_address_and_probe_their_own_roles() {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let other_addr = free_addr().await;
    let alive = Arc::new(AtomicBool::new(true));
    let a_ready = Arc::new(AtomicBool::new(true));
    let b_ready = Arc::new(AtomicBool::new(true));
    let engine_ready = Arc::new(AtomicBool::new(true));

    let mut set = ListenerSet::default();
    let a = Router::new().route("/a", get(|| async { "a" }));
    let fallback_a = Router::new().fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "not found by a") });
    set.add_role(
        vec![Listener::new("a", main_addr.clone(), "A_ADDR", a.into()).with_fallback(fallback_a)],
        vec![flag_check("liveness", &alive)],
        vec![flag_check("a_ready", &a_ready)],
        vec![],
    );
    let b = Router::new().route("/b", get(|| async { "b" }));
    set.add_role(
        vec![Listener::new("b", main_addr.clone(), "B_ADDR", b.into())],
        vec![],
        vec![flag_check("b_ready", &b_ready)],
        vec!["B_ALLOWLIST"],
    );
    let c = Router::new().route("/c", get(|| async { "c" }));
    set.add_role(
        vec![Listener::new("c", other_addr.clone(), "C_ADDR", c.into()).with_health(HealthStyle::Text)],
        vec![],
        vec![],
        vec![],
    );
    // A role without a listener (the engine): its readiness applies to every socket.
    set.add_role(vec![], vec![], vec![flag_check("engine", &engine_ready)], vec![]);

    let shutdown = CancellationToken::new();
    let (bound, tasks) =
        serve_listeners(set, main, &main_addr, prometheus::Registry::new(), shutdown.clone()).await.unwrap();
    assert_eq!(bound.len(), 2);
    assert_eq!(bound[0].names, ["a", "b"]);
    assert_eq!(bound[1].names, ["c"]);
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
    let main_url = |path: &str| format!("http://{main_addr}{path}");
    let other_url = |path: &str| format!("http://{other_addr}{path}");

    // Routes of both roles on the main socket, one role's on the other; each socket's fallback.
    assert_eq!(get_text(main_url("/a")).await.1, "a");
    assert_eq!(get_text(main_url("/b")).await.1, "b");
    assert_eq!(get_text(main_url("/c")).await.0, 404);
    assert_eq!(get_text(main_url("/nope")).await, (404, "not found by a".to_owned(), None));
    assert_eq!(get_text(other_url("/c")).await.1, "c");
    assert_eq!(get_text(other_url("/a")).await.0, 404);
    // /metrics only on the main socket.
    assert_eq!(get_text(main_url("/metrics")).await.0, 200);
    assert_eq!(get_text(other_url("/metrics")).await.0, 404);

    assert_eq!(get_json(main_url("/health")).await, (200, json!({"status": "ok"})));
    // A role's warning (a setting worth a look) is listed on every JSON /ready, ready or not.
    assert_eq!(get_json(main_url("/ready")).await, (200, json!({"status": "ready", "warnings": ["B_ALLOWLIST"]})));
    assert_eq!(get_text(other_url("/health")).await, (200, "ok".to_owned(), None));
    assert_eq!(get_text(other_url("/ready")).await, (200, "ready".to_owned(), None));

    // b's readiness fails the main socket only; the engine's fails both.
    b_ready.store(false, Ordering::SeqCst);
    assert_eq!(
        get_json(main_url("/ready")).await,
        (503, json!({"status": "not_ready", "failing": ["b_ready"], "warnings": ["B_ALLOWLIST"]}))
    );
    assert_eq!(get_text(other_url("/ready")).await.0, 200);
    engine_ready.store(false, Ordering::SeqCst);
    assert_eq!(
        get_json(main_url("/ready")).await,
        (503, json!({"status": "not_ready", "failing": ["b_ready", "engine"], "warnings": ["B_ALLOWLIST"]}))
    );
    assert_eq!(get_text(other_url("/ready")).await, (503, "not ready".to_owned(), Some("engine".to_owned())));
    // Readiness never fails liveness.
    assert_eq!(get_json(main_url("/health")).await.0, 200);

    // A liveness failure fails /health (and /ready) everywhere.
    alive.store(false, Ordering::SeqCst);
    assert_eq!(get_json(main_url("/health")).await, (503, json!({"status": "unavailable", "failing": ["liveness"]})));
    assert_eq!(get_text(other_url("/health")).await, (503, "unavailable".to_owned(), Some("liveness".to_owned())));

    shutdown.cancel();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn handlers_see_the_peer_address() {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let router =
        Router::new().route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }));
    let mut set = ListenerSet::default();
    set.add_role(vec![Listener::new("peer", main_addr.clone(), "PEER_ADDR", router.into())], vec![], vec![], vec![]);
    let shutdown = CancellationToken::new();
    let (_, tasks) =
        serve_listeners(set, main, &main_addr, prometheus::Registry::new(), shutdown.clone()).await.unwrap();
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();

    let (status, body, _) = get_text(format!("http://{main_addr}/peer")).await;
    assert_eq!(status, 200);
    let peer: SocketAddr = body.parse().expect("a socket address");
    assert!(peer.ip().is_loopback(), "{peer}");
    assert_ne!(peer.port(), 0);

    shutdown.cancel();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_hung_check_fails_instead_of_hanging() {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let mut set = ListenerSet::default();
    set.add_role(vec![], vec![], vec![Check::new("hung", std::future::pending)], vec![]);
    let shutdown = CancellationToken::new();
    let (_, tasks) =
        serve_listeners(set, main, &main_addr, prometheus::Registry::new(), shutdown.clone()).await.unwrap();
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
    assert_eq!(
        get_json(format!("http://{main_addr}/ready")).await,
        (503, json!({"status": "not_ready", "failing": ["hung"]}))
    );
    shutdown.cancel();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_taken_address_names_its_setting() {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let mut set = ListenerSet::default();
    set.add_role(
        vec![Listener::new("x", taken_addr.clone(), "X_LISTEN", Router::new().into())],
        vec![],
        vec![],
        vec![],
    );
    let error = serve_listeners(set, main, &main_addr, prometheus::Registry::new(), CancellationToken::new())
        .await
        .err()
        .expect("the address is taken");
    let message = format!("{error:#}");
    assert!(message.contains(&taken_addr) && message.contains("X_LISTEN"), "{message}");
}

/// With `FLOWHOST_METRICS_TOKEN`, `/metrics` answers only the bearer, on the main socket and on a role's own
/// metrics listener alike; the probes and the roles' routes stay as they were.
#[tokio::test]
async fn the_metrics_token_guards_metrics_on_every_socket() {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let other_addr = free_addr().await;
    let registry = prometheus::Registry::new();
    let mut set = ListenerSet::default();
    let own_metrics = flowhost_role::metrics_router(registry.clone()).route("/c", get(|| async { "c" }));
    set.add_role(vec![Listener::new("c", other_addr.clone(), "C_ADDR", own_metrics)], vec![], vec![], vec![]);
    set.require_metrics_token(Some(&flowhost_core::config::Secret::new("scrape-token-0123")));
    let shutdown = CancellationToken::new();
    let (_bound, tasks) = serve_listeners(set, main, &main_addr, registry, shutdown.clone()).await.unwrap();
    let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();

    let client = reqwest::Client::new();
    for addr in [&main_addr, &other_addr] {
        let url = format!("http://{addr}/metrics");
        let response = client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 401, "{url} without the bearer");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        for wrong in ["Bearer scrape-token-012", "Bearer scrape-token-01234", "scrape-token-0123"] {
            let status = client.get(&url).header("authorization", wrong).send().await.unwrap().status();
            assert_eq!(status, 401, "{url} with {wrong:?}");
        }
        let status =
            client.get(&url).header("authorization", "Bearer scrape-token-0123").send().await.unwrap().status();
        assert_eq!(status, 200, "{url} with the bearer");
        assert_eq!(get_text(format!("http://{addr}/health")).await.0, 200);
    }
    assert_eq!(get_text(format!("http://{other_addr}/c")).await, (200, "c".to_owned(), None));
    shutdown.cancel();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
}

/// A burst of connections past the standard library's accept queue (128) completes its handshakes while nothing
/// accepts them yet: the queue is `LISTEN_BACKLOG` long (the kernel caps it at `net.core.somaxconn`, 4096 here).
/// With 128, the connections past it wait for the kernel's retransmission, a second or more.
#[tokio::test]
async fn a_burst_of_connections_waits_in_the_accept_queue_not_for_a_retransmission() {
    const BURST: usize = 400;
    let listener = flowhost_role::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut connects = tokio::task::JoinSet::new();
    for _ in 0..BURST {
        connects
            .spawn(tokio::time::timeout(std::time::Duration::from_millis(700), tokio::net::TcpStream::connect(addr)));
    }
    let mut connected = Vec::new();
    while let Some(result) = connects.join_next().await {
        connected.push(result.unwrap().expect("connected before the kernel's first retransmission").unwrap());
    }
    assert_eq!(connected.len(), BURST);
    // And they are served once accepted.
    let (accepted, _) = listener.accept().await.unwrap();
    drop(accepted);
}

/// Serves `POST /small`, which takes bodies of up to 1 KiB, and `POST /refused`, which refuses every request
/// without reading its body; answers the address and the serving tasks.
async fn serve_small_bodies() -> (String, CancellationToken, Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) {
    let main = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let main_addr = main.local_addr().unwrap().to_string();
    let router = Router::new()
        .route("/small", axum::routing::post(|body: axum::body::Bytes| async move { body.len().to_string() }))
        .layer(axum::extract::DefaultBodyLimit::max(1024))
        .route("/refused", axum::routing::post(|| async { (axum::http::StatusCode::BAD_REQUEST, "refused") }));
    let mut set = ListenerSet::default();
    set.add_role(vec![Listener::new("small", main_addr.clone(), "SMALL_ADDR", router.into())], vec![], vec![], vec![]);
    let shutdown = CancellationToken::new();
    let (_, tasks) =
        serve_listeners(set, main, &main_addr, prometheus::Registry::new(), shutdown.clone()).await.unwrap();
    (main_addr, shutdown, tasks.into_iter().map(tokio::spawn).collect())
}

/// Writes `head` and then `body` on a new connection, as most clients do (the whole body before reading), and
/// answers everything the server sent until it closed.
async fn exchange(addr: &str, head: String, body: &[u8]) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// A body refused for its size is read to its end before the refusal is sent, so a client that writes its
/// whole body first reads the 413 rather than a broken pipe or a reset (the server closing over unread data
/// resets the connection); the refusal says `Connection: close`. Several rounds: the reset was a race.
#[tokio::test]
async fn a_refused_body_is_read_so_its_client_sees_the_refusal() {
    let (addr, shutdown, handles) = serve_small_bodies().await;
    let body = vec![b'x'; 6 * 1024 * 1024];
    for round in 0..5 {
        let head = format!("POST /small HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n\r\n", body.len());
        let answer = exchange(&addr, head, &body).await.unwrap_or_else(|error| panic!("round {round}: {error}"));
        assert!(answer.starts_with("HTTP/1.1 413"), "round {round}: {answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "round {round}: {answer}");
    }
    // A chunked body is read to its end the same way.
    let mut chunked = Vec::new();
    for _ in 0..64 {
        chunked.extend_from_slice(format!("{:x}\r\n", 64 * 1024).as_bytes());
        chunked.extend_from_slice(&[b'y'; 64 * 1024]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let head = format!("POST /small HTTP/1.1\r\nhost: {addr}\r\ntransfer-encoding: chunked\r\n\r\n");
    let answer = exchange(&addr, head, &chunked).await.expect("the refusal, not a reset");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A body the route takes is unaffected.
    let head = format!("POST /small HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 5\r\nconnection: close\r\n\r\n");
    let answer = exchange(&addr, head, b"hello").await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("\r\n\r\n5"), "{answer}");
    stop(shutdown, handles).await;
}

/// Writes `head` and `sent` (not the whole body it declares) on a new connection and answers the first bytes the
/// server sends within a second: an answer that did not wait for the rest of the body.
async fn answer_without_the_body(addr: &str, head: String, sent: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(sent).await.unwrap();
    let mut answer = vec![0u8; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(1), stream.read(&mut answer))
        .await
        .expect("answered without the rest of the body")
        .unwrap();
    String::from_utf8_lossy(&answer[..read]).into_owned()
}

async fn stop(shutdown: CancellationToken, handles: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>) {
    shutdown.cancel();
    for handle in handles {
        handle.await.unwrap().unwrap();
    }
}

/// A client that asked `Expect: 100-continue` waits for the answer before sending its body: a refusal that did
/// not read the body comes at once, without the `100 Continue` that would invite the refused body.
#[tokio::test]
async fn a_refusal_does_not_invite_a_body_the_client_has_held_back() {
    let (addr, shutdown, handles) = serve_small_bodies().await;
    let head =
        format!("POST /refused HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 4096\r\nexpect: 100-continue\r\n\r\n");
    let answer = answer_without_the_body(&addr, head, b"").await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    stop(shutdown, handles).await;
}

/// Past the bound of what a refusal reads, the rest stays unread and the connection closes at once: a refusal
/// costs no more than a body the route takes.
#[tokio::test]
async fn a_refused_body_past_the_bound_is_left_unread() {
    let (addr, shutdown, handles) = serve_small_bodies().await;
    // The route refuses the body once it has read past its limit of 1 KiB.
    let head = format!("POST /small HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\n\r\n", 64u64 << 30);
    let answer = answer_without_the_body(&addr, head, &[b'z'; 2048]).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    stop(shutdown, handles).await;
}
