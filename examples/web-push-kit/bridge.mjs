// The browser kit's bridge: the same-origin backend a casino site puts in front of Flowhost's notification
// service. It holds the push-platform caller token (never sent to the browser), resolves the player from the
// session, serves the page and the service worker, and forwards every call, the in-app websocket included: the
// browser talks only to the bridge (spec 000, "Suggested bridge contract" and "Bridge rules"). Node.js only, no
// dependencies:
//
//   FLOWHOST_URL=http://127.0.0.1:8787 PUSH_PLATFORM_TOKEN=... SOURCE_APP=casino-web \
//   WEBPUSH_ALLOWED_TARGET_HOSTS=casino.example ALLOWED_ORIGINS=https://casino.example node bridge.mjs
//
// Settings (environment):
//   FLOWHOST_URL                   Flowhost's push API, http or https (default http://127.0.0.1:8787)
//   PUSH_PLATFORM_TOKEN            the caller token of the caller policy (required)
//   SOURCE_APP                     the X-Source-App value (default casino-web)
//   BRIDGE_PORT                    port on 127.0.0.1 (default 8790; 0 picks one, printed as "LISTENING <port>")
//   WEBPUSH_ALLOWED_TARGET_HOSTS   hosts the click handoff may redirect to, comma-separated; unset: none
//   ALLOWED_ORIGINS                other origins that may call the browser-events route and open the in-app
//                                  socket, comma-separated exact origins (https://casino.example); unset: the
//                                  bridge's own origin only (no CORS headers at all)
//   DEMO_TENANT_ID, DEMO_PLAYER_ID the session this demo pretends to have (a real bridge reads its own session)
//
// Routes (browser-facing; "session" routes answer 401 without a signed-in player):
//   GET  /                         the page; GET /app.js; GET /sw.js (the service worker, scope /)
//   GET  /api/push/config          -> GET  /api/v1/webpush/client-config
//   POST /api/push/subscriptions   -> POST /api/v1/service/webpush/subscriptions (session: adds tenant_id,
//                                     player_id; only endpoint and keys come from the browser)
//   POST /api/push/deactivate      -> POST /api/v1/service/webpush/subscriptions/deactivate (session: full tuple)
//   POST /api/push/semantic        -> POST /api/v1/service/webpush/events/semantic (session: `opened` or `read`,
//                                     identity from the session)
//   POST /api/push/events          -> POST /api/v1/service/webpush/events/browser (no session needed: the
//                                     interaction token identifies); CORS only for ALLOWED_ORIGINS
//   OPTIONS /api/push/events       the CORS preflight: 204, with access-control-allow-origin only for
//                                   ALLOWED_ORIGINS (a foreign origin gets 204 without it, which the browser
//                                   treats as a refusal)
//   GET  /api/push/click           click handoff for cross-origin targets: records `clicked` server-side and
//                                   answers 307 to the target, only when its host is on the allowlist
//   GET  /api/inapp/socket[?after=<cursor>]
//                                  the in-app websocket (session; Origin the bridge's own or on ALLOWED_ORIGINS,
//                                  else 403): the bridge mints a connect token, opens the upgrade to Flowhost's
//                                  websocket path itself and pipes the bytes both ways
//   POST /api/inapp/connect        -> POST /api/v1/service/inapp/connect-tokens (session): `{token, expires_at}`,
//                                   the fresh token of the socket's `refresh` frame

import http from "node:http";
import net from "node:net";
import tls from "node:tls";
import { readFile } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const FLOWHOST_URL = (process.env.FLOWHOST_URL || "http://127.0.0.1:8787").replace(/\/$/, "");
const TOKEN = process.env.PUSH_PLATFORM_TOKEN;
const SOURCE_APP = process.env.SOURCE_APP || "casino-web";
const PORT = Number(process.env.BRIDGE_PORT ?? 8790);
const ALLOWED_TARGETS = list(process.env.WEBPUSH_ALLOWED_TARGET_HOSTS).map((h) => h.toLowerCase());
const ALLOWED_ORIGINS = list(process.env.ALLOWED_ORIGINS).map(origin);
const SESSION = { tenant_id: process.env.DEMO_TENANT_ID || "casino-1", player_id: Number(process.env.DEMO_PLAYER_ID || 42) };
const MAX_BODY = 64 * 1024;
// How long a proxied socket may take to flush and close once its other side is gone (or Flowhost refused it).
const CLOSE_GRACE_MS = 5000;

function list(value) {
  return (value || "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
}

/** An ALLOWED_ORIGINS entry as browsers serialize the Origin header (scheme://host[:port], no path). */
function origin(entry) {
  let url;
  try {
    url = new URL(entry);
  } catch {
    url = null;
  }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== entry.replace(/\/$/, "")) {
    console.error(`ALLOWED_ORIGINS: ${JSON.stringify(entry)} is not an origin (scheme://host[:port])`);
    process.exit(2);
  }
  return url.origin;
}

if (!TOKEN) {
  console.error("PUSH_PLATFORM_TOKEN is required (the caller token of Flowhost's caller policy)");
  process.exit(2);
}

/** The player of this request's session; a real bridge reads its own authenticated session here. */
function session(_request) {
  return Number.isInteger(SESSION.player_id) && SESSION.player_id > 0 ? SESSION : null;
}

async function forward(method, path, body) {
  const response = await fetch(FLOWHOST_URL + path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "x-source-app": SOURCE_APP, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, text };
}

function readBody(request) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    request.on("data", (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error("body too large"));
        request.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    request.on("end", () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {});
      } catch {
        reject(new Error("body is not JSON"));
      }
    });
    request.on("error", reject);
  });
}

function send(response, status, body, headers = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(text);
}

/**
 * The CORS headers for this request: only an Origin listed on ALLOWED_ORIGINS is echoed, never `*` (the
 * bridge's own pages need none; any other site is refused by the browser for want of the header).
 */
function corsHeaders(request) {
  const from = request.headers.origin;
  return from && ALLOWED_ORIGINS.includes(from) ? { "access-control-allow-origin": from, vary: "origin" } : {};
}

/** Whether the click handoff may redirect to `target`. */
function allowedTarget(target) {
  let url;
  try {
    url = new URL(target);
  } catch {
    return false;
  }
  if (url.protocol !== "https:") return false;
  const host = url.hostname.toLowerCase();
  return ALLOWED_TARGETS.some((allowed) =>
    allowed.startsWith("*.") ? host.endsWith(allowed.slice(1)) : host === allowed,
  );
}

const STATIC = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  "/sw.js": ["sw.js", "text/javascript; charset=utf-8"],
};

async function route(request, response) {
  const url = new URL(request.url, "http://bridge.invalid");
  if (request.method === "GET" && STATIC[url.pathname]) {
    const [file, type] = STATIC[url.pathname];
    const content = await readFile(join(here, "public", file));
    response.writeHead(200, { "content-type": type, "cache-control": "no-store", "service-worker-allowed": "/" });
    return response.end(content);
  }
  if (request.method === "OPTIONS" && url.pathname === "/api/push/events") {
    const cors = corsHeaders(request);
    const allow = cors["access-control-allow-origin"]
      ? { "access-control-allow-methods": "POST", "access-control-allow-headers": "content-type", "access-control-max-age": "600" }
      : {};
    response.writeHead(204, { ...cors, ...allow });
    return response.end();
  }
  if (request.method === "GET" && url.pathname === "/api/push/config") {
    const answer = await forward("GET", "/api/v1/webpush/client-config");
    return send(response, answer.status, answer.text);
  }
  if (request.method === "POST" && url.pathname === "/api/push/events") {
    // The service worker has no session: the interaction token in the body identifies the event.
    const body = await readBody(request);
    const answer = await forward("POST", "/api/v1/service/webpush/events/browser", body);
    return send(response, answer.status, answer.text, corsHeaders(request));
  }
  if (request.method === "GET" && url.pathname === "/api/push/click") {
    const target = url.searchParams.get("target") || "";
    if (!allowedTarget(target)) {
      return send(response, 400, { error: { code: "TARGET_NOT_ALLOWED", message: "this click target is not on WEBPUSH_ALLOWED_TARGET_HOSTS" } });
    }
    const event = {
      event_id: randomUUID(),
      delivery_id: url.searchParams.get("delivery_id"),
      notification_id: url.searchParams.get("notification_id"),
      interaction_token: url.searchParams.get("interaction_token"),
      event_type: "clicked",
      endpoint: url.searchParams.get("endpoint") || null,
      occurred_at: new Date().toISOString(),
      metadata: { handoff: true },
    };
    const actionId = url.searchParams.get("action_id");
    if (actionId) event.action_id = actionId;
    const answer = await forward("POST", "/api/v1/service/webpush/events/browser", event);
    if (answer.status !== 202) {
      return send(response, answer.status, answer.text);
    }
    response.writeHead(307, { location: target });
    return response.end();
  }
  const player = session(request);
  if (url.pathname.startsWith("/api/") && !player) {
    return send(response, 401, { error: { code: "UNAUTHORIZED", message: "sign in first" } });
  }
  if (request.method === "POST" && url.pathname === "/api/push/subscriptions") {
    // Only endpoint and keys come from the browser; the identity comes from the session.
    const body = await readBody(request);
    const subscription = {
      tenant_id: player.tenant_id,
      player_id: player.player_id,
      endpoint: body.endpoint,
      keys: body.keys,
      user_agent: request.headers["user-agent"],
      platform: "web",
    };
    const answer = await forward("POST", "/api/v1/service/webpush/subscriptions", subscription);
    return send(response, answer.status, answer.text);
  }
  if (request.method === "POST" && url.pathname === "/api/push/deactivate") {
    const body = await readBody(request);
    const tuple = { tenant_id: player.tenant_id, player_id: player.player_id, endpoint: body.endpoint };
    const answer = await forward("POST", "/api/v1/service/webpush/subscriptions/deactivate", tuple);
    return send(response, answer.status, answer.text);
  }
  if (request.method === "POST" && url.pathname === "/api/push/semantic") {
    // `opened` or `read`, seen by the product: the identity is the session's, whatever the body says.
    const body = await readBody(request);
    const event = {
      event_id: body.event_id || randomUUID(),
      delivery_id: body.delivery_id,
      notification_id: body.notification_id,
      event_type: body.event_type,
      tenant_id: player.tenant_id,
      player_id: player.player_id,
      occurred_at: body.occurred_at || new Date().toISOString(),
      metadata: body.metadata ?? {},
    };
    const answer = await forward("POST", "/api/v1/service/webpush/events/semantic", event);
    return send(response, answer.status, answer.text);
  }
  if (request.method === "POST" && url.pathname === "/api/inapp/connect") {
    // The fresh token of the socket's `refresh` frame; the socket itself is opened through the bridge.
    const answer = await forward("POST", "/api/v1/service/inapp/connect-tokens", player);
    if (answer.status !== 201) return send(response, answer.status, answer.text);
    const minted = JSON.parse(answer.text);
    return send(response, 200, { token: minted.token, expires_at: minted.expires_at });
  }
  return send(response, 404, { error: { code: "NOT_FOUND", message: "no such route" } });
}

/** Answers a refused upgrade with a plain HTTP response and closes the connection. */
function refuse(socket, status, code, message) {
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/**
 * Whether a websocket upgrade may come from this Origin: the bridge's own or one on ALLOWED_ORIGINS. CORS does
 * not apply to websockets and a browser may send the session's cookie on one another site opens, so without this
 * that site could read a signed-in player's messages. A request without Origin is no browser's.
 */
function allowedSocketOrigin(request) {
  const from = request.headers.origin;
  if (!from) return true;
  if (ALLOWED_ORIGINS.includes(from)) return true;
  try {
    return new URL(from).host === request.headers.host;
  } catch {
    return false;
  }
}

/** A connection to Flowhost's host and port (TLS for an https FLOWHOST_URL). */
function connectUpstream(target) {
  const host = target.hostname.replace(/^\[|\]$/g, "");
  const secure = target.protocol === "https:";
  const port = Number(target.port || (secure ? 443 : 80));
  return secure
    ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host })
    : net.connect({ host, port });
}

/**
 * `GET /api/inapp/socket`: Node has no websocket server, and needs none. After checking the session the bridge
 * mints the connect token itself (the browser never sees Flowhost nor the token), sends Flowhost the same
 * upgrade with the browser's handshake headers, and from then on copies bytes both ways: Flowhost's 101 answer
 * (computed from the browser's key) and every frame reach the browser unchanged.
 */
async function upgrade(request, socket, head) {
  const url = new URL(request.url, "http://bridge.invalid");
  if (request.method !== "GET" || url.pathname !== "/api/inapp/socket") {
    return refuse(socket, 404, "NOT_FOUND", "no such route");
  }
  if ((request.headers.upgrade || "").toLowerCase() !== "websocket") {
    return refuse(socket, 400, "BAD_REQUEST", "only websocket upgrades are served here");
  }
  if (!allowedSocketOrigin(request)) {
    return refuse(socket, 403, "FORBIDDEN", "this origin is not on ALLOWED_ORIGINS");
  }
  const player = session(request);
  if (!player) return refuse(socket, 401, "UNAUTHORIZED", "sign in first");
  const minted = await forward("POST", "/api/v1/service/inapp/connect-tokens", player);
  if (minted.status !== 201) {
    // The caller policy's answer is the bridge's problem, not the player's: no 401 that would read "sign in".
    console.error(`bridge: connect token: Flowhost answered ${minted.status}: ${minted.text}`);
    return refuse(socket, 502, "BRIDGE_ERROR", "the notification service refused a connect token");
  }
  if (socket.destroyed) return; // the browser went away meanwhile
  const { token, websocket_path: path } = JSON.parse(minted.text);
  const target = new URL(FLOWHOST_URL);
  let query = `?token=${encodeURIComponent(token)}`;
  const after = url.searchParams.get("after");
  if (after) query += `&after=${encodeURIComponent(after)}`;
  const lines = [`GET ${target.pathname.replace(/\/$/, "")}${path}${query} HTTP/1.1`, `host: ${target.host}`];
  for (const name of ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol"]) {
    if (request.headers[name] !== undefined) lines.push(`${name}: ${request.headers[name]}`);
  }

  const upstream = connectUpstream(target);
  upstream.setNoDelay(true);
  socket.setNoDelay(true);
  upstream.write(lines.join("\r\n") + "\r\n\r\n");
  if (head.length) upstream.write(head);

  // The first line of Flowhost's answer decides: 101 keeps both pipes; anything else is passed on as is and
  // the connection ends once it is through (Flowhost closes when the bridge finishes its side).
  let status = Buffer.alloc(0);
  const sniff = (chunk) => {
    status = Buffer.concat([status, chunk]);
    const end = status.indexOf("\r\n");
    if (end < 0 && status.length < 64) return;
    upstream.off("data", sniff);
    if (!/^HTTP\/1\.[01] 101 /.test(status.subarray(0, end < 0 ? status.length : end).toString("latin1"))) {
      socket.unpipe(upstream);
      upstream.end();
      setTimeout(() => {
        upstream.destroy();
        socket.destroy();
      }, CLOSE_GRACE_MS).unref();
    }
  };
  upstream.on("data", sniff);
  upstream.pipe(socket);
  socket.pipe(upstream);
  // Either side ending or failing ends the other: no half-open sockets are left behind.
  const closeOther = (other) => () => {
    other.end();
    setTimeout(() => other.destroy(), CLOSE_GRACE_MS).unref();
  };
  upstream.on("close", closeOther(socket));
  socket.on("close", closeOther(upstream));
  upstream.on("error", (error) => {
    if (status.length === 0 && !socket.destroyed) {
      console.error(`bridge: in-app socket: ${error.message}`);
      socket.unpipe(upstream);
      return refuse(socket, 502, "BRIDGE_ERROR", "the notification service did not answer");
    }
    socket.destroy();
  });
  socket.on("error", () => upstream.destroy());
}

const server = http.createServer((request, response) => {
  route(request, response).catch((error) => {
    console.error(`bridge: ${request.method} ${request.url}: ${error.message}`);
    if (!response.headersSent) send(response, 502, { error: { code: "BRIDGE_ERROR", message: "the notification service did not answer" } });
  });
});
server.on("upgrade", (request, socket, head) => {
  socket.on("error", () => socket.destroy());
  upgrade(request, socket, head).catch((error) => {
    console.error(`bridge: upgrade ${request.url}: ${error.message}`);
    if (!socket.destroyed) refuse(socket, 502, "BRIDGE_ERROR", "the notification service did not answer");
  });
});
server.listen(PORT, "127.0.0.1", () => {
  console.log(`LISTENING ${server.address().port}`);
});
