// The canvas keeps the node objects an edit did not change (React Flow redraws a node whose object changed).
import assert from "node:assert/strict";
import { test } from "node:test";

import { keepUnchanged, type CanvasNode } from "./canvasNodes";
import type { FlowNode, Problem } from "./graph";

const flowNode = (id: string): FlowNode => ({ id, kind: "mapping", config: {}, position: { x: 0, y: 0 } });
const orphan = (id: string): Problem => ({ code: "ORPHAN_NODE", severity: "warning", message: `${id} is an orphan`, node_id: id, origin: "client" });
const drawn = (node: FlowNode, fields: Partial<CanvasNode> = {}, problems: Problem[] = []): CanvasNode => ({
  id: node.id,
  type: "flow",
  position: { ...node.position! },
  data: { node, problems },
  selected: false,
  ariaLabel: `Mapping ${node.id}`,
  ...fields,
});

test("a node none of whose inputs changed keeps its object, problems compared by what they say", () => {
  const [a, b] = [flowNode("a"), flowNode("b")];
  const previous = [drawn(a, {}, [orphan("a")]), drawn(b)];
  const fresh = [drawn(a, {}, [orphan("a")]), drawn(b), drawn(flowNode("c"))];
  const kept = keepUnchanged(new Map(previous.map((node) => [node.id, node])), fresh);
  assert.equal(kept[0], previous[0], "equal problems made again");
  assert.equal(kept[1], previous[1]);
  assert.equal(kept[2], fresh[2], "a new node is drawn");
});

test("a node whose draft, selection, size, position, class or problems changed is drawn again", () => {
  const a = flowNode("a");
  const before = drawn(a);
  const previous = new Map([["a", before]]);
  const changes: CanvasNode[] = [
    drawn({ ...a, config: { mode: "merge" } }),
    drawn(a, { selected: true }),
    drawn(a, { measured: { width: 180, height: 56 } }),
    drawn(a, { position: { x: 10, y: 0 } }),
    drawn(a, { className: "on-path outcome-completed" }),
    drawn(a, {}, [orphan("a")]),
    drawn(a, { data: { node: a, problems: [], change: "changed" } }),
  ];
  for (const changed of changes) assert.equal(keepUnchanged(previous, [changed])[0], changed);
});
