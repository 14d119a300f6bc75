// The panels below the flow editor's canvas: the problems (the client's wiring rules merged with the server's
// draft validation; a node's problem focuses the node, a warning can be acknowledged for the release), and for
// the opened flow its runs, its dead letters and its released versions (Runs.tsx, DeadLetters.tsx,
// Versions.tsx).

import { DeadLettersPanel } from "./DeadLetters";
import { toggled } from "./Resources";
import { RunsPanel } from "./Runs";
import type { FlowEditor } from "./useFlowEditor";
import { VersionsPanel } from "./Versions";

export function FlowPanels({ editor }: { editor: FlowEditor }) {
  const { flow, run, comparing, compare, showRun, showRunOf, focusNode } = editor;
  return (
    <div className="panels">
      <ProblemsPanel editor={editor} />
      {flow && <RunsPanel key={`runs-${flow.id}`} flowId={flow.id} chosen={run} onChoose={showRun} />}
      {flow && <DeadLettersPanel key={`letters-${flow.id}`} flowId={flow.id} onShowRun={showRunOf} />}
      {flow && (
        <VersionsPanel
          key={`versions-${flow.id}-${flow.released_version ?? 0}`}
          flowId={flow.id}
          comparing={comparing}
          onCompare={compare}
          onFocus={focusNode}
        />
      )}
    </div>
  );
}

/// The draft's problems, each with its node (a button focusing it) and, for a warning, its acknowledgement.
function ProblemsPanel({ editor }: { editor: FlowEditor }) {
  const { problems, acknowledged, setAcknowledged, focusNode } = editor;
  return (
    <section className="problems" aria-labelledby="problems-heading">
      <h2 id="problems-heading">
        Problems ({problems.filter((problem) => problem.severity === "blocking").length} blocking,{" "}
        {problems.filter((problem) => problem.severity === "warning").length} warnings)
      </h2>
      <ul>
        {problems.map((problem, at) => (
          <li
            key={`${problem.origin}-${problem.code}-${problem.node_id ?? ""}-${at}`}
            className={`problem problem-${problem.severity}`}
          >
            <span className="severity">{problem.severity}</span>
            {problem.node_id ? (
              <button className="link" onClick={() => focusNode(problem.node_id!)}>
                {problem.node_id}
              </button>
            ) : null}{" "}
            <code>{problem.code}</code> {problem.message}
            {problem.severity === "warning" && (
              <label className="ack">
                <input
                  type="checkbox"
                  checked={acknowledged.has(problem.code)}
                  onChange={(event) =>
                    setAcknowledged((current) => toggled(current, problem.code, event.target.checked))
                  }
                />{" "}
                acknowledge
              </label>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
