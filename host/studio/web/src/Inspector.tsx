// The flow editor's inspector: the selected node's heading and, for the draft, what the chosen run did there
// (RunOverlay.tsx) and its form (its name, a condition's CEL, an action's or a plugin node kind's schema form, a
// test against the live plugin, its config as JSON, its connections made by keyboard, and the problems placed on
// its fields); in the diff view, the node's values before and after.

import { useEffect, useState } from "react";

import { ActionForm } from "./ActionForm";
import { CelEditor } from "./CelEditor";
import {
  fieldsAt,
  kindLabel,
  parentService,
  type FieldInfo,
  type FlowBody,
  type FlowNode,
  type Problem,
} from "./graph";
import { NodeKindForm } from "./NodeKindForm";
import type { NodeKindCatalog } from "./nodeKinds";
import { NodeTest } from "./NodeTest";
import { RunAtNode } from "./RunOverlay";
import type { FlowEditor } from "./useFlowEditor";
import { DiffStepView } from "./Versions";

export function InspectorPanel({ editor }: { editor: FlowEditor }) {
  const { flow, only, body, schemaFields, nodeKinds, problemsOf, run, comparing, edit, connect } = editor;
  return (
    <aside className="inspector" aria-labelledby="inspector-heading">
      <h2 id="inspector-heading" tabIndex={-1}>
        {only ? `${kindLabel(only)} ${only.id}` : "Inspector"}
      </h2>
      {only && comparing ? (
        <DiffStepView entry={comparing.diff.nodes.find((entry) => entry.id === only.id)!} />
      ) : only ? (
        <>
          <RunAtNode run={run} id={only.id} />
          <Inspector
            key={only.id}
            flowId={flow?.id ?? ""}
            node={only}
            body={body}
            schemaFields={schemaFields}
            nodeKinds={nodeKinds}
            problems={problemsOf(only.id)}
            onEdit={edit}
            onConnect={connect}
          />
        </>
      ) : (
        <p>Select a node to {comparing ? "see what changed" : "edit it"}.</p>
      )}
    </aside>
  );
}

/// The selected node: its label, its form (a condition's CEL, an action's or a plugin node kind's schema form),
/// its config as JSON (applied as one undoable edit), its connections made by keyboard, and the problems placed
/// on its fields.
function Inspector(props: {
  flowId: string;
  node: FlowNode;
  body: FlowBody;
  schemaFields: FieldInfo[];
  nodeKinds: NodeKindCatalog;
  problems: Problem[];
  onEdit: (change: (body: FlowBody) => FlowBody) => void;
  onConnect: (from: string, to: string) => boolean;
}) {
  const { flowId, node, body, schemaFields, nodeKinds, problems, onEdit, onConnect } = props;
  const declarations = nodeKinds.declarations ?? [];
  const [config, setConfig] = useState(JSON.stringify(node.config, null, 2));
  const [configError, setConfigError] = useState<string | null>(null);
  // The JSON follows edits made elsewhere (the form, undo).
  useEffect(() => setConfig(JSON.stringify(node.config, null, 2)), [node.config]);
  const setNodeConfig = (next: Record<string, unknown>) =>
    onEdit((current) => ({
      ...current,
      nodes: current.nodes.map((n) => (n.id === node.id ? { ...n, config: next } : n)),
    }));
  const [target, setTarget] = useState("");
  const others = body.nodes.filter((candidate) => candidate.id !== node.id);

  const applyConfig = () => {
    try {
      const parsed = JSON.parse(config);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new Error("the config is a JSON object");
      }
      setConfigError(null);
      if (JSON.stringify(parsed) !== JSON.stringify(node.config)) setNodeConfig(parsed);
    } catch (error) {
      setConfigError(error instanceof Error ? error.message : String(error));
    }
  };

  return (
    <div className="inspector-body">
      <label>
        Name
        <input
          value={node.name ?? ""}
          onChange={(event) => {
            const name = event.target.value;
            onEdit((current) => ({
              ...current,
              nodes: current.nodes.map((n) => (n.id === node.id ? { ...n, name: name || undefined } : n)),
            }));
          }}
        />
      </label>
      {node.kind === "condition" && (
        <>
          <label className="inline">
            <input
              type="checkbox"
              checked={node.config.else === true}
              onChange={(event) => {
                const { expression: _expression, else: _else, ...rest } = node.config;
                setNodeConfig(event.target.checked ? { ...rest, else: true } : { ...rest, expression: "" });
              }}
            />{" "}
            Else branch (goes on when no sibling condition does)
          </label>
          {node.config.else !== true && (
            <div className="field">
              <span id={`${node.id}-cel-label`}>Expression (CEL)</span>
              <CelEditor
                value={typeof node.config.expression === "string" ? node.config.expression : ""}
                fields={fieldsAt(body, node.id, schemaFields, declarations)}
                problems={problems.filter((problem) => problem.pointer === "/config/expression")}
                label={`Expression of condition ${node.id}`}
                onChange={(text) => setNodeConfig({ ...node.config, expression: text })}
              />
            </div>
          )}
        </>
      )}
      {node.kind === "action" && (
        <ActionForm
          service={parentService(body, node.id)}
          config={node.config}
          problems={problems}
          onChange={setNodeConfig}
        />
      )}
      {node.kind === "node-kind" && (
        <NodeKindForm catalog={nodeKinds} config={node.config} problems={problems} onChange={setNodeConfig} />
      )}
      {((node.kind === "condition" && node.config.else !== true) || node.kind === "action") && (
        <NodeTest flowId={flowId} node={node} body={body} schemaFields={schemaFields} nodeKinds={declarations} />
      )}
      <label>
        Config (JSON)
        <textarea
          value={config}
          rows={10}
          spellCheck={false}
          aria-invalid={configError !== null || problems.some((problem) => problem.pointer?.startsWith("/config"))}
          aria-describedby="config-problems"
          onChange={(event) => setConfig(event.target.value)}
          onBlur={applyConfig}
        />
      </label>
      <button onClick={applyConfig}>Apply config</button>
      <ul id="config-problems" className="field-problems">
        {configError && <li className="problem-blocking">{configError}</li>}
        {problems.map((problem, at) => (
          <li key={at} className={`problem-${problem.severity}`}>
            {problem.pointer ? <code>{problem.pointer}</code> : null} {problem.message}
          </li>
        ))}
      </ul>
      <label>
        Connect to
        <select value={target} onChange={(event) => setTarget(event.target.value)}>
          <option value="">Choose a node…</option>
          {others.map((other) => (
            <option key={other.id} value={other.id}>
              {other.id}
            </option>
          ))}
        </select>
      </label>
      <button onClick={() => target && onConnect(node.id, target) && setTarget("")} disabled={!target}>
        Connect
      </button>
    </div>
  );
}
