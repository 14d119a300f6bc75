// The browser client of the edge analytics gateway (spec 002 part A, request rule 7): posts one event to
// `POST /api/gateway/events` the only way the frontend may.
//
// - HTTPS only. `http:` is refused, unless the page opts into `allowLoopbackHttp` for development and the
//   gateway is on a loopback host (`localhost`, `127.0.0.1`, `[::1]`).
// - `credentials: "omit"` (the player bearer is the only credential; no cookie), `redirect: "error"` (the route
//   never redirects, so a redirect is an attack or a misconfiguration), `referrerPolicy: "no-referrer"`.
// - At most three attempts. A 429 or a 503 is retried after its `Retry-After` (or a short backoff when it has
//   none), a network failure after the backoff; nothing else is retried. A `Retry-After` longer than
//   `maxWaitMs` ends the attempts at once: retrying earlier than the gateway asked would only be refused again.
//
// No dependency, no build step: an ES module a page imports as it is.
//
//   import { createGatewayClient } from "./gateway-client.mjs";
//   const gateway = createGatewayClient({ url: "https://events.example.com", token: () => session.bearer });
//   const result = await gateway.send({ event_type: "player.casino-presence.v1", event_payload: {...} });
//   // result: { ok, status, attempts, eventId, retryAfterMs?, error? }

/** The spec's attempt budget for one event. */
export const MAX_ATTEMPTS = 3;

const ROUTE = "/api/gateway/events";
const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * The gateway's base URL as a `URL`, or an error saying why it may not be used.
 * @param {string} url the gateway's origin (a path, query or fragment is refused: the route is fixed)
 * @param {boolean} allowLoopbackHttp development only: allow `http:` to a loopback host
 */
export function gatewayBase(url, allowLoopbackHttp = false) {
  const base = new URL(url);
  const insecureAllowed = allowLoopbackHttp && base.protocol === "http:" && LOOPBACK_HOSTS.has(base.hostname);
  if (base.protocol !== "https:" && !insecureAllowed) {
    throw new TypeError(
      `the gateway must be reached over HTTPS (got ${base.protocol}//${base.host}); ` +
        "allowLoopbackHttp permits http:// to localhost, 127.0.0.1 or [::1] for development only",
    );
  }
  if ((base.pathname !== "/" && base.pathname !== "") || base.search || base.hash || base.username || base.password) {
    throw new TypeError("the gateway URL is an origin only (scheme, host and port)");
  }
  return base;
}

/**
 * Milliseconds a `Retry-After` value asks to wait (delta-seconds or an HTTP date), or null when absent or unusable.
 * @param {string | null} value
 * @param {number} now the current time in ms (Date.now())
 */
export function retryAfterMs(value, now = Date.now()) {
  if (value == null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/**
 * A client of one gateway.
 * @param {object} options
 * @param {string} options.url the gateway's HTTPS origin, e.g. "https://events.example.com"
 * @param {string | (() => string | Promise<string>)} options.token the player bearer (or a function giving the current one)
 * @param {boolean} [options.allowLoopbackHttp=false] development only: allow http:// to a loopback host
 * @param {number} [options.maxWaitMs=10000] the longest Retry-After honoured before giving up on the event
 * @param {number} [options.backoffMs=500] the first wait after a failure without Retry-After (doubled, with jitter)
 * @param {typeof fetch} [options.fetch] the fetch to use (the page's by default)
 * @param {(ms: number) => Promise<void>} [options.sleep] how to wait (a timer by default)
 */
export function createGatewayClient(options) {
  const base = gatewayBase(options.url, options.allowLoopbackHttp === true);
  const endpoint = new URL(ROUTE, base).toString();
  const maxWaitMs = options.maxWaitMs ?? 10_000;
  const backoffMs = options.backoffMs ?? 500;
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  const token = typeof options.token === "function" ? options.token : () => options.token;

  /**
   * Posts one event: `event_type` and `event_payload` are required; `event_id` (a UUID) and `occurred_at` are
   * filled in when absent, and the same `event_id` is sent on every attempt so the pipeline can deduplicate.
   */
  async function send(event) {
    const body = JSON.stringify({
      event_type: event.event_type,
      event_id: event.event_id ?? crypto.randomUUID(),
      occurred_at: event.occurred_at ?? new Date().toISOString(),
      event_payload: event.event_payload,
    });
    const eventId = JSON.parse(body).event_id;
    let result = { ok: false, status: 0, attempts: 0, eventId };
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      let wait;
      try {
        const response = await doFetch(endpoint, {
          method: "POST",
          body,
          headers: { "content-type": "application/json", authorization: `Bearer ${await token()}` },
          mode: "cors",
          credentials: "omit",
          redirect: "error",
          referrerPolicy: "no-referrer",
          cache: "no-store",
        });
        result = { ok: response.status === 202, status: response.status, attempts: attempt, eventId };
        if (response.status !== 429 && response.status !== 503) return result;
        const asked = retryAfterMs(response.headers.get("retry-after"));
        if (asked != null) {
          result.retryAfterMs = asked;
          if (asked > maxWaitMs) return result;
        }
        wait = asked ?? jittered(backoffMs * 2 ** (attempt - 1));
      } catch (error) {
        // A network failure, a CORS refusal or a redirect (redirect: "error"): fetch cannot tell them apart.
        result = { ok: false, status: 0, attempts: attempt, eventId, error: String(error) };
        wait = jittered(backoffMs * 2 ** (attempt - 1));
      }
      if (attempt < MAX_ATTEMPTS) await sleep(wait);
    }
    return result;
  }

  return { endpoint, send };
}

/** Between half and all of `ms`, so clients that failed together do not retry together. */
function jittered(ms) {
  return ms / 2 + Math.random() * (ms / 2);
}
