// The CEL environment's functions, methods and macros as the server declares them (`GET /api/v2/cel/functions`,
// the same environment every expression is checked and run in), turned into completion options: after `x.`,
// the methods (or, after a namespace such as `math.`, its functions); elsewhere the global functions, macros
// and namespaces. Pure, apart from the one cached request.

import { call } from "./api";

export interface CatalogEntry {
  name: string;
  kind: "function" | "method" | "macro";
  signatures: string[];
}

export interface CompletionOption {
  label: string;
  detail: string;
  type: "function" | "method" | "namespace";
}

let request: Promise<CatalogEntry[]> | null = null;

/// The catalog, fetched once per page (again after a failure).
export function loadCatalog(): Promise<CatalogEntry[]> {
  request ??= call<{ functions: CatalogEntry[] }>("GET", "/api/v2/cel/functions")
    .then((answer) => answer.functions)
    .catch(() => {
      request = null;
      return [];
    });
  return request;
}

/// Whether a macro is called on a receiver (`list.all(...)`) rather than as a function (`has(...)`).
const isMethodMacro = (entry: CatalogEntry) => !entry.signatures.some((signature) => signature.startsWith(`${entry.name}(`));

const detail = (entry: CatalogEntry) => {
  const text = entry.signatures.join(" | ");
  return text.length > 80 ? `${text.slice(0, 77)}…` : text;
};

/// The namespaces of dotted names (`math` of `math.greatest`).
export function namespaces(catalog: readonly CatalogEntry[]): Set<string> {
  return new Set(catalog.filter((entry) => entry.name.includes(".")).map((entry) => entry.name.split(".")[0]));
}

/// The options after `receiver.` (`receiver` null: not after a dot).
export function optionsFor(catalog: readonly CatalogEntry[], receiver: string | null): CompletionOption[] {
  const options = new Map<string, CompletionOption>();
  const add = (option: CompletionOption) => {
    const known = options.get(option.label);
    if (known) known.detail = `${known.detail} | ${option.detail}`.slice(0, 120);
    else options.set(option.label, option);
  };
  if (receiver !== null && namespaces(catalog).has(receiver)) {
    for (const entry of catalog) {
      if (entry.name.startsWith(`${receiver}.`) && entry.kind !== "method") {
        add({ label: entry.name.slice(receiver.length + 1), detail: detail(entry), type: "function" });
      }
    }
  } else if (receiver !== null) {
    for (const entry of catalog) {
      if (entry.kind === "method" || (entry.kind === "macro" && isMethodMacro(entry))) add({ label: entry.name, detail: detail(entry), type: "method" });
    }
  } else {
    for (const entry of catalog) {
      if (entry.name.includes(".")) continue;
      if (entry.kind === "function" || (entry.kind === "macro" && !isMethodMacro(entry))) add({ label: entry.name, detail: detail(entry), type: "function" });
    }
    for (const namespace of namespaces(catalog)) {
      const members = catalog.filter((entry) => entry.name.startsWith(`${namespace}.`)).map((entry) => entry.name);
      add({ label: namespace, detail: members.slice(0, 4).join(", ") + (members.length > 4 ? ", …" : ""), type: "namespace" });
    }
  }
  return [...options.values()].sort((a, b) => a.label.localeCompare(b.label));
}
