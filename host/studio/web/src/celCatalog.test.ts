// Completion options from the server's CEL catalog: methods after a dot, a namespace's functions after
// `namespace.`, global functions, function-style macros and namespaces elsewhere.
import assert from "node:assert/strict";
import { test } from "node:test";

import { namespaces, optionsFor, type CatalogEntry } from "./celCatalog";

const catalog: CatalogEntry[] = [
  { name: "size", kind: "function", signatures: ["(string) -> int", "(list(A)) -> int"] },
  { name: "size", kind: "method", signatures: ["string.() -> int"] },
  { name: "lowerAscii", kind: "method", signatures: ["string.() -> string"] },
  { name: "math.greatest", kind: "function", signatures: ["(int, int) -> int"] },
  { name: "math.least", kind: "function", signatures: ["(int, int) -> int"] },
  { name: "sets.contains", kind: "function", signatures: ["(list(T), list(T)) -> bool"] },
  { name: "has", kind: "macro", signatures: ["has(e.f) -> bool"] },
  { name: "all", kind: "macro", signatures: ["list.all(x, p) -> bool"] },
  { name: "cel.bind", kind: "macro", signatures: ["cel.bind(name, init, body)"] },
];

test("after a dot: methods and receiver macros", () => {
  assert.deepEqual(optionsFor(catalog, "game").map((option) => option.label), ["all", "lowerAscii", "size"]);
});

test("after a namespace: its functions", () => {
  assert.deepEqual(namespaces(catalog), new Set(["math", "sets", "cel"]));
  assert.deepEqual(optionsFor(catalog, "math").map((option) => [option.label, option.type]), [["greatest", "function"], ["least", "function"]]);
  assert.deepEqual(optionsFor(catalog, "cel").map((option) => option.label), ["bind"]);
});

test("elsewhere: global functions, function macros and namespaces, each once", () => {
  const options = optionsFor(catalog, null);
  assert.deepEqual(options.map((option) => option.label), ["cel", "has", "math", "sets", "size"]);
  assert.equal(options.find((option) => option.label === "math")!.detail, "math.greatest, math.least");
  assert.equal(options.find((option) => option.label === "size")!.type, "function");
});
