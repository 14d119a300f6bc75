// Plugin node kinds: the palette's labels, a new node's config, which declaration a node names (drift
// included), the answers and added fields, and where node-kind nodes sit in the graph rules.
import assert from "node:assert/strict";
import { test } from "node:test";

import { clientProblems, connectionRefusal, fieldsAt, freshId, kindLabel, parentService, type FlowBody } from "./graph";
import {
  addedFields,
  answersOf,
  idStem,
  newNodeConfig,
  paletteLabel,
  resolveNodeKind,
  undeclaredMessage,
  type NodeKindDeclaration,
} from "./nodeKinds";
import { fields, setAt } from "./schema";

const score: NodeKindDeclaration = {
  plugin: "score",
  service: "score",
  version: "0.1.0",
  name: "score",
  description: "Scores a deposit; drops low scores",
  config_schema: {
    type: "object",
    properties: { min: { type: "number" }, field: { type: "string" } },
    required: ["min"],
    additionalProperties: false,
  },
  answers: ["continue", "stop"],
  adds_fields: { score: "double" },
};
const grade: NodeKindDeclaration = { plugin: "score", service: "score", version: "0.1.0", name: "grade", config_schema: {} };

test("the palette names a kind with its plugin and version; a new node names the plugin and kind", () => {
  assert.equal(paletteLabel(score), "score (score 0.1.0)");
  assert.deepEqual(newNodeConfig(score), { plugin: "score", kind: "score" });
  assert.equal(idStem(score), "score");
  assert.equal(idStem({ ...score, name: "odd name/with slash" }), "node-kind", "a name that makes no tidy id");
  const body: FlowBody = { nodes: [{ id: "score-1", kind: "node-kind", config: {} }], edges: [] };
  assert.equal(freshId(body, idStem(score)), "score-2");
});

test("a node's plugin/kind resolves to its declaration, or says why not", () => {
  const declarations = [grade, score];
  assert.deepEqual(resolveNodeKind({ plugin: "score", kind: "score", min: 5 }, declarations), { state: "declared", declaration: score });
  assert.deepEqual(resolveNodeKind({ plugin: "score", kind: "score" }, null), { state: "loading" });
  assert.deepEqual(resolveNodeKind({ plugin: "score" }, declarations), { state: "unnamed", plugin: "score", kind: null });
  assert.deepEqual(resolveNodeKind({ plugin: "", kind: 3 }, declarations), { state: "unnamed", plugin: null, kind: null });
  const dropped = resolveNodeKind({ plugin: "score", kind: "rank" }, declarations);
  assert.deepEqual(dropped, { state: "undeclared", plugin: "score", kind: "rank", others: [grade, score] });
  assert.match(undeclaredMessage("score", "rank", [grade, score]), /score\/rank is not declared.*declares grade, score instead/);
  assert.match(undeclaredMessage("gone", "rank", []), /No active version of plugin gone declares any node kind/);
});

test("answers default to all five; added fields are listed by name", () => {
  assert.deepEqual(answersOf(score), ["continue", "stop"]);
  assert.deepEqual(answersOf(grade), ["continue", "stop", "skip-forward", "permanent", "retryable"]);
  assert.deepEqual(addedFields({ ...score, adds_fields: { z: "int", a: "bool" } }), [
    { name: "a", type: "bool" },
    { name: "z", type: "int" },
  ]);
  assert.deepEqual(addedFields(grade), []);
});

test("the form's fields leave plugin and kind alone and write the rest into the config", () => {
  const found = fields({ ...(score.config_schema as object), properties: { plugin: {}, kind: {}, min: { type: "number" } } }, "/config", ["plugin", "kind"]);
  assert.deepEqual(found.map((field) => [field.pointer, field.required]), [["/config/min", true]]);
  const config = setAt({ plugin: "score", kind: "score" }, "/config/field", "{{amount}}");
  assert.deepEqual(setAt(config, "/config/min", 5), { plugin: "score", kind: "score", field: "{{amount}}", min: 5 });
});

const placed = (): FlowBody => ({
  nodes: [
    { id: "src", kind: "source", config: { event_type: "deposit" } },
    { id: "score-1", kind: "node-kind", config: { plugin: "score", kind: "score", min: 5 } },
    { id: "cond", kind: "condition", config: {} },
    { id: "out", kind: "output-topic", config: {} },
  ],
  edges: [],
});

test("a node-kind node sits where a condition or mapping may, and is labelled plugin/kind", () => {
  const body = placed();
  assert.equal(connectionRefusal(body, "src", "score-1"), null);
  assert.equal(connectionRefusal(body, "score-1", "out"), null);
  assert.equal(connectionRefusal(body, "score-1", "cond"), null);
  const wired = { ...body, edges: [{ from: "src", to: "score-1" }] };
  assert.match(connectionRefusal(wired, "cond", "score-1")!, /already has an input/);
  assert.equal(kindLabel(body.nodes[1]), "score/score");
  assert.equal(kindLabel({ kind: "node-kind", config: { plugin: "score" } }), "score/?");
  assert.equal(kindLabel({ kind: "node-kind", config: {} }), "Plugin node kind");
  assert.equal(kindLabel({ kind: "mapping", config: {} }), "Mapping");
  const segmented: FlowBody = {
    nodes: [
      { id: "src", kind: "source", config: {} },
      { id: "seg", kind: "service-in", config: { service: "ledger" } },
      { id: "k", kind: "node-kind", config: { plugin: "score", kind: "score" } },
      { id: "act", kind: "action", config: {} },
    ],
    edges: [{ from: "src", to: "seg" }, { from: "seg", to: "k" }],
  };
  assert.equal(connectionRefusal(segmented, "k", "act"), null, "inside a segment, like a condition");
  assert.equal(parentService({ ...segmented, edges: [...segmented.edges, { from: "k", to: "act" }] }, "act"), "ledger");
});

test("a node-kind node leading nowhere is a dead end; its problems name it by plugin/kind", () => {
  const body = { ...placed(), edges: [{ from: "src", to: "score-1" }] };
  const problems = clientProblems(body).filter((problem) => problem.node_id === "score-1");
  assert.deepEqual(problems.map((problem) => problem.code), ["DEAD_END"]);
  assert.match(problems[0].message, /^score\/score "score-1" leads nowhere/);
});

test("the fields after a node-kind node include its adds_fields", () => {
  const schema = [{ name: "amount", type: "double" }];
  const body = { ...placed(), edges: [{ from: "src", to: "score-1" }, { from: "score-1", to: "cond" }] };
  const names = (declarations: NodeKindDeclaration[]) => fieldsAt(body, "cond", schema, declarations).map((f) => `${f.name}:${f.type}`);
  assert.deepEqual(names([score]), ["amount:double", "event_type:string", "score:double", "tenant_id:string"]);
  assert.deepEqual(names([grade]), ["amount:double", "event_type:string", "tenant_id:string"], "undeclared: nothing added");
  assert.deepEqual(
    fieldsAt(body, "score-1", schema, [score]).map((f) => f.name),
    ["amount", "event_type", "tenant_id"],
    "the node's own fields are not among those reaching it",
  );
});
