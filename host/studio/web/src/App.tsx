// Studio's shell: the sections (flows, rules, schemas, event sources, plugins) and which one is shown, the
// status line and the sign-in. The flows section, the flow editor, is FlowsView.tsx; the others each have their
// own file (Rules.tsx, Schemas.tsx, EventSources.tsx, Plugins.tsx).

import { ReactFlowProvider } from "@xyflow/react";
import { useCallback, useMemo, useState } from "react";

import { ApiError, setToken } from "./api";
import { EventSourcesView } from "./EventSources";
import { FeedbackContext, type Feedback } from "./feedback";
import { FlowsView } from "./FlowsView";
import { PluginsView } from "./Plugins";
import { RulesView } from "./Rules";
import { SchemasView } from "./Schemas";

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
