// The browser kit's service worker (spec 000, "Browser-side rules"): show each push, report `displayed`,
// `clicked` (with `action_id` for an action button) and `closed` with keepalive; a cross-origin click target
// goes through the bridge's click handoff, which records the click and redirects.

const EVENTS = "/api/push/events";

async function currentEndpoint() {
  const subscription = await self.registration.pushManager.getSubscription();
  return subscription ? subscription.endpoint : null;
}

async function report(payload, eventType, actionId) {
  const body = {
    event_id: crypto.randomUUID(),
    delivery_id: payload.delivery_id,
    notification_id: payload.data && payload.data.notification_id,
    interaction_token: payload.interaction_token,
    event_type: eventType,
    endpoint: await currentEndpoint(),
    occurred_at: new Date().toISOString(),
    metadata: {},
  };
  if (actionId) body.action_id = actionId;
  // keepalive: the report survives the worker (or the page) going away.
  return fetch(EVENTS, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    keepalive: true,
  });
}

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  if (!event.data) return;
  const payload = event.data.json();
  if (payload.payload_version !== "v1") return;
  const options = {
    body: payload.body,
    icon: payload.icon,
    badge: payload.badge,
    image: payload.image,
    tag: payload.tag,
    requireInteraction: Boolean(payload.require_interaction),
    silent: Boolean(payload.silent),
    renotify: Boolean(payload.renotify && payload.tag),
    actions: (payload.actions || []).map((a) => ({ action: a.id, title: a.label, icon: a.icon })),
    data: payload,
  };
  event.waitUntil(
    self.registration.showNotification(payload.title, options).then(() => report(payload, "displayed")),
  );
});

self.addEventListener("notificationclick", (event) => {
  const payload = event.notification.data;
  event.notification.close();
  const action = (payload.actions || []).find((a) => a.id === event.action);
  const target = action ? action.target_url : payload.target_url;
  const sameOrigin = target && new URL(target, self.location.origin).origin === self.location.origin;
  if (!target) {
    event.waitUntil(report(payload, "clicked", action && action.id));
  } else if (sameOrigin) {
    event.waitUntil(Promise.all([report(payload, "clicked", action && action.id), self.clients.openWindow(target)]));
  } else {
    // Cross-origin: the bridge records the click (with the token) and answers 307 to the target.
    const handoff = new URL("/api/push/click", self.location.origin);
    handoff.searchParams.set("target", target);
    handoff.searchParams.set("delivery_id", payload.delivery_id);
    handoff.searchParams.set("notification_id", payload.data.notification_id);
    handoff.searchParams.set("interaction_token", payload.interaction_token);
    if (action) handoff.searchParams.set("action_id", action.id);
    event.waitUntil(self.clients.openWindow(handoff.toString()));
  }
});

self.addEventListener("notificationclose", (event) => {
  event.waitUntil(report(event.notification.data, "closed"));
});
