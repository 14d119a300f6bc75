// The difference between two released versions of a flow, for the canvas's diff view: which nodes were added,
// removed or changed (and, for a change, each config value that differs, by JSON Pointer), and which edges were
// added or removed. Positions do not count: moving a node changes nothing the runner sees. Pure functions.

import type { FlowBody, FlowNode } from "./graph";

export type ChangeKind = "added" | "removed" | "changed" | "same";

/// One value that differs between the two versions of a node (`undefined`: absent on that side).
export interface ValueChange {
  pointer: string;
  before: unknown;
  after: unknown;
}

export interface NodeDiff {
  id: string;
  change: ChangeKind;
  /// The node as it is in the later version (the earlier one's for a removed node).
  node: FlowNode;
  values: ValueChange[];
}

export interface EdgeDiff {
  from: string;
  to: string;
  change: "added" | "removed" | "same";
}

export interface FlowDiff {
  nodes: NodeDiff[];
  edges: EdgeDiff[];
}

const escape = (key: string) => key.replaceAll("~", "~0").replaceAll("/", "~1");

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/// Every leaf where `before` and `after` differ, under `pointer`. Objects are compared key by key; arrays and
/// scalars as whole values.
export function valueChanges(before: unknown, after: unknown, pointer = ""): ValueChange[] {
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys.flatMap((key) => valueChanges(before[key], after[key], `${pointer}/${escape(key)}`));
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [{ pointer, before, after }];
}

/// The node as the runner sees it: kind, name and config (not its position).
const meaning = (node: FlowNode) => ({ kind: node.kind, name: node.name, config: node.config });

/// The diff from `before` to `after`: the later version's nodes in its order, then the removed ones.
export function diffBodies(before: FlowBody, after: FlowBody): FlowDiff {
  const earlier = new Map(before.nodes.map((node) => [node.id, node]));
  const later = new Set(after.nodes.map((node) => node.id));
  const nodes: NodeDiff[] = after.nodes.map((node) => {
    const old = earlier.get(node.id);
    if (!old) return { id: node.id, change: "added", node, values: [] };
    const values = valueChanges(meaning(old), meaning(node));
    return { id: node.id, change: values.length > 0 ? "changed" : "same", node, values };
  });
  for (const node of before.nodes) {
    if (!later.has(node.id)) nodes.push({ id: node.id, change: "removed", node, values: [] });
  }
  const key = (edge: { from: string; to: string }) => `${edge.from}\u0000${edge.to}`;
  const earlierEdges = new Set(before.edges.map(key));
  const laterEdges = new Set(after.edges.map(key));
  const edges: EdgeDiff[] = after.edges.map((edge) => ({
    from: edge.from,
    to: edge.to,
    change: earlierEdges.has(key(edge)) ? "same" : "added",
  }));
  for (const edge of before.edges) {
    if (!laterEdges.has(key(edge))) edges.push({ from: edge.from, to: edge.to, change: "removed" });
  }
  return { nodes, edges };
}

/// The diff as a body the canvas can draw: every node of either version (positions from the later one, or the
/// earlier one for removed nodes) and every edge of either.
export function diffBody(diff: FlowDiff): FlowBody {
  return {
    nodes: diff.nodes.map((entry) => entry.node),
    edges: diff.edges.map(({ from, to }) => ({ from, to })),
  };
}
