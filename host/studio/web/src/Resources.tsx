// The layout every v1 resource section shares (rules, schemas, event sources, plugins): the list of what is
// stored with a "New" entry, and the form of the chosen one. `useStored` loads a list and reloads it after a
// change or a sign-in.

import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";

import { ApiError, call } from "./api";
import { useFeedback } from "./feedback";

/// A section's stored list at `path`, which entry is chosen (null: a new one), and what its form calls after a
/// save or a delete (the list reloads, and the saved entry stays chosen).
export function useSection<T>(path: string, keyOf: (item: T) => string) {
  const { items, reload } = useStored<T>(path);
  const [chosen, choose] = useState<string | null>(null);
  const current = items.find((item) => keyOf(item) === chosen);
  return {
    items,
    chosen,
    choose,
    current,
    reload,
    /// Remounts the form when the choice changes or the chosen entry arrives.
    formKey: `${chosen ?? ""}-${current ? "loaded" : "new"}`,
    onSaved: async (key: string) => {
      await reload();
      choose(key);
    },
    onDeleted: async () => {
      await reload();
      choose(null);
    },
  };
}

const asList = <T,>(answer: unknown) => answer as T[];

/// The items at `path` (a GET answering a JSON array, or what `pick` takes from its answer: keep `pick` the same
/// function between renders), and a reload. Only the latest reload's answer is shown: an earlier one that
/// arrives after it (a reload on sign-in racing one after a delete) would bring back what is gone.
export function useStored<T>(path: string, pick: (answer: unknown) => T[] = asList): { items: T[]; reload: () => Promise<void> } {
  const { failed, session } = useFeedback();
  const [items, setItems] = useState<T[]>([]);
  const latest = useRef(0);
  const reload = useCallback(async () => {
    const ticket = ++latest.current;
    try {
      const answer = pick(await call<unknown>("GET", path));
      if (ticket === latest.current) setItems(answer);
    } catch (error) {
      if (ticket === latest.current) failed(error);
    }
    // `session`: signing in loads the list again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [failed, path, pick, session]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { items, reload };
}

export function ResourceSection(props: {
  title: string;
  newLabel: string;
  entries: { key: string; label: string; detail?: string }[];
  chosen: string | null;
  onChoose: (key: string | null) => void;
  children: ReactNode;
}) {
  const { title, newLabel, entries, chosen, onChoose, children } = props;
  const headingId = `${title.toLowerCase().replaceAll(" ", "-")}-heading`;
  return (
    <div className="resource-section">
      <nav className="resource-list" aria-labelledby={headingId}>
        <h2 id={headingId}>{title}</h2>
        <button onClick={() => onChoose(null)} aria-pressed={chosen === null}>
          {newLabel}
        </button>
        <ul>
          {entries.map((entry) => (
            <li key={entry.key}>
              <button className={`link${chosen === entry.key ? " chosen" : ""}`} aria-pressed={chosen === entry.key} onClick={() => onChoose(entry.key)}>
                {entry.label}
              </button>
              {entry.detail && <span className="hint"> {entry.detail}</span>}
            </li>
          ))}
        </ul>
      </nav>
      <main className="resource-form">{children}</main>
    </div>
  );
}

/// The server's refusal of the last save, under the form.
export function FormError({ error }: { error: string | null }) {
  return (
    <p className="form-error" role="alert">
      {error ?? ""}
    </p>
  );
}

/// Runs a save or delete: its refusal is kept for `FormError` (a 401 asks for the token instead); on success
/// `after` runs first (the list reloads), then the success message goes on the status line, so what the message
/// announces is already on screen. Answers whether it succeeded.
export function useSubmit(): {
  error: string | null;
  submit: (work: () => Promise<string>, after?: () => Promise<void>) => Promise<boolean>;
} {
  const { say, failed } = useFeedback();
  const [error, setError] = useState<string | null>(null);
  const submit = useCallback(
    async (work: () => Promise<string>, after?: () => Promise<void>) => {
      try {
        const message = await work();
        setError(null);
        await after?.();
        say(message);
        return true;
      } catch (caught) {
        if (caught instanceof ApiError && caught.status === 401) failed(caught);
        else setError(caught instanceof Error ? caught.message : String(caught));
        return false;
      }
    },
    [failed, say],
  );
  return { error, submit };
}

/// `set` with `item` in it (`on`) or not, as a new set (for React state).
export function toggled<T>(set: ReadonlySet<T>, item: T, on: boolean): Set<T> {
  const next = new Set(set);
  if (on) next.add(item);
  else next.delete(item);
  return next;
}
