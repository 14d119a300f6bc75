// Studio's time to interactive with a large flow, in headless Chromium (Debian's /usr/bin/chromium):
// from choosing the flow until all its nodes are drawn, and then one edit (a node added from the palette) until
// it is drawn; five loads, each in a fresh page. Prints a Markdown table.
//
// The edit is timed from the script (Playwright's click, with its actionability checks, until its polling sees
// the node: what a user waits for plus the harness's own time) and, besides, in the page: from the click event
// until the frame that draws the node has run (a task after the first animation frame with the node in the
// DOM), Studio's share alone.
//
// With ANCHOR_DIR (`node host/studio/web/build.mjs --anchor --outdir ANCHOR_DIR`), the same edit is timed in the
// page on the anchor as well: React Flow alone with a chain of as many nodes and the same canvas chrome, a node
// added by a button, five loads in the same browser. Its files are served by Playwright from the directory (no
// server), under BASE_URL's origin.
//
//   node studio_load.mjs BASE_URL FLOW_ID NODES [ANCHOR_DIR]

import { readFile } from "node:fs/promises";
import { join } from "node:path";

import { launchChromium } from "./chromium.mjs";

const [base, flowId, nodes, anchorDir] = process.argv.slice(2);
const browser = await launchChromium();
const times = { page: [], flow: [], edit: [], inPage: [], anchor: [] };
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const started = performance.now();
  await page.goto(`${base}/studio/`);
  await page.getByRole("heading", { name: "Flowhost Studio" }).waitFor();
  times.page.push(performance.now() - started);
  // Before the flow is chosen, so that the edit follows its drawing as closely as without it.
  await page.evaluate(watchEdit, Number(nodes) + 1);
  const chosen = performance.now();
  await page.getByLabel("Flow", { exact: true }).selectOption(flowId);
  await nodesDrawn(page, Number(nodes));
  times.flow.push(performance.now() - chosen);
  const edited = performance.now();
  await page.getByRole("button", { name: "Mapping" }).click();
  await nodesDrawn(page, Number(nodes) + 1);
  times.edit.push(performance.now() - edited);
  times.inPage.push(await (await page.waitForFunction(() => window.editDrawn)).jsonValue());
  await page.close();
}
for (let run = 0; anchorDir && run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const types = { html: "text/html", js: "text/javascript", css: "text/css" };
  await page.route(`${base}/react-flow-anchor/**`, async (route) => {
    const file = new URL(route.request().url()).pathname.split("/").pop();
    const body = await readFile(join(anchorDir, file));
    await route.fulfill({ body, contentType: types[file.split(".").pop()] });
  });
  await page.goto(`${base}/react-flow-anchor/index.html?nodes=${nodes}`);
  await nodesDrawn(page, Number(nodes));
  await page.evaluate(watchEdit, Number(nodes) + 1);
  await page.getByRole("button", { name: "Add element" }).click();
  times.anchor.push(await (await page.waitForFunction(() => window.editDrawn)).jsonValue());
  await page.close();
}
await browser.close();
/// Waits until `count` nodes are on the page.
function nodesDrawn(page, count) {
  return page.waitForFunction((count) => document.querySelectorAll(".react-flow__node").length === count, count, { polling: 10, timeout: 60_000 });
}

/// In the page: on the next click, sets `window.editDrawn` to the ms from the click event until a task after
/// the first animation frame in which `count` nodes are in the DOM (that frame is drawn before the task runs).
function watchEdit(count) {
  addEventListener("click", (event) => {
    const observer = new MutationObserver(() => {
      if (document.querySelectorAll(".react-flow__node").length !== count) return;
      observer.disconnect();
      requestAnimationFrame(() => setTimeout(() => (window.editDrawn = performance.now() - event.timeStamp)));
    });
    observer.observe(document.body, { childList: true, subtree: true });
  }, { capture: true, once: true });
}

const median = (values) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.log("| What | Median of 5 | Slowest |");
console.log("|---|---|---|");
console.log(`| page interactive (GET /studio/ until the toolbar is drawn) | ${median(times.page).toFixed(0)} ms | ${Math.max(...times.page).toFixed(0)} ms |`);
console.log(`| ${nodes}-node flow drawn (chosen until every node is on the page) | ${median(times.flow).toFixed(0)} ms | ${Math.max(...times.flow).toFixed(0)} ms |`);
console.log(`| then one edit (a node added from the palette until drawn) | ${median(times.edit).toFixed(0)} ms | ${Math.max(...times.edit).toFixed(0)} ms |`);
console.log(`| the same edit in the page (click event until the frame drawing the node) | ${median(times.inPage).toFixed(0)} ms | ${Math.max(...times.inPage).toFixed(0)} ms |`);
if (anchorDir) {
  console.log(`| anchor: React Flow alone, ${nodes} nodes, a node added (in the page, the same way) | ${median(times.anchor).toFixed(0)} ms | ${Math.max(...times.anchor).toFixed(0)} ms |`);
}
