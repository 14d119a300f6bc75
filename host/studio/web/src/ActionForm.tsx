// An action node's configuration as a form generated from its action's `config_schema` (the fields are
// SchemaForm.tsx's): the action is picked among those of its parent segment's service (`GET
// /api/v2/services/:service`), the pickers are filled from the data sources of the component declaring the
// action, and the server's problems land under the field their JSON Pointer names.

import { useEffect, useState } from "react";

import { call } from "./api";
import type { Problem } from "./graph";
import { setAt } from "./schema";
import { FieldRow, SchemaFields, problemsAt, type DataSourceOwner } from "./SchemaForm";

interface ActionDecl {
  name: string;
  description?: string;
  config_schema?: unknown;
}

interface ComponentRow extends DataSourceOwner {
  actions: ActionDecl[];
}

export interface ServiceView {
  service: string;
  components: ComponentRow[];
}

/// Where an action is declared: its component and declaration.
function declaration(view: ServiceView, action: string): { component: ComponentRow; action: ActionDecl } | null {
  for (const component of view.components) {
    const found = component.actions.find((candidate) => candidate.name === action);
    if (found) return { component, action: found };
  }
  return null;
}

export function ActionForm(props: {
  service: string | null;
  config: Record<string, unknown>;
  problems: Problem[];
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { service, config, problems, onChange } = props;
  const [view, setView] = useState<ServiceView | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    setView(null);
    setError(null);
    if (!service) return;
    call<ServiceView>("GET", `/api/v2/services/${encodeURIComponent(service)}`)
      .then(setView)
      .catch((failure: Error) => setError(failure.message));
  }, [service]);

  if (!service) return <p className="hint">Connect this action after a service segment to choose its action.</p>;
  if (error) return <p className="problem-blocking">Service {service}: {error}</p>;
  if (!view) return <p className="hint">Loading the actions of {service}…</p>;

  const actions = view.components.flatMap((component) => component.actions);
  const actionRef = typeof config.action_ref === "string" ? config.action_ref : "";
  const declared = actionRef ? declaration(view, actionRef) : null;

  return (
    <fieldset className="action-form">
      <legend>Action of {service}</legend>
      <FieldRow label="Action" errors={problemsAt(problems, "/config/action_ref")}>
        {(id, describedBy) => (
          <select
            id={id}
            aria-describedby={describedBy}
            value={actionRef}
            onChange={(event) => onChange(setAt(config, "/config/action_ref", event.target.value || undefined))}
          >
            <option value="">Choose an action…</option>
            {actions.map((action) => (
              <option key={action.name} value={action.name}>
                {action.name}
              </option>
            ))}
          </select>
        )}
      </FieldRow>
      {declared?.action.description && <p className="hint">{declared.action.description}</p>}
      {declared && (
        <SchemaFields
          schema={declared.action.config_schema}
          skip={["action_ref"]}
          config={config}
          problems={problems}
          owner={declared.component}
          onChange={onChange}
        />
      )}
    </fieldset>
  );
}
