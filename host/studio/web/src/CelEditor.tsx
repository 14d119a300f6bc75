// A condition's CEL expression in CodeMirror 6: syntax highlighting (a small stream tokenizer of CEL's lexical
// grammar), completion of the fields that reach the node with their types and of CEL's functions and macros,
// and the server's type-check errors under the text as you type (the server is the authority: each change is
// committed after a short pause, validate-draft runs, and its CEL problems for this node come back as
// diagnostics and as text below the editor).

import { autocompletion, type CompletionContext, type CompletionResult } from "@codemirror/autocomplete";
import { HighlightStyle, StreamLanguage, syntaxHighlighting, type StringStream } from "@codemirror/language";
import { lintGutter, setDiagnostics, type Diagnostic } from "@codemirror/lint";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, placeholder } from "@codemirror/view";
import { defaultKeymap, history as editorHistory, historyKeymap } from "@codemirror/commands";
import { tags } from "@lezer/highlight";
import { useEffect, useId, useRef, useState } from "react";

import { loadCatalog, optionsFor, type CatalogEntry } from "./celCatalog";
import type { FieldInfo, Problem } from "./graph";

const KEYWORDS = new Set(["true", "false", "null", "in"]);

/// CEL's tokens: strings (quoted, raw, triple-quoted, bytes), numbers, keywords, identifiers, operators and
/// `//` comments. A string left open at the end of a line goes on to the next.
export function celToken(stream: StringStream, state: { quote: string | null }): string | null {
  if (state.quote) {
    while (!stream.eol()) {
      if (stream.match(state.quote)) {
        state.quote = null;
        return "string";
      }
      if (stream.next() === "\\") stream.next();
    }
    return "string";
  }
  if (stream.eatSpace()) return null;
  if (stream.match("//")) {
    stream.skipToEnd();
    return "comment";
  }
  const quote = stream.match(/^[rRbB]{0,2}("""|'''|"|')/);
  if (quote) {
    state.quote = (quote as RegExpMatchArray)[1];
    return celToken(stream, state);
  }
  if (stream.match(/^(0x[0-9a-fA-F]+u?|\d+\.\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+u?)/)) return "number";
  const word = stream.match(/^[A-Za-z_][A-Za-z0-9_]*/);
  if (word) {
    const text = (word as RegExpMatchArray)[0];
    if (KEYWORDS.has(text)) return "keyword";
    return stream.match(/^\s*\(/, false) ? "function" : "variableName";
  }
  if (stream.match(/^(&&|\|\||==|!=|<=|>=|[-+*/%<>!?:])/)) return "operator";
  stream.next();
  return "punctuation";
}

export const celLanguage = StreamLanguage.define<{ quote: string | null }>({
  name: "cel",
  startState: () => ({ quote: null }),
  token: celToken,
  tokenTable: { function: tags.function(tags.variableName) },
});

const highlight = HighlightStyle.define([
  { tag: tags.keyword, color: "#7a2e9e", fontWeight: "600" },
  { tag: tags.string, color: "#1c6b2a" },
  { tag: tags.number, color: "#0b5cad" },
  { tag: tags.comment, color: "#5c6670", fontStyle: "italic" },
  { tag: tags.operator, color: "#8a3b00" },
  { tag: tags.function(tags.variableName), color: "#0b4f6c" },
]);

/// The completions at the cursor: after `x.`, the methods (after a namespace such as `math.`, its functions);
/// else the fields, then the functions, macros and namespaces, all from the server's catalog of the CEL
/// environment.
export function completions(fields: readonly FieldInfo[], catalog: readonly CatalogEntry[]) {
  return (context: CompletionContext): CompletionResult | null => {
    const word = context.matchBefore(/[A-Za-z_][A-Za-z0-9_]*/);
    // A method call follows a name, a closing bracket or a string, never a number (`100.` is a double).
    const afterDot = context.matchBefore(/(?:[A-Za-z_][A-Za-z0-9_]*|[)\]'"])\.[A-Za-z0-9_]*/);
    if (!word && !afterDot && !context.explicit) return null;
    if (!afterDot && context.matchBefore(/[0-9.]+/)?.text.includes(".")) return null;
    const from = word ? word.from : context.pos;
    if (afterDot) {
      const receiver = /([A-Za-z_][A-Za-z0-9_]*)\.[A-Za-z0-9_]*$/.exec(afterDot.text)?.[1] ?? "";
      return { from, options: optionsFor(catalog, receiver), validFor: /^[A-Za-z0-9_]*$/ };
    }
    return {
      from,
      options: [
        ...fields.map((field) => ({ label: field.name, detail: field.type, type: "variable", boost: 1 })),
        ...optionsFor(catalog, null),
        ...[...KEYWORDS].map((keyword) => ({ label: keyword, type: "keyword" })),
      ],
      validFor: /^[A-Za-z0-9_]*$/,
    };
  };
}

export function CelEditor(props: {
  value: string;
  fields: readonly FieldInfo[];
  problems: Problem[];
  label: string;
  onChange: (value: string) => void;
}) {
  const { value, fields, problems, label, onChange } = props;
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const [catalog, setCatalog] = useState<readonly CatalogEntry[]>([]);
  useEffect(() => {
    void loadCatalog().then(setCatalog);
  }, []);
  const latest = useRef({ onChange, fields, value, catalog });
  latest.current = { onChange, fields, value, catalog };
  const errorsId = useId();
  const timer = useRef<number | undefined>(undefined);

  useEffect(() => {
    const commit = (text: string) => {
      window.clearTimeout(timer.current);
      timer.current = window.setTimeout(() => {
        if (text !== latest.current.value) latest.current.onChange(text);
      }, 400);
    };
    const editor = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          editorHistory(),
          keymap.of([...defaultKeymap, ...historyKeymap]),
          celLanguage,
          syntaxHighlighting(highlight),
          autocompletion({ override: [(context) => completions(latest.current.fields, latest.current.catalog)(context)], activateOnTyping: true }),
          lintGutter(),
          placeholder("amount > 100.0"),
          EditorView.lineWrapping,
          EditorView.contentAttributes.of({ "aria-label": label, "aria-describedby": errorsId }),
          EditorView.updateListener.of((update) => {
            if (update.docChanged) commit(update.state.doc.toString());
          }),
          EditorView.domEventHandlers({ blur: (_, editorView) => void latest.current.onChange(editorView.state.doc.toString()) }),
        ],
      }),
    });
    view.current = editor;
    return () => {
      window.clearTimeout(timer.current);
      editor.destroy();
      view.current = null;
    };
    // The editor is made once per node; later values arrive through the effect below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  // A value changed elsewhere (undo, the JSON editor) replaces the text.
  useEffect(() => {
    const editor = view.current;
    if (editor && editor.state.doc.toString() !== value && !editor.hasFocus) {
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: value } });
    }
  }, [value]);

  // The server's problems of the expression, as diagnostics over the whole text.
  useEffect(() => {
    const editor = view.current;
    if (!editor) return;
    const length = editor.state.doc.length;
    const diagnostics: Diagnostic[] = problems.map((problem) => ({
      from: 0,
      to: Math.max(length, 0),
      severity: problem.severity === "blocking" ? "error" : "warning",
      message: problem.message,
    }));
    editor.dispatch(setDiagnostics(editor.state, diagnostics));
  }, [problems]);

  return (
    <div className="cel">
      <div ref={host} className="cel-editor" />
      <ul id={errorsId} className="field-problems" aria-live="polite">
        {problems.map((problem, at) => (
          <li key={at} className={`problem-${problem.severity}`} role="alert">
            {problem.message}
          </li>
        ))}
      </ul>
    </div>
  );
}
