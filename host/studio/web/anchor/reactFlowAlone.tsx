// The anchor of Studio's edit figure (tests/browser/studio_load.mjs): React Flow alone, as its own stress
// example uses it (default nodes, state applied with `applyNodeChanges`), with the chrome Studio's canvas draws
// (background, controls, minimap, fitted view), a chain of `?nodes=` nodes, and a button that adds one node. Not
// part of Studio's bundle: `node build.mjs --anchor --outdir <dir>` builds it for the benchmark alone.

import "@xyflow/react/dist/style.css";

import {
  Background,
  Controls,
  MiniMap,
  Panel,
  ReactFlow,
  applyEdgeChanges,
  applyNodeChanges,
  type Edge,
  type EdgeChange,
  type Node,
  type NodeChange,
} from "@xyflow/react";
import { useCallback, useState } from "react";
import { createRoot } from "react-dom/client";

const count = Number(new URLSearchParams(location.search).get("nodes") ?? "300");

function chainNode(at: number): Node {
  return { id: `n${at}`, position: { x: at * 220, y: 80 + (at % 2) * 60 }, data: { label: `Node ${at}` } };
}

const initialNodes: Node[] = Array.from({ length: count }, (_, at) => chainNode(at));
const initialEdges: Edge[] = Array.from({ length: count - 1 }, (_, at) => ({
  id: `n${at}->n${at + 1}`,
  source: `n${at}`,
  target: `n${at + 1}`,
}));

function AnchorFlow() {
  const [nodes, setNodes] = useState(initialNodes);
  const [edges, setEdges] = useState(initialEdges);
  const onNodesChange = useCallback(
    (changes: NodeChange[]) => setNodes((current) => applyNodeChanges(changes, current)),
    [],
  );
  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => setEdges((current) => applyEdgeChanges(changes, current)),
    [],
  );
  return (
    <div style={{ width: "100vw", height: "100vh" }}>
      <ReactFlow nodes={nodes} edges={edges} onNodesChange={onNodesChange} onEdgesChange={onEdgesChange} fitView>
        <Background />
        <Controls />
        <MiniMap />
        <Panel position="top-right">
          <button onClick={() => setNodes((current) => [...current, chainNode(current.length)])}>Add element</button>
        </Panel>
      </ReactFlow>
    </div>
  );
}

createRoot(document.getElementById("root")!).render(<AnchorFlow />);
