// The pure rules: typed connections, wiring problems, the release gate, undo/redo, copy/paste.
import assert from "node:assert/strict";
import { test } from "node:test";

import { copy, paste } from "./clipboard";
import {
  clientProblems,
  connectionRefusal,
  cycleNodes,
  freshId,
  mergeProblems,
  problemsByNode,
  releaseGate,
  type FlowBody,
  type Problem,
} from "./graph";
import { record, redo, replace, start, undo } from "./history";

const node = (id: string, kind: string) => ({ id, kind, config: {} });
const basic = (): FlowBody => ({
  nodes: [node("src", "source"), node("svc", "service-in"), node("act", "action"), node("map", "mapping")],
  edges: [
    { from: "src", to: "svc" },
    { from: "svc", to: "act" },
  ],
});

test("typed connections refuse what cannot connect, with a message", () => {
  const body = basic();
  assert.match(connectionRefusal(body, "map", "src")!, /into the source/);
  assert.match(connectionRefusal(body, "map", "svc")!, /already has an input/);
  assert.match(connectionRefusal(body, "act", "act")!, /cannot feed itself/);
  assert.match(connectionRefusal({ ...body, edges: [...body.edges, { from: "act", to: "map" }] }, "map", "svc")!, /input|cycle/);
  const lone = { nodes: [node("src", "source"), node("act", "action"), node("m", "mapping")], edges: [{ from: "src", to: "m" }] };
  assert.match(connectionRefusal(lone, "m", "act")!, /service segment before it/);
  const chained = { ...body, nodes: [...body.nodes, node("act2", "action")] };
  assert.match(connectionRefusal(chained, "act", "act2")!, /service segment of its own/);
  assert.equal(connectionRefusal(body, "act", "map"), null);
  assert.equal(connectionRefusal(body, "src", "map"), null, "a source may branch");
  const looped = { nodes: [node("src", "source"), node("a", "mapping"), node("b", "mapping")], edges: [{ from: "src", to: "a" }, { from: "a", to: "b" }] };
  assert.match(connectionRefusal({ ...looped, edges: [{ from: "a", to: "b" }] }, "b", "a")!, /cycle/);
});

test("wiring problems: source, inputs, cycles, orphans, dead ends", () => {
  const codes = (body: FlowBody) => clientProblems(body).map((p) => `${p.code}:${p.node_id ?? ""}`).sort();
  assert.deepEqual(codes({ nodes: [], edges: [] }), ["EMPTY_FLOW:"]);
  assert.deepEqual(codes(basic()), ["DEAD_END:map", "ORPHAN_NODE:map"]);
  const cyclic: FlowBody = {
    nodes: [node("src", "source"), node("a", "mapping"), node("b", "condition")],
    edges: [{ from: "src", to: "a" }, { from: "a", to: "b" }, { from: "b", to: "a" }],
  };
  assert.deepEqual(cycleNodes(cyclic), ["a", "b"]);
  assert.deepEqual(codes(cyclic), ["CYCLE:a", "CYCLE:b", "MULTIPLE_INPUTS:a"]);
  const noSource: FlowBody = { nodes: [node("a", "mapping")], edges: [] };
  assert.ok(codes(noSource).includes("SOURCE_MISSING:"));
  const two: FlowBody = { nodes: [node("s1", "source"), node("s2", "source")], edges: [{ from: "s1", to: "s2" }] };
  assert.ok(codes(two).includes("SOURCE_DUPLICATE:s2") && codes(two).includes("EDGE_INTO_SOURCE:s2"));
  assert.deepEqual(cycleNodes({ nodes: [node("a", "mapping")], edges: [{ from: "a", to: "a" }] }), ["a"]);
});

test("a long chain is checked whole: its one stray node is an orphan and a dead end, the rest are fine", () => {
  const chain: FlowBody = {
    nodes: [node("n0", "source"), ...Array.from({ length: 2000 }, (_, at) => node(`n${at + 1}`, at % 2 ? "condition" : "mapping"))],
    edges: Array.from({ length: 2000 }, (_, at) => ({ from: `n${at}`, to: `n${at + 1}` })),
  };
  chain.nodes.push(node("n2001", "output-topic"), node("stray", "mapping"));
  chain.edges.push({ from: "n2000", to: "n2001" });
  assert.deepEqual(clientProblems(chain).map((p) => `${p.code}:${p.node_id}`), ["ORPHAN_NODE:stray", "DEAD_END:stray"]);
  assert.match(connectionRefusal(chain, "n2001", "n0")!, /into the source/);
  assert.match(connectionRefusal(chain, "n1500", "n10")!, /already has an input/);
  assert.match(connectionRefusal({ ...chain, edges: chain.edges.filter((e) => e.to !== "n10") }, "n1500", "n10")!, /cycle/);
  assert.equal(connectionRefusal(chain, "n2000", "stray"), null);
});

test("each node's problems: the draft's in order, then the broken reasons the draft does not also have", () => {
  const problem = (code: string, node_id: string, origin: Problem["origin"] = "client"): Problem => ({ code, severity: "warning", message: code, node_id, origin });
  const draft = [problem("DEAD_END", "a"), problem("ORPHAN_NODE", "b"), problem("ORPHAN_NODE", "a"), { ...problem("EMPTY", ""), node_id: undefined }];
  const broken = [problem("DEAD_END", "a", "server"), problem("ACTION_MISSING", "a", "server"), problem("ACTION_MISSING", "c", "server")];
  const byNode = problemsByNode(draft, broken);
  assert.deepEqual(byNode.get("a"), [draft[0], draft[2], broken[1]]);
  assert.deepEqual(byNode.get("b"), [draft[1]]);
  assert.deepEqual(byNode.get("c"), [broken[2]]);
  assert.equal(byNode.has("d"), false);
});

test("server and client problems merge once, blocking first; only blocking problems stop a release", () => {
  const client = clientProblems(basic());
  const server: Problem[] = [
    { code: "ORPHAN_NODE", severity: "warning", message: "server says orphan", node_id: "map", origin: "server" },
    { code: "ACTION_REF_MISSING", severity: "blocking", message: "no action_ref", node_id: "act", pointer: "/config/action_ref", origin: "server" },
  ];
  const merged = mergeProblems(client, server);
  assert.deepEqual(merged.map((p) => `${p.code}/${p.origin}`), ["ACTION_REF_MISSING/server", "ORPHAN_NODE/server", "DEAD_END/client"]);
  assert.deepEqual(releaseGate(merged, new Set()), { allowed: false, reason: "1 blocking problem", note: "2 warnings not acknowledged" });
  const warnings = merged.filter((p) => p.severity === "warning");
  assert.deepEqual(releaseGate(warnings, new Set(["ORPHAN_NODE"])), { allowed: true, reason: "", note: "1 warning not acknowledged" });
  assert.deepEqual(releaseGate(warnings, new Set(["ORPHAN_NODE", "DEAD_END"])), { allowed: true, reason: "", note: "" });
});

test("undo and redo walk the edits, config edits included", () => {
  let history = start(basic());
  const edited = { ...history.present, nodes: history.present.nodes.map((n) => (n.id === "map" ? { ...n, config: { fields: ["a"] } } : n)) };
  history = record(history, edited);
  history = record(history, { ...edited, nodes: [...edited.nodes, node("x", "condition")] });
  assert.equal(history.past.length, 2);
  history = undo(history);
  assert.equal(history.present.nodes.length, 4);
  assert.deepEqual(history.present.nodes.find((n) => n.id === "map")!.config, { fields: ["a"] });
  history = undo(history);
  assert.deepEqual(history.present.nodes.find((n) => n.id === "map")!.config, {});
  assert.equal(undo(history), history, "nothing left to undo");
  history = redo(redo(history));
  assert.equal(history.present.nodes.length, 5);
  assert.equal(redo(history), history, "nothing left to redo");
});

test("a drag is one undo step back to where it started", () => {
  const at = (x: number) => ({ ...basic(), nodes: basic().nodes.map((n) => (n.id === "map" ? { ...n, position: { x, y: 0 } } : n)) });
  let history = start(at(0));
  history = replace(history, at(10));
  history = replace(history, at(20));
  assert.equal(history.past.length, 0, "no step while the drag is under way");
  history = record(history, at(30));
  assert.equal(history.past.length, 1);
  history = undo(history);
  assert.deepEqual(history.present.nodes.find((n) => n.id === "map")!.position, { x: 0, y: 0 });
  history = redo(history);
  assert.deepEqual(history.present.nodes.find((n) => n.id === "map")!.position, { x: 30, y: 0 });
  history = record(history, at(40));
  assert.equal(undo(history).present.nodes.find((n) => n.id === "map")!.position!.x, 30, "the next edit steps from the drag's end");
});

test("copy and paste keep the group's inner edges under fresh ids", () => {
  const body = basic();
  const fragment = copy(body, new Set(["svc", "act"]));
  assert.deepEqual(fragment.edges, [{ from: "svc", to: "act" }]);
  const pasted = paste(body, fragment);
  assert.deepEqual(pasted.ids, ["service-in-1", "action-1"]);
  assert.deepEqual(pasted.body.edges.at(-1), { from: "service-in-1", to: "action-1" });
  assert.equal(pasted.body.nodes.length, 6);
  assert.equal(freshId(pasted.body, "action"), "action-2");
});

test("the fields reaching a node follow mappings, lookups and actions", async () => {
  const { fieldsAt } = await import("./graph");
  const schema = [
    { name: "amount", type: "double" },
    { name: "player_id", type: "string" },
  ];
  const body: FlowBody = {
    nodes: [
      { id: "src", kind: "source", config: { event_type: "deposit" } },
      { id: "merge", kind: "mapping", config: { mode: "merge", fields: [{ source: "player_id", target: "player" }] } },
      { id: "tpl", kind: "lookup", config: { target: "template" } },
      { id: "c1", kind: "condition", config: {} },
      { id: "select", kind: "mapping", config: { fields: [{ source: "amount", target: "value" }] } },
      { id: "c2", kind: "condition", config: {} },
    ],
    edges: [
      { from: "src", to: "merge" },
      { from: "merge", to: "tpl" },
      { from: "tpl", to: "c1" },
      { from: "c1", to: "select" },
      { from: "select", to: "c2" },
    ],
  };
  const names = (id: string) => fieldsAt(body, id, schema).map((f) => `${f.name}:${f.type}`);
  assert.deepEqual(names("merge"), ["amount:double", "event_type:string", "player_id:string", "tenant_id:string"]);
  assert.deepEqual(names("c1"), ["amount:double", "event_type:string", "player:string", "player_id:string", "template:dyn", "tenant_id:string"]);
  assert.deepEqual(names("c2"), ["value:double"], "select keeps only its targets");
});
