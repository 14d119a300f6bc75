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
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { memo, useCallback, useLayoutEffect, useMemo, useRef, useState } from "react";

import { keepUnchanged, type CanvasNode } from "./canvasNodes";
import { connectionRefusal, kindLabel } from "./graph";
import { NODE_HEIGHT, NODE_WIDTH } from "./layout";
import { runNodeClass, runTookEdge } from "./RunOverlay";
import type { FlowEditor } from "./useFlowEditor";

/// A node on the canvas: its kind (a plugin node kind's `plugin/kind`), id, a badge with its problems, and in
/// the diff view what changed.
const FlowNodeView = memo(function FlowNodeView({ data, selected }: NodeProps<CanvasNode>) {
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
});

const nodeTypes = { flow: FlowNodeView };

const DELETE_KEYS = ["Delete", "Backspace"];

/// The overview's node colour, stroke and class: the stylesheet's (as when none is given). Given as functions
/// that stay the same: for a plain value the overview makes a new function at each render, which redraws every
/// node of the overview whenever a node is added or removed.
const styledByStylesheet = () => "";

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

  // The nodes drawn last time: an edit passes React Flow new objects only for the nodes it changed.
  const drawn = useRef<ReadonlyMap<string, CanvasNode>>(new Map());
  const nodes: CanvasNode[] = useMemo(() => {
    const fresh: CanvasNode[] = shown.nodes.map((node, at) => ({
      id: node.id,
      type: "flow",
      position: node.position ?? { x: 40 + at * 220, y: 80 },
      data: { node, problems: comparing ? [] : problemsOf(node.id), change: changeOf.get(node.id) },
      selected: selected.has(node.id),
      measured: measured.get(node.id),
      className: nodeClass(node.id),
      ariaLabel: `${kindLabel(node)} ${node.id}${comparing ? ` (${changeOf.get(node.id) ?? "same"})` : ""}`,
    }));
    const kept = keepUnchanged(drawn.current, fresh);
    drawn.current = new Map(kept.map((node) => [node.id, node]));
    return kept;
  }, [shown.nodes, measured, problemsOf, selected, nodeClass, comparing, changeOf]);
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
    (changes: NodeChange<CanvasNode>[]) => {
      const moved = new Map<string, { x: number; y: number }>();
      let dragEnded = false;
      const removed = new Set<string>();
      const selections: [string, boolean][] = [];
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
          selections.push([change.id, change.selected]);
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
      if (selections.length > 0) {
        setSelected((current) => {
          const selection = new Set(current);
          for (const [id, chosen] of selections) {
            if (chosen) selection.add(id);
            else selection.delete(id);
          }
          return selection;
        });
      }
      if (moved.size > 0) move(moved, dragEnded);
      if (removed.size > 0) {
        edit((current) => ({
          nodes: current.nodes.filter((node) => !removed.has(node.id)),
          edges: current.edges.filter((edge) => !removed.has(edge.from) && !removed.has(edge.to)),
        }));
      }
    },
    [edit, move, setSelected],
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

  // The connection handlers read the latest draft without changing identity at each edit: React Flow copies
  // every changed handler into its store, which asks each drawn node and edge whether it must redraw.
  const latest = useRef({ body, connect });
  useLayoutEffect(() => {
    latest.current = { body, connect };
  });
  const onConnect = useCallback(
    (connection: Connection) => latest.current.connect(connection.source, connection.target),
    [],
  );
  const isValidConnection = useCallback(
    (connection: Connection | Edge) =>
      connectionRefusal(latest.current.body, connection.source, connection.target) === null,
    [],
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
        onConnect={onConnect}
        isValidConnection={isValidConnection}
        nodesDraggable={!comparing}
        nodesConnectable={!comparing}
        deleteKeyCode={comparing ? null : DELETE_KEYS}
        fitView
      >
        <Background />
        <Controls />
        <MiniMap
          pannable
          zoomable
          ariaLabel="Overview of the flow"
          nodeColor={styledByStylesheet}
          nodeStrokeColor={styledByStylesheet}
          nodeClassName={styledByStylesheet}
        />
      </ReactFlow>
    </main>
  );
}
