// The flow editor's state and what changes it, for the flows section's toolbar, palette, canvas, inspector and
// panels: the flow list, the opened flow and its draft (an undo history: every graph edit goes through `edit`,
// one undo step each), the selection, the problems (the client's wiring rules merged with the server's draft
// validation, which runs shortly after each edit), the acknowledged warnings, the chosen run, the compared
// versions, the plugin node kinds, and the clipboard (copy, paste; their keys are in useShortcuts.ts). It makes
// the editor's own calls to the admin API (the flows: list, open, validate, save, release, create; the node
// kinds; the source's schema; a dead letter's run); the panels and forms make theirs.

import { useReactFlow } from "@xyflow/react";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";

import { call } from "./api";
import { copy, paste, type Fragment } from "./clipboard";
import { diffBody } from "./diff";
import { useFeedback } from "./feedback";
import {
  KIND_LABELS,
  clientProblems,
  connectionRefusal,
  freshId,
  mergeProblems,
  problemsByNode,
  releaseGate,
  sourceEventType,
  type FieldInfo,
  type FlowBody,
  type FlowNode,
  type NodeKind,
  type Problem,
} from "./graph";
import * as history from "./history";
import { NODE_HEIGHT, NODE_WIDTH, layout } from "./layout";
import { idStem, newNodeConfig, type NodeKindCatalog, type NodeKindDeclaration } from "./nodeKinds";
import type { RunDetail } from "./Runs";
import { useShortcuts } from "./useShortcuts";
import type { Comparison } from "./Versions";

export interface FlowSummary {
  id: string;
  name: string;
  status: string;
}

export interface FlowRecord {
  id: string;
  name: string;
  description: string;
  status: string;
  released_version?: number | null;
  draft: FlowBody;
  broken_reasons?: Problem[];
}

interface Report {
  valid: boolean;
  issues: Omit<Problem, "origin">[];
}

/// The problems of a node that has none (one array, so a node's problems compare equal across renders).
const NO_PROBLEMS: Problem[] = [];

/// What the flows section's parts read and call.
export type FlowEditor = ReturnType<typeof useFlowEditor>;

/// The editor of the flows section; `visible`: whether it is the section shown (showing it again refreshes the
/// plugin node kinds, which an upload in the Plugins section may have changed).
export function useFlowEditor(visible: boolean) {
  const { say, failed, session } = useFeedback();
  const [flows, setFlows] = useState<FlowSummary[]>([]);
  const [flow, setFlow] = useState<FlowRecord | null>(null);
  const [graph, setGraph] = useState<history.History>(history.start({ nodes: [], edges: [] }));
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [serverProblems, setServerProblems] = useState<Problem[]>([]);
  const [acknowledged, setAcknowledged] = useState<Set<string>>(new Set());
  const [dirty, setDirty] = useState(false);
  const [run, setRun] = useState<RunDetail | null>(null);
  const [comparing, setComparing] = useState<Comparison | null>(null);
  const clipboard = useRef<Fragment | null>(null);
  const reactFlow = useReactFlow();
  const body = graph.present;

  const loadFlows = useCallback(async () => {
    try {
      setFlows(await call<FlowSummary[]>("GET", "/api/v2/flows"));
    } catch (error) {
      failed(error);
    }
    // `session`: signing in loads the list again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [failed, session]);

  useEffect(() => {
    void loadFlows();
  }, [loadFlows]);

  // The plugin node kinds the palette offers and the inspector's forms are made from. A failure is shown in the
  // palette; the last list fetched stays.
  const [nodeKinds, setNodeKinds] = useState<NodeKindCatalog>({ declarations: null, error: null });
  const loadNodeKinds = useCallback(async () => {
    try {
      const declarations = await call<NodeKindDeclaration[]>("GET", "/api/v2/node-kinds");
      setNodeKinds({ declarations: Array.isArray(declarations) ? declarations : [], error: null });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      setNodeKinds((current) => ({ declarations: current.declarations, error: message }));
    }
    // `session`: signing in loads them again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [session]);

  useEffect(() => {
    if (visible) void loadNodeKinds();
  }, [visible, loadNodeKinds]);

  const open = useCallback(
    async (id: string) => {
      try {
        const record = await call<FlowRecord>("GET", `/api/v2/flows/${encodeURIComponent(id)}`);
        const placed = record.draft.nodes.every((node) => node.position) ? record.draft : layout(record.draft);
        setFlow(record);
        setGraph(history.start(placed));
        setSelected(new Set());
        setAcknowledged(new Set());
        setDirty(false);
        setRun(null);
        setComparing(null);
        say(`Opened ${record.name || record.id}.`);
        window.setTimeout(() => reactFlow.fitView({ padding: 0.2 }), 0);
      } catch (error) {
        failed(error);
      }
    },
    [failed, reactFlow, say],
  );

  /// One undoable edit of the graph.
  const edit = useCallback((change: (body: FlowBody) => FlowBody) => {
    setGraph((current) => history.record(current, change(current.present)));
    setDirty(true);
  }, []);

  /// Nodes dragged to new positions: one undo step when the drag ends, none while it is under way.
  const move = useCallback((moved: Map<string, { x: number; y: number }>, dragEnded: boolean) => {
    const place = (current: FlowBody) => ({
      ...current,
      nodes: current.nodes.map((node) => (moved.has(node.id) ? { ...node, position: moved.get(node.id) } : node)),
    });
    setGraph((current) => {
      const placed = place(current.present);
      return dragEnded ? history.record(current, placed) : history.replace(current, placed);
    });
    setDirty(true);
  }, []);

  // The server validates the draft shortly after each edit; its issues join the client's.
  useEffect(() => {
    if (!flow) return;
    const timer = window.setTimeout(async () => {
      try {
        const report = await call<Report>("POST", "/api/v2/flows/validate-draft", body);
        setServerProblems(report.issues.map((issue) => ({ ...issue, origin: "server" as const })));
      } catch (error) {
        failed(error);
      }
    }, 300);
    return () => window.clearTimeout(timer);
  }, [body, flow, failed]);

  // The source event type's schema: the fields conditions complete.
  const eventType = sourceEventType(body);
  const [schemaFields, setSchemaFields] = useState<FieldInfo[]>([]);
  useEffect(() => {
    setSchemaFields([]);
    if (!eventType) return;
    call<{ fields: FieldInfo[] }>("GET", `/api/v1/schemas/${encodeURIComponent(eventType)}`)
      .then((schema) => setSchemaFields(schema.fields))
      .catch(() => setSchemaFields([]));
  }, [eventType]);

  // The client's rules run once per edit (not again when the server's answer arrives).
  const wiringProblems = useMemo(() => clientProblems(body), [body]);
  const problems = useMemo(() => mergeProblems(wiringProblems, serverProblems), [wiringProblems, serverProblems]);
  const gate = releaseGate(problems, acknowledged);
  const brokenReasons = useMemo(
    () =>
      flow?.status === "invalid"
        ? (flow.broken_reasons ?? []).map((reason) => ({ ...reason, origin: "server" as const }))
        : [],
    [flow],
  );

  // A node's problems: the draft's, and the broken reasons of its released version that the draft still has
  // (each once), grouped once per change rather than searched per node.
  const byNode = useMemo(() => problemsByNode(problems, brokenReasons), [problems, brokenReasons]);
  const problemsOf = useCallback((id: string) => byNode.get(id) ?? NO_PROBLEMS, [byNode]);

  // The canvas draws the draft, or in the diff view both compared versions (read-only).
  const shown = useMemo(() => (comparing ? diffBody(comparing.diff) : body), [body, comparing]);

  const connect = useCallback(
    (from: string, to: string) => {
      const refusal = connectionRefusal(body, from, to);
      if (refusal) {
        say(refusal, true);
        return false;
      }
      edit((current) => ({ ...current, edges: [...current.edges, { from, to }] }));
      say(`Connected ${from} to ${to}.`);
      return true;
    },
    [body, edit, say],
  );

  const addNode = useCallback(
    (kind: NodeKind) => {
      const id = freshId(body, kind);
      const right = Math.max(0, ...body.nodes.map((node) => (node.position?.x ?? 0) + NODE_WIDTH + 40));
      edit((current) => ({
        ...current,
        nodes: [...current.nodes, { id, kind, config: {}, position: { x: right, y: 80 } }],
      }));
      setSelected(new Set([id]));
      say(`Added ${KIND_LABELS[kind]} ${id}.`);
    },
    [body, edit, say],
  );

  /// Places a node of a plugin's node kind, its config naming the plugin and the kind.
  const addPluginNode = useCallback(
    (declaration: NodeKindDeclaration) => {
      const id = freshId(body, idStem(declaration));
      const right = Math.max(0, ...body.nodes.map((node) => (node.position?.x ?? 0) + NODE_WIDTH + 40));
      const node: FlowNode = {
        id,
        kind: "node-kind",
        config: newNodeConfig(declaration),
        position: { x: right, y: 80 },
      };
      edit((current) => ({ ...current, nodes: [...current.nodes, node] }));
      setSelected(new Set([id]));
      say(`Added ${declaration.plugin}/${declaration.name} ${id}.`);
    },
    [body, edit, say],
  );

  const focusNode = useCallback(
    (id: string) => {
      setSelected(new Set([id]));
      const node = shown.nodes.find((candidate) => candidate.id === id);
      if (node?.position) {
        reactFlow.setCenter(node.position.x + NODE_WIDTH / 2, node.position.y + NODE_HEIGHT / 2, { zoom: 1.2 });
      }
      document.getElementById("inspector-heading")?.focus();
    },
    [shown.nodes, reactFlow],
  );

  const save = useCallback(async () => {
    if (!flow) return;
    try {
      const saved = await call<FlowRecord>("PUT", `/api/v2/flows/${encodeURIComponent(flow.id)}`, {
        name: flow.name,
        description: flow.description,
        nodes: body.nodes,
        edges: body.edges,
      });
      setFlow({ ...flow, ...saved });
      setDirty(false);
      say("Draft saved.");
      void loadFlows();
    } catch (error) {
      failed(error);
    }
  }, [body, failed, flow, loadFlows, say]);

  const release = useCallback(async () => {
    if (!flow) return;
    try {
      if (dirty) await save();
      const path = `/api/v2/flows/${encodeURIComponent(flow.id)}/release`;
      const released = await call<{ version: number }>("POST", path, { acknowledged_warnings: [...acknowledged] });
      await open(flow.id);
      say(`Released version ${released.version}.`);
      void loadFlows();
    } catch (error) {
      failed(error);
    }
  }, [acknowledged, dirty, failed, flow, loadFlows, open, save, say]);

  const createFlow = useCallback(
    async (id: string) => {
      try {
        await call("POST", "/api/v2/flows", {
          id,
          name: id,
          nodes: [{ id: "source-1", kind: "source", config: {}, position: { x: 40, y: 80 } }],
          edges: [],
        });
        await loadFlows();
        await open(id);
        return true;
      } catch (error) {
        failed(error);
        return false;
      }
    },
    [failed, loadFlows, open],
  );

  const compare = useCallback(
    (comparison: Comparison | null) => {
      setComparing(comparison);
      setSelected(new Set());
      if (comparison) {
        setRun(null);
        say(`Comparing version ${comparison.from} with version ${comparison.to}.`);
      }
      window.setTimeout(() => reactFlow.fitView({ padding: 0.2 }), 0);
    },
    [reactFlow, say],
  );

  /// Shows `chosen` on the graph (null: no run), leaving the diff view.
  const showRun = useCallback(
    (chosen: RunDetail | null) => {
      compare(null);
      setRun(chosen);
    },
    [compare],
  );

  /// Shows the run `runId` (a dead letter's) on the graph, leaving the diff view.
  const showRunOf = useCallback(
    async (runId: string) => {
      compare(null);
      setRun(await call<RunDetail>("GET", `/api/v2/runs/${encodeURIComponent(runId)}`));
    },
    [compare],
  );

  const undo = useCallback(() => setGraph((current) => history.undo(current)), []);
  const redo = useCallback(() => setGraph((current) => history.redo(current)), []);
  const copySelection = useCallback(() => {
    clipboard.current = copy(body, selected);
    say(`Copied ${clipboard.current.nodes.length} node${clipboard.current.nodes.length === 1 ? "" : "s"}.`);
  }, [body, say, selected]);
  const pasteClipboard = useCallback(() => {
    const fragment = clipboard.current;
    if (!fragment || fragment.nodes.length === 0) return;
    const pasted = paste(body, fragment);
    edit(() => pasted.body);
    setSelected(new Set(pasted.ids));
    say(`Pasted ${pasted.ids.length} node${pasted.ids.length === 1 ? "" : "s"}.`);
  }, [body, edit, say]);

  // Keyboard: undo/redo and copy/paste, unless the focus is in a text field.
  useShortcuts({ undo, redo, copy: copySelection, paste: pasteClipboard });

  const only = selected.size === 1 ? shown.nodes.find((node) => selected.has(node.id)) : undefined;
  const editable = flow !== null && !comparing;

  return {
    flows,
    flow,
    graph,
    body,
    shown,
    only,
    editable,
    dirty,
    selected,
    setSelected,
    acknowledged,
    setAcknowledged,
    problems,
    problemsOf,
    brokenReasons,
    gate,
    schemaFields,
    nodeKinds,
    loadNodeKinds,
    run,
    showRun,
    showRunOf,
    comparing,
    compare,
    open,
    createFlow,
    save,
    release,
    edit,
    move,
    connect,
    addNode,
    addPluginNode,
    focusNode,
    undo,
    redo,
  };
}
