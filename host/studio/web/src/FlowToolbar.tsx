// The flow editor's toolbar: choosing the flow to open, creating one ("New flow"), undo and redo, auto-layout,
// saving the draft, and releasing it once the release gate allows (what blocks it, or the warnings recorded
// with it, said beside the button).

import { useState } from "react";

import { layout } from "./layout";
import type { FlowEditor } from "./useFlowEditor";

export function FlowToolbar({ editor }: { editor: FlowEditor }) {
  const { flows, flow, graph, editable, dirty, gate, open, createFlow, undo, redo, edit, save, release } = editor;
  return (
    <div className="toolbar flow-toolbar" role="toolbar" aria-label="Flow editing">
      <label>
        Flow{" "}
        <select
          aria-label="Flow"
          value={flow?.id ?? ""}
          onChange={(event) => event.target.value && void open(event.target.value)}
        >
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
      <button
        onClick={() => void release()}
        disabled={!editable || !gate.allowed}
        title={gate.reason || "Release this draft"}
      >
        Release
      </button>
      {flow && !gate.allowed && <span className="gate">{gate.reason}</span>}
      {flow && gate.allowed && gate.note && (
        <span className="gate-note">{gate.note} (recorded with the release)</span>
      )}
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
        <input
          value={id}
          onChange={(event) => setId(event.target.value)}
          pattern="[A-Za-z0-9._\-]+"
          title="letters, digits, '.', '_', '-'"
          required
          autoFocus
        />
      </label>
      <button type="submit">Create</button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </form>
  );
}
