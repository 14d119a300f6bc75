// "Test this node": the sample event generated from the fields that reach a node (editable, and pinned per flow
// and node in the browser's local storage), and the rendering of an action's `{{placeholders}}` with it, as the
// engine renders them before invoking the action. Pure except for the pin's storage.

import type { FieldInfo } from "./graph";

/// A value of each field's type: non-integral doubles (an integral number reads as an int), a string naming
/// the field, `true`; dynamic fields are left out.
export function sampleEvent(fields: readonly FieldInfo[]): Record<string, unknown> {
  const sample: Record<string, unknown> = {};
  for (const field of fields) {
    switch (field.type) {
      case "int":
        sample[field.name] = 1;
        break;
      case "double":
        sample[field.name] = 150.5;
        break;
      case "bool":
        sample[field.name] = true;
        break;
      case "string":
        sample[field.name] = field.name === "tenant_id" ? "casino-1" : `sample-${field.name}`;
        break;
      default:
        break;
    }
  }
  return sample;
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}/g;
const WHOLE = /^\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}$/;

function lookup(event: Record<string, unknown>, path: string): unknown {
  let value: unknown = event;
  for (const part of path.split(".")) {
    if (!value || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/// `value` with every `{{field}}` replaced from `event`: a string that is exactly one placeholder takes the
/// field's own value, others get its text; an unknown field is an error naming it.
export function render(value: unknown, event: Record<string, unknown>): unknown {
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    if (whole) {
      const found = lookup(event, whole[1]);
      if (found === undefined) throw new Error(`{{${whole[1]}}} names no field of the sample`);
      return found;
    }
    return value.replace(PLACEHOLDER, (_, name: string) => {
      const found = lookup(event, name);
      if (found === undefined) throw new Error(`{{${name}}} names no field of the sample`);
      return typeof found === "string" ? found : JSON.stringify(found);
    });
  }
  if (Array.isArray(value)) return value.map((item) => render(item, event));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, render(item, event)]));
  }
  return value;
}

const pinKey = (flow: string, node: string) => `flowhost-studio-pin:${flow}:${node}`;

export function pinned(flow: string, node: string): string | null {
  return localStorage.getItem(pinKey(flow, node));
}

export function pin(flow: string, node: string, sample: string | null): void {
  if (sample === null) localStorage.removeItem(pinKey(flow, node));
  else localStorage.setItem(pinKey(flow, node), sample);
}
