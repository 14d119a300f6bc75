// The config form's reading of `config_schema` and its conversions.
import assert from "node:assert/strict";
import { test } from "node:test";

import { parentService, type FlowBody } from "./graph";
import { fields, fromInput, getAt, options, setAt, sourceQuery, toInput } from "./schema";

const schema = {
  type: "object",
  required: ["template_id", "title"],
  properties: {
    action_ref: { type: "string" },
    template_id: { type: "integer", "x-data-source": "templates", "x-data-source-label": "title" },
    title: { type: "string", title: "Title", description: "Shown in bold" },
    urgency: { enum: ["low", "high"] },
    silent: { type: "boolean" },
    tags: { type: "array", items: { type: "string" } },
    "a/b": { type: "number" },
    ttl: { type: "object", properties: { seconds: { type: "integer" } } },
  },
};

test("fields follow the schema, with pointers, kinds and data sources", () => {
  const found = fields(schema);
  assert.deepEqual(
    found.map((f) => [f.pointer, f.kind, f.required]),
    [
      ["/config/template_id", "integer", true],
      ["/config/title", "string", true],
      ["/config/urgency", "enum", false],
      ["/config/silent", "boolean", false],
      ["/config/tags", "string-list", false],
      ["/config/a~1b", "number", false],
      ["/config/ttl", "object", false],
    ],
  );
  assert.deepEqual(found[0].dataSource, { source: "templates", field: "template_id", label: "title" });
  assert.equal(found[1].description, "Shown in bold");
  assert.deepEqual(found[2].options, ["low", "high"]);
  assert.deepEqual(found[6].fields!.map((f) => f.pointer), ["/config/ttl/seconds"]);
  assert.deepEqual(fields(null), [], "no schema, no fields");
});

test("inputs convert to config values; placeholders stay strings", () => {
  assert.equal(fromInput("integer", "42"), 42);
  assert.equal(fromInput("integer", "4.5"), "4.5", "not an integer: kept for the server to refuse");
  assert.equal(fromInput("integer", "{{level}}"), "{{level}}");
  assert.equal(fromInput("number", " 2.5 "), 2.5);
  assert.equal(fromInput("string", ""), undefined);
  assert.deepEqual(fromInput("string-list", "a, b,,c"), ["a", "b", "c"]);
  assert.equal(toInput("string-list", ["a", "b"]), "a, b");
  assert.equal(toInput("integer", undefined), "");
});

test("values are set and read by pointer, nested objects created", () => {
  const config = { action_ref: "send", ttl: { seconds: 5 } };
  const next = setAt(config, "/config/ttl/seconds", 9);
  assert.deepEqual(next, { action_ref: "send", ttl: { seconds: 9 } });
  assert.deepEqual(config.ttl, { seconds: 5 }, "the original is not changed");
  assert.deepEqual(setAt({}, "/config/a~1b", 1), { "a/b": 1 });
  assert.deepEqual(setAt({ title: "x" }, "/config/title", undefined), {});
  assert.equal(getAt(next, "/config/ttl/seconds"), 9);
  assert.equal(getAt(next, "/config/missing/deeper"), undefined);
});

test("picker options come from an array or the array of an object", () => {
  const ref = { source: "templates", field: "template_id", label: "title" };
  assert.deepEqual(options([{ id: 1, title: "Bonus" }, { title: "no id" }], ref), [{ value: "1", label: "Bonus" }]);
  assert.deepEqual(options({ items: [{ id: "a" }] }, ref), [{ value: "a", label: "a" }]);
  const tenants = { source: "tenants", field: "tenant_id" };
  assert.deepEqual(options({ items: [{ tenant_id: "t1" }] }, tenants), [{ value: "t1", label: "t1" }], "by the property's name");
  assert.deepEqual(options([{ code: "x", id: 1 }], { ...tenants, value: "code" }), [{ value: "x", label: "x" }]);
  assert.deepEqual(options("nonsense", ref), []);
});

test("a data source is asked with the config's literal values of its parameters", () => {
  assert.equal(sourceQuery(["tenant_id"], { tenant_id: "t 1", other: "x" }), "?tenant_id=t+1");
  assert.equal(sourceQuery(["tenant_id"], { tenant_id: "{{tenant_id}}" }), "", "placeholders are run-time values");
  assert.equal(sourceQuery(["template_id"], { template_id: 7 }), "?template_id=7");
  assert.equal(sourceQuery([], { tenant_id: "t" }), "");
});

test("an action's parent service is the nearest segment before it", () => {
  const body: FlowBody = {
    nodes: [
      { id: "src", kind: "source", config: {} },
      { id: "seg", kind: "service-in", config: { service: "notifications" } },
      { id: "cond", kind: "condition", config: {} },
      { id: "act", kind: "action", config: {} },
      { id: "lone", kind: "action", config: {} },
    ],
    edges: [
      { from: "src", to: "seg" },
      { from: "seg", to: "cond" },
      { from: "cond", to: "act" },
    ],
  };
  assert.equal(parentService(body, "act"), "notifications");
  assert.equal(parentService(body, "lone"), null);
});
