// Auto-layout: left to right, the source first, by dagre's layered layout.

import dagre from "@dagrejs/dagre";

import type { FlowBody } from "./graph";

export const NODE_WIDTH = 180;
export const NODE_HEIGHT = 56;

/// `body` with every node placed.
export function layout(body: FlowBody): FlowBody {
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({ rankdir: "LR", nodesep: 30, ranksep: 60 });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const node of body.nodes) graph.setNode(node.id, { width: NODE_WIDTH, height: NODE_HEIGHT });
  for (const edge of body.edges) {
    if (graph.hasNode(edge.from) && graph.hasNode(edge.to)) graph.setEdge(edge.from, edge.to);
  }
  dagre.layout(graph);
  return {
    ...body,
    nodes: body.nodes.map((node) => {
      const placed = graph.node(node.id);
      return { ...node, position: { x: Math.round(placed.x - NODE_WIDTH / 2), y: Math.round(placed.y - NODE_HEIGHT / 2) } };
    }),
  };
}
