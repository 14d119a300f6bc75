// The flow editor's palette ("Add a node"): a button per built-in node kind and per plugin node kind of
// `GET /api/v2/node-kinds` (or why that list could not be loaded), each placing a node of its kind.

import { KIND_LABELS, NODE_KINDS } from "./graph";
import { paletteLabel } from "./nodeKinds";
import type { FlowEditor } from "./useFlowEditor";

export function Palette({ editor }: { editor: FlowEditor }) {
  const { nodeKinds, loadNodeKinds, editable, addNode, addPluginNode } = editor;
  return (
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
  );
}
