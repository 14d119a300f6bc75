// The browser kit in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; nothing is
// downloaded): the page loads from the bridge, registers the service worker and opens the in-app websocket on
// the bridge; "Enable notifications" is clicked (a real user gesture); real push payloads (encrypted by
// Flowhost, decrypted by the test's push service) are delivered to the service worker with the DevTools
// protocol (ServiceWorker.deliverPushMessage); the worker shows each and reports `displayed` through the
// bridge. Every request off loopback is refused.
//
//   node push_kit.mjs BRIDGE_URL INPUT_FILE ARTIFACTS_DIR
//
// INPUT_FILE: {"payloads": [<delivered payload>, ...], "subscription": {"endpoint", "keys"}}. Chromium's push
// service is Google's, out of reach here, so `pushManager.subscribe` is replaced in the page by a recorder that
// answers `subscription` (the one the test's push service issued): what is tested is what the page does around
// it, inside the gesture.
//
// Prints lines the Rust test waits for: READY (page up, worker active, socket connected), SOCKET {"page",
// "opened"} (the socket URL the page holds and every websocket it opened), SUBSCRIBED {"calls", "requests",
// "status"} (the subscribe calls, the requests the click made, the status line), PUSHED {"title", "tag",
// "icon", "badge", "image", "actions"} per payload (the notification the worker showed), INAPP <text> (an in-app
// message appeared in the page), DONE (the screenshot is written).

import { readFile } from "node:fs/promises";
import { launchChromium } from "./chromium.mjs";

const [bridge, inputFile, artifacts] = process.argv.slice(2);
const input = JSON.parse(await readFile(inputFile, "utf8"));

const browser = await launchChromium();
const context = await browser.newContext();
await context.grantPermissions(["notifications"], { origin: bridge });
await context.route("**/*", (route) => {
  const host = new URL(route.request().url()).hostname;
  return host === "127.0.0.1" || host === "localhost" ? route.continue() : route.abort();
});
await context.addInitScript((subscription) => {
  window.subscribeCalls = [];
  PushManager.prototype.subscribe = async function (options) {
    const key = btoa(String.fromCharCode(...new Uint8Array(options.applicationServerKey)));
    window.subscribeCalls.push({
      userVisibleOnly: options.userVisibleOnly,
      applicationServerKey: key.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
      userActivation: navigator.userActivation.isActive,
    });
    return { ...subscription, toJSON: () => subscription };
  };
}, input.subscription);

/**
 * The first truthy answer of `check(arg)` in the page, polled every 200 ms for 20 s (page.waitForFunction takes
 * the promise of an async predicate as its truthy answer, so it cannot wait on one).
 */
async function poll(check, arg, ms = 20000) {
  const until = Date.now() + ms;
  for (;;) {
    const answer = await page.evaluate(check, arg);
    if (answer) return answer;
    if (Date.now() > until) {
      const shown = await page.evaluate(async () => {
        const reg = await navigator.serviceWorker.ready;
        return (await reg.getNotifications()).map((n) => n.title);
      });
      throw new Error(`timed out waiting for ${arg}; shown: ${JSON.stringify(shown)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const page = await context.newPage();
page.on("console", (message) => console.error(`page: ${message.text()}`));
const requests = [];
page.on("request", (request) => requests.push(`${request.method()} ${new URL(request.url()).pathname}`));
const sockets = [];
page.on("websocket", (socket) => sockets.push(socket.url()));
await page.goto(bridge + "/");
await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
await page.waitForFunction(() => document.getElementById("inbox-status").textContent.startsWith("Connected"), null, { timeout: 20000 });

// The worker's registration, as DevTools sees it.
const cdp = await context.newCDPSession(page);
const registrations = new Promise((resolve) => {
  cdp.on("ServiceWorker.workerRegistrationUpdated", ({ registrations }) => {
    const ours = registrations.find((r) => r.scopeURL.startsWith(bridge) && !r.isDeleted);
    if (ours) resolve(ours);
  });
});
// A push is delivered only to an activated, running worker version of the registration.
const versions = [];
const activated = (registrationId) =>
  versions.some((v) => v.registrationId === registrationId && v.status === "activated" && v.runningStatus === "running");
cdp.on("ServiceWorker.workerVersionUpdated", ({ versions: updated }) => versions.push(...updated));
await cdp.send("ServiceWorker.enable");
const registration = await registrations;
for (const until = Date.now() + 20000; !activated(registration.registrationId); ) {
  if (Date.now() > until) throw new Error(`the worker never ran activated: ${JSON.stringify(versions)}`);
  await new Promise((resolve) => setTimeout(resolve, 50));
}
console.log("READY");
console.log(`SOCKET ${JSON.stringify({ page: await page.evaluate(() => window.inAppSocket.url), opened: sockets })}`);

// The gesture: config and worker are ready before the click, so the click reaches subscribe() directly.
await page.waitForSelector("#enable[data-ready='true']", { timeout: 20000 });
const before = requests.length;
await page.click("#enable");
await page.waitForFunction(() => document.getElementById("status").textContent !== "", null, { timeout: 20000 });
console.log(
  `SUBSCRIBED ${JSON.stringify({
    calls: await page.evaluate(() => window.subscribeCalls),
    requests: requests.slice(before).filter((r) => r.includes(" /api/push/")),
    status: await page.textContent("#status"),
  })}`,
);

// The worker shows a push: the notification is listed by its registration.
const showing = async (title) => {
  const reg = await navigator.serviceWorker.ready;
  const n = (await reg.getNotifications()).find((n) => n.title === title);
  return n && { title: n.title, tag: n.tag, icon: n.icon, badge: n.badge, image: n.image, actions: n.actions };
};
for (const payload of input.payloads) {
  // DevTools now and then drops a delivered message without dispatching it (about one run in eight here, the
  // worker running and activated): a push not shown within 5 s is delivered again, at most four times in all.
  let shown = null;
  for (let attempt = 1; !shown; attempt++) {
    await cdp.send("ServiceWorker.deliverPushMessage", {
      origin: new URL(bridge).origin,
      registrationId: registration.registrationId,
      data: JSON.stringify(payload),
    });
    try {
      shown = await poll(showing, payload.title, attempt < 4 ? 5000 : 20000);
    } catch (error) {
      if (attempt >= 4) throw error;
      console.error(`push ${payload.title} not shown after delivery ${attempt}; delivering it again`);
    }
  }
  console.log(`PUSHED ${JSON.stringify(shown)}`);
}

// An in-app message sent now appears in the page.
const item = await page.waitForSelector("#messages li", { timeout: 30000 });
console.log(`INAPP ${await item.textContent()}`);
await page.screenshot({ path: `${artifacts}/push-kit.png`, fullPage: true });
await browser.close();
console.log("DONE");
