// The flow editor's canvas (React Flow): the draft's nodes, each with its kind, id and a badge with its problems,
// and its edges; drawing, moving and deleting them as edits of the draft; the banner of a released flow turned
// invalid; and, read-only, the diff of two released versions (nodes and edges marked added, removed or changed)
// or the chosen run's path (RunOverlay.tsx).

import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position,
  ReactFlow,
  type Connection,
  type Edge,
  type EdgeChange,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { useCallback, useMemo, useState } from "react";

import type { ChangeKind } from "./diff";
import { connectionRefusal, kindLabel, type FlowNode, type Problem } from "./graph";
import { NODE_HEIGHT, NODE_WIDTH } from "./layout";
import { runNodeClass, runTookEdge } from "./RunOverlay";
import type { FlowEditor } from "./useFlowEditor";

type NodeData = { node: FlowNode; problems: Problem[]; change?: ChangeKind };

/// A node on the canvas: its kind (a plugin node kind's `plugin/kind`), id, a badge with its problems, and in
/// the diff view what changed.
function FlowNodeView({ data, selected }: NodeProps<Node<NodeData>>) {
  const { node, problems, change } = data;
  const blocking = problems.filter((problem) => problem.severity === "blocking").length;
  const label = kindLabel(node);
  return (
    <div
      className={`node node-${node.kind}${selected ? " selected" : ""}`}
      style={{ width: NODE_WIDTH, minHeight: NODE_HEIGHT }}
    >
      {node.kind !== "source" && <Handle type="target" position={Position.Left} />}
      <div className="node-kind" title={label}>
        {label}
      </div>
      <div className="node-id">{node.name || node.id}</div>
      {change && change !== "same" && <div className="node-change">{change}</div>}
      {problems.length > 0 && (
        <span
          className={`badge ${blocking > 0 ? "badge-blocking" : "badge-warning"}`}
          title={problems.map((problem) => problem.message).join("\n")}
          aria-label={`${problems.length} problem${problems.length === 1 ? "" : "s"}`}
        >
          {problems.length}
        </span>
      )}
      <Handle type="source" position={Position.Right} />
    </div>
  );
}

const nodeTypes = { flow: FlowNodeView };

export function FlowCanvas({ editor }: { editor: FlowEditor }) {
  const { flow, body, shown, selected, setSelected, problemsOf, brokenReasons, run, comparing, compare } = editor;
  const { edit, move, connect } = editor;
  // Node sizes as React Flow measured them (it shows a node only once measured).
  const [measured, setMeasured] = useState<Map<string, { width: number; height: number }>>(new Map());

  const changeOf = useMemo(
    () => new Map(comparing?.diff.nodes.map((entry) => [entry.id, entry.change]) ?? []),
    [comparing],
  );
  const edgeChangeOf = useMemo(
    () => new Map(comparing?.diff.edges.map((entry) => [`${entry.from}->${entry.to}`, entry.change]) ?? []),
    [comparing],
  );
  const nodeClass = useCallback(
    (id: string) => (comparing ? `diff-${changeOf.get(id) ?? "same"}` : runNodeClass(run, id)),
    [changeOf, comparing, run],
  );

  const nodes: Node<NodeData>[] = useMemo(
    () =>
      shown.nodes.map((node, at) => ({
        id: node.id,
        type: "flow",
        position: node.position ?? { x: 40 + at * 220, y: 80 },
        data: { node, problems: comparing ? [] : problemsOf(node.id), change: changeOf.get(node.id) },
        selected: selected.has(node.id),
        measured: measured.get(node.id),
        className: nodeClass(node.id),
        ariaLabel: `${kindLabel(node)} ${node.id}${comparing ? ` (${changeOf.get(node.id) ?? "same"})` : ""}`,
      })),
    [shown.nodes, measured, problemsOf, selected, nodeClass, comparing, changeOf],
  );
  const edges: Edge[] = useMemo(
    () =>
      shown.edges.map((edge) => {
        const id = `${edge.from}->${edge.to}`;
        return {
          id,
          source: edge.from,
          target: edge.to,
          ariaLabel: `from ${edge.from} to ${edge.to}`,
          className: comparing ? `diff-${edgeChangeOf.get(id) ?? "same"}` : undefined,
          animated: !comparing && runTookEdge(run, edge.from, edge.to),
        };
      }),
    [shown.edges, run, comparing, edgeChangeOf],
  );

  const onNodesChange = useCallback(
    (changes: NodeChange<Node<NodeData>>[]) => {
      const moved = new Map<string, { x: number; y: number }>();
      let dragEnded = false;
      const removed = new Set<string>();
      let selection: Set<string> | null = null;
      const sizes: [string, { width: number; height: number }][] = [];
      for (const change of changes) {
        if (change.type === "dimensions" && change.dimensions) {
          sizes.push([change.id, change.dimensions]);
        } else if (change.type === "position" && change.position) {
          moved.set(change.id, change.position);
          if (change.dragging === false) dragEnded = true;
        } else if (change.type === "remove") {
          removed.add(change.id);
        } else if (change.type === "select") {
          selection ??= new Set(selected);
          if (change.selected) selection.add(change.id);
          else selection.delete(change.id);
        }
      }
      if (sizes.length > 0) {
        setMeasured((current) => {
          const changed = sizes.filter(([id, size]) => {
            const known = current.get(id);
            return !known || known.width !== size.width || known.height !== size.height;
          });
          if (changed.length === 0) return current;
          const next = new Map(current);
          for (const [id, size] of changed) next.set(id, size);
          return next;
        });
      }
      if (selection) setSelected(selection);
      if (moved.size > 0) move(moved, dragEnded);
      if (removed.size > 0) {
        edit((current) => ({
          nodes: current.nodes.filter((node) => !removed.has(node.id)),
          edges: current.edges.filter((edge) => !removed.has(edge.from) && !removed.has(edge.to)),
        }));
      }
    },
    [edit, move, selected, setSelected],
  );

  const onEdgesChange = useCallback(
    (changes: EdgeChange[]) => {
      const removed = new Set(changes.filter((change) => change.type === "remove").map((change) => change.id));
      if (removed.size > 0) {
        edit((current) => ({
          ...current,
          edges: current.edges.filter((edge) => !removed.has(`${edge.from}->${edge.to}`)),
        }));
      }
    },
    [edit],
  );

  const differing = comparing ? comparing.diff.nodes.filter((entry) => entry.change !== "same").length : 0;
  return (
    <main className="canvas" aria-label="Flow canvas">
      {comparing ? (
        <p className="banner diff-banner">
          Version {comparing.from} → version {comparing.to}: {differing} node
          {differing === 1 ? "" : "s"} differ (read-only).{" "}
          <button onClick={() => compare(null)}>Close the diff</button>
        </p>
      ) : (
        flow?.status === "invalid" && (
          <p className="banner drift" role="alert">
            This released flow is invalid after a plugin change: {brokenReasons.length} broken reason
            {brokenReasons.length === 1 ? "" : "s"}. Fix the draft and release again.
          </p>
        )
      )}
      <ReactFlow
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onConnect={(connection: Connection) => connect(connection.source, connection.target)}
        isValidConnection={(connection) => connectionRefusal(body, connection.source, connection.target) === null}
        nodesDraggable={!comparing}
        nodesConnectable={!comparing}
        deleteKeyCode={comparing ? null : ["Delete", "Backspace"]}
        fitView
      >
        <Background />
        <Controls />
        <MiniMap pannable zoomable ariaLabel="Overview of the flow" />
      </ReactFlow>
    </main>
  );
}
