// The sample event and the placeholder rendering of "Test this node".
import assert from "node:assert/strict";
import { test } from "node:test";

import { render, sampleEvent } from "./sample";

test("a sample has a value of each field's type", () => {
  const sample = sampleEvent([
    { name: "amount", type: "double" },
    { name: "count", type: "int" },
    { name: "vip", type: "bool" },
    { name: "tenant_id", type: "string" },
    { name: "game", type: "string" },
    { name: "result", type: "dyn" },
  ]);
  assert.deepEqual(sample, { amount: 150.5, count: 1, vip: true, tenant_id: "casino-1", game: "sample-game" });
  assert.ok(!Number.isInteger(sample.amount), "a double stays a double in JSON");
});

test("placeholders render like the engine's: whole values keep their type", () => {
  const event = { level: 3, player: "p1", nested: { country: "de" } };
  assert.deepEqual(render({ template_id: "{{level}}", title: "Hi {{player}} ({{level}})", list: ["{{nested.country}}"], n: 2 }, event), {
    template_id: 3,
    title: "Hi p1 (3)",
    list: ["de"],
    n: 2,
  });
  assert.throws(() => render("{{missing}}", event), /missing/);
});
