// The page side of the browser kit (spec 000, "Browser-side rules"): subscribe inside a user gesture with
// userVisibleOnly and the service's public key, hand only endpoint and keys to the bridge, and keep an in-app
// websocket open (to the bridge, which forwards it) with resume after the last cursor.

const status = (text) => (document.getElementById("status").textContent = text);

/** The public key of client-config (base64url) as the bytes `applicationServerKey` takes. */
function decodeBase64Url(value) {
  const padded = value.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (value.length % 4)) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

function supported() {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

// Fetched and registered at load: the click handler must reach subscribe() with no network round trip before
// it, or the gesture's transient activation may have expired and the browser refuses the subscription.
const push = { key: null, registration: null, problem: null, preparing: null };

function prepare() {
  push.problem = null;
  push.preparing = load().finally(() => (push.preparing = null));
}

async function load() {
  try {
    const config = await (await fetch("/api/push/config")).json();
    if (!config.public_key) throw new Error("the notification service is not ready");
    push.key = decodeBase64Url(config.public_key);
    push.registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
    await navigator.serviceWorker.ready;
    document.getElementById("enable").dataset.ready = "true";
  } catch (error) {
    push.problem = error.message;
  }
}

/** The click handler: permission, then subscribe, before anything else is awaited. */
async function enable() {
  if (!push.key || !push.registration) {
    const problem = push.problem;
    // Not awaited: this click cannot subscribe any more, the next one can once the config is here.
    if (!push.preparing) prepare();
    return status(
      problem
        ? `Notifications are not available right now (${problem}).`
        : "Notifications are not ready yet; try again in a moment.",
    );
  }
  try {
    const permission = await Notification.requestPermission();
    if (permission !== "granted") return status("Notifications are blocked in this browser.");
    const subscription = await push.registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: push.key,
    });
    const { endpoint, keys } = subscription.toJSON();
    const answer = await fetch("/api/push/subscriptions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ endpoint, keys }),
    });
    if (!answer.ok) throw new Error(`the bridge answered ${answer.status}`);
    status("Notifications are on.");
    document.getElementById("disable").hidden = false;
  } catch (error) {
    status(`Could not turn notifications on: ${error.message}`);
  }
}

async function disable() {
  const reg = await navigator.serviceWorker.getRegistration("/");
  const subscription = await reg?.pushManager.getSubscription();
  if (!subscription) return status("Notifications are off.");
  await fetch("/api/push/deactivate", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ endpoint: subscription.endpoint }),
  });
  await subscription.unsubscribe();
  status("Notifications are off.");
}

// In-app messages: a websocket with heartbeats, read frames and resume after the last cursor.
const seen = new Set();
let lastCursor = null;
let retryDelay = 1000;

function show(message) {
  if (seen.has(message.notification_id)) return;
  seen.add(message.notification_id);
  lastCursor = message.cursor;
  const item = document.createElement("li");
  item.dataset.notificationId = message.notification_id;
  item.className = message.status === "unread" ? "unread" : "";
  item.textContent = `${message.content.title}: ${message.content.body}`;
  document.getElementById("messages").prepend(item);
}

/** The bridge's socket (the browser talks only to the bridge); it holds the session and mints the token. */
function socketUrl() {
  const url = new URL("/api/inapp/socket", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (lastCursor) url.searchParams.set("after", lastCursor);
  return url.toString();
}

function connect() {
  const inbox = document.getElementById("inbox-status");
  const socket = new WebSocket(socketUrl());
  socket.onmessage = (event) => {
    const frame = JSON.parse(event.data);
    if (frame.type === "hello") {
      retryDelay = 1000;
      inbox.textContent = `Connected; ${frame.unread} unread.`;
    } else if (frame.type === "message") {
      show(frame.message);
    } else if (frame.type === "ping") {
      socket.send(JSON.stringify({ type: "pong" }));
    } else if (frame.type === "expiring") {
      // Keep the connection: a fresh connect token of this player, sent before the old one expires.
      fetch("/api/inapp/connect", { method: "POST" })
        .then((answer) => answer.json())
        .then((fresh) => socket.send(JSON.stringify({ type: "refresh", token: fresh.token })))
        .catch(() => {}); // Past the expiry the server closes (4001) and the page reconnects below.
    }
  };
  // A refused upgrade (no session, too many sockets) closes too: retry with backoff, resuming after the cursor.
  socket.onclose = () => {
    inbox.textContent = "Reconnecting…";
    setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 30000);
  };
  window.inAppSocket = socket;
}

document.getElementById("support").textContent = supported()
  ? ""
  : "This browser cannot show notifications (on iOS, add the site to the Home Screen first).";
document.getElementById("enable").disabled = !supported();
document.getElementById("enable").addEventListener("click", enable);
document.getElementById("disable").addEventListener("click", disable);
if (supported()) prepare();
connect();
