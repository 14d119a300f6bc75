// Studio's time to interactive with a large flow, in headless Chromium (Debian's /usr/bin/chromium):
// from choosing the flow until all its nodes are drawn, and then one edit (a node added from the palette) until
// it is drawn; five loads, each in a fresh page. Prints a Markdown table.
//
//   node studio_load.mjs BASE_URL FLOW_ID NODES

import { launchChromium } from "./chromium.mjs";

const [base, flowId, nodes] = process.argv.slice(2);
const browser = await launchChromium();
const times = { page: [], flow: [], edit: [] };
for (let run = 0; run < 5; run++) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const started = performance.now();
  await page.goto(`${base}/studio/`);
  await page.getByRole("heading", { name: "Flowhost Studio" }).waitFor();
  times.page.push(performance.now() - started);
  const chosen = performance.now();
  await page.getByLabel("Flow", { exact: true }).selectOption(flowId);
  await page.waitForFunction((count) => document.querySelectorAll(".react-flow__node").length === count, Number(nodes), { polling: 10, timeout: 60_000 });
  times.flow.push(performance.now() - chosen);
  const edited = performance.now();
  await page.getByRole("button", { name: "Mapping" }).click();
  await page.waitForFunction((count) => document.querySelectorAll(".react-flow__node").length === count, Number(nodes) + 1, { polling: 10, timeout: 60_000 });
  times.edit.push(performance.now() - edited);
  await page.close();
}
await browser.close();
const median = (values) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.log("| What | Median of 5 | Slowest |");
console.log("|---|---|---|");
console.log(`| page interactive (GET /studio/ until the toolbar is drawn) | ${median(times.page).toFixed(0)} ms | ${Math.max(...times.page).toFixed(0)} ms |`);
console.log(`| ${nodes}-node flow drawn (chosen until every node is on the page) | ${median(times.flow).toFixed(0)} ms | ${Math.max(...times.flow).toFixed(0)} ms |`);
console.log(`| then one edit (a node added from the palette until drawn) | ${median(times.edit).toFixed(0)} ms | ${Math.max(...times.edit).toFixed(0)} ms |`);
