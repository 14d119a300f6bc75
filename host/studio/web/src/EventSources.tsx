// Event sources (`/api/v1/event-sources`): the default output topic of each source topic, used by rules whose
// own output topic is empty.

import { useState } from "react";

import { call } from "./api";
import { FormError, ResourceSection, useSection, useSubmit } from "./Resources";

interface EventSource {
  source_topic: string;
  default_output_topic: string;
  description?: string;
}

export function EventSourcesView() {
  const section = useSection<EventSource>("/api/v1/event-sources", (source) => source.source_topic);
  return (
    <ResourceSection
      title="Event sources"
      newLabel="New event source"
      entries={section.items.map((source) => ({ key: source.source_topic, label: source.source_topic, detail: `→ ${source.default_output_topic}` }))}
      chosen={section.chosen}
      onChoose={section.choose}
    >
      <EventSourceForm key={section.formKey} source={section.current} onSaved={section.onSaved} />
    </ResourceSection>
  );
}

function EventSourceForm(props: { source?: EventSource; onSaved: (topic: string) => Promise<void> }) {
  const { source, onSaved } = props;
  const [topic, setTopic] = useState(source?.source_topic ?? "");
  const [output, setOutput] = useState(source?.default_output_topic ?? "");
  const [description, setDescription] = useState(source?.description ?? "");
  const { error, submit } = useSubmit();
  return (
    <form
      className="resource-body"
      aria-label={source ? `Event source ${source.source_topic}` : "New event source"}
      onSubmit={async (event) => {
        event.preventDefault();
        const body = { default_output_topic: output, description: description || undefined };
        const path = `/api/v1/event-sources/${encodeURIComponent(topic.trim())}`;
        await submit(async () => (await call("PUT", path, body), `Event source ${topic.trim()} saved.`), () => onSaved(topic.trim()));
      }}
    >
      <h2>{source ? `Event source ${source.source_topic}` : "New event source"}</h2>
      <label>
        Source topic <input value={topic} onChange={(event) => setTopic(event.target.value)} readOnly={source !== undefined} required />
      </label>
      <label>
        Default output topic <input value={output} onChange={(event) => setOutput(event.target.value)} />
      </label>
      <label>
        Description <input value={description} onChange={(event) => setDescription(event.target.value)} />
      </label>
      <div className="buttons">
        <button type="submit">Save event source</button>
      </div>
      <FormError error={error} />
    </form>
  );
}
