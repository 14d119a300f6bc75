// Plugin node kinds (`GET /api/v2/node-kinds`): the node kinds that the active version of a component declares
// and that flows can place as `node-kind` nodes (`{"kind": "node-kind", "config": {"plugin", "kind", ...}}`).
// What Studio derives from a declaration: the palette's label, a new node's config, which declaration a node
// names (or why none does: no reference, or drift after a version dropped the kind), the answers it may give
// and the fields it adds to the payload. Pure, no DOM.

import type { FieldInfo } from "./graph";

/// One entry of `GET /api/v2/node-kinds`.
export interface NodeKindDeclaration {
  /// The component id (the node's `config.plugin`).
  plugin: string;
  service: string;
  /// The active version that declares it.
  version: string;
  /// The kind's name (the node's `config.kind`).
  name: string;
  description?: string;
  /// JSON Schema of the node's config without `plugin` and `kind`.
  config_schema?: unknown;
  answers?: string[];
  adds_fields?: Record<string, string>;
}

/// The declarations as Studio last fetched them: `declarations` is `null` until a fetch succeeds; `error` says
/// why the last fetch failed.
export interface NodeKindCatalog {
  declarations: NodeKindDeclaration[] | null;
  error: string | null;
}

/// What a node kind may answer when `answers` is not declared: all of them.
export const ALL_ANSWERS: readonly string[] = ["continue", "stop", "skip-forward", "permanent", "retryable"];

/// What each answer does to a run (docs/flows.md, "Plugin node kinds").
export const ANSWER_MEANINGS: Readonly<Record<string, string>> = {
  continue: "goes on, with the payload it gives or the one it received",
  stop: "ends the branch here (not matched)",
  "skip-forward": "ends the branch, acknowledged, without a dead letter",
  permanent: "fails the step for good (dead letter)",
  retryable: "fails the step for now; it is retried with backoff",
};

/// The config keys that name the declaration; the form never edits them.
export const REFERENCE_KEYS: readonly string[] = ["plugin", "kind"];

/// The palette's label: the kind's name and where it comes from, e.g. `score (score 0.1.0)`.
export function paletteLabel(declaration: NodeKindDeclaration): string {
  return `${declaration.name} (${declaration.plugin} ${declaration.version})`;
}

/// The config of a node newly placed from the palette.
export function newNodeConfig(declaration: NodeKindDeclaration): Record<string, unknown> {
  return { plugin: declaration.plugin, kind: declaration.name };
}

/// The stem of a new node's id: the kind's name when it makes a tidy id, else `node-kind`.
export function idStem(declaration: NodeKindDeclaration): string {
  return /^[A-Za-z][A-Za-z0-9_-]{0,63}$/.test(declaration.name) ? declaration.name : "node-kind";
}

/// The plugin and kind a node's config names (`null` when absent or not a non-empty string).
export function nodeKindReference(config: Record<string, unknown>): { plugin: string | null; kind: string | null } {
  const text = (value: unknown) => (typeof value === "string" && value.trim() !== "" ? value : null);
  return { plugin: text(config.plugin), kind: text(config.kind) };
}

/// What a `node-kind` node's config refers to, among the fetched declarations:
/// - `loading`: the declarations are not known (not fetched yet, or the fetch failed);
/// - `unnamed`: the config lacks `plugin` or `kind`;
/// - `undeclared`: no active version of the plugin declares the kind (drift, or a typo); `others` are the kinds
///   the plugin does declare;
/// - `declared`: found.
export type NodeKindResolution =
  | { state: "loading" }
  | { state: "unnamed"; plugin: string | null; kind: string | null }
  | { state: "undeclared"; plugin: string; kind: string; others: NodeKindDeclaration[] }
  | { state: "declared"; declaration: NodeKindDeclaration };

export function resolveNodeKind(
  config: Record<string, unknown>,
  declarations: readonly NodeKindDeclaration[] | null,
): NodeKindResolution {
  const { plugin, kind } = nodeKindReference(config);
  if (!plugin || !kind) return { state: "unnamed", plugin, kind };
  if (!declarations) return { state: "loading" };
  const declaration = findDeclaration(declarations, plugin, kind);
  if (declaration) return { state: "declared", declaration };
  return { state: "undeclared", plugin, kind, others: declarations.filter((candidate) => candidate.plugin === plugin) };
}

/// The declaration of `kind` by `plugin`, if any.
export function findDeclaration(
  declarations: readonly NodeKindDeclaration[],
  plugin: unknown,
  kind: unknown,
): NodeKindDeclaration | undefined {
  return declarations.find((declaration) => declaration.plugin === plugin && declaration.name === kind);
}

/// The answers the kind may give (all five when it declares none).
export function answersOf(declaration: NodeKindDeclaration): string[] {
  return Array.isArray(declaration.answers) && declaration.answers.length > 0 ? declaration.answers.slice() : ALL_ANSWERS.slice();
}

/// The payload fields the kind adds when it continues, by name.
export function addedFields(declaration: NodeKindDeclaration): FieldInfo[] {
  return Object.entries(declaration.adds_fields ?? {})
    .filter(([, type]) => typeof type === "string")
    .map(([name, type]) => ({ name, type }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/// What the drift message says about a node whose plugin/kind no active version declares.
export function undeclaredMessage(plugin: string, kind: string, others: readonly NodeKindDeclaration[]): string {
  const offered = others.map((other) => other.name);
  const now =
    offered.length > 0
      ? `Its active version ${others[0].version} declares ${offered.join(", ")} instead.`
      : `No active version of plugin ${plugin} declares any node kind.`;
  return `The node kind ${plugin}/${kind} is not declared by any active plugin version (a newer version may have dropped it): this node cannot run. ${now}`;
}
