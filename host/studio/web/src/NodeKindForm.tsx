// A plugin node kind's node in the inspector: the plugin and kind it names (fixed: a node placed from the
// palette keeps them), its configuration as a form generated from the declaration's `config_schema` (the fields
// are SchemaForm.tsx's; `{{placeholders}}` are kept in text fields, the server's problems land under their
// field), the answers the kind may give and the fields it adds. A node whose plugin/kind no active version
// declares (a new version dropped it: drift) says so instead of showing a form.

import type { Problem } from "./graph";
import {
  ANSWER_MEANINGS,
  REFERENCE_KEYS,
  addedFields,
  answersOf,
  resolveNodeKind,
  undeclaredMessage,
  type NodeKindCatalog,
  type NodeKindDeclaration,
} from "./nodeKinds";
import { SchemaFields, problemsAt } from "./SchemaForm";

export function NodeKindForm(props: {
  catalog: NodeKindCatalog;
  config: Record<string, unknown>;
  problems: Problem[];
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { catalog, config, problems, onChange } = props;
  const resolution = resolveNodeKind(config, catalog.declarations);
  const referenceProblems = [...problemsAt(problems, "/config/plugin"), ...problemsAt(problems, "/config/kind")];
  const plugin = typeof config.plugin === "string" ? config.plugin : "";
  const kind = typeof config.kind === "string" ? config.kind : "";

  return (
    <fieldset className="action-form node-kind-form">
      <legend>Node kind {plugin || "?"}/{kind || "?"}</legend>
      <dl className="node-kind-reference">
        <dt>Plugin</dt>
        <dd>
          {plugin || "(none)"}
          {resolution.state === "declared" && ` ${resolution.declaration.version}`}
        </dd>
        <dt>Kind</dt>
        <dd>{kind || "(none)"}</dd>
      </dl>
      {referenceProblems.map((problem, at) => (
        <p key={at} className={`field-error problem-${problem.severity}`} role="alert">
          {problem.message}
        </p>
      ))}
      {resolution.state === "unnamed" && (
        <p className="problem-blocking" role="alert">
          This node names no {resolution.plugin ? "kind" : "plugin"}: place a plugin node kind from the palette, or set
          <code> plugin</code> and <code>kind</code> in its config.
        </p>
      )}
      {resolution.state === "loading" &&
        (catalog.error ? (
          <p className="problem-blocking">The plugin node kinds could not be loaded ({catalog.error}); refresh them in the palette.</p>
        ) : (
          <p className="hint">Loading the plugin node kinds…</p>
        ))}
      {resolution.state === "undeclared" && (
        <p className="problem-blocking node-kind-drift" role="alert">
          {undeclaredMessage(resolution.plugin, resolution.kind, resolution.others)}
        </p>
      )}
      {resolution.state === "declared" && <Declared declaration={resolution.declaration} config={config} problems={problems} onChange={onChange} />}
    </fieldset>
  );
}

function Declared(props: {
  declaration: NodeKindDeclaration;
  config: Record<string, unknown>;
  problems: Problem[];
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { declaration, config, problems, onChange } = props;
  const adds = addedFields(declaration);
  return (
    <>
      {declaration.description && <p className="hint">{declaration.description}</p>}
      <SchemaFields schema={declaration.config_schema} skip={REFERENCE_KEYS} config={config} problems={problems} owner={null} onChange={onChange} />
      <h3 className="form-heading">Answers</h3>
      <ul className="node-kind-answers" aria-label={`Answers of ${declaration.name}`}>
        {answersOf(declaration).map((answer) => (
          <li key={answer}>
            <code>{answer}</code> {ANSWER_MEANINGS[answer] ?? ""}
          </li>
        ))}
      </ul>
      <h3 className="form-heading">Adds fields</h3>
      {adds.length > 0 ? (
        <ul className="node-kind-fields" aria-label={`Fields ${declaration.name} adds`}>
          {adds.map((field) => (
            <li key={field.name}>
              <code>{field.name}</code> {field.type}
            </li>
          ))}
        </ul>
      ) : (
        <p className="hint">None: the nodes after it read the fields that reach it.</p>
      )}
    </>
  );
}
