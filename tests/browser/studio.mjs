// Studio in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; nothing is downloaded and
// every request off loopback is refused): the flow `welcome` (a source and an unconnected output topic, seeded
// by the Rust test) is opened, wired by keyboard, refused a connection into its source, edited with undo and
// redo, saved and released.
//
//   node studio.mjs BASE_URL ARTIFACTS_DIR
//
// Prints `OK <step>` per step, then DONE; a failed step prints `FAIL <step>: <why>` and exits 1.

import { chromium } from "playwright-core";

const [base, artifacts] = process.argv.slice(2);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
});
const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
const offLoopback = [];
await context.route("**/*", (route) => {
  const url = new URL(route.request().url());
  if (url.hostname === "127.0.0.1" || url.hostname === "localhost") return route.continue();
  offLoopback.push(url.href);
  return route.abort("blockedbyclient");
});
const page = await context.newPage();
const consoleErrors = [];
page.on("console", (message) => message.type() === "error" && consoleErrors.push(message.text()));
page.on("pageerror", (error) => consoleErrors.push(String(error)));

let step = "start";
async function check(name, action) {
  step = name;
  await action();
  console.log(`OK ${name}`);
}
const expect = (condition, why) => {
  if (!condition) throw new Error(why);
};
const status = () => page.locator("p.status").innerText();
const waitFor = async (predicate, why, timeout = 10_000) => {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    if (await predicate()) return;
    await page.waitForTimeout(100);
  }
  throw new Error(`timed out: ${why}`);
};
const api = async (path) => (await page.request.get(base + path)).json();

try {
  await check("served from the binary", async () => {
    const response = await page.goto(`${base}/studio/`);
    expect(response.status() === 200, `GET /studio/ answered ${response.status()}`);
    expect((response.headers()["content-security-policy"] ?? "").includes("frame-ancestors 'none'"), "a CSP");
    await page.getByRole("heading", { name: "Flowhost Studio" }).waitFor();
  });

  await check("open a flow", async () => {
    await page.getByLabel("Flow", { exact: true }).selectOption("welcome");
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 2, "two nodes on the canvas");
  });

  await check("client and server problems merged", async () => {
    // The unconnected output topic is an orphan: one entry, although both the client and the server find it.
    await waitFor(async () => (await page.locator(".problems li", { hasText: "ORPHAN_NODE" }).count()) === 1, "one orphan");
    expect(!(await page.getByRole("button", { name: "Release" }).isEnabled()), "Release waits for the acknowledgement");
  });

  await check("clicking a problem focuses its node", async () => {
    await page.locator(".problems li", { hasText: "ORPHAN_NODE" }).getByRole("button", { name: "out" }).click();
    await waitFor(async () => (await page.locator("#inspector-heading").innerText()).includes("out"), "inspector shows out");
  });

  await check("a connection into the source is refused with a message", async () => {
    await page.getByLabel("Connect to").selectOption("src");
    await page.getByRole("button", { name: "Connect", exact: true }).click();
    await waitFor(async () => (await status()).includes("Nothing can lead into the source"), "the refusal");
    expect((await page.locator(".react-flow__edge").count()) === 0, "no edge drawn");
  });

  await check("keyboard-only wiring", async () => {
    await page.locator(".react-flow__node", { hasText: "src" }).click();
    await waitFor(async () => (await page.locator("#inspector-heading").innerText()).includes("src"), "src selected");
    const select = page.getByLabel("Connect to");
    await select.focus();
    await select.selectOption("out");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    await waitFor(async () => (await page.locator(".react-flow__edge").count()) === 1, "one edge");
    await waitFor(async () => (await page.locator(".problems li", { hasText: "ORPHAN_NODE" }).count()) === 0, "no orphan");
  });

  await check("undo and redo count the edits", async () => {
    await page.getByRole("button", { name: "Mapping" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 3, "three nodes");
    await page.getByRole("button", { name: "Undo" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 2, "two nodes after undo");
    await page.getByRole("button", { name: "Redo" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 3, "three nodes after redo");
    await page.keyboard.press("Control+z");
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 2, "two nodes after Ctrl+Z");
    await page.getByRole("button", { name: "Undo" }).click();
    await waitFor(async () => (await page.locator(".react-flow__edge").count()) === 0, "the edge undone");
    await page.getByRole("button", { name: "Redo" }).click();
    await waitFor(async () => (await page.locator(".react-flow__edge").count()) === 1, "the edge redone");
  });

  await check("save the draft", async () => {
    await page.getByRole("button", { name: "Save draft" }).click();
    await waitFor(async () => (await status()).includes("Draft saved"), "saved");
    const flow = await api("/api/v2/flows/welcome");
    expect(JSON.stringify(flow.draft.edges.map((e) => [e.from, e.to])) === '[["src","out"]]', `draft edges ${JSON.stringify(flow.draft.edges)}`);
  });

  await check("release", async () => {
    const release = page.getByRole("button", { name: "Release" });
    await waitFor(() => release.isEnabled(), "Release enabled once nothing blocks");
    await release.click();
    await waitFor(async () => (await status()).includes("Released version 1"), "released");
    const flow = await api("/api/v2/flows/welcome");
    expect(flow.status === "valid" && flow.released_version === 1, `status ${flow.status}, version ${flow.released_version}`);
  });

  await page.screenshot({ path: `${artifacts}/studio.png` });
  expect(offLoopback.length === 0, `requests off loopback: ${offLoopback.join(", ")}`);
  expect(consoleErrors.length === 0, `console errors: ${consoleErrors.join(" | ")}`);
  console.log("DONE");
} catch (error) {
  await page.screenshot({ path: `${artifacts}/studio-failed.png` }).catch(() => {});
  console.log(`FAIL ${step}: ${error.message}${consoleErrors.length ? ` (console: ${consoleErrors.join(" | ")})` : ""}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
