// What a `config_schema` (JSON Schema: an action's or a plugin node kind's) asks for, reduced to the fields a
// form can show: each with its JSON Pointer under the node (`/config/<name>`), its kind, whether it is required,
// its enum values, and its data source when the schema names one (`"x-data-source": "<source>"`, with
// `x-data-source-value` and `x-data-source-label` naming the item fields of value and label; by default the
// value is the item's `id`, or its field of the property's own name, or `value`, and the label its `name`, else
// the value). Also the conversion of what a field holds back into the config (`{{placeholders}}` stay strings).
// Pure, no DOM.

export type FieldKind = "string" | "number" | "integer" | "boolean" | "enum" | "string-list" | "object" | "json";

export interface DataSourceRef {
  source: string;
  /// The property the picker fills (its name is a default value field).
  field: string;
  value?: string;
  label?: string;
}

export interface Field {
  name: string;
  pointer: string;
  kind: FieldKind;
  title: string;
  description?: string;
  required: boolean;
  options?: string[];
  dataSource?: DataSourceRef;
  /// The fields of a nested object.
  fields?: Field[];
}

type Schema = Record<string, unknown>;

const asSchema = (value: unknown): Schema => (value && typeof value === "object" && !Array.isArray(value) ? (value as Schema) : {});

function kindOf(schema: Schema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.every((value) => typeof value === "string")) return "enum";
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "string":
      return "string";
    case "number":
      return "number";
    case "integer":
      return "integer";
    case "boolean":
      return "boolean";
    case "array":
      return asSchema(schema.items).type === "string" ? "string-list" : "json";
    case "object":
      return "object";
    default:
      return "json";
  }
}

/// The fields of an object schema, in declaration order, with pointers under `base`.
export function fields(schema: unknown, base = "/config", skip: readonly string[] = ["action_ref"]): Field[] {
  const object = asSchema(schema);
  const properties = asSchema(object.properties);
  const required = new Set(Array.isArray(object.required) ? object.required.map(String) : []);
  return Object.entries(properties)
    .filter(([name]) => !skip.includes(name))
    .map(([name, value]) => {
      const property = asSchema(value);
      const pointer = `${base}/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      const kind = kindOf(property);
      const field: Field = {
        name,
        pointer,
        kind,
        title: typeof property.title === "string" ? property.title : name,
        required: required.has(name),
      };
      if (typeof property.description === "string") field.description = property.description;
      if (kind === "enum") field.options = (property.enum as string[]).slice();
      if (typeof property["x-data-source"] === "string") {
        field.dataSource = { source: property["x-data-source"], field: name };
        if (typeof property["x-data-source-value"] === "string") field.dataSource.value = property["x-data-source-value"];
        if (typeof property["x-data-source-label"] === "string") field.dataSource.label = property["x-data-source-label"];
      }
      if (kind === "object") field.fields = fields(property, pointer, []);
      return field;
    });
}

const PLACEHOLDER = /^\{\{\s*[A-Za-z_][A-Za-z0-9_.]*\s*\}\}$/;

/// What a text input of `kind` holds, as the config stores it: numbers as numbers, a whole `{{placeholder}}`
/// as the string it is, an empty optional field as absent (`undefined`).
export function fromInput(kind: FieldKind, text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === "") return undefined;
  if (PLACEHOLDER.test(trimmed)) return trimmed;
  switch (kind) {
    case "number": {
      const number = Number(trimmed);
      return Number.isFinite(number) ? number : text;
    }
    case "integer": {
      const number = Number(trimmed);
      return Number.isInteger(number) ? number : text;
    }
    case "string-list":
      return text
        .split(",")
        .map((item) => item.trim())
        .filter((item) => item !== "");
    case "json":
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
    default:
      return text;
  }
}

/// How a config value shows in a text input of `kind`.
export function toInput(kind: FieldKind, value: unknown): string {
  if (value === undefined || value === null) return "";
  if (kind === "string-list" && Array.isArray(value)) return value.join(", ");
  if (kind === "json") return JSON.stringify(value);
  return String(value);
}

/// `config` with the value at `pointer` (under `/config`) set, or removed when `undefined`.
export function setAt(config: Record<string, unknown>, pointer: string, value: unknown): Record<string, unknown> {
  const path = pointer
    .split("/")
    .slice(2)
    .map((part) => part.replaceAll("~1", "/").replaceAll("~0", "~"));
  const copy = structuredClone(config);
  let target: Record<string, unknown> = copy;
  for (const part of path.slice(0, -1)) {
    const next = target[part];
    if (!next || typeof next !== "object" || Array.isArray(next)) target[part] = {};
    target = target[part] as Record<string, unknown>;
  }
  const last = path[path.length - 1];
  if (value === undefined) delete target[last];
  else target[last] = value;
  return copy;
}

/// The value at `pointer` (under `/config`).
export function getAt(config: Record<string, unknown>, pointer: string): unknown {
  let value: unknown = config;
  for (const part of pointer.split("/").slice(2)) {
    if (!value || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  }
  return value;
}

/// The options of a data-source picker from the source's answer: an array of items, or an object holding one
/// (`{"items": [...]}`, `{"templates": [...]}`).
export function options(answer: unknown, ref: DataSourceRef): { value: string; label: string }[] {
  const list = Array.isArray(answer)
    ? answer
    : (Object.values(asSchema(answer)).find((value) => Array.isArray(value)) as unknown[] | undefined) ?? [];
  const valueFields = ref.value ? [ref.value] : ["id", ref.field, "value"];
  return list.flatMap((entry) => {
    const item = asSchema(entry);
    const key = valueFields.find((name) => item[name] !== undefined && item[name] !== null);
    if (!key) return [];
    const value = String(item[key]);
    const label = item[ref.label ?? "name"];
    return [{ value, label: label === undefined || label === null ? value : String(label) }];
  });
}

/// The query of a data-source request: each parameter the source declares, from the config's own literal value
/// of the same name (a `{{placeholder}}` is only known at run time, so it is not sent).
export function sourceQuery(declared: readonly string[], config: Record<string, unknown>): string {
  const query = new URLSearchParams();
  for (const name of declared) {
    const value = config[name];
    if ((typeof value === "string" && value !== "" && !value.includes("{{")) || typeof value === "number") {
      query.set(name, String(value));
    }
  }
  const text = query.toString();
  return text ? `?${text}` : "";
}
