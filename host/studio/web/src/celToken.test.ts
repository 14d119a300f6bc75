// CEL's tokenizer for highlighting: strings (open or closed), numbers, keywords, functions and operators.
import assert from "node:assert/strict";
import { test } from "node:test";

import { StringStream } from "@codemirror/language";

import { celToken } from "./CelEditor";

function tokens(line: string, state = { quote: null as string | null }) {
  const stream = new StringStream(line, 2, 2);
  const out: [string, string | null][] = [];
  while (!stream.eol()) {
    const style = celToken(stream, state);
    out.push([line.slice(stream.start, stream.pos), style]);
    stream.start = stream.pos;
  }
  return out.filter(([text]) => text.trim() !== "");
}

test("strings, numbers, keywords, functions and operators", () => {
  assert.deepEqual(tokens("size('a\\'b') >= 2.5 && x in [r\"c\"]"), [
    ["size", "function"],
    ["(", "punctuation"],
    ["'a\\'b'", "string"],
    [")", "punctuation"],
    [">=", "operator"],
    ["2.5", "number"],
    ["&&", "operator"],
    ["x", "variableName"],
    ["in", "keyword"],
    ["[", "punctuation"],
    ['r"c"', "string"],
    ["]", "punctuation"],
  ]);
});

test("a string left open goes on to the next line", () => {
  const state = { quote: null as string | null };
  assert.deepEqual(tokens("x == '''open", state), [["x", "variableName"], ["==", "operator"], ["'''open", "string"]]);
  assert.equal(state.quote, "'''");
  assert.deepEqual(tokens("still''' + 1", state), [["still'''", "string"], ["+", "operator"], ["1", "number"]]);
});
