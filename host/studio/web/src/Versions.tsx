// A flow's released versions and the visual diff between two of them: the canvas draws both versions' nodes
// and edges marked added, removed or changed (read-only), this panel lists what changed, and the inspector
// shows a changed node's values before and after (`GET /api/v2/flows/:id/versions[/:version]`).

import { useCallback, useEffect, useState } from "react";

import { call } from "./api";
import { diffBodies, diffBody, type FlowDiff, type NodeDiff } from "./diff";
import { useFeedback } from "./feedback";
import type { FlowBody } from "./graph";
import { layout } from "./layout";

interface VersionSummary {
  version: number;
  released_at: string;
  released_by: string;
  body_hash: string;
}

export interface Comparison {
  from: number;
  to: number;
  diff: FlowDiff;
}

const show = (value: unknown) => (value === undefined ? "(absent)" : JSON.stringify(value));

/// The diff with every node placed: the versions' own positions, or an auto-layout of both when one lacks them.
function placed(diff: FlowDiff): FlowDiff {
  if (diff.nodes.every((entry) => entry.node.position)) return diff;
  const positions = new Map(layout(diffBody(diff)).nodes.map((node) => [node.id, node.position]));
  return { ...diff, nodes: diff.nodes.map((entry) => ({ ...entry, node: { ...entry.node, position: positions.get(entry.id) } })) };
}

export function VersionsPanel(props: {
  flowId: string;
  comparing: Comparison | null;
  onCompare: (comparison: Comparison | null) => void;
  onFocus: (nodeId: string) => void;
}) {
  const { flowId, comparing, onCompare, onFocus } = props;
  const { failed, session } = useFeedback();
  const [versions, setVersions] = useState<VersionSummary[]>([]);
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");

  useEffect(() => {
    call<VersionSummary[]>("GET", `/api/v2/flows/${encodeURIComponent(flowId)}/versions`)
      .then((listed) => {
        setVersions(listed);
        setTo(listed[0] ? String(listed[0].version) : "");
        setFrom(listed[1] ? String(listed[1].version) : "");
      })
      .catch(failed);
  }, [flowId, failed, session]);

  const compare = useCallback(async () => {
    try {
      const body = (version: string) =>
        call<{ body: FlowBody }>("GET", `/api/v2/flows/${encodeURIComponent(flowId)}/versions/${version}`).then((found) => found.body);
      const [before, after] = await Promise.all([body(from), body(to)]);
      onCompare({ from: Number(from), to: Number(to), diff: placed(diffBodies(before, after)) });
    } catch (error) {
      failed(error);
    }
  }, [failed, flowId, from, onCompare, to]);

  const pick = (value: string, onChange: (value: string) => void, label: string) => (
    <label>
      {label}{" "}
      <select value={value} onChange={(event) => onChange(event.target.value)}>
        <option value="">—</option>
        {versions.map((version) => (
          <option key={version.version} value={version.version}>
            v{version.version} · {version.released_at} · {version.released_by}
          </option>
        ))}
      </select>
    </label>
  );

  return (
    <section className="versions" aria-labelledby="versions-heading">
      <h2 id="versions-heading">Versions ({versions.length} released)</h2>
      {versions.length < 2 ? (
        <p className="hint">Two released versions are needed for a diff.</p>
      ) : (
        <div className="buttons">
          {pick(from, setFrom, "Compare")}
          {pick(to, setTo, "with")}
          <button onClick={() => void compare()} disabled={!from || !to || from === to}>
            Show the diff
          </button>
          {comparing && <button onClick={() => onCompare(null)}>Close the diff</button>}
        </div>
      )}
      {comparing && (
        <ul className="changes" aria-label="Changes">
          {comparing.diff.nodes
            .filter((entry) => entry.change !== "same")
            .map((entry) => (
              <li key={entry.id} className={`change-${entry.change}`}>
                <button className="link" onClick={() => onFocus(entry.id)}>
                  {entry.id}
                </button>{" "}
                {entry.change}
                {entry.values.length > 0 && `: ${entry.values.map((value) => `${value.pointer} ${show(value.before)} → ${show(value.after)}`).join(", ")}`}
              </li>
            ))}
          {comparing.diff.edges
            .filter((edge) => edge.change !== "same")
            .map((edge) => (
              <li key={`${edge.from}->${edge.to}`} className={`change-${edge.change}`}>
                edge {edge.from} → {edge.to} {edge.change}
              </li>
            ))}
        </ul>
      )}
    </section>
  );
}

/// A node in the diff view, for the inspector: what changed between the two versions.
export function DiffStepView({ entry }: { entry: NodeDiff | undefined }) {
  if (!entry) return null;
  return (
    <section className="diff-step" aria-label={`Changes of ${entry.id}`}>
      <h3>{entry.change === "same" ? "Unchanged" : entry.change[0].toUpperCase() + entry.change.slice(1)}</h3>
      {entry.values.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Value</th>
              <th scope="col">Before</th>
              <th scope="col">After</th>
            </tr>
          </thead>
          <tbody>
            {entry.values.map((value) => (
              <tr key={value.pointer}>
                <td>
                  <code>{value.pointer}</code>
                </td>
                <td>{show(value.before)}</td>
                <td>{show(value.after)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h4>Config</h4>
      <pre>{JSON.stringify(entry.node.config, null, 2)}</pre>
    </section>
  );
}
