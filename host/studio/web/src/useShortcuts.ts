// The flow editor's keyboard shortcuts: Ctrl+Z (or ⌘Z) undoes, Ctrl+Shift+Z or Ctrl+Y redoes, Ctrl+C copies the
// selected nodes and Ctrl+V pastes them, unless the focus is in a text field.

import { useEffect } from "react";

export function useShortcuts(actions: {
  undo: () => void;
  redo: () => void;
  copy: () => void;
  paste: () => void;
}) {
  const { undo, redo, copy, paste } = actions;
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement;
      if (target.closest("input, textarea, select")) return;
      const mod = event.ctrlKey || event.metaKey;
      if (!mod) return;
      const key = event.key.toLowerCase();
      if (key === "z" && !event.shiftKey) undo();
      else if ((key === "z" && event.shiftKey) || key === "y") redo();
      else if (key === "c") copy();
      else if (key === "v") paste();
      else return;
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [copy, paste, redo, undo]);
}
