// A node's configuration as form fields generated from a JSON Schema (see schema.ts), shared by the forms of
// action nodes (ActionForm.tsx) and plugin node kinds (NodeKindForm.tsx): each field gets the input its type
// asks for (text fields keep `{{placeholders}}` as strings), a field naming a data source gets a picker filled
// through the catalog's proxy (`GET /api/v1/components/:id/data/:source`) when the form knows the component
// that declares the source, and the server's problems land under the field their JSON Pointer names (those of
// a whole object, such as a missing required property, above its fields). Text fields commit when they lose
// focus (one undo step per field edit).

import { useEffect, useId, useState, type ReactNode } from "react";

import { call } from "./api";
import type { Problem } from "./graph";
import { fields, fromInput, getAt, options, setAt, sourceQuery, toInput, type DataSourceRef, type Field } from "./schema";

/// The component whose data sources fill the pickers, as the catalog lists it.
export interface DataSourceOwner {
  component_id: string;
  data_sources: { name: string; params?: string[] }[];
}

/// The problems at `pointer` or under it.
export function problemsAt(problems: readonly Problem[], pointer: string): Problem[] {
  return problems.filter((problem) => problem.pointer === pointer || problem.pointer?.startsWith(`${pointer}/`));
}

/// The fields of `schema` (its properties but `skip`), each writing its value into `config` under `/config`.
export function SchemaFields(props: {
  schema: unknown;
  skip: readonly string[];
  config: Record<string, unknown>;
  problems: Problem[];
  /// Without one, a data-source field is a text input.
  owner: DataSourceOwner | null;
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { schema, skip, config, problems, owner, onChange } = props;
  const errorsAt = (pointer: string) => problemsAt(problems, pointer);
  return (
    <>
      <ObjectProblems problems={problems.filter((problem) => problem.pointer === "/config")} />
      {fields(schema, "/config", skip).map((field) => (
        <SchemaField key={field.pointer} field={field} config={config} owner={owner} errorsAt={errorsAt} onChange={onChange} />
      ))}
    </>
  );
}

/// The problems of a whole object (its pointer, not one of its fields'), announced.
function ObjectProblems({ problems }: { problems: Problem[] }) {
  return (
    <>
      {problems.map((problem, at) => (
        <p key={at} className={`field-error problem-${problem.severity}`} role="alert">
          {problem.message}
        </p>
      ))}
    </>
  );
}

/// One labelled input with its description and its problems (announced, and named by `aria-describedby`).
export function FieldRow(props: {
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
  owner: DataSourceOwner | null;
  errorsAt: (pointer: string) => Problem[];
  onChange: (config: Record<string, unknown>) => void;
}) {
  const { field, config, owner, errorsAt, onChange } = props;
  const value = getAt(config, field.pointer);
  const set = (next: unknown) => onChange(setAt(config, field.pointer, next));
  if (field.kind === "object" && field.fields) {
    return (
      <fieldset className="nested">
        <legend>{field.title}</legend>
        <ObjectProblems problems={errorsAt(field.pointer).filter((problem) => problem.pointer === field.pointer)} />
        {field.fields.map((inner) => (
          <SchemaField key={inner.pointer} field={inner} config={config} owner={owner} errorsAt={errorsAt} onChange={onChange} />
        ))}
      </fieldset>
    );
  }
  return (
    <FieldRow label={field.title} required={field.required} description={field.description} errors={errorsAt(field.pointer)}>
      {(id, describedBy) => {
        const common = { id, "aria-describedby": describedBy, "aria-invalid": errorsAt(field.pointer).length > 0 };
        if (field.dataSource && owner) {
          return <Picker {...common} field={field} owner={owner} config={config} value={value} onChange={set} />;
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
  owner: DataSourceOwner;
  config: Record<string, unknown>;
  value: unknown;
  onChange: (value: unknown) => void;
}) {
  const { field, owner, config, value, onChange, ...attributes } = props;
  const ref = field.dataSource!;
  const declared = owner.data_sources.find((source) => source.name === ref.source)?.params ?? [];
  const query = sourceQuery(declared, config);
  const refKey = JSON.stringify(ref);
  const path = `/api/v1/components/${encodeURIComponent(owner.component_id)}/data/${encodeURIComponent(ref.source)}${query}`;
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
