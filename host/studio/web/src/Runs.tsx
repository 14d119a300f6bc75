// A flow's runs on its graph: the list of recent runs (newest first), and for the chosen one the path it took
// (its nodes marked on the canvas with their outcomes) and, in the inspector, each node's input, output,
// outcome and attempts (`GET /api/v2/flows/:id/runs`, `GET /api/v2/runs/:run_id`).

import { call } from "./api";
import { useFeedback } from "./feedback";
import { useStored } from "./Resources";

export interface RunSummary {
  run_id: string;
  status: string;
  started_at: string;
  version: number;
  path: { node_id: string; outcome: string }[];
}

export interface RunStep {
  node_id: string;
  kind: string;
  input?: unknown;
  output?: unknown;
  outcome: string;
  attempts?: { attempt: number; outcome: string; error?: string }[];
}

export interface RunDetail {
  run_id: string;
  status: string;
  version: number;
  nodes: RunStep[];
  /// The nodes' inputs and outputs were not kept (`engine.runs.node_payloads`).
  node_payloads_dropped?: boolean;
}

const pickRuns = (answer: unknown) => (answer as { runs: RunSummary[] }).runs;

export function RunsPanel(props: { flowId: string; chosen: RunDetail | null; onChoose: (run: RunDetail | null) => void }) {
  const { flowId, chosen, onChoose } = props;
  const { failed: onError } = useFeedback();
  const { items: runs, reload: refresh } = useStored<RunSummary>(`/api/v2/flows/${encodeURIComponent(flowId)}/runs?page_size=20`, pickRuns);
  const choose = async (runId: string) => {
    try {
      onChoose(await call<RunDetail>("GET", `/api/v2/runs/${encodeURIComponent(runId)}`));
    } catch (error) {
      onError(error);
    }
  };
  return (
    <section className="runs" aria-labelledby="runs-heading">
      <h2 id="runs-heading">Runs</h2>
      <div className="buttons">
        <button onClick={() => void refresh()}>Refresh runs</button>
        {chosen && <button onClick={() => onChoose(null)}>Hide run</button>}
      </div>
      {runs.length === 0 ? (
        <p className="hint">No runs yet.</p>
      ) : (
        <ul>
          {runs.map((run) => (
            <li key={run.run_id}>
              <button className={`link${chosen?.run_id === run.run_id ? " chosen" : ""}`} aria-pressed={chosen?.run_id === run.run_id} onClick={() => void choose(run.run_id)}>
                {run.started_at} · v{run.version} · {run.status} · {run.path.length} nodes
              </button>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/// What the chosen run did at one node, for the inspector.
export function RunStepView({ step, payloadsDropped }: { step: RunStep; payloadsDropped?: boolean }) {
  const show = (value: unknown) =>
    (value === undefined || value === null) && payloadsDropped
      ? "not kept (engine.runs.node_payloads)"
      : value === undefined
        ? "—"
        : JSON.stringify(value, null, 2);
  return (
    <section className="run-step" aria-label={`This run at ${step.node_id}`}>
      <h3>This run here: {step.outcome}</h3>
      <p>
        {step.attempts?.length ?? 0} attempt record{step.attempts?.length === 1 ? "" : "s"}
        {step.attempts?.some((attempt) => attempt.error) ? `: ${step.attempts.filter((a) => a.error).map((a) => a.error).join("; ")}` : ""}
      </p>
      <h4>Input</h4>
      <pre>{show(step.input)}</pre>
      <h4>Output</h4>
      <pre>{show(step.output)}</pre>
    </section>
  );
}
