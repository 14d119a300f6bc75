// A flow's dead letters (terminal action failures): listed newest first with their node, action, reason and
// error; each can be shown on the graph (its run) and replayed, alone or several at once, either to the run's
// own version or to the flow's latest release (`GET /api/v2/dead-letters?flow_id=`,
// `POST /api/v2/dead-letters/:id/replay`, `POST /api/v2/dead-letters/replay`).

import { useCallback, useEffect, useState } from "react";

import { ApiError, call } from "./api";
import { useFeedback } from "./feedback";
import { toggled } from "./Resources";

export interface DeadLetter {
  id: string;
  run_id: string;
  version: number;
  node_id: string;
  service: string;
  action: string;
  reason: string;
  error: string;
  attempts: number;
  at: string;
  status: "open" | "replayed";
  replays: { at: string; by: string; to: "run" | "latest"; run_id: string; version: number }[];
}

type Target = "run" | "latest";

interface Replayed {
  run_id: string;
  version: number;
}

const TARGET_LABELS: Record<Target, string> = { run: "the run's version", latest: "the latest release" };

export function DeadLettersPanel(props: { flowId: string; onShowRun: (runId: string) => Promise<void> }) {
  const { flowId, onShowRun } = props;
  const { say, failed, session } = useFeedback();
  const [status, setStatus] = useState<"open" | "replayed" | "">("open");
  const [letters, setLetters] = useState<DeadLetter[]>([]);
  const [total, setTotal] = useState(0);
  const [chosen, setChosen] = useState<Set<string>>(new Set());

  const refresh = useCallback(async () => {
    try {
      const query = new URLSearchParams({ flow_id: flowId, page_size: "50" });
      if (status) query.set("status", status);
      const page = await call<{ dead_letters: DeadLetter[]; total: number }>("GET", `/api/v2/dead-letters?${query}`);
      setLetters(page.dead_letters);
      setTotal(page.total);
      setChosen((current) => new Set([...current].filter((id) => page.dead_letters.some((letter) => letter.id === id))));
    } catch (error) {
      failed(error);
    }
    // `session`: signing in loads them again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [failed, flowId, status, session]);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  const replayOne = async (letter: DeadLetter, to: Target) => {
    try {
      const replayed = await call<Replayed>("POST", `/api/v2/dead-letters/${encodeURIComponent(letter.id)}/replay`, { to });
      say(`Replayed to ${TARGET_LABELS[to]}: run ${replayed.run_id}, version ${replayed.version}.`);
      await refresh();
    } catch (error) {
      failed(error);
    }
  };

  const replayChosen = async (to: Target) => {
    try {
      const answer = await call<{ results: { id: string; replayed?: Replayed; error?: unknown }[] }>("POST", "/api/v2/dead-letters/replay", {
        ids: [...chosen],
        to,
      });
      const refused = answer.results.filter((result) => result.error);
      const reasons = refused.map((result) => `${result.id}: ${ApiError.describe(409, result.error)}`).join("; ");
      say(`Replayed ${answer.results.length - refused.length} of ${answer.results.length} to ${TARGET_LABELS[to]}.${reasons ? ` Refused: ${reasons}` : ""}`, refused.length > 0);
      setChosen(new Set());
      await refresh();
    } catch (error) {
      failed(error);
    }
  };

  return (
    <section className="dead-letters" aria-labelledby="dead-letters-heading">
      <h2 id="dead-letters-heading">Dead letters ({total})</h2>
      <div className="buttons">
        <label>
          Show{" "}
          <select value={status} onChange={(event) => setStatus(event.target.value as typeof status)}>
            <option value="open">open</option>
            <option value="replayed">replayed</option>
            <option value="">all</option>
          </select>
        </label>
        <button onClick={() => void refresh()}>Refresh dead letters</button>
      </div>
      {chosen.size > 0 && (
        <div className="buttons">
          <button onClick={() => void replayChosen("run")}>Replay {chosen.size} to the run's version</button>
          <button onClick={() => void replayChosen("latest")}>Replay {chosen.size} to the latest release</button>
        </div>
      )}
      {letters.length === 0 ? (
        <p className="hint">No {status || ""} dead letters.</p>
      ) : (
        <ul>
          {letters.map((letter) => (
            <li key={letter.id} className="dead-letter">
              <label className="inline">
                <input
                  type="checkbox"
                  checked={chosen.has(letter.id)}
                  disabled={letter.status !== "open"}
                  onChange={(event) => setChosen((current) => toggled(current, letter.id, event.target.checked))}
                />{" "}
                {letter.at} · v{letter.version} · {letter.node_id} ({letter.service}.{letter.action}) · {letter.status}
              </label>
              <p className="letter-error">
                {letter.reason} after {letter.attempts} attempt{letter.attempts === 1 ? "" : "s"}: {letter.error}
                {letter.replays.length > 0 && ` · replayed ${letter.replays.length} time${letter.replays.length === 1 ? "" : "s"}`}
              </p>
              <div className="buttons">
                <button className="link" onClick={() => void onShowRun(letter.run_id).catch(failed)}>
                  Show run
                </button>
                {letter.status === "open" && (
                  <>
                    <button onClick={() => void replayOne(letter, "run")}>Replay to the run's version</button>
                    <button onClick={() => void replayOne(letter, "latest")}>Replay to the latest release</button>
                  </>
                )}
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
