// Event schemas (`/api/v1/schemas`): the typed fields of each event type, which rule and flow conditions are
// checked against. A schema is made of rows (name, type); saving replaces it. Deleting one that rules use
// asks first, naming them: their expressions are no longer type-checked once it is gone.

import { useState } from "react";

import { call } from "./api";
import { useFeedback } from "./feedback";
import { FormError, ResourceSection, useSection, useSubmit } from "./Resources";

export interface EventSchema {
  event_type: string;
  fields: { name: string; type: string }[];
}

export const FIELD_TYPES = ["int", "double", "string", "bool"] as const;

export function SchemasView() {
  const section = useSection<EventSchema>("/api/v1/schemas", (schema) => schema.event_type);
  return (
    <ResourceSection
      title="Schemas"
      newLabel="New schema"
      entries={section.items.map((schema) => ({ key: schema.event_type, label: schema.event_type, detail: `${schema.fields.length} fields` }))}
      chosen={section.chosen}
      onChoose={section.choose}
    >
      <SchemaForm key={section.formKey} schema={section.current} onSaved={section.onSaved} onDeleted={section.onDeleted} />
    </ResourceSection>
  );
}

function SchemaForm(props: { schema?: EventSchema; onSaved: (eventType: string) => Promise<void>; onDeleted: () => Promise<void> }) {
  const { schema, onSaved, onDeleted } = props;
  const [eventType, setEventType] = useState(schema?.event_type ?? "");
  const [fields, setFields] = useState(schema?.fields ?? [{ name: "", type: "string" }]);
  const { error, submit } = useSubmit();
  const { failed } = useFeedback();
  // The rules that use this schema, while a deletion waits for confirmation.
  const [usedBy, setUsedBy] = useState<string[] | null>(null);
  const path = `/api/v1/schemas/${encodeURIComponent(eventType.trim())}`;
  const remove = async () => {
    await submit(async () => (await call("DELETE", path), `Schema ${eventType.trim()} deleted.`), onDeleted);
  };
  const askToRemove = async () => {
    try {
      const rules = await call<{ id: string; name: string; conditions: { event_type: string } }[]>("GET", "/api/v1/triggers");
      const users = rules.filter((rule) => rule.conditions.event_type === schema?.event_type).map((rule) => rule.name || rule.id);
      if (users.length === 0) await remove();
      else setUsedBy(users);
    } catch (caught) {
      failed(caught);
    }
  };
  const setField = (at: number, change: Partial<EventSchema["fields"][number]>) =>
    setFields((current) => current.map((field, index) => (index === at ? { ...field, ...change } : field)));

  return (
    <form
      className="resource-body"
      aria-label={schema ? `Schema ${schema.event_type}` : "New schema"}
      onSubmit={async (event) => {
        event.preventDefault();
        await submit(async () => (await call("PUT", path, { fields }), `Schema ${eventType.trim()} saved.`), () => onSaved(eventType.trim()));
      }}
    >
      <h2>{schema ? `Schema ${schema.event_type}` : "New schema"}</h2>
      <label>
        Event type <input value={eventType} onChange={(event) => setEventType(event.target.value)} readOnly={schema !== undefined} required />
      </label>
      <table>
        <thead>
          <tr>
            <th scope="col">Field</th>
            <th scope="col">Type</th>
            <th scope="col">
              <span className="visually-hidden">Remove</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {fields.map((field, at) => (
            <tr key={at}>
              <td>
                <input aria-label={`Name of field ${at + 1}`} value={field.name} onChange={(event) => setField(at, { name: event.target.value })} />
              </td>
              <td>
                <select aria-label={`Type of field ${at + 1}`} value={field.type} onChange={(event) => setField(at, { type: event.target.value })}>
                  {FIELD_TYPES.map((type) => (
                    <option key={type}>{type}</option>
                  ))}
                </select>
              </td>
              <td>
                <button type="button" onClick={() => setFields((current) => current.filter((_, index) => index !== at))}>
                  Remove field {at + 1}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="buttons">
        <button type="button" onClick={() => setFields((current) => [...current, { name: "", type: "string" }])}>
          Add field
        </button>
        <button type="submit">Save schema</button>
        {schema && (
          <button type="button" onClick={() => void askToRemove()}>
            Delete schema
          </button>
        )}
      </div>
      {usedBy && (
        <div className="confirm" role="alertdialog" aria-label="Delete a schema in use">
          <p>
            {usedBy.length === 1 ? "Rule" : "Rules"} {usedBy.join(", ")} {usedBy.length === 1 ? "uses" : "use"} {schema?.event_type}: without
            the schema, {usedBy.length === 1 ? "its expression is" : "their expressions are"} no longer type-checked.
          </p>
          <div className="buttons">
            <button type="button" onClick={() => void remove()}>
              Delete anyway
            </button>
            <button type="button" onClick={() => setUsedBy(null)}>
              Keep the schema
            </button>
          </div>
        </div>
      )}
      <FormError error={error} />
    </form>
  );
}
