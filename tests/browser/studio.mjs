// Studio in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core; nothing is downloaded and
// every request off loopback is refused), one scenario per run against flows the Rust test seeded:
//
// - `wiring`: the flow `welcome` (a source and an unconnected output topic) is opened, wired by keyboard,
//   refused a connection into its source, edited with undo and redo, saved and released.
// - `config`: the flow `notify` (source, notifications segment, `send_webpush` action with a negative
//   `player_id`) shows the schema form of its action with the server's error under the player field; the fix
//   clears it, undo and redo walk the config edit, and the flow is saved and released.
// - `cel`: the flow `cel` (source, a condition `amount > 100` on a double field, an output topic) shows the
//   server's type error under the expression; completion offers the schema's fields with their types and the
//   CEL environment's functions and methods from the server's catalog; the fix
//   clears the error; "Test this node" runs the bundled condition plugin on a generated sample, then an edited
//   one, which is pinned; the flow is released.
// - `drift`: the released flow `drift` turned `invalid` after its service registered a manifest without its
//   action: the canvas says so, the action's node carries the broken reason, and picking the new action in the
//   draft fixes it; the release makes the flow valid again.
// - `runs`: the released flow `runs` has one completed run (seeded by the Rust test): the runs panel lists it,
//   choosing it marks the path on the canvas, and the output node's input, output and outcome are shown.
// - `plugin`: the `ledger` wasm plugin is uploaded in the Plugins section; a flow is built from nothing on the
//   canvas (source, service segment, the plugin's `limit` action configured in its form, output topic), wired
//   by keyboard, validated and released. The Rust test then publishes two deposits: one under the limit runs
//   through the wasm action (its path and the action's output shown), one over it is dead-lettered. The dead
//   letter is replayed to the run's version (failing again), the limit raised in a second release, the letter
//   replayed to the latest release (a new run completes), and the two versions compared on the canvas.
// - `plugin-node-kind`: the `score` plugin (uploaded and active, declaring the node kind `score`) is listed in
//   the palette; on the flow `scored` (a source only) its node is placed and wired between the source and an
//   output topic placed too, its `min` is filled in the form made from its `config_schema` (a wrong value first,
//   the server's error shown under the field), the added field and the answers are listed, and with the draft
//   valid the flow is saved and released.
// - `plugin-node-kind-drift`: after `score` 0.3.0 (declaring `rank` instead of `score`) was activated, the
//   released flow `scored` is invalid: the canvas says so, its `score/score` node carries the broken reason,
//   its inspector says the kind is no longer declared and names what the plugin declares now, and the palette
//   offers `rank`.
// - `first-action`: the example plugin's walk-through (examples/first-action, step 6): first-action 0.1.0
//   uploaded; a flow built around its `welcome_bonus` after its segment, configured in its schema form with the
//   event's fields as placeholders, and released. The Rust test publishes three deposits: the run with the bonus
//   is shown on the graph, the one in JPY with the action skipped forward, the one sent as text dead-lettered;
//   0.2.0 (the fix, reading text) is uploaded and the dead letter replayed to its run, which completes.
// - `admin`: with an admin token configured, Studio asks for it and signs in; a schema, an event source and a
//   v1 rule (its CEL type error shown and fixed) are created with the server's refusals shown on their forms;
//   two versions of the `greeter` plugin are uploaded, another plugin's component refused as a third, and the
//   plugin rolled back.
//
// Every scenario ends with an accessibility check (axe-core: no serious or critical finding).
//
//   node studio.mjs BASE_URL ARTIFACTS_DIR SCENARIO
//
// The environment gives what a scenario needs beyond the seeded flows: STUDIO_WASM_DIR (the components to
// upload), STUDIO_SOURCE_TOPIC and STUDIO_OUTPUT_TOPIC (the `plugin` and `first-action` flows' topics; the output topic also
// for `plugin-node-kind`), STUDIO_TOKEN (the admin
// token the `admin` scenario signs in with; also sent by the script's own API checks).
//
// Prints `OK <step>` per step, then DONE; a failed step prints `FAIL <step>: <why>` and exits 1.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

import { launchChromium } from "./chromium.mjs";

const axeSource = await readFile(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const [base, artifacts, scenario] = process.argv.slice(2);
const { STUDIO_WASM_DIR: wasmDir, STUDIO_SOURCE_TOPIC: sourceTopic, STUDIO_OUTPUT_TOPIC: outputTopic, STUDIO_TOKEN: adminToken } = process.env;

const browser = await launchChromium();
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
// The browser also logs each 4xx answer as an error; Studio shows those answers, and the steps check that it does.
const answeredRefusal = /^Failed to load resource: the server responded with a status of 4\d\d/;
page.on("console", (message) => message.type() === "error" && !answeredRefusal.test(message.text()) && consoleErrors.push(message.text()));
page.on("pageerror", (error) => consoleErrors.push(String(error)));


async function saveDraft() {
  await page.getByRole("button", { name: "Save draft" }).click();
  await waitFor(async () => (await status()).includes("Draft saved"), "saved");
}

/// Presses Release once nothing blocks it and waits for `version`.
async function release(version) {
  const button = page.getByRole("button", { name: "Release", exact: true });
  await waitFor(() => button.isEnabled(), "Release enabled once nothing blocks");
  await button.click();
  await waitFor(async () => (await status()).includes(`Released version ${version}`), "released");
}

async function openFlow(id, nodes) {
  await page.getByLabel("Flow", { exact: true }).selectOption(id);
  await waitFor(async () => (await page.locator(".react-flow__node").count()) === nodes, `${nodes} nodes on the canvas`);
}

async function wiringScenario() {
  await check("open a flow", () => openFlow("welcome", 2));

  await check("client and server problems merged", async () => {
    // The unconnected output topic is an orphan: one entry, although both the client and the server find it.
    await waitFor(async () => (await page.locator(".problems li", { hasText: "ORPHAN_NODE" }).count()) === 1, "one orphan");
    // A warning never blocks a release (rule 4): Release stays enabled and says the warning is unacknowledged.
    await waitFor(async () => await page.getByRole("button", { name: "Release", exact: true }).isEnabled(), "Release enabled despite the warning");
    await waitFor(async () => (await page.locator(".gate-note").innerText().catch(() => "")).includes("1 warning not acknowledged"), "the note");
  });

  await check("clicking a problem focuses its node", async () => {
    await page.locator(".problems li", { hasText: "ORPHAN_NODE" }).getByRole("button", { name: "out" }).click();
    await waitFor(async () => (await page.locator("#inspector-heading").innerText()).includes("out"), "inspector shows out");
  });

  await check("a connection into the source is refused with a message", async () => {
    await page.getByLabel("Connect to").selectOption("src");
    await page.getByRole("button", { name: "Connect", exact: true }).click();
    await waitFor(async () => (await status()).includes("Nothing can lead into the source"), "the refusal");
    await waitFor(async () => (await page.locator(".react-flow__edge").count()) === 0, "no edge drawn");
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
    await saveDraft();
    const flow = await api("/api/v2/flows/welcome");
    expect(JSON.stringify(flow.draft.edges.map((e) => [e.from, e.to])) === '[["src","out"]]', `draft edges ${JSON.stringify(flow.draft.edges)}`);
  });

  await check("release", async () => {
    await release(1);
    const flow = await api("/api/v2/flows/welcome");
    expect(flow.status === "valid" && flow.released_version === 1, `status ${flow.status}, version ${flow.released_version}`);
  });

}

async function configScenario() {
  const field = (name) => page.locator(".action-form .field", { has: page.getByText(name, { exact: true }) });
  await check("open a flow", () => openFlow("notify", 3));
  await check("the action's form comes from its config_schema", async () => {
    await page.locator(".react-flow__node", { hasText: "push" }).click();
    await page.getByRole("group", { name: "Action of notifications" }).waitFor();
    await waitFor(async () => (await page.getByLabel("Action", { exact: true }).inputValue()) === "send_webpush", "the action picked");
    for (const name of ["tenant_id", "player_id", "template_id", "language_enabled_id"]) {
      await field(`${name} *`).waitFor();
    }
  });
  await check("pickers are filled through the catalog's data-source proxy", async () => {
    const tenant = field("tenant_id *").locator("select");
    await waitFor(async () => (await tenant.locator("option").first().innerText()) === "Choose…", "tenants loaded");
    await waitFor(async () => (await page.locator(".picker-error").count()) === 0, "no picker failed");
  });
  await check("the server's schema error lands on its field and blocks release", async () => {
    await waitFor(async () => (await field("player_id *").getByRole("alert").count()) > 0, "an error under player_id");
    await waitFor(async () => (await field("player_id *").locator("input").getAttribute("aria-invalid")) === "true", "aria-invalid");
    await waitFor(async () => !(await page.getByRole("button", { name: "Release", exact: true }).isEnabled()), "Release blocked");
    await waitFor(async () => (await page.locator(".problems li", { hasText: "ACTION_CONFIG_INVALID" }).count()) === 1, "in the problems panel");
  });
  await check("the fix clears it; undo and redo walk the config edit", async () => {
    const input = field("player_id *").locator("input");
    await input.fill("7");
    await input.press("Tab");
    await waitFor(async () => (await field("player_id *").getByRole("alert").count()) === 0, "the error cleared");
    await page.getByRole("button", { name: "Undo" }).click();
    await waitFor(async () => (await input.inputValue()) === "-5", "undo restores -5");
    await waitFor(async () => (await field("player_id *").getByRole("alert").count()) > 0, "and its error");
    await page.getByRole("button", { name: "Redo" }).click();
    await waitFor(async () => (await input.inputValue()) === "7", "redo gives 7 again");
    await page.screenshot({ path: `${artifacts}/studio-config-form.png` });
  });
  await check("save and release", async () => {
    await saveDraft();
    const draft = (await api("/api/v2/flows/notify")).draft;
    expect(draft.nodes.find((n) => n.id === "push").config.player_id === 7, "player_id 7 stored");
    await release(1);
  });
}

async function celScenario() {
  const editor = page.getByRole("textbox", { name: "Expression of condition cond" });
  const errors = page.locator(".cel .field-problems li");
  await check("open a flow", () => openFlow("cel", 3));
  await check("the server's type error shows under the expression", async () => {
    await page.locator(".react-flow__node", { hasText: "cond" }).click();
    await editor.waitFor();
    await waitFor(async () => (await errors.count()) > 0, "an error under the expression");
    await waitFor(async () => /double|100\.0/.test(await errors.first().innerText()), async () => `the message: ${await errors.first().innerText()}`);
    await waitFor(async () => !(await page.getByRole("button", { name: "Release", exact: true }).isEnabled()), "Release blocked");
  });
  await check("completion offers the fields that reach the node", async () => {
    await editor.click();
    await page.keyboard.press("Control+End");
    await page.keyboard.type(" && am");
    const option = page.locator(".cm-tooltip-autocomplete li", { hasText: "amount" });
    await option.waitFor();
    await waitFor(async () => (await option.innerText()).includes("double"), async () => `with its type: ${await option.innerText()}`);
    await page.keyboard.press("Escape");
    // The server's catalog of the CEL environment: a namespace's functions after `math.`, methods after `x.`.
    await page.keyboard.type(" && math.gre");
    await page.locator(".cm-tooltip-autocomplete li", { hasText: "greatest" }).waitFor();
    await page.keyboard.press("Escape");
    await page.keyboard.type(" && 'a'.lowerA");
    await page.locator(".cm-tooltip-autocomplete li", { hasText: "lowerAscii" }).waitFor();
    await page.keyboard.press("Escape");
  });
  await check("the fix clears the error as you type", async () => {
    await editor.click();
    await page.keyboard.press("Control+a");
    await page.keyboard.type("amount > 100.0");
    await waitFor(async () => (await page.locator(".cm-tooltip-autocomplete").count()) === 0, "no completion after a number's dot");
    await waitFor(async () => (await errors.count()) === 0, "no error left", 15_000);
  });
  await check("test this node against the live plugin with a generated, edited, pinned sample", async () => {
    await page.locator(".node-test summary").click();
    const sample = page.getByLabel("Sample event (JSON)");
    const result = page.locator(".test-result");
    await waitFor(async () => JSON.parse(await sample.inputValue()).amount === 150.5, async () => `generated from the schema: ${await sample.inputValue()}`);
    await page.getByRole("button", { name: "Run test" }).click();
    await waitFor(async () => (await result.innerText()).includes('{"pass":true}'), "150.5 passes");
    await sample.fill(JSON.stringify({ ...JSON.parse(await sample.inputValue()), amount: 5.5 }));
    await page.getByRole("button", { name: "Run test" }).click();
    await waitFor(async () => (await result.innerText()).includes('{"pass":false}'), "5.5 does not");
    await page.getByRole("button", { name: "Pin sample" }).click();
    // Another node, then the condition again: the pinned sample comes back.
    await page.locator(".react-flow__node", { hasText: "out" }).click();
    await page.locator(".react-flow__node", { hasText: "cond" }).click();
    await page.locator(".node-test summary").click();
    await waitFor(async () => JSON.parse(await sample.inputValue()).amount === 5.5, "the pinned sample");
  });
  await check("save and release", async () => {
    await saveDraft();
    const draft = (await api("/api/v2/flows/cel")).draft;
    expect(draft.nodes.find((n) => n.id === "cond").config.expression === "amount > 100.0", "the expression stored");
    await release(1);
  });
}

async function driftScenario() {
  const tag = page.locator(".react-flow__node", { hasText: "tag" });
  await check("open a flow", () => openFlow("drift", 4));
  await check("the drift is shown with its broken reason on the node", async () => {
    await page.getByRole("alert").filter({ hasText: "invalid after a plugin change" }).waitFor();
    await tag.locator(".badge-blocking").waitFor();
    await waitFor(async () => ((await tag.locator(".badge").getAttribute("title")) ?? "").length > 0, "the badge names the reason");
  });
  await check("the draft is fixed by picking the service's new action", async () => {
    await tag.click();
    await page.getByRole("group", { name: "Action of crm" }).waitFor();
    await page.getByLabel("Action", { exact: true }).selectOption("tag_vip");
    await waitFor(async () => (await page.locator(".problems li.problem-blocking").count()) === 0, "nothing blocks");
  });
  await check("the release makes it valid again", async () => {
    await release(2);
    await waitFor(async () => (await page.getByRole("alert").filter({ hasText: "invalid after a plugin change" }).count()) === 0, "the banner gone");
  });
}

async function runsScenario() {
  await check("open a flow", () => openFlow("runs", 2));
  await check("the runs panel lists the run", async () => {
    const panel = page.getByRole("region", { name: "Runs" });
    await panel.getByRole("button", { name: /completed/ }).first().click();
  });
  await check("the path is marked on the canvas", async () => {
    await waitFor(async () => (await page.locator(".react-flow__node.on-path").count()) === 2, "two nodes on the path");
  });
  await check("a node shows what the run did there", async () => {
    await page.locator(".react-flow__node", { hasText: "out" }).click();
    const here = page.getByRole("region", { name: "This run at out" });
    await here.waitFor();
    await waitFor(async () => (await here.innerText()).includes("passed"), async () => `the outcome: ${await here.innerText()}`);
    await waitFor(async () => (await here.locator("pre").first().innerText()).includes("250.5"), "the input has the event's amount");
  });
}

const canvasNode = (id) => page.locator(".react-flow__node", { hasText: id });
const section = (name) => page.getByRole("navigation", { name: "Sections" }).getByRole("button", { name, exact: true }).click();

/// Clicks node `id` until the inspector shows it: a click that lands while the canvas is still settling (a node
/// just added, the view being fitted) can select nothing on a loaded machine, so it is made again.
async function selectNode(id) {
  await canvasNode(id).click();
  await waitFor(async () => {
    if ((await page.locator("#inspector-heading").innerText()).endsWith(` ${id}`)) return true;
    await canvasNode(id).click();
    return false;
  }, `${id} selected`, 15_000);
}

/// Replaces node `id`'s config through the inspector's JSON field.
async function setConfig(id, config) {
  await selectNode(id);
  await page.getByLabel("Config (JSON)").fill(JSON.stringify(config));
  await page.getByRole("button", { name: "Apply config" }).click();
}

/// Connects `from` to `to` with the inspector's keyboard path.
async function connectNodes(from, to) {
  await selectNode(from);
  await page.getByLabel("Connect to").selectOption(to);
  await page.getByRole("button", { name: "Connect", exact: true }).click();
  await waitFor(async () => (await status()).includes(`Connected ${from} to ${to}`), `${from} -> ${to}`);
}

/// Presses `refresh` in `panel` until `ready` holds (the server's work is asynchronous).
async function refreshUntil(panel, refresh, ready, why, timeout = 60_000) {
  await waitFor(
    async () => {
      await panel.getByRole("button", { name: refresh }).click();
      await page.waitForTimeout(300);
      return ready();
    },
    why,
    timeout,
  );
}

async function uploadPlugin(form, id, version, file) {
  if (id !== null) await form.getByLabel("Plugin id").fill(id);
  await form.getByLabel("Version (as its manifest says)").fill(version);
  await form.getByLabel("Component (.wasm)").setInputFiles(`${wasmDir}/${file}`);
  await form.getByRole("button", { name: "Upload" }).click();
}

/// Builds the flow `id` from nothing on the canvas: a source on STUDIO_SOURCE_TOPIC, a segment of `service`, an
/// action (configured by the caller) and an output topic on STUDIO_OUTPUT_TOPIC, wired in that order by keyboard.
async function buildServiceFlow(id, service) {
  await section("Flows");
  await page.getByRole("button", { name: "New flow" }).click();
  await page.getByLabel("Id of the new flow").fill(id);
  await page.getByRole("button", { name: "Create" }).click();
  await waitFor(async () => (await page.locator(".react-flow__node").count()) === 1, "the source");
  await setConfig("source-1", { event_type: "deposit", topic: sourceTopic });
  for (const kind of ["Service segment", "Action", "Output topic"]) await page.getByRole("navigation", { name: "Add a node" }).getByRole("button", { name: kind }).click();
  await waitFor(async () => (await page.locator(".react-flow__node").count()) === 4, "four nodes");
  await setConfig("service-in-1", { service });
  await setConfig("output-topic-1", { topic: outputTopic });
  await connectNodes("source-1", "service-in-1");
  await connectNodes("service-in-1", "action-1");
  await connectNodes("action-1", "output-topic-1");
}

async function pluginScenario() {
  const runsPanel = page.getByRole("region", { name: "Runs" });
  const letters = page.getByRole("region", { name: /Dead letters/ });
  await check("upload the wasm plugin", async () => {
    await section("Plugins");
    await uploadPlugin(page.getByRole("form", { name: "Upload a plugin" }), "ledger", "0.1.0", "ledger.wasm");
    await waitFor(async () => (await status()).includes("Plugin ledger 0.1.0 uploaded and active"), "uploaded");
    await page.getByRole("table", { name: "Versions of ledger" }).getByText("limit", { exact: false }).waitFor();
  });
  await check("build a flow from nothing on the canvas", () => buildServiceFlow("ledger-flow", "ledger"));
  await check("configure the plugin's action in its form", async () => {
    await selectNode("action-1");
    await page.getByRole("group", { name: "Action of ledger" }).waitFor();
    await page.getByLabel("Action", { exact: true }).selectOption("limit");
    const field = (name) => page.locator(".action-form .field", { has: page.getByText(name, { exact: true }) }).locator("input");
    await field("amount *").fill("{{amount}}");
    await field("amount *").press("Tab");
    await field("limit *").fill("100");
    await field("limit *").press("Tab");
    await waitFor(async () => (await page.locator(".problems li.problem-blocking").count()) === 0, "nothing blocks");
  });
  await check("validate and release", async () => {
    await saveDraft();
    const flow = await api("/api/v2/flows/ledger-flow");
    expect(flow.validation === undefined || flow.validation.valid !== false, `draft validation: ${JSON.stringify(flow.validation)}`);
    await release(1);
  });
  await check("a run through the wasm action is shown on the graph", async () => {
    await refreshUntil(runsPanel, "Refresh runs", async () => (await runsPanel.getByRole("button", { name: /completed/ }).count()) > 0, "a completed run");
    await runsPanel.getByRole("button", { name: /completed/ }).first().click();
    await waitFor(async () => (await page.locator(".react-flow__node.on-path").count()) === 4, "four nodes on the path");
    await selectNode("action-1");
    const here = page.getByRole("region", { name: "This run at action-1" });
    await waitFor(async () => (await here.innerText()).includes("accepted"), async () => `the wasm action's output: ${await here.innerText()}`);
  });
  await check("the failed run's dead letter is listed and its run shown", async () => {
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.locator(".dead-letter").count()) === 1, "one dead letter");
    await waitFor(async () => (await letters.innerText()).includes("over the limit"), async () => `the error: ${await letters.innerText()}`);
    await letters.getByRole("button", { name: "Show run" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node.outcome-dead_lettered").count()) === 1, "the action marked dead-lettered");
  });
  await check("replayed to the run's version, it fails again", async () => {
    await letters.getByRole("button", { name: "Replay to the run's version" }).click();
    await waitFor(async () => /Replayed to the run's version: run .*, version 1/.test(await status()), "replayed to version 1");
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.innerText()).includes("replayed 1 time"), "one replay recorded");
    await waitFor(async () => (await letters.locator(".dead-letter").count()) === 1, "still open");
  });
  await check("the limit is raised in a second release", async () => {
    await page.getByRole("button", { name: "Hide run" }).click();
    await selectNode("action-1");
    const limit = page.locator(".action-form .field", { has: page.getByText("limit *", { exact: true }) }).locator("input");
    await limit.fill("1000");
    await limit.press("Tab");
    await saveDraft();
    await release(2);
  });
  await check("replayed to the latest release, a new run completes", async () => {
    await letters.getByRole("button", { name: "Replay to the latest release" }).click();
    await waitFor(async () => /Replayed to the latest release: run .*, version 2/.test(await status()), "replayed to version 2");
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.locator(".dead-letter").count()) === 0, "no open letter");
    await refreshUntil(runsPanel, "Refresh runs", async () => (await runsPanel.getByRole("button", { name: /v2 · completed/ }).count()) === 1, "a completed run of v2");
  });
  await check("the two released versions are compared on the canvas", async () => {
    const versions = page.getByRole("region", { name: /Versions/ });
    await versions.getByRole("button", { name: "Show the diff" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node.diff-changed").count()) === 1, "one changed node");
    await waitFor(async () => (await page.locator(".react-flow__node.diff-same").count()) === 3, "three unchanged");
    const changes = page.getByRole("list", { name: "Changes" });
    await waitFor(async () => (await changes.innerText()).includes("/config/limit 100 → 1000"), async () => `the change: ${await changes.innerText()}`);
    await waitFor(async () => !(await page.getByRole("button", { name: "Release", exact: true }).isEnabled()), "the diff is read-only");
    await canvasNode("action-1").click();
    await page.getByRole("region", { name: "Changes of action-1" }).getByRole("cell", { name: "/config/limit" }).waitFor();
    await page.screenshot({ path: `${artifacts}/studio-plugin-diff.png` });
    await page.getByRole("button", { name: "Close the diff" }).first().click();
    await waitFor(async () => (await page.locator(".react-flow__node.diff-changed").count()) === 0, "back to the draft");
  });
}

/// The first-action walk-through (examples/first-action/README.md, step 6) as its reader does it in Studio.
async function firstActionScenario() {
  const runsPanel = page.getByRole("region", { name: "Runs" });
  const letters = page.getByRole("region", { name: /Dead letters/ });
  const run = (nodes) => runsPanel.getByRole("button", { name: new RegExp(`completed · ${nodes} nodes`) });
  await check("upload first-action", async () => {
    await section("Plugins");
    await uploadPlugin(page.getByRole("form", { name: "Upload a plugin" }), "first-action", "0.1.0", "first-action-0.1.0.wasm");
    await waitFor(async () => (await status()).includes("Plugin first-action 0.1.0 uploaded and active"), "uploaded");
    await page.getByRole("table", { name: "Versions of first-action" }).getByText("welcome_bonus", { exact: false }).waitFor();
  });
  await check("place it after its service's segment", () => buildServiceFlow("welcome-bonus", "first-action"));
  await check("configure welcome_bonus in its schema form", async () => {
    await selectNode("action-1");
    await page.getByRole("group", { name: "Action of first-action" }).waitFor();
    await page.getByLabel("Action", { exact: true }).selectOption("welcome_bonus");
    const field = (name) => page.locator(".action-form .field", { has: page.getByText(name, { exact: true }) }).locator("input").first();
    for (const [name, value] of [["player_id *", "{{player_id}}"], ["deposit *", "{{amount}}"], ["currency *", "{{currency}}"]]) {
      await field(name).fill(value);
      await field(name).press("Tab");
    }
    await waitFor(async () => (await page.locator(".problems li.problem-blocking").count()) === 0, async () => `nothing blocks: ${await page.locator(".problems").innerText().catch(String)}`);
  });
  await check("release", async () => {
    await saveDraft();
    await release(1);
  });
  await check("a deposit's run and its bonus on the graph", async () => {
    await refreshUntil(runsPanel, "Refresh runs", async () => (await run(4).count()) > 0, "a completed run through the action");
    await run(4).first().click();
    await waitFor(async () => (await page.locator(".react-flow__node.on-path").count()) === 4, "four nodes on the path");
    await selectNode("action-1");
    const here = page.getByRole("region", { name: "This run at action-1" });
    await waitFor(async () => (await here.innerText()).includes('"bonus": 100'), async () => `the bonus: ${await here.innerText()}`);
  });
  await check("a deposit in JPY skips forward", async () => {
    await refreshUntil(runsPanel, "Refresh runs", async () => (await run(3).count()) > 0, "a completed run ending at the action");
    await run(3).first().click();
    await waitFor(async () => (await page.locator(".react-flow__node.outcome-skip_forward").count()) === 1, "the action marked skip_forward");
  });
  await check("a deposit sent as text is dead-lettered", async () => {
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.locator(".dead-letter").count()) === 1, "one dead letter");
    await waitFor(async () => (await letters.innerText()).includes("invalid type: string"), async () => `the error: ${await letters.innerText()}`);
    await letters.getByRole("button", { name: "Show run" }).click();
    await waitFor(async () => (await page.locator(".react-flow__node.outcome-dead_lettered").count()) === 1, "the action marked dead-lettered");
    await page.getByRole("button", { name: "Hide run" }).click();
  });
  await check("the fix, 0.2.0, uploaded and active", async () => {
    await section("Plugins");
    await page.getByRole("navigation", { name: "Plugins" }).getByRole("button", { name: "first-action" }).click();
    await uploadPlugin(page.getByRole("form", { name: "Upload a version of first-action" }), null, "0.2.0", "first-action-0.2.0.wasm");
    await waitFor(async () => (await api("/api/v1/plugins/first-action")).active_version === "0.2.0", "0.2.0 active");
  });
  await check("the dead letter replayed to its run completes it", async () => {
    await section("Flows");
    await openFlow("welcome-bonus", 4);
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.locator(".dead-letter").count()) === 1, "the open letter");
    await letters.getByRole("button", { name: "Replay to the run's version" }).click();
    await waitFor(async () => /Replayed to the run's version: run .*, version 1/.test(await status()), "replayed to version 1");
    await refreshUntil(letters, "Refresh dead letters", async () => (await letters.locator(".dead-letter").count()) === 0, "no open letter");
    await refreshUntil(runsPanel, "Refresh runs", async () => (await run(4).count()) === 2, "two runs through the action");
  });
}

async function pluginNodeKindScenario() {
  const palette = page.getByRole("navigation", { name: "Add a node" });
  const form = page.getByRole("group", { name: "Node kind score/score" });
  const field = (name) => form.locator(".field", { has: page.getByText(name, { exact: true }) });
  const min = field("min *").locator("input");
  await check("open a flow", () => openFlow("scored", 1));
  await check("the palette lists the plugin node kind with its plugin and description", async () => {
    await palette.getByRole("heading", { name: "Plugin node kinds" }).waitFor();
    const button = palette.getByRole("button", { name: "score (score 0.1.0)", exact: true });
    await button.waitFor();
    const declared = (await api("/api/v2/node-kinds")).find((kind) => kind.plugin === "score" && kind.name === "score");
    expect(declared !== undefined, "GET /api/v2/node-kinds lists score/score");
    expect((await button.getAttribute("title")) === (declared.description ?? null), `the description as title: ${await button.getAttribute("title")}`);
  });
  await check("place it and an output topic from the palette, wired after the source", async () => {
    await palette.getByRole("button", { name: "score (score 0.1.0)", exact: true }).click();
    await waitFor(async () => (await status()).includes("Added score/score score-1"), "the node added");
    await waitFor(async () => (await canvasNode("score-1").locator(".node-kind").innerText()).toLowerCase() === "score/score", "labelled plugin/kind");
    await palette.getByRole("button", { name: "Output topic", exact: true }).click();
    await waitFor(async () => (await page.locator(".react-flow__node").count()) === 3, "three nodes");
    await setConfig("output-topic-1", { topic: outputTopic });
    await connectNodes("src", "score-1");
    await connectNodes("score-1", "output-topic-1");
  });
  await check("its form comes from the declaration's config_schema, with its answers and added field", async () => {
    await selectNode("score-1");
    await form.waitFor();
    await field("min *").waitFor();
    await field("field").waitFor();
    expect((await form.getByRole("textbox").count()) === 2, "plugin and kind are not editable fields");
    const answers = page.getByRole("list", { name: "Answers of score" });
    await waitFor(async () => /continue[\s\S]*stop/.test(await answers.innerText()), async () => `the answers: ${await answers.innerText()}`);
    expect((await answers.locator("li").count()) === 2, "only the declared answers");
    const adds = page.getByRole("list", { name: "Fields score adds" });
    expect((await adds.innerText()).includes("score double"), `the added field: ${await adds.innerText()}`);
    // `min` is required: the server's validation blocks the release until it is set.
    await waitFor(async () => (await page.locator(".problems li.problem-blocking", { hasText: "NODE_KIND_CONFIG_INVALID" }).count()) > 0, "min missing is blocking");
    await waitFor(async () => (await form.getByRole("alert").filter({ hasText: "min" }).count()) > 0, "the form says min is missing");
    await waitFor(async () => !(await page.getByRole("button", { name: "Release", exact: true }).isEnabled()), "Release blocked");
  });
  await check("a wrong min gets the server's error under its field", async () => {
    await min.fill("many");
    await min.press("Tab");
    await waitFor(async () => (await field("min *").getByRole("alert").count()) > 0, "an error under min");
    await waitFor(async () => (await min.getAttribute("aria-invalid")) === "true", "aria-invalid");
  });
  await check("filling min makes the draft valid", async () => {
    await min.fill("5");
    await min.press("Tab");
    await waitFor(async () => (await field("min *").getByRole("alert").count()) === 0, "the error cleared");
    await waitFor(async () => (await page.locator(".problems li.problem-blocking").count()) === 0, async () => `nothing blocks: ${await page.locator(".problems").innerText()}`);
    await waitFor(() => page.getByRole("button", { name: "Release", exact: true }).isEnabled(), "Release enabled");
    await page.screenshot({ path: `${artifacts}/studio-node-kind-form.png` });
  });
  await check("save and release", async () => {
    await saveDraft();
    const flow = await api("/api/v2/flows/scored");
    const node = flow.draft.nodes.find((n) => n.id === "score-1");
    const config = node?.config ?? {};
    expect(node?.kind === "node-kind" && Object.keys(config).length === 3 && config.plugin === "score" && config.kind === "score" && config.min === 5, `the node: ${JSON.stringify(node)}`);
    expect(flow.validation === undefined || flow.validation.valid !== false, `draft validation: ${JSON.stringify(flow.validation)}`);
    await release(1);
  });
}

async function pluginNodeKindDriftScenario() {
  const palette = page.getByRole("navigation", { name: "Add a node" });
  await check("open a flow", () => openFlow("scored", 3));
  await check("the drift is shown with its broken reason on the node", async () => {
    await page.getByRole("alert").filter({ hasText: "invalid after a plugin change" }).waitFor();
    await canvasNode("score-1").locator(".badge-blocking").waitFor();
    await waitFor(async () => (await page.locator(".problems li.problem-blocking", { hasText: "NODE_KIND_NOT_DECLARED" }).count()) > 0, "in the problems panel");
  });
  await check("the inspector says the kind is no longer declared", async () => {
    await selectNode("score-1");
    const drift = page.getByRole("group", { name: "Node kind score/score" }).locator(".node-kind-drift");
    await waitFor(async () => /score\/score is not declared[\s\S]*0\.3\.0 declares rank/.test(await drift.innerText().catch(() => "")), async () => `the message: ${await drift.innerText()}`);
    expect((await page.locator(".node-kind-form input").count()) === 0, "no form for an undeclared kind");
  });
  await check("the palette offers what the plugin declares now", async () => {
    await palette.getByRole("button", { name: "rank (score 0.3.0)", exact: true }).waitFor();
    expect((await palette.getByRole("button", { name: "score (score 0.1.0)", exact: true }).count()) === 0, "score/score no longer offered");
  });
}

async function adminScenario() {
  const form = (name) => page.getByRole("form", { name });
  const formError = (name) => form(name).getByRole("alert");
  await check("sign in with the admin token", async () => {
    await page.getByLabel("Admin token").waitFor();
    await page.getByLabel("Admin token").fill(adminToken);
    await page.getByRole("button", { name: "Sign in" }).click();
    await waitFor(async () => (await status()).includes("Signed in"), "signed in");
    await waitFor(async () => (await page.getByLabel("Admin token").count()) === 0, "the token form gone");
  });
  await check("a schema: the server's refusal shown, then saved", async () => {
    await section("Schemas");
    const schema = form("New schema");
    await schema.getByLabel("Event type").fill("login");
    await schema.getByLabel("Name of field 1").fill("age");
    await schema.getByLabel("Type of field 1").selectOption("int");
    await schema.getByRole("button", { name: "Add field" }).click();
    await schema.getByLabel("Name of field 2").fill("age");
    await schema.getByRole("button", { name: "Save schema" }).click();
    await waitFor(async () => (await formError("New schema").innerText()).includes("declared more than once"), "the duplicate refused");
    await schema.getByLabel("Name of field 2").fill("country");
    await schema.getByRole("button", { name: "Save schema" }).click();
    await waitFor(async () => (await status()).includes("Schema login saved"), "saved");
    const stored = await api("/api/v1/schemas/login");
    expect(JSON.stringify(stored.fields) === '[{"name":"age","type":"int"},{"name":"country","type":"string"}]', JSON.stringify(stored));
  });
  await check("an event source: the server's refusal shown, then saved", async () => {
    await section("Event sources");
    const source = form("New event source");
    await source.getByLabel("Source topic").fill("logins");
    await source.getByRole("button", { name: "Save event source" }).click();
    await waitFor(async () => (await formError("New event source").innerText()).includes("default_output_topic"), "the empty default refused");
    await source.getByLabel("Default output topic").fill("logins-out");
    await source.getByRole("button", { name: "Save event source" }).click();
    await waitFor(async () => (await status()).includes("Event source logins saved"), "saved");
    expect((await api("/api/v1/event-sources/logins")).default_output_topic === "logins-out", "stored");
  });
  await check("a rule: its CEL type error shown and fixed, saved, disabled", async () => {
    await section("Rules");
    const rule = form("New rule");
    await rule.getByLabel("Id").fill("adults");
    await rule.getByLabel("Name").fill("Adults");
    await rule.getByLabel("Source topic").fill("logins");
    await rule.getByLabel("Event type").selectOption("login");
    const editor = page.getByRole("textbox", { name: "Expression of the rule" });
    await editor.click();
    await page.keyboard.type("age > 17.5");
    const errors = rule.locator(".cel .field-problems li");
    await waitFor(async () => (await errors.count()) > 0, "the type error under the expression");
    await editor.click();
    await page.keyboard.press("Control+a");
    await page.keyboard.type("age >= 18");
    await waitFor(async () => (await errors.count()) === 0, "the error cleared");
    await rule.getByRole("button", { name: "Save rule" }).click();
    await waitFor(async () => (await status()).includes("Rule Adults saved"), "saved");
    const saved = form("Rule Adults");
    await saved.getByLabel("Enabled").uncheck();
    await saved.getByRole("button", { name: "Save rule" }).click();
    await waitFor(async () => (await api("/api/v1/triggers/adults")).enabled === false, "disabled");
    const stored = await api("/api/v1/triggers/adults");
    expect(stored.conditions.expression === "age >= 18" && stored.output_topic === "", JSON.stringify(stored));
  });
  await check("deleting a schema in use asks first, naming its rules", async () => {
    await section("Schemas");
    await page.getByRole("navigation", { name: "Schemas" }).getByRole("button", { name: "login" }).click();
    await form("Schema login").getByRole("button", { name: "Delete schema" }).click();
    const confirm = page.getByRole("alertdialog", { name: "Delete a schema in use" });
    await waitFor(async () => (await confirm.innerText()).includes("Adults"), async () => `names the rule: ${await confirm.innerText()}`);
    await confirm.getByRole("button", { name: "Keep the schema" }).click();
    expect((await api("/api/v1/schemas/login")).event_type === "login", "kept");
    await form("Schema login").getByRole("button", { name: "Delete schema" }).click();
    await confirm.getByRole("button", { name: "Delete anyway" }).click();
    await waitFor(async () => (await status()).includes("Schema login deleted"), "deleted");
    await waitFor(async () => (await page.getByRole("navigation", { name: "Schemas" }).getByRole("button", { name: "login" }).count()) === 0, "gone from the list");
  });
  await check("two plugin versions uploaded, another plugin's component refused, rolled back", async () => {
    await section("Plugins");
    await uploadPlugin(form("Upload a plugin"), "greeter", "0.1.0", "greeter.wasm");
    await waitFor(async () => (await status()).includes("Plugin greeter 0.1.0 uploaded and active"), "0.1.0 uploaded");
    const next = form("Upload a version of greeter");
    await uploadPlugin(next, null, "0.2.0", "greeter_v2.wasm");
    await waitFor(async () => (await api("/api/v1/plugins/greeter")).active_version === "0.2.0", "0.2.0 active");
    await uploadPlugin(next, null, "0.3.0", "garbage.wasm");
    const refusal = async () => formError("Upload a version of greeter").innerText();
    await waitFor(async () => (await refusal()).includes("manifest declares garbage@0.1.0"), "another plugin's component refused");
    await page.getByRole("button", { name: "Roll back to 0.1.0" }).click();
    await waitFor(async () => (await status()).includes("greeter: 0.1.0 active (was 0.2.0)"), "rolled back");
    expect((await api("/api/v1/plugins/greeter")).active_version === "0.1.0", "0.1.0 active");
  });
}

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
/// Polls `predicate` until it holds; past `timeout` fails with `why` (a string, or a function asked then, so the
/// message shows the page as it was when the wait gave up).
const waitFor = async (predicate, why, timeout = 10_000) => {
  const until = Date.now() + timeout;
  while (Date.now() < until) {
    if (await predicate()) return;
    await page.waitForTimeout(100);
  }
  throw new Error(`timed out: ${typeof why === "function" ? await why().catch(String) : why}`);
};
const api = async (path) =>
  (await page.request.get(base + path, { headers: adminToken ? { authorization: `Bearer ${adminToken}` } : {} })).json();

try {
  await check("served from the binary", async () => {
    const response = await page.goto(`${base}/studio/`);
    expect(response.status() === 200, `GET /studio/ answered ${response.status()}`);
    expect((response.headers()["content-security-policy"] ?? "").includes("frame-ancestors 'none'"), "a CSP");
    await page.getByRole("heading", { name: "Flowhost Studio" }).waitFor();
  });

  const scenarios = { wiring: wiringScenario, config: configScenario, cel: celScenario, drift: driftScenario, runs: runsScenario, plugin: pluginScenario, "plugin-node-kind": pluginNodeKindScenario, "plugin-node-kind-drift": pluginNodeKindDriftScenario, admin: adminScenario, "first-action": firstActionScenario };
  await scenarios[scenario]();

  await check("no serious or critical accessibility finding", async () => {
    // Evaluated through the DevTools protocol, so the page's CSP (no inline script) stays on.
    await page.evaluate(axeSource);
    const result = await page.evaluate(() => globalThis.axe.run(document, { resultTypes: ["violations"] }));
    const grave = result.violations.filter((violation) => ["serious", "critical"].includes(violation.impact));
    const describe = (violation) => `${violation.id} (${violation.impact}): ${violation.nodes.map((n) => n.target.join(" ")).slice(0, 3).join(", ")}`;
    expect(grave.length === 0, grave.map(describe).join("; "));
  });

  await page.screenshot({ path: `${artifacts}/studio-${scenario}.png` });
  expect(offLoopback.length === 0, `requests off loopback: ${offLoopback.join(", ")}`);
  expect(consoleErrors.length === 0, `console errors: ${consoleErrors.join(" | ")}`);
  console.log("DONE");
} catch (error) {
  await page.screenshot({ path: `${artifacts}/studio-${scenario}-failed.png` }).catch(() => {});
  console.log(`FAIL ${step}: ${error.message}${consoleErrors.length ? ` (console: ${consoleErrors.join(" | ")})` : ""}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
