// An action node's configuration as a form generated from its action's `config_schema` (see schema.ts): the
// action is picked among those of its parent segment's service, each field gets the input its type asks for,
// pickers are filled from the service's data sources through the catalog's proxy
// (`GET /api/v1/components/:id/data/:source`), and the server's problems land under the field their JSON
// Pointer names. Text fields commit when they lose focus (one undo step per field edit).

import { useEffect, useId, useState, type ReactNode } from "react";

import { call } from "./api";
import type { Problem } from "./graph";
import { fields, fromInput, getAt, options, setAt, sourceQuery, toInput, type DataSourceRef, type Field } from "./schema";

interface ActionDecl {
  name: string;
  description?: string;
  config_schema?: unknown;
}

interface ComponentRow {
  component_id: string;
  actions: ActionDecl[];
  data_sources: { name: string; params?: string[] }[];
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
  const errorsAt = (pointer: string) =>
    problems.filter((problem) => problem.pointer === pointer || problem.pointer?.startsWith(`${pointer}/`));

  return (
    <fieldset className="action-form">
      <legend>Action of {service}</legend>
      <FieldRow label="Action" errors={errorsAt("/config/action_ref")}>
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
      {declared &&
        fields(declared.action.config_schema).map((field) => (
          <SchemaField
            key={field.pointer}
            field={field}
            config={config}
            component={declared.component}
            errorsAt={errorsAt}
            onChange={onChange}
          />
        ))}
    </fieldset>
  );
}

function FieldRow(props: {
  label: string;
  required?: boolean;
  description?: string;
  errors: Problem[];
  children: (id: string, describedBy: string) => ReactNode;
}) {
  const id = useId();
  const describedBy = `${id}-help`;
  return (
    <div className={`field${props.errors.length ? " field-invalid" : ""}`}>
      <label htmlFor={id}>
        {props.label}
        {props.required ? " *" : ""}
      </label>
      {props.children(id, describedBy)}
      <div id={describedBy}>
        {props.description && <span className="hint">{props.description}</span>}
        {props.errors.map((problem, at) => (
          <span key={at} className={`field-error problem-${problem.severity}`} role="alert">
            {problem.message}
          </span>
        ))}
      </div>
    </div>
  );
}

function SchemaField(props: {
  field: Field;
  config: Record<string, unknown>;
  component: ComponentRow;
  errorsAt: (pointer: string) => Problem[];
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { field, config, component, errorsAt, onChange } = props;
  const value = getAt(config, field.pointer);
  const set = (next: unknown) => onChange(setAt(config, field.pointer, next));
  if (field.kind === "object" && field.fields) {
    return (
      <fieldset className="nested">
        <legend>{field.title}</legend>
        {field.fields.map((inner) => (
          <SchemaField key={inner.pointer} field={inner} config={config} component={component} errorsAt={errorsAt} onChange={onChange} />
        ))}
      </fieldset>
    );
  }
  return (
    <FieldRow label={field.title} required={field.required} description={field.description} errors={errorsAt(field.pointer)}>
      {(id, describedBy) => {
        const common = { id, "aria-describedby": describedBy, "aria-invalid": errorsAt(field.pointer).length > 0 };
        if (field.dataSource) {
          return <Picker {...common} field={field} component={component} config={config} value={value} onChange={set} />;
        }
        if (field.kind === "boolean") {
          return <input {...common} type="checkbox" checked={value === true} onChange={(event) => set(event.target.checked)} />;
        }
        if (field.kind === "enum") {
          return (
            <select {...common} value={typeof value === "string" ? value : ""} onChange={(event) => set(event.target.value || undefined)}>
              <option value="">{field.required ? "Choose…" : "(none)"}</option>
              {field.options!.map((option) => (
                <option key={option} value={option}>
                  {option}
                </option>
              ))}
            </select>
          );
        }
        return <TextInput {...common} kind={field.kind} value={value} onCommit={set} />;
      }}
    </FieldRow>
  );
}

/// A text field that commits on blur or Enter.
function TextInput(props: {
  id: string;
  "aria-describedby": string;
  "aria-invalid": boolean;
  kind: Field["kind"];
  value: unknown;
  onCommit: (value: unknown) => void;
}) {
  const { kind, value, onCommit, ...attributes } = props;
  const [text, setText] = useState(toInput(kind, value));
  useEffect(() => setText(toInput(kind, value)), [kind, value]);
  const commit = () => {
    const next = fromInput(kind, text);
    if (JSON.stringify(next) !== JSON.stringify(value)) onCommit(next);
  };
  return (
    <input
      {...attributes}
      type="text"
      inputMode={kind === "number" || kind === "integer" ? "decimal" : undefined}
      value={text}
      onChange={(event) => setText(event.target.value)}
      onBlur={commit}
      onKeyDown={(event) => event.key === "Enter" && commit()}
    />
  );
}

/// A choice among a data source's items, fetched through the catalog's proxy; a failure says so and offers a
/// retry, and the current value stays editable as text meanwhile.
function Picker(props: {
  id: string;
  "aria-describedby": string;
  "aria-invalid": boolean;
  field: Field;
  component: ComponentRow;
  config: Record<string, unknown>;
  value: unknown;
  onChange: (value: unknown) => void;
}) {
  const { field, component, config, value, onChange, ...attributes } = props;
  const ref = field.dataSource!;
  const declared = component.data_sources.find((source) => source.name === ref.source)?.params ?? [];
  const query = sourceQuery(declared, config);
  const refKey = JSON.stringify(ref);
  const path = `/api/v1/components/${encodeURIComponent(component.component_id)}/data/${encodeURIComponent(ref.source)}${query}`;
  const [items, setItems] = useState<{ value: string; label: string }[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setError(null);
    const chosen: DataSourceRef = JSON.parse(refKey);
    call<unknown>("GET", path)
      .then((answer) => setItems(options(answer, chosen)))
      .catch((failure: Error) => setError(failure.message));
  }, [path, refKey, attempt]);
  const current = value === undefined || value === null ? "" : String(value);
  if (error) {
    return (
      <span className="picker-error">
        <TextInput {...attributes} kind={field.kind} value={value} onCommit={onChange} />
        <span className="problem-blocking">Could not load {ref.source}: {error}</span>
        <button type="button" onClick={() => setAttempt((n) => n + 1)}>
          Retry
        </button>
      </span>
    );
  }
  return (
    <select
      {...attributes}
      value={current}
      onChange={(event) => {
        const chosen = event.target.value;
        onChange(chosen === "" ? undefined : field.kind === "integer" || field.kind === "number" ? Number(chosen) : chosen);
      }}
    >
      <option value="">{items ? "Choose…" : "Loading…"}</option>
      {current && !items?.some((item) => item.value === current) && <option value={current}>{current}</option>}
      {(items ?? []).map((item) => (
        <option key={item.value} value={item.value}>
          {item.label}
        </option>
      ))}
    </select>
  );
}
