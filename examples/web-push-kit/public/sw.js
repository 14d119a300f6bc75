// The browser kit's service worker (spec 000, "Browser-side rules"): show each push, report `displayed`,
// `clicked` (with `action_id` for an action button) and `closed` with keepalive; a cross-origin click target
// goes through the bridge's click handoff, which records the click and redirects.

const EVENTS = "/api/push/events";

async function currentEndpoint() {
  const subscription = await self.registration.pushManager.getSubscription();
  return subscription ? subscription.endpoint : null;
}

/** A payload field worth passing on: absent, null and empty are left out (an empty URL would load the worker). */
function present(value) {
  return value !== undefined && value !== null && value !== "";
}

/** `data.notification_id`, when the payload has `data` at all. */
function notificationId(payload) {
  return payload.data ? payload.data.notification_id : undefined;
}

async function report(payload, eventType, actionId) {
  const body = {
    event_id: crypto.randomUUID(),
    delivery_id: payload.delivery_id,
    notification_id: notificationId(payload),
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

/**
 * The options of showNotification: only the fields the payload has. `renotify` needs a non-empty `tag` (the
 * browser throws otherwise), and an action without an icon is passed without one.
 */
function notificationOptions(payload) {
  const options = {
    body: payload.body,
    requireInteraction: Boolean(payload.require_interaction),
    silent: Boolean(payload.silent),
    data: payload,
  };
  for (const field of ["icon", "badge", "image", "tag"]) {
    if (present(payload[field])) options[field] = payload[field];
  }
  if (present(payload.tag) && payload.renotify) options.renotify = true;
  if (Array.isArray(payload.actions) && payload.actions.length > 0) {
    options.actions = payload.actions.map((a) => {
      const action = { action: a.id, title: a.label };
      if (present(a.icon)) action.icon = a.icon;
      return action;
    });
  }
  return options;
}

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  if (!event.data) return;
  const payload = event.data.json();
  if (payload.payload_version !== "v1") return;
  const options = notificationOptions(payload);
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
    if (present(notificationId(payload))) handoff.searchParams.set("notification_id", notificationId(payload));
    handoff.searchParams.set("interaction_token", payload.interaction_token);
    if (action) handoff.searchParams.set("action_id", action.id);
    event.waitUntil(self.clients.openWindow(handoff.toString()));
  }
});

self.addEventListener("notificationclose", (event) => {
  event.waitUntil(report(event.notification.data, "closed"));
});
