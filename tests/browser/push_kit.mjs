// The browser kit in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; nothing is
// downloaded): the page loads from the bridge, registers the service worker, connects the in-app websocket;
// a real push payload (encrypted by Flowhost, decrypted by the test's push service) is delivered to the service
// worker with the DevTools protocol (ServiceWorker.deliverPushMessage); the worker shows it and reports
// `displayed` through the bridge. Every request off loopback is refused.
//
//   node push_kit.mjs BRIDGE_URL PAYLOAD_FILE ARTIFACTS_DIR
//
// Prints lines the Rust test waits for: READY (page up, worker active, socket connected), PUSHED (the payload
// reached the worker, which showed it), INAPP <text> (an in-app message appeared in the page), DONE (the
// screenshot is written).

import { readFile } from "node:fs/promises";
import { chromium } from "playwright-core";

const [bridge, payloadFile, artifacts] = process.argv.slice(2);
const payload = await readFile(payloadFile, "utf8");

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
const context = await browser.newContext();
await context.grantPermissions(["notifications"], { origin: bridge });
await context.route("**/*", (route) => {
  const host = new URL(route.request().url()).hostname;
  return host === "127.0.0.1" || host === "localhost" ? route.continue() : route.abort();
});
const page = await context.newPage();
page.on("console", (message) => console.error(`page: ${message.text()}`));
await page.goto(bridge + "/");
await page.waitForFunction(() => navigator.serviceWorker.controller !== null || navigator.serviceWorker.ready, null, { timeout: 20000 });
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
await cdp.send("ServiceWorker.enable");
const registration = await registrations;
console.log("READY");

await cdp.send("ServiceWorker.deliverPushMessage", {
  origin: new URL(bridge).origin,
  registrationId: registration.registrationId,
  data: payload,
});
// The worker shows it: the notification is listed by its registration.
const title = JSON.parse(payload).title;
await page.waitForFunction(
  async (expected) => {
    const reg = await navigator.serviceWorker.ready;
    const shown = await reg.getNotifications();
    return shown.some((n) => n.title === expected);
  },
  title,
  { timeout: 20000, polling: 200 },
);
console.log("PUSHED");

// An in-app message sent now appears in the page.
const item = await page.waitForSelector("#messages li", { timeout: 30000 });
console.log(`INAPP ${await item.textContent()}`);
await page.screenshot({ path: `${artifacts}/push-kit.png`, fullPage: true });
await browser.close();
console.log("DONE");
