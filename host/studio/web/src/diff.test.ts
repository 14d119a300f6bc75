// The diff between two released versions: nodes added, removed and changed (by pointer), edges added and
// removed, positions ignored.
import assert from "node:assert/strict";
import { test } from "node:test";

import { diffBodies, diffBody, valueChanges } from "./diff";

const v1 = {
  nodes: [
    { id: "src", kind: "source", config: { topic: "deposits" }, position: { x: 0, y: 0 } },
    { id: "act", kind: "action", config: { action_ref: "limit", limit: 100, nested: { a: 1, b: 2 } } },
    { id: "old", kind: "output-topic", config: { topic: "a" } },
  ],
  edges: [
    { from: "src", to: "act" },
    { from: "act", to: "old" },
  ],
};
const v2 = {
  nodes: [
    { id: "src", kind: "source", config: { topic: "deposits" }, position: { x: 300, y: 50 } },
    { id: "act", kind: "action", config: { action_ref: "limit", limit: 1000, nested: { a: 1 } } },
    { id: "new", kind: "output-topic", config: { topic: "b" } },
  ],
  edges: [
    { from: "src", to: "act" },
    { from: "act", to: "new" },
  ],
};

test("nodes are added, removed, changed or the same; a move is no change", () => {
  const diff = diffBodies(v1, v2);
  assert.deepEqual(
    diff.nodes.map((node) => [node.id, node.change]),
    [["src", "same"], ["act", "changed"], ["new", "added"], ["old", "removed"]],
  );
  assert.deepEqual(diff.nodes[1].values, [
    { pointer: "/config/limit", before: 100, after: 1000 },
    { pointer: "/config/nested/b", before: 2, after: undefined },
  ]);
});

test("edges are added or removed", () => {
  const diff = diffBodies(v1, v2);
  assert.deepEqual(
    diff.edges.map((edge) => [edge.from, edge.to, edge.change]),
    [["src", "act", "same"], ["act", "new", "added"], ["act", "old", "removed"]],
  );
  const drawn = diffBody(diff);
  assert.equal(drawn.nodes.length, 4, "the canvas draws both versions' nodes");
  assert.equal(drawn.edges.length, 3);
});

test("identical versions differ nowhere; pointers escape '/' and '~'", () => {
  assert.ok(diffBodies(v1, v1).nodes.every((node) => node.change === "same"));
  assert.deepEqual(valueChanges({ "a/b": 1, "c~d": [1] }, { "a/b": 2, "c~d": [1, 2] }), [
    { pointer: "/a~1b", before: 1, after: 2 },
    { pointer: "/c~0d", before: [1], after: [1, 2] },
  ]);
});
