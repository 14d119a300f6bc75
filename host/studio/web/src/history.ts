// Undo and redo over whole graph snapshots: every edit (a node added, moved or removed, an edge drawn, a config
// changed, a paste) records the graph before it; undo restores it and keeps the undone state for redo. Pure,
// bounded, no DOM.

import type { FlowBody } from "./graph";

/// How many edits can be undone.
export const MAX_UNDO = 200;

export interface History {
  past: FlowBody[];
  present: FlowBody;
  future: FlowBody[];
  /// The present before an edit under way (a drag whose positions `replace` the present): the undo step its end
  /// records, so undo puts the nodes back where the drag started.
  before?: FlowBody;
}

export function start(body: FlowBody): History {
  return { past: [], present: body, future: [] };
}

/// Records `next` as an edit of the present (a new edit drops what could be redone).
export function record(history: History, next: FlowBody): History {
  const base = history.before ?? history.present;
  if (next === base) return { ...history, present: next, before: undefined };
  const past = [...history.past, base].slice(-MAX_UNDO);
  return { past, present: next, future: [] };
}

/// Replaces the present without making an undo step (node positions while a drag is under way); the next
/// `record` makes one step from the present before the first replace.
export function replace(history: History, next: FlowBody): History {
  return { ...history, present: next, before: history.before ?? history.present };
}

export function undo(history: History): History {
  const previous = history.past[history.past.length - 1];
  if (!previous) return history;
  return { past: history.past.slice(0, -1), present: previous, future: [history.present, ...history.future] };
}

export function redo(history: History): History {
  const next = history.future[0];
  if (!next) return history;
  return { past: [...history.past, history.present], present: next, future: history.future.slice(1) };
}
