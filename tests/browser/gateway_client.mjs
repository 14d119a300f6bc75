// The gateway's browser client (examples/gateway-client/gateway-client.mjs) in headless Chromium (Debian's
// /usr/bin/chromium, driven by playwright-core; every name but loopback resolves to nothing). A page of an
// allowed origin imports the module as a page would and sends events to a running edge, and to a stub gateway
// the test serves for the answers an edge gives only under load (a 429 with a short Retry-After, a 503, a
// redirect).
//
//   node gateway_client.mjs EDGE_URL PAGE_URL STUB_URL ARTIFACTS_DIR
//
// Prints one JSON line per case, then DONE once the screenshot is written.

import { launchChromium } from "./chromium.mjs";

const [edge, pageUrl, stub, artifacts] = process.argv.slice(2);

const browser = await launchChromium({ resolveLoopbackOnly: true });
const page = await (await browser.newContext()).newPage();
page.on("console", (message) => console.error(`page: ${message.text()}`));
page.on("pageerror", (error) => console.error(`page error: ${error}`));
await page.goto(pageUrl);

/** Runs one case in the page: the module as the page imports it, the client's answer and the time it took. */
async function run(name, options, event) {
  const result = await page.evaluate(
    async ({ options, event }) => {
      const { createGatewayClient } = await import("/gateway-client.mjs");
      const started = performance.now();
      try {
        const client = createGatewayClient(options);
        const answer = await client.send(event);
        return { ...answer, elapsedMs: Math.round(performance.now() - started) };
      } catch (error) {
        return { refused: String(error) };
      }
    },
    { options, event },
  );
  await page.evaluate((line) => document.body.insertAdjacentHTML("beforeend", `<p>${line}</p>`),
    `${name}: ${JSON.stringify(result)}`);
  console.log(JSON.stringify({ case: name, ...result }));
}

const presence = (action) => ({
  event_type: "player.casino-presence.v1",
  event_payload: { presence_session_id: "0b6f3a52-3c2f-4d0e-9d1a-7f3e2b1c0a99", action },
});
// A cookie of the page's host (cookies ignore ports, so the stub's host sees it unless credentials are omitted).
await page.evaluate(() => (document.cookie = "session=must-not-travel; path=/"));

// HTTPS only: plain HTTP is refused before any request, loopback included, unless the page opts in for
// development; the opt-in never covers another host.
await run("plain-http-refused", { url: edge, token: "player-78" }, presence("opened"));
await run("plain-http-elsewhere-refused", { url: "http://events.example.com", token: "player-78", allowLoopbackHttp: true },
  presence("opened"));
await run("path-refused", { url: `${edge}/api/gateway/events`, token: "player-78", allowLoopbackHttp: true },
  presence("opened"));

// Against the running edge.
const dev = { url: edge, allowLoopbackHttp: true };
await run("accepted", { ...dev, token: "player-78" }, presence("opened"));
await run("unauthorized", { ...dev, token: "invalid" }, presence("heartbeat"));
await run("limit-first", { ...dev, token: "player-79" }, presence("opened"));
await run("rate-limited", { ...dev, token: "player-79", maxWaitMs: 5000 }, presence("heartbeat"));

// Against the stub: what only load makes an edge answer.
const viaStub = { url: stub, allowLoopbackHttp: true, backoffMs: 100 };
await run("retry-after-honoured", { ...viaStub, token: "retry-once" }, presence("heartbeat"));
await run("unavailable-three-attempts", { ...viaStub, token: "always-503" }, presence("heartbeat"));
await run("redirect-refused", { ...viaStub, token: "redirect" }, presence("heartbeat"));

await page.screenshot({ path: `${artifacts}/gateway-client.png`, fullPage: true });
await browser.close();
console.log("DONE");
