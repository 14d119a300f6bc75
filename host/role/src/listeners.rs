//! The process's HTTP sockets: roles' [`Listener`]s grouped by address (equal addresses share one socket), each
//! socket given `/health` and `/ready`, the main socket also `/metrics`, all served with the peer address
//! available to handlers (`ConnectInfo<SocketAddr>`), until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use prometheus::{Encoder, TextEncoder};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use utoipa::openapi::OpenApi;

use flowhost_core::config::Secret;
use flowhost_core::digest::TokenDigest;

use crate::check::{failing, Check};
use crate::openapi::{routes, ApiRouter};

/// How `/health` and `/ready` answer on a socket. The flow runtime and the push service answer JSON
/// (`{ "status": "ok" }`); the presence projector and the campaign API answer plain text (`ok`, `ready`,
/// `not ready`), as their specification says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HealthStyle {
    #[default]
    Json,
    Text,
}

/// An HTTP listener a role asks for.
pub struct Listener {
    /// Short name for logs and the listener table of docs/operations.md (`admin`, `push`, `gateway-edge`, ...).
    pub name: &'static str,
    /// The address to bind, as configured (or the default). Listeners with equal addresses share a socket.
    pub addr: String,
    /// The settings that set `addr`, for error messages (`"FLOWHOST_API_HOST / API_PORT"`).
    pub settings: &'static str,
    /// The role's routes, state applied, without `/health`, `/ready` or a fallback.
    pub router: Router,
    /// The OpenAPI document of `router` (the same list of handlers made both).
    pub openapi: OpenApi,
    /// Answers requests no route of the socket matched (the role's 404 in its own error envelope). The first
    /// listener of a socket that has one provides it.
    pub fallback: Option<Router>,
    pub health: HealthStyle,
    /// This listener's own readiness checks, instead of its role's (a role whose sockets serve different parts,
    /// such as the gateway's edge and ingest listeners).
    pub readiness: Option<Vec<Check>>,
    /// Wraps the socket's whole router, probes and fallback included (a layer every response of the socket
    /// must pass, such as the campaign API's `X-Request-Id`). The first listener of a socket that has one
    /// provides it.
    pub wrap: Option<fn(Router) -> Router>,
    /// Whether the socket answers `/ready` for this listener (default). A listener without readiness (the
    /// gateway worker's metrics listener: spec 002 gives the worker no HTTP readiness) leaves `/ready` out of
    /// its socket unless another listener of the socket asks for it; `/health` stays.
    pub ready_route: bool,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("name", &self.name).field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Listener {
    /// A listener serving `routes`, which documents what it routes (see [`crate::openapi`]).
    pub fn new(name: &'static str, addr: impl Into<String>, settings: &'static str, routes: ApiRouter) -> Listener {
        let (router, openapi) = routes.split_for_parts();
        Listener {
            name,
            addr: addr.into(),
            settings,
            router,
            openapi,
            fallback: None,
            health: HealthStyle::Json,
            readiness: None,
            wrap: None,
            ready_route: true,
        }
    }

    /// Serves no `/ready` for this listener (see [`Listener::ready_route`]).
    pub fn without_readiness(mut self) -> Listener {
        self.ready_route = false;
        self
    }

    /// Wraps the whole socket's router (see [`Listener::wrap`]).
    pub fn with_wrap(mut self, wrap: fn(Router) -> Router) -> Listener {
        self.wrap = Some(wrap);
        self
    }

    /// Sets the handler of unmatched requests (a router whose own fallback answers them).
    pub fn with_fallback(mut self, fallback: Router) -> Listener {
        self.fallback = Some(fallback);
        self
    }

    pub fn with_health(mut self, health: HealthStyle) -> Listener {
        self.health = health;
        self
    }

    /// Gives this listener its own readiness checks instead of its role's.
    pub fn with_readiness(mut self, checks: Vec<Check>) -> Listener {
        self.readiness = Some(checks);
        self
    }
}

/// Everything the roles contributed, ready to bind: listeners with the readiness checks of their role, the
/// process-wide liveness checks, and the readiness checks of roles without a listener (they apply everywhere).
#[derive(Debug, Default)]
pub struct ListenerSet {
    listeners: Vec<(Listener, Vec<Check>)>,
    liveness: Vec<Check>,
    everywhere: Vec<Check>,
    /// Checks of the main socket only (the process's remote backends, see `add_main_readiness`).
    main: Vec<Check>,
    /// Whether some role has readiness to answer: a listener serving `/ready`, or a role without listeners.
    /// When none has (a process running only the gateway worker), the main socket serves no `/ready` either.
    any_readiness: bool,
    warnings: Vec<&'static str>,
    metrics_token: Option<TokenDigest>,
}

impl ListenerSet {
    /// `/metrics` on every socket then requires `Authorization: Bearer <token>` (`FLOWHOST_METRICS_TOKEN`);
    /// anything else answers 401.
    pub fn require_metrics_token(&mut self, token: Option<&Secret>) {
        self.metrics_token = token.map(TokenDigest::new);
    }

    /// Readiness checks `/ready` of the main socket runs (the flow runtime's address), beside its roles' own:
    /// the process's remote backends, named after each, so a probe says which dependency does not answer.
    pub fn add_main_readiness(&mut self, checks: Vec<Check>) {
        self.main.extend(checks);
    }

    /// Adds one role's contribution.
    pub fn add_role(
        &mut self,
        listeners: Vec<Listener>,
        liveness: Vec<Check>,
        readiness: Vec<Check>,
        warnings: Vec<&'static str>,
    ) {
        self.liveness.extend(liveness);
        for warning in warnings {
            if !self.warnings.contains(&warning) {
                self.warnings.push(warning);
            }
        }
        if listeners.is_empty() {
            self.any_readiness = true;
            self.everywhere.extend(readiness);
            return;
        }
        self.any_readiness |= listeners.iter().any(|listener| listener.ready_route);
        for mut listener in listeners {
            let checks = listener.readiness.take().unwrap_or_else(|| readiness.clone());
            self.listeners.push((listener, checks));
        }
    }
}

/// One bound socket: its address and the names of the listeners it serves.
#[derive(Debug, Clone)]
pub struct BoundListener {
    pub addr: SocketAddr,
    pub names: Vec<&'static str>,
}

struct Probes {
    liveness: Vec<Check>,
    readiness: Vec<Check>,
    health: HealthStyle,
    /// Settings an operator should look at, process-wide (see `RoleParts::warnings`).
    warnings: Arc<Vec<&'static str>>,
}

struct Socket {
    addr: String,
    settings: &'static str,
    names: Vec<&'static str>,
    router: Option<Router>,
    documents: Vec<OpenApi>,
    fallback: Option<Router>,
    wrap: Option<fn(Router) -> Router>,
    readiness: Vec<Check>,
    health: HealthStyle,
    /// Whether `/ready` is served: on the main socket unless no role has readiness, elsewhere when a listener of
    /// the socket asks for it.
    ready_route: bool,
}

/// The accept queue's length asked of the kernel, which caps it at `net.core.somaxconn` (4096 on current Linux).
/// The standard library's and mio's 128 overflows when a burst of clients connects while the workers are busy:
/// the kernel then drops their handshakes, and each of those clients waits for a retransmission, a second or more
/// (measured: the p99 of a thousand connections opened within 60 ms at twice the gateway's capacity was 1.0-1.3 s,
/// for an axum echo handler as much as for the gateway).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds a listening socket on `addr` (`host:port`; the first of its addresses that binds) with an accept queue
/// of [`LISTEN_BACKLOG`], reusing the address as the standard library does not (a restarted process rebinds at
/// once).
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(addr).await? {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the address resolves to no socket address")
    }))
}

/// Binds every socket of `set` and serves them until `shutdown`. `main` is the already-bound socket of the
/// main address (`main_addr`, the flow runtime's `api.host:api.port`): listeners configured to that address
/// use it, and it serves `/health`, `/ready` and `/metrics` even when no role has routes there. Returns the
/// bound sockets and the serving futures (one per socket).
pub async fn serve_listeners(
    set: ListenerSet,
    main: TcpListener,
    main_addr: &str,
    registry: prometheus::Registry,
    shutdown: CancellationToken,
) -> anyhow::Result<(Vec<BoundListener>, Vec<crate::Task>)> {
    let ListenerSet { listeners, liveness, everywhere, main: main_checks, any_readiness, warnings, metrics_token } =
        set;
    for warning in &warnings {
        warn!(setting = warning, "a setting is worth a look (listed under warnings on /ready)");
    }
    let warnings = Arc::new(warnings);
    let mut sockets: Vec<Socket> = vec![Socket {
        addr: main_addr.to_owned(),
        settings: "FLOWHOST_API_HOST / API_PORT",
        names: Vec::new(),
        router: None,
        documents: Vec::new(),
        fallback: None,
        wrap: None,
        readiness: main_checks,
        health: HealthStyle::Json,
        ready_route: any_readiness,
    }];
    for (listener, readiness) in listeners {
        let index = match sockets.iter().position(|socket| socket.addr == listener.addr) {
            Some(index) => index,
            None => {
                sockets.push(Socket {
                    addr: listener.addr.clone(),
                    settings: listener.settings,
                    names: Vec::new(),
                    router: None,
                    documents: Vec::new(),
                    fallback: None,
                    wrap: None,
                    readiness: Vec::new(),
                    health: listener.health,
                    ready_route: false,
                });
                sockets.len() - 1
            }
        };
        let socket = &mut sockets[index];
        if socket.names.contains(&listener.name) {
            // The same listener asked for twice (two roles of one family in one process, such as
            // `gateway-edge,gateway-worker` both serving the gateway's metrics): served once.
            continue;
        }
        if socket.names.is_empty() {
            socket.health = listener.health;
            socket.settings = listener.settings;
        }
        socket.names.push(listener.name);
        socket.ready_route |= listener.ready_route;
        socket.documents.push(listener.openapi);
        socket.router = Some(match socket.router.take() {
            Some(router) => router.merge(listener.router),
            None => listener.router,
        });
        if socket.fallback.is_none() {
            socket.fallback = listener.fallback;
        }
        if socket.wrap.is_none() {
            socket.wrap = listener.wrap;
        }
        for check in readiness {
            if !socket.readiness.iter().any(|known| known.name() == check.name()) {
                socket.readiness.push(check);
            }
        }
    }

    let mut main = Some(main);
    let mut bound = Vec::new();
    let mut tasks: Vec<crate::Task> = Vec::new();
    for (index, socket) in sockets.into_iter().enumerate() {
        let tcp = match main.take().filter(|_| index == 0) {
            Some(tcp) => tcp,
            None => bind(&socket.addr)
                .await
                .with_context(|| format!("cannot listen on {} ({})", socket.addr, socket.settings))?,
        };
        let addr = tcp.local_addr()?;
        let mut readiness = socket.readiness;
        readiness.extend(everywhere.iter().cloned());
        let probes = Arc::new(Probes {
            liveness: liveness.clone(),
            readiness,
            health: socket.health,
            warnings: warnings.clone(),
        });
        let mut probe_routes = ApiRouter::new().routes(routes!(health));
        if socket.ready_route {
            probe_routes = probe_routes.routes(routes!(ready));
        }
        let mut probe_routes = probe_routes.with_state(probes);
        if index == 0 {
            probe_routes = probe_routes.merge(metrics_router(registry.clone()));
        }
        let (mut router, probes_document) = probe_routes.split_for_parts();
        let mut documents = socket.documents;
        documents.push(probes_document);
        let document: Arc<str> = serde_json::to_string(&crate::openapi::socket_document(&socket.names, documents))
            .context("serializing the OpenAPI document")?
            .into();
        let (document_route, _) =
            ApiRouter::new().routes(routes!(openapi_document)).with_state(document).split_for_parts();
        router = router.merge(document_route);
        if let Some(routes) = socket.router {
            router = router.merge(routes);
        }
        if let Some(fallback) = socket.fallback {
            router = router.fallback_service(fallback);
        }
        if let Some(wrap) = socket.wrap {
            router = wrap(router);
        }
        if let Some(token) = metrics_token {
            router = router.layer(axum::middleware::from_fn_with_state(token, guard_metrics));
        }
        let router = router
            .layer(axum::middleware::from_fn(crate::refused_body::close_after_refused_body))
            .layer(axum::Extension(LocalAddr(addr)));
        info!(%addr, listeners = ?socket.names, "listening");
        bound.push(BoundListener { addr, names: socket.names });
        let token = shutdown.clone();
        tasks.push(Box::pin(async move {
            axum::serve(tcp, router.into_make_service_with_connect_info::<SocketAddr>())
                .with_graceful_shutdown(token.cancelled_owned())
                .await
                .with_context(|| format!("serving {addr}"))
        }));
    }
    Ok((bound, tasks))
}

/// `/metrics` with the metrics token only (whichever role's router serves it on this socket).
async fn guard_metrics(
    State(token): State<TokenDigest>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
    if request.uri().path() == "/metrics" && !token.matches_bearer(authorization) {
        return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "metrics need the bearer token\n")
            .into_response();
    }
    next.run(request).await
}

/// The address of the socket a request came in on (a request extension on every listener): the port a
/// client had to name to reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr(pub SocketAddr);

/// Liveness: 200 while the process's liveness checks pass, else 503 naming the failing ones.
///
/// The flow runtime and the push service answer JSON (`{"status": "ok"}`); the presence projector and the
/// campaign API answer plain text (`ok`), as their specifications say.
#[utoipa::path(get, path = "/health", tag = "probes", responses(
    (status = 200, description = "Alive", content((Value = "application/json"), (String = "text/plain"))),
    (status = 503, description = "A liveness check fails", content((Value = "application/json"), (String = "text/plain"))),
))]
async fn health(State(probes): State<Arc<Probes>>) -> Response {
    let failing = failing(&probes.liveness, "health").await;
    match (probes.health, failing.is_empty()) {
        (HealthStyle::Json, true) => Json(json!({ "status": "ok" })).into_response(),
        (HealthStyle::Json, false) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "status": "unavailable", "failing": failing })))
                .into_response()
        }
        (HealthStyle::Text, true) => "ok".into_response(),
        (HealthStyle::Text, false) => {
            (StatusCode::SERVICE_UNAVAILABLE, failing_header(&failing), "unavailable").into_response()
        }
    }
}

/// Readiness: 200 while the checks of the roles on this socket pass, else 503 naming the failing ones; settings
/// worth a look are listed under `warnings`.
#[utoipa::path(get, path = "/ready", tag = "probes", responses(
    (status = 200, description = "Ready", content((Value = "application/json"), (String = "text/plain"))),
    (status = 503, description = "A readiness check fails", content((Value = "application/json"), (String = "text/plain"))),
))]
async fn ready(State(probes): State<Arc<Probes>>) -> Response {
    let mut failing = failing(&probes.liveness, "ready").await;
    for name in self::failing(&probes.readiness, "ready").await {
        if !failing.contains(&name) {
            failing.push(name);
        }
    }
    let with_warnings = |mut body: Value| {
        if !probes.warnings.is_empty() {
            body["warnings"] = json!(*probes.warnings);
        }
        Json(body)
    };
    match (probes.health, failing.is_empty()) {
        (HealthStyle::Json, true) => with_warnings(json!({ "status": "ready" })).into_response(),
        (HealthStyle::Json, false) => {
            (StatusCode::SERVICE_UNAVAILABLE, with_warnings(json!({ "status": "not_ready", "failing": failing })))
                .into_response()
        }
        (HealthStyle::Text, true) => "ready".into_response(),
        (HealthStyle::Text, false) => {
            (StatusCode::SERVICE_UNAVAILABLE, failing_header(&failing), "not ready").into_response()
        }
    }
}

/// Plain-text probes keep the body the specification gives (`not ready`) and name the failing checks in a
/// header.
fn failing_header(failing: &[&'static str]) -> [(&'static str, String); 1] {
    [("flowhost-failing-checks", failing.join(","))]
}

/// `GET /metrics` over `registry`, for a role that serves metrics on a listener of its own as well.
pub fn metrics_router<S: Clone + Send + Sync + 'static>(registry: prometheus::Registry) -> ApiRouter<S> {
    ApiRouter::new().routes(routes!(metrics)).with_state(registry)
}

/// The Prometheus text exposition of the process's metrics (with `FLOWHOST_METRICS_TOKEN` set, only for
/// `Authorization: Bearer <token>`; anything else answers 401).
#[utoipa::path(get, path = "/metrics", tag = "probes", responses(
    (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
    (status = 401, description = "The metrics token is required", body = String, content_type = "text/plain"),
))]
async fn metrics(State(registry): State<prometheus::Registry>) -> Response {
    metrics_response(&registry)
}

/// This socket's OpenAPI 3.1 document: every route it serves, generated from the handlers.
#[utoipa::path(get, path = "/openapi.json", tag = "probes", responses(
    (status = 200, description = "The OpenAPI 3.1 document of this socket", body = Value),
))]
async fn openapi_document(State(document): State<Arc<str>>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document.to_string()).into_response()
}

/// The Prometheus text exposition of `registry`, as a response.
pub fn metrics_response(registry: &prometheus::Registry) -> Response {
    let mut body = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&registry.gather(), &mut body) {
        warn!(%error, "metrics encoding failed");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}
