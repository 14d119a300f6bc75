// The gateway's public route from real pages in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; nothing is downloaded, every name but loopback resolves to nothing). Each page posts one event the
// way the frontend must (spec 002 part A, rule 7): HTTPS-only in production, `credentials: "omit"`,
// `redirect: "error"`, `referrerPolicy: "no-referrer"`, and at most three attempts.
//
//   node gateway_cors.mjs EDGE_URL ALLOWED_PAGE EXCLUDED_PAGE ARTIFACTS_DIR
//
// Prints one JSON line per case: {"case", "status"} when the page could read the answer, {"case", "error"}
// when the browser refused it (CORS), then DONE once the screenshot is written.

import { launchChromium } from "./chromium.mjs";

const [edge, allowedPage, excludedPage, artifacts] = process.argv.slice(2);

const browser = await launchChromium({ resolveLoopbackOnly: true });
const context = await browser.newContext();

// What the frontend does: one event, three attempts at most, retrying only a 503 or a network failure.
async function post(page, extraHeaders) {
  return page.evaluate(
    async ({ edge, extraHeaders }) => {
      const body = JSON.stringify({
        event_type: "player.casino-presence.v1",
        event_id: crypto.randomUUID(),
        occurred_at: new Date().toISOString(),
        event_payload: { presence_session_id: crypto.randomUUID(), action: "opened" },
      });
      let last;
      for (let attempt = 1; attempt <= 3; attempt++) {
        try {
          const response = await fetch(edge + "/api/gateway/events", {
            method: "POST",
            body,
            headers: { "content-type": "application/json", authorization: "Bearer player-77", ...extraHeaders },
            credentials: "omit",
            redirect: "error",
            referrerPolicy: "no-referrer",
            mode: "cors",
          });
          last = { status: response.status, attempts: attempt };
          if (response.status !== 503) break;
        } catch (error) {
          last = { error: String(error), attempts: attempt };
        }
      }
      document.body.insertAdjacentHTML("beforeend", `<p>${JSON.stringify(last)}</p>`);
      return last;
    },
    { edge, extraHeaders },
  );
}

const page = await context.newPage();
page.on("console", (message) => console.error(`page: ${message.text()}`));
await page.goto(allowedPage);
console.log(JSON.stringify({ case: "allowed", ...(await post(page, {})) }));
console.log(JSON.stringify({ case: "client-ip-header", ...(await post(page, { "x-gateway-client-ip": "198.51.100.1" })) }));
await page.screenshot({ path: `${artifacts}/gateway-allowed.png` });

const excluded = await context.newPage();
await excluded.goto(excludedPage);
console.log(JSON.stringify({ case: "excluded", ...(await post(excluded, {})) }));
await excluded.screenshot({ path: `${artifacts}/gateway-excluded.png` });

await browser.close();
console.log("DONE");
