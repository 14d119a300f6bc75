// v1 rules (`/api/v1/triggers`): events of one type on a source topic whose CEL expression holds are published
// to an output topic (or the source topic's default). The expression is edited like a flow condition: the
// schema's fields complete, and the server's type checker (`POST /api/v1/validate/expression`) answers under
// the text as you type. Rules compiled from a flow are shown read-only: they are edited through the flow.

import { useEffect, useState } from "react";

import { call } from "./api";
import { CelEditor } from "./CelEditor";
import type { Problem } from "./graph";
import { FormError, ResourceSection, useSection, useStored, useSubmit } from "./Resources";
import type { EventSchema } from "./Schemas";

interface Rule {
  id: string;
  name: string;
  source: { type: "kafka"; topic: string };
  conditions: { event_type: string; expression: string };
  output_topic: string;
  output_mapping?: { mode: "select"; fields: { source: string; target: string }[] };
  enabled: boolean;
  flow_id?: string;
}

export function RulesView() {
  const section = useSection<Rule>("/api/v1/triggers", (rule) => rule.id);
  const schemas = useStored<EventSchema>("/api/v1/schemas").items;
  return (
    <ResourceSection
      title="Rules"
      newLabel="New rule"
      entries={section.items.map((rule) => ({
        key: rule.id,
        label: rule.name || rule.id,
        detail: `${rule.enabled ? "enabled" : "disabled"}${rule.flow_id ? ` · flow ${rule.flow_id}` : ""}`,
      }))}
      chosen={section.chosen}
      onChoose={section.choose}
    >
      <RuleForm key={section.formKey} rule={section.current} schemas={schemas} onSaved={section.onSaved} onDeleted={section.onDeleted} />
    </ResourceSection>
  );
}

function RuleForm(props: { rule?: Rule; schemas: EventSchema[]; onSaved: (id: string) => Promise<void>; onDeleted: () => Promise<void> }) {
  const { rule, schemas, onSaved, onDeleted } = props;
  const [id, setId] = useState(rule?.id ?? "");
  const [name, setName] = useState(rule?.name ?? "");
  const [topic, setTopic] = useState(rule?.source.topic ?? "");
  const [eventType, setEventType] = useState(rule?.conditions.event_type ?? "");
  const [expression, setExpression] = useState(rule?.conditions.expression ?? "");
  const [output, setOutput] = useState(rule?.output_topic ?? "");
  const [mapping, setMapping] = useState(rule?.output_mapping?.fields ?? []);
  const [enabled, setEnabled] = useState(rule?.enabled ?? true);
  const [celProblems, setCelProblems] = useState<Problem[]>([]);
  const { error, submit } = useSubmit();
  const readOnly = rule?.flow_id !== undefined;
  const fields = schemas.find((schema) => schema.event_type === eventType)?.fields ?? [];

  // The server's type checker on the expression, shortly after each change.
  useEffect(() => {
    setCelProblems([]);
    if (!eventType || !expression.trim()) return;
    const timer = window.setTimeout(async () => {
      try {
        const answer = await call<{ errors: string[] }>("POST", "/api/v1/validate/expression", { event_type: eventType, expression });
        setCelProblems(answer.errors.map((message) => ({ code: "CEL_INVALID", severity: "blocking", message, origin: "server" })));
      } catch (caught) {
        setCelProblems([{ code: "CEL_INVALID", severity: "blocking", message: caught instanceof Error ? caught.message : String(caught), origin: "server" }]);
      }
    }, 300);
    return () => window.clearTimeout(timer);
  }, [eventType, expression]);

  const body = (): Omit<Rule, "flow_id"> => ({
    id: id.trim(),
    name,
    source: { type: "kafka", topic: topic.trim() },
    conditions: { event_type: eventType, expression },
    output_topic: output.trim(),
    output_mapping: mapping.length > 0 ? { mode: "select", fields: mapping } : undefined,
    enabled,
  });
  const path = (ruleId: string) => `/api/v1/triggers/${encodeURIComponent(ruleId)}`;
  const save = async () => {
    let savedId = "";
    await submit(
      async () => {
        const answer = rule ? await call<Rule>("PUT", path(rule.id), body()) : await call<Rule>("POST", "/api/v1/triggers", body());
        savedId = answer.id;
        return `Rule ${answer.name || answer.id} saved.`;
      },
      () => onSaved(savedId),
    );
  };
  const setRow = (at: number, change: Partial<{ source: string; target: string }>) =>
    setMapping((current) => current.map((row, index) => (index === at ? { ...row, ...change } : row)));

  return (
    <form
      className="resource-body"
      aria-label={rule ? `Rule ${rule.name || rule.id}` : "New rule"}
      onSubmit={(event) => {
        event.preventDefault();
        void save();
      }}
    >
      <h2>{rule ? `Rule ${rule.name || rule.id}` : "New rule"}</h2>
      {readOnly && <p className="hint">This rule is compiled from flow {rule?.flow_id}: edit the flow instead.</p>}
      <fieldset disabled={readOnly}>
        <label>
          Id <input value={id} onChange={(event) => setId(event.target.value)} readOnly={rule !== undefined} placeholder="(generated when empty)" />
        </label>
        <label>
          Name <input value={name} onChange={(event) => setName(event.target.value)} />
        </label>
        <label>
          Source topic <input value={topic} onChange={(event) => setTopic(event.target.value)} required />
        </label>
        <label>
          Event type{" "}
          <select value={eventType} onChange={(event) => setEventType(event.target.value)} required>
            <option value="">Choose a schema…</option>
            {schemas.map((schema) => (
              <option key={schema.event_type}>{schema.event_type}</option>
            ))}
          </select>
        </label>
        <div className="field">
          <span>Expression (CEL)</span>
          <CelEditor value={expression} fields={fields} problems={celProblems} label="Expression of the rule" onChange={setExpression} />
        </div>
        <label>
          Output topic <input value={output} onChange={(event) => setOutput(event.target.value)} placeholder="(the source topic's default)" />
        </label>
        <fieldset className="mapping">
          <legend>Output mapping (only the listed fields, renamed)</legend>
          {mapping.map((row, at) => (
            <div key={at} className="buttons">
              <input aria-label={`Source field ${at + 1}`} value={row.source} onChange={(event) => setRow(at, { source: event.target.value })} />
              →
              <input aria-label={`Target field ${at + 1}`} value={row.target} onChange={(event) => setRow(at, { target: event.target.value })} />
              <button type="button" onClick={() => setMapping((current) => current.filter((_, index) => index !== at))}>
                Remove mapping {at + 1}
              </button>
            </div>
          ))}
          <button type="button" onClick={() => setMapping((current) => [...current, { source: "", target: "" }])}>
            Add mapped field
          </button>
        </fieldset>
        <label className="inline">
          <input type="checkbox" checked={enabled} onChange={(event) => setEnabled(event.target.checked)} /> Enabled
        </label>
        <div className="buttons">
          <button type="submit">Save rule</button>
          {rule && (
            <button
              type="button"
              onClick={async () => {
                await submit(async () => (await call("DELETE", path(rule.id)), `Rule ${rule.name || rule.id} deleted.`), onDeleted);
              }}
            >
              Delete rule
            </button>
          )}
        </div>
      </fieldset>
      <FormError error={error} />
    </form>
  );
}
