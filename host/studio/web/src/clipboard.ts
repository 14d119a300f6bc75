// Copy and paste of node groups: the selected nodes with the edges between them, pasted with fresh ids and an
// offset so the copy is visible beside the original. Pure, no DOM.

import { freshId, type FlowBody, type FlowEdge, type FlowNode } from "./graph";

export interface Fragment {
  nodes: FlowNode[];
  edges: FlowEdge[];
}

/// The nodes `ids` and the edges with both ends among them.
export function copy(body: FlowBody, ids: ReadonlySet<string>): Fragment {
  return {
    nodes: body.nodes.filter((node) => ids.has(node.id)).map((node) => structuredClone(node)),
    edges: body.edges.filter((edge) => ids.has(edge.from) && ids.has(edge.to)).map((edge) => ({ ...edge })),
  };
}

/// `body` with the fragment added under fresh ids, moved by `offset`; also the new ids.
export function paste(body: FlowBody, fragment: Fragment, offset = 40): { body: FlowBody; ids: string[] } {
  const renamed = new Map<string, string>();
  let next: FlowBody = { nodes: [...body.nodes], edges: [...body.edges] };
  for (const node of fragment.nodes) {
    const id = freshId(next, node.kind);
    renamed.set(node.id, id);
    const position = node.position ? { x: node.position.x + offset, y: node.position.y + offset } : undefined;
    next = { ...next, nodes: [...next.nodes, { ...structuredClone(node), id, position }] };
  }
  const edges = fragment.edges.map((edge) => ({ from: renamed.get(edge.from)!, to: renamed.get(edge.to)! }));
  return { body: { ...next, edges: [...next.edges, ...edges] }, ids: [...renamed.values()] };
}
