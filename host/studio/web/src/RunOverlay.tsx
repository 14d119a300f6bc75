// The chosen run over the flow editor: on the canvas, the path it took (its nodes marked `on-path` with their
// outcome, the others `off-path`, the edges it took animated) and, in the inspector, what it did at the selected
// node. The run is chosen in the runs panel or from a dead letter (Runs.tsx, DeadLetters.tsx).

import { RunStepView, type RunDetail } from "./Runs";

/// What `run` did at node `id` (undefined: the run did not pass there).
function stepOf(run: RunDetail, id: string) {
  return run.nodes.find((step) => step.node_id === id);
}

/// The class of node `id` on the canvas under `run` (undefined: no run is shown).
export function runNodeClass(run: RunDetail | null, id: string) {
  if (!run) return undefined;
  const step = stepOf(run, id);
  return step ? `on-path outcome-${step.outcome}` : "off-path";
}

/// Whether `run` took the edge `from` → `to` (it passed at both ends).
export function runTookEdge(run: RunDetail | null, from: string, to: string) {
  return run !== null && stepOf(run, from) !== undefined && stepOf(run, to) !== undefined;
}

/// In the inspector: what `run` did at node `id`, if it passed there.
export function RunAtNode({ run, id }: { run: RunDetail | null; id: string }) {
  const step = run ? stepOf(run, id) : undefined;
  return run && step ? <RunStepView step={step} payloadsDropped={run.node_payloads_dropped} /> : null;
}
