// The browser kit's bridge: the same-origin backend a casino site puts in front of Flowhost's notification
// service. It holds the push-platform caller token (never sent to the browser), resolves the player from the
// session, serves the page and the service worker, and forwards every call (spec 000, "Suggested bridge contract"
// and "Bridge rules"). Node.js only, no dependencies:
//
//   FLOWHOST_URL=http://127.0.0.1:8787 PUSH_PLATFORM_TOKEN=... SOURCE_APP=casino-web \
//   WEBPUSH_ALLOWED_TARGET_HOSTS=casino.example node bridge.mjs
//
// Settings (environment):
//   FLOWHOST_URL                   Flowhost's push API (default http://127.0.0.1:8787)
//   PUSH_PLATFORM_TOKEN            the caller token of the caller policy (required)
//   SOURCE_APP                     the X-Source-App value (default casino-web)
//   BRIDGE_PORT                    port on 127.0.0.1 (default 8790; 0 picks one, printed as "LISTENING <port>")
//   WEBPUSH_ALLOWED_TARGET_HOSTS   hosts the click handoff may redirect to, comma-separated; unset: none
//   DEMO_TENANT_ID, DEMO_PLAYER_ID the session this demo pretends to have (a real bridge reads its own session)
//
// Routes (browser-facing):
//   GET  /                         the page; GET /app.js; GET /sw.js (the service worker, scope /)
//   GET  /api/push/config          -> GET  /api/v1/webpush/client-config
//   POST /api/push/subscriptions   -> POST /api/v1/service/webpush/subscriptions (adds tenant_id, player_id)
//   POST /api/push/deactivate      -> POST /api/v1/service/webpush/subscriptions/deactivate (full tuple)
//   POST /api/push/events          -> POST /api/v1/service/webpush/events/browser (no session needed: the
//                                     interaction token identifies; CORS for the product's origins)
//   GET  /api/push/click           click handoff for cross-origin targets: records `clicked` server-side and
//                                   answers 307 to the target, only when its host is on the allowlist
//   POST /api/inapp/connect        -> POST /api/v1/service/inapp/connect-tokens; answers the websocket URL

import http from "node:http";
import { readFile } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const FLOWHOST_URL = (process.env.FLOWHOST_URL || "http://127.0.0.1:8787").replace(/\/$/, "");
const TOKEN = process.env.PUSH_PLATFORM_TOKEN;
const SOURCE_APP = process.env.SOURCE_APP || "casino-web";
const PORT = Number(process.env.BRIDGE_PORT ?? 8790);
const ALLOWED_TARGETS = (process.env.WEBPUSH_ALLOWED_TARGET_HOSTS || "")
  .split(",")
  .map((h) => h.trim().toLowerCase())
  .filter(Boolean);
const SESSION = { tenant_id: process.env.DEMO_TENANT_ID || "casino-1", player_id: Number(process.env.DEMO_PLAYER_ID || 42) };
const MAX_BODY = 64 * 1024;

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
  const cors = { "access-control-allow-origin": request.headers.origin || "*", vary: "origin" };
  if (request.method === "GET" && STATIC[url.pathname]) {
    const [file, type] = STATIC[url.pathname];
    const content = await readFile(join(here, "public", file));
    response.writeHead(200, { "content-type": type, "cache-control": "no-store", "service-worker-allowed": "/" });
    return response.end(content);
  }
  if (request.method === "OPTIONS" && url.pathname === "/api/push/events") {
    response.writeHead(204, { ...cors, "access-control-allow-methods": "POST", "access-control-allow-headers": "content-type" });
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
    return send(response, answer.status, answer.text, cors);
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
  if (request.method === "POST" && url.pathname === "/api/inapp/connect") {
    const answer = await forward("POST", "/api/v1/service/inapp/connect-tokens", player);
    if (answer.status !== 201) return send(response, answer.status, answer.text);
    const minted = JSON.parse(answer.text);
    const websocket = FLOWHOST_URL.replace(/^http/, "ws") + minted.websocket_path + "?token=" + encodeURIComponent(minted.token);
    // The token also refreshes an open websocket (a `refresh` frame) before its expiry.
    return send(response, 200, { websocket, token: minted.token, expires_at: minted.expires_at });
  }
  return send(response, 404, { error: { code: "NOT_FOUND", message: "no such route" } });
}

const server = http.createServer((request, response) => {
  route(request, response).catch((error) => {
    console.error(`bridge: ${request.method} ${request.url}: ${error.message}`);
    if (!response.headersSent) send(response, 502, { error: { code: "BRIDGE_ERROR", message: "the notification service did not answer" } });
  });
});
server.listen(PORT, "127.0.0.1", () => {
  console.log(`LISTENING ${server.address().port}`);
});
