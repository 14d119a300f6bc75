// The canvas's React Flow nodes kept from one render to the next: React Flow compares nodes by identity, and a
// node whose object changed is measured and redrawn again, so a node none of whose inputs changed keeps the
// object it had. An edit then redraws the nodes it touched, not every node of the flow. Pure, no DOM.

import type { Node } from "@xyflow/react";

import type { ChangeKind } from "./diff";
import type { FlowNode, Problem } from "./graph";

/// What a node on the canvas shows: the draft's node, its problems and, in the diff view, what changed.
export type NodeData = { node: FlowNode; problems: Problem[]; change?: ChangeKind };

export type CanvasNode = Node<NodeData>;

/// Whether two lists of problems say the same (problems are made again at each edit, so not by identity).
function sameProblems(a: Problem[], b: Problem[]): boolean {
  return (
    a === b ||
    (a.length === b.length &&
      a.every((problem, at) => {
        const other = b[at];
        return (
          problem.code === other.code &&
          problem.severity === other.severity &&
          problem.message === other.message &&
          problem.origin === other.origin &&
          problem.pointer === other.pointer
        );
      }))
  );
}

/// Whether `a` and `b` draw the same: every field the canvas sets (see FlowCanvas.tsx) is compared.
function sameNode(a: CanvasNode, b: CanvasNode): boolean {
  return (
    a.type === b.type &&
    a.position.x === b.position.x &&
    a.position.y === b.position.y &&
    a.selected === b.selected &&
    a.measured === b.measured &&
    a.className === b.className &&
    a.ariaLabel === b.ariaLabel &&
    a.data.node === b.data.node &&
    a.data.change === b.data.change &&
    sameProblems(a.data.problems, b.data.problems)
  );
}

/// `fresh`, each node that draws the same as its version in `previous` (by id) replaced by that version.
export function keepUnchanged(previous: ReadonlyMap<string, CanvasNode>, fresh: CanvasNode[]): CanvasNode[] {
  return fresh.map((node) => {
    const kept = previous.get(node.id);
    return kept && sameNode(kept, node) ? kept : node;
  });
}
