// Studio's screen: the sections (flows, rules, schemas, event sources, plugins), the status line and the
// sign-in. The flows section is the editor: the flow list, the palette (the built-in node kinds and the plugin
// node kinds of `GET /api/v2/node-kinds`), the canvas, the inspector of the selected node, and the panels below
// it (problems merging the client's wiring rules with the server's draft validation, runs, dead letters,
// released versions and their diff). Every graph edit goes through `edit` (one undo step each); the server
// validates the draft shortly after each edit.

import { ReactFlowProvider } from "@xyflow/react";
import { useCallback, useEffect, useMemo, useState } from "react";

import { ActionForm } from "./ActionForm";
import { ApiError, setToken } from "./api";
import { CelEditor } from "./CelEditor";
import { DeadLettersPanel } from "./DeadLetters";
import { EventSourcesView } from "./EventSources";
import { FeedbackContext, type Feedback } from "./feedback";
import { FlowCanvas } from "./FlowCanvas";
import { NodeKindForm } from "./NodeKindForm";
import { NodeTest } from "./NodeTest";
import { PluginsView } from "./Plugins";
import { toggled } from "./Resources";
import { RulesView } from "./Rules";
import { RunAtNode } from "./RunOverlay";
import { RunsPanel } from "./Runs";
import { SchemasView } from "./Schemas";
import { VersionsPanel, DiffStepView } from "./Versions";
import {
  KIND_LABELS,
  NODE_KINDS,
  fieldsAt,
  kindLabel,
  parentService,
  type FieldInfo,
  type FlowBody,
  type FlowNode,
  type Problem,
} from "./graph";
import { layout } from "./layout";
import { paletteLabel, type NodeKindCatalog } from "./nodeKinds";
import { useFlowEditor } from "./useFlowEditor";

/// The flows section; `visible`: whether it is the section shown (showing it again refreshes the plugin node
/// kinds, which an upload in the Plugins section may have changed).
function FlowsView({ visible }: { visible: boolean }) {
  const editor = useFlowEditor(visible);
  const { flows, flow, graph, body, only, editable, dirty, acknowledged, setAcknowledged, problems } = editor;
  const { problemsOf, gate, schemaFields, nodeKinds, loadNodeKinds, run, showRun, showRunOf, comparing } = editor;
  const { compare, open, createFlow, save, release, edit, connect, addNode, addPluginNode, focusNode, undo, redo } = editor;

  return (
    <div className="flows-view">
      <div className="toolbar flow-toolbar" role="toolbar" aria-label="Flow editing">
        <label>
          Flow{" "}
          <select aria-label="Flow" value={flow?.id ?? ""} onChange={(event) => event.target.value && void open(event.target.value)}>
            <option value="">Choose a flow…</option>
            {flows.map((summary) => (
              <option key={summary.id} value={summary.id}>
                {summary.name || summary.id} ({summary.status})
              </option>
            ))}
          </select>
        </label>
        <NewFlowForm onCreate={createFlow} />
        <button onClick={undo} disabled={!editable || graph.past.length === 0} aria-keyshortcuts="Control+Z">
          Undo
        </button>
        <button onClick={redo} disabled={!editable || graph.future.length === 0} aria-keyshortcuts="Control+Shift+Z">
          Redo
        </button>
        <button onClick={() => edit(layout)} disabled={!editable}>
          Auto-layout
        </button>
        <button onClick={() => void save()} disabled={!editable || !dirty}>
          Save draft
        </button>
        <button onClick={() => void release()} disabled={!editable || !gate.allowed} title={gate.reason || "Release this draft"}>
          Release
        </button>
        {flow && !gate.allowed && <span className="gate">{gate.reason}</span>}
        {flow && gate.allowed && gate.note && <span className="gate-note">{gate.note} (recorded with the release)</span>}
      </div>
      <div className="workspace">
        <nav className="palette" aria-label="Add a node">
          <h2>Add</h2>
          {NODE_KINDS.map((kind) => (
            <button key={kind} onClick={() => addNode(kind)} disabled={!editable}>
              {KIND_LABELS[kind]}
            </button>
          ))}
          <h3>Plugin node kinds</h3>
          {nodeKinds.error && <p className="palette-error">Could not load them: {nodeKinds.error}</p>}
          {nodeKinds.declarations === null && !nodeKinds.error && <p className="hint">Loading…</p>}
          {nodeKinds.declarations?.length === 0 && <p className="hint">No active plugin declares one.</p>}
          {(nodeKinds.declarations ?? []).map((declaration) => (
            <button
              key={`${declaration.plugin}/${declaration.name}`}
              title={declaration.description}
              onClick={() => addPluginNode(declaration)}
              disabled={!editable}
            >
              {paletteLabel(declaration)}
            </button>
          ))}
          <button className="link" onClick={() => void loadNodeKinds()}>
            Refresh node kinds
          </button>
        </nav>
        <FlowCanvas editor={editor} />
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
      </div>
      <div className="panels">
        <section className="problems" aria-labelledby="problems-heading">
          <h2 id="problems-heading">
            Problems ({problems.filter((problem) => problem.severity === "blocking").length} blocking,{" "}
            {problems.filter((problem) => problem.severity === "warning").length} warnings)
          </h2>
          <ul>
            {problems.map((problem, at) => (
              <li key={`${problem.origin}-${problem.code}-${problem.node_id ?? ""}-${at}`} className={`problem problem-${problem.severity}`}>
                <span className="severity">{problem.severity}</span>
                {problem.node_id ? (
                  <button className="link" onClick={() => focusNode(problem.node_id!)}>
                    {problem.node_id}
                  </button>
                ) : null}{" "}
                <code>{problem.code}</code> {problem.message}
                {problem.severity === "warning" && (
                  <label className="ack">
                    <input
                      type="checkbox"
                      checked={acknowledged.has(problem.code)}
                      onChange={(event) => setAcknowledged((current) => toggled(current, problem.code, event.target.checked))}
                    />{" "}
                    acknowledge
                  </label>
                )}
              </li>
            ))}
          </ul>
        </section>
        {flow && <RunsPanel key={`runs-${flow.id}`} flowId={flow.id} chosen={run} onChoose={showRun} />}
        {flow && <DeadLettersPanel key={`letters-${flow.id}`} flowId={flow.id} onShowRun={showRunOf} />}
        {flow && (
          <VersionsPanel key={`versions-${flow.id}-${flow.released_version ?? 0}`} flowId={flow.id} comparing={comparing} onCompare={compare} onFocus={focusNode} />
        )}
      </div>
    </div>
  );
}

/// "New flow": asks for the id in place, creates the flow with a source node and opens it.
function NewFlowForm({ onCreate }: { onCreate: (id: string) => Promise<boolean> }) {
  const [asking, setAsking] = useState(false);
  const [id, setId] = useState("");
  if (!asking) return <button onClick={() => setAsking(true)}>New flow</button>;
  return (
    <form
      className="inline-form"
      onSubmit={async (event) => {
        event.preventDefault();
        if (await onCreate(id.trim())) {
          setAsking(false);
          setId("");
        }
      }}
    >
      <label>
        Id of the new flow{" "}
        <input value={id} onChange={(event) => setId(event.target.value)} pattern="[A-Za-z0-9._\-]+" title="letters, digits, '.', '_', '-'" required autoFocus />
      </label>
      <button type="submit">Create</button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </form>
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
    onEdit((current) => ({ ...current, nodes: current.nodes.map((n) => (n.id === node.id ? { ...n, config: next } : n)) }));
  const [target, setTarget] = useState("");
  const others = body.nodes.filter((candidate) => candidate.id !== node.id);

  const applyConfig = () => {
    try {
      const parsed = JSON.parse(config);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("the config is a JSON object");
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
            onEdit((current) => ({ ...current, nodes: current.nodes.map((n) => (n.id === node.id ? { ...n, name: name || undefined } : n)) }));
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
        <ActionForm service={parentService(body, node.id)} config={node.config} problems={problems} onChange={setNodeConfig} />
      )}
      {node.kind === "node-kind" && <NodeKindForm catalog={nodeKinds} config={node.config} problems={problems} onChange={setNodeConfig} />}
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

function TokenForm({ onToken }: { onToken: (token: string) => void }) {
  const [value, setValue] = useState("");
  return (
    <form
      className="token"
      onSubmit={(event) => {
        event.preventDefault();
        onToken(value);
      }}
    >
      <label>
        Admin token <input type="password" value={value} onChange={(event) => setValue(event.target.value)} autoComplete="off" />
      </label>
      <button type="submit">Sign in</button>
    </form>
  );
}

const SECTIONS = [
  ["flows", "Flows"],
  ["rules", "Rules"],
  ["schemas", "Schemas"],
  ["event-sources", "Event sources"],
  ["plugins", "Plugins"],
] as const;

type Section = (typeof SECTIONS)[number][0];

export function App() {
  const [section, setSection] = useState<Section>("flows");
  const [message, setMessage] = useState<{ text: string; error: boolean } | null>(null);
  const [needToken, setNeedToken] = useState(false);
  const [session, setSession] = useState(0);
  const say = useCallback((text: string, error = false) => setMessage({ text, error }), []);
  const failed = useCallback(
    (error: unknown) => {
      if (error instanceof ApiError && error.status === 401) {
        setNeedToken(true);
        say("The admin API needs its token.", true);
      } else {
        say(error instanceof Error ? error.message : String(error), true);
      }
    },
    [say],
  );
  const feedback: Feedback = useMemo(() => ({ say, failed, session }), [say, failed, session]);
  return (
    <FeedbackContext.Provider value={feedback}>
      <div className="studio">
        <header className="toolbar">
          <h1>Flowhost Studio</h1>
          <nav aria-label="Sections" className="sections">
            {SECTIONS.map(([key, label]) => (
              <button key={key} aria-current={section === key ? "page" : undefined} onClick={() => setSection(key)}>
                {label}
              </button>
            ))}
          </nav>
          {needToken && (
            <TokenForm
              onToken={(value) => {
                setToken(value);
                setNeedToken(false);
                say("Signed in.");
                setSession((count) => count + 1);
              }}
            />
          )}
        </header>
        <p className={`status${message?.error ? " status-error" : ""}`} role="status" aria-live="polite">
          {message?.text ?? ""}
        </p>
        {/* The editor stays mounted while another section is shown: its unsaved draft survives. */}
        <div className="section" hidden={section !== "flows"}>
          <ReactFlowProvider>
            <FlowsView visible={section === "flows"} />
          </ReactFlowProvider>
        </div>
        {section === "rules" && <RulesView />}
        {section === "schemas" && <SchemasView />}
        {section === "event-sources" && <EventSourcesView />}
        {section === "plugins" && <PluginsView />}
      </div>
    </FeedbackContext.Provider>
  );
}
