// The graph rules Studio checks as you edit, before the server's draft validation answers: which node kinds can
// connect (typed connections), and the wiring problems of a whole graph (no source or two, an edge into the
// source, a node fed twice, cycles, orphans, dead ends). Codes and severities are the server's
// (host/flows/src/issues.rs), so a problem found here and there shows once. Also what each node is called and
// the fields that reach a node. Pure functions, no DOM.

import { findDeclaration, type NodeKindDeclaration } from "./nodeKinds";

export type NodeKind =
  | "source"
  | "condition"
  | "rate-limit"
  | "mapping"
  | "lookup"
  | "output-topic"
  | "service-in"
  | "action"
  | "node-kind";

/// The built-in kinds the palette offers (a `node-kind` node is placed from one of the plugins' declarations).
export const NODE_KINDS: readonly NodeKind[] = [
  "source",
  "condition",
  "rate-limit",
  "mapping",
  "lookup",
  "service-in",
  "action",
  "output-topic",
];

/// What the palette calls each kind.
export const KIND_LABELS: Record<NodeKind, string> = {
  source: "Source",
  condition: "Condition",
  "rate-limit": "Rate limit",
  mapping: "Mapping",
  lookup: "Lookup",
  "output-topic": "Output topic",
  "service-in": "Service segment",
  action: "Action",
  "node-kind": "Plugin node kind",
};

/// What a node is called on the canvas and in messages about its kind: its kind's label, or for a plugin node
/// kind the `plugin/kind` it names.
export function kindLabel(node: Pick<FlowNode, "kind" | "config">): string {
  if (node.kind === "node-kind") {
    const plugin = typeof node.config.plugin === "string" && node.config.plugin ? node.config.plugin : "?";
    const kind = typeof node.config.kind === "string" && node.config.kind ? node.config.kind : "?";
    return plugin === "?" && kind === "?" ? KIND_LABELS["node-kind"] : `${plugin}/${kind}`;
  }
  return KIND_LABELS[node.kind as NodeKind] ?? node.kind;
}

export interface FlowNode {
  id: string;
  kind: string;
  name?: string;
  config: Record<string, unknown>;
  position?: { x: number; y: number };
}

export interface FlowEdge {
  id?: string;
  from: string;
  to: string;
}

export interface FlowBody {
  nodes: FlowNode[];
  edges: FlowEdge[];
}

export type Severity = "blocking" | "warning";

/// One problem, from the client rules or the server's validation (the server's `issues` have this shape).
export interface Problem {
  code: string;
  severity: Severity;
  message: string;
  node_id?: string;
  edge_id?: string;
  pointer?: string;
  /// Where it was found.
  origin: "client" | "server";
}

function byId(nodes: FlowNode[]): Map<string, FlowNode> {
  return new Map(nodes.map((node) => [node.id, node]));
}

function incoming(edges: FlowEdge[], id: string): FlowEdge[] {
  return edges.filter((edge) => edge.to === id);
}

/// Whether a node of `kind` (or an upstream node) is on the path that reaches `id`, walking inputs backwards.
function upstreamHas(body: FlowBody, id: string, kind: string): boolean {
  const nodes = byId(body.nodes);
  const seen = new Set<string>();
  const stack = [id];
  while (stack.length > 0) {
    const current = stack.pop()!;
    if (seen.has(current)) continue;
    seen.add(current);
    if (nodes.get(current)?.kind === kind) return true;
    for (const edge of incoming(body.edges, current)) stack.push(edge.from);
  }
  return false;
}

/// Each node's successors (the nodes its edges lead to, in the edges' order) and how many edges enter it: built
/// once per graph, so the rules below walk the graph in linear time however many nodes it has.
function adjacency(edges: FlowEdge[]): { successors: Map<string, string[]>; inputs: Map<string, number> } {
  const successors = new Map<string, string[]>();
  const inputs = new Map<string, number>();
  for (const edge of edges) {
    const next = successors.get(edge.from);
    if (next) next.push(edge.to);
    else successors.set(edge.from, [edge.to]);
    inputs.set(edge.to, (inputs.get(edge.to) ?? 0) + 1);
  }
  return { successors, inputs };
}

/// Every node reachable from `starts` along the edges (the starts included).
function reachableFrom(successors: Map<string, string[]>, starts: string[]): Set<string> {
  const seen = new Set<string>();
  const stack = [...starts];
  while (stack.length > 0) {
    const current = stack.pop()!;
    if (seen.has(current)) continue;
    seen.add(current);
    for (const next of successors.get(current) ?? []) stack.push(next);
  }
  return seen;
}

/// Whether `from` reaches `to` along the edges.
function reaches(edges: FlowEdge[], from: string, to: string): boolean {
  return reachableFrom(adjacency(edges).successors, [from]).has(to);
}

/// Why an edge `from` -> `to` cannot be drawn, or `null` when it can (the typed-connection rule).
export function connectionRefusal(body: FlowBody, from: string, to: string): string | null {
  const nodes = byId(body.nodes);
  const source = nodes.get(from);
  const target = nodes.get(to);
  if (!source || !target) return "Both ends must be nodes of this flow.";
  if (from === to) return "A node cannot feed itself.";
  if (target.kind === "source") return "Nothing can lead into the source: a run starts there.";
  if (body.edges.some((edge) => edge.to === to)) {
    return `${label(target)} already has an input: each node continues exactly one path.`;
  }
  if (body.edges.some((edge) => edge.from === from && edge.to === to)) return "These nodes are already connected.";
  if (reaches(body.edges, to, from)) return "This connection would close a cycle.";
  if (target.kind === "action" && !upstreamHas(body, from, "service-in")) {
    return "An action runs inside a service: place a service segment before it.";
  }
  if (target.kind === "action" && source.kind === "action") {
    return "An action after an action needs a service segment of its own between them.";
  }
  return null;
}

function label(node: FlowNode): string {
  return node.name?.trim() || `${kindLabel(node)} "${node.id}"`;
}

/// The wiring problems of a graph (the client rules).
export function clientProblems(body: FlowBody): Problem[] {
  const problems: Problem[] = [];
  const add = (code: string, severity: Severity, message: string, at: Partial<Problem> = {}) =>
    problems.push({ code, severity, message, origin: "client", ...at });
  const nodes = byId(body.nodes);
  if (body.nodes.length === 0) {
    add("EMPTY_FLOW", "blocking", "The flow has no nodes.");
    return problems;
  }
  const { successors, inputs } = adjacency(body.edges);
  const sources = body.nodes.filter((node) => node.kind === "source");
  if (sources.length === 0) add("SOURCE_MISSING", "blocking", "The flow has no source node.");
  for (const extra of sources.slice(1)) {
    add("SOURCE_DUPLICATE", "blocking", "The flow has more than one source node.", { node_id: extra.id });
  }
  for (const edge of body.edges) {
    if (!nodes.has(edge.from) || !nodes.has(edge.to)) {
      add("EDGE_UNKNOWN_NODE", "blocking", "An edge names a node that does not exist.", { edge_id: edge.id });
    } else if (nodes.get(edge.to)?.kind === "source") {
      add("EDGE_INTO_SOURCE", "blocking", "An edge leads into the source node.", { node_id: edge.to });
    }
  }
  for (const node of body.nodes) {
    if ((inputs.get(node.id) ?? 0) > 1) {
      add("MULTIPLE_INPUTS", "blocking", `${label(node)} has more than one input.`, { node_id: node.id });
    }
  }
  for (const id of cycleNodes(body)) {
    add("CYCLE", "blocking", `${label(nodes.get(id)!)} is on a cycle.`, { node_id: id });
  }
  const reachable = reachableFrom(successors, sources.map((source) => source.id));
  for (const node of body.nodes) {
    if (sources.length > 0 && !reachable.has(node.id)) {
      add("ORPHAN_NODE", "warning", `${label(node)} cannot be reached from the source; it never runs.`, {
        node_id: node.id,
      });
    }
  }
  const passing = new Set(["condition", "rate-limit", "mapping", "lookup", "node-kind"]);
  for (const node of body.nodes) {
    if (passing.has(node.kind) && !successors.has(node.id)) {
      add("DEAD_END", "warning", `${label(node)} leads nowhere; its result is dropped.`, { node_id: node.id });
    }
  }
  return problems;
}

/// The nodes on a cycle (Tarjan's strongly connected components of more than one node, or a self-loop).
export function cycleNodes(body: FlowBody): string[] {
  let index = 0;
  const indexes = new Map<string, number>();
  const lowlinks = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const found: string[] = [];
  const { successors: next } = adjacency(body.edges);
  const successors = (id: string) => next.get(id) ?? [];
  const visit = (id: string) => {
    indexes.set(id, index);
    lowlinks.set(id, index);
    index += 1;
    stack.push(id);
    onStack.add(id);
    for (const next of successors(id)) {
      if (!indexes.has(next)) {
        visit(next);
        lowlinks.set(id, Math.min(lowlinks.get(id)!, lowlinks.get(next)!));
      } else if (onStack.has(next)) {
        lowlinks.set(id, Math.min(lowlinks.get(id)!, indexes.get(next)!));
      }
    }
    if (lowlinks.get(id) === indexes.get(id)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== id);
      const selfLoop = successors(id).includes(id);
      if (component.length > 1 || selfLoop) found.push(...component);
    }
  };
  for (const node of body.nodes) if (!indexes.has(node.id)) visit(node.id);
  return found.sort();
}

/// One list of problems: the server's, then the client's that the server did not also report (same code and
/// node), blocking first.
export function mergeProblems(client: Problem[], server: Problem[]): Problem[] {
  const key = (problem: Problem) => `${problem.code}|${problem.node_id ?? ""}`;
  const known = new Set(server.map(key));
  const merged = [...server, ...client.filter((problem) => !known.has(key(problem)))];
  const rank = (problem: Problem) => (problem.severity === "blocking" ? 0 : 1);
  return merged.sort((a, b) => rank(a) - rank(b));
}

/// Each node's problems: the draft's (`problems`, in their order), then the broken reasons of its released
/// version (`broken`) that the draft does not also have (same code), each once. Nodes without any are absent.
export function problemsByNode(problems: Problem[], broken: Problem[]): Map<string, Problem[]> {
  const byNode = new Map<string, Problem[]>();
  const append = (problem: Problem) => {
    const own = byNode.get(problem.node_id!);
    if (own) own.push(problem);
    else byNode.set(problem.node_id!, [problem]);
  };
  for (const problem of problems) if (problem.node_id !== undefined) append(problem);
  const draftCodes = new Map([...byNode].map(([id, own]) => [id, new Set(own.map((problem) => problem.code))]));
  for (const reason of broken) {
    if (reason.node_id !== undefined && !draftCodes.get(reason.node_id)?.has(reason.code)) append(reason);
  }
  return byNode;
}

/// Whether Release may be pressed: only a blocking problem stops it (release rule 4). Warnings never block; the
/// release records which were present and which the author acknowledged, and `note` counts the unacknowledged.
export function releaseGate(
  problems: Problem[],
  acknowledged: ReadonlySet<string>,
): { allowed: boolean; reason: string; note: string } {
  const blocking = problems.filter((problem) => problem.severity === "blocking");
  const open = problems.filter((problem) => problem.severity === "warning" && !acknowledged.has(problem.code));
  const note = open.length > 0 ? `${open.length} warning${open.length === 1 ? "" : "s"} not acknowledged` : "";
  if (blocking.length > 0) {
    return { allowed: false, reason: `${blocking.length} blocking problem${blocking.length === 1 ? "" : "s"}`, note };
  }
  return { allowed: true, reason: "", note };
}

/// The service of an action's parent: the nearest service segment before it (walking its single input back).
export function parentService(body: FlowBody, id: string): string | null {
  const nodes = byId(body.nodes);
  const seen = new Set<string>();
  let current = incoming(body.edges, id)[0]?.from;
  while (current && !seen.has(current)) {
    seen.add(current);
    const node = nodes.get(current);
    if (node?.kind === "service-in") return typeof node.config.service === "string" ? node.config.service : null;
    current = incoming(body.edges, current)[0]?.from;
  }
  return null;
}

/// One field a node can read: its name and its type (`int`, `double`, `string`, `bool`, or `dyn` for lookup and
/// action results, which type-check with any use).
export interface FieldInfo {
  name: string;
  type: string;
}

/// The fields that reach node `id`: the source event type's schema fields plus `event_type` and `tenant_id`, as
/// changed on the way by mappings (`select` keeps only its targets, `merge` adds them), lookups (their
/// `target`), actions (`result`) and plugin node kinds (the `adds_fields` of their declaration among
/// `nodeKinds`). The node's own change is not included (a condition reads what reaches it).
export function fieldsAt(
  body: FlowBody,
  id: string,
  schema: readonly FieldInfo[],
  nodeKinds: readonly NodeKindDeclaration[] = [],
): FieldInfo[] {
  const nodes = byId(body.nodes);
  const path: FlowNode[] = [];
  const seen = new Set<string>();
  let current = incoming(body.edges, id)[0]?.from;
  while (current && !seen.has(current)) {
    seen.add(current);
    const node = nodes.get(current);
    if (!node) break;
    path.unshift(node);
    current = incoming(body.edges, current)[0]?.from;
  }
  let fields = new Map<string, string>([
    ["event_type", "string"],
    ["tenant_id", "string"],
  ]);
  for (const field of schema) fields.set(field.name, field.type);
  for (const node of path) {
    const config = node.config;
    if (node.kind === "mapping" && Array.isArray(config.fields)) {
      const mapped = new Map<string, string>();
      for (const entry of config.fields as { source?: unknown; target?: unknown }[]) {
        if (typeof entry?.source === "string" && typeof entry?.target === "string") {
          mapped.set(entry.target, fields.get(entry.source) ?? "dyn");
        }
      }
      fields = config.mode === "merge" ? new Map([...fields, ...mapped]) : mapped;
    } else if (node.kind === "lookup" && typeof config.target === "string") {
      fields.set(config.target, "dyn");
    } else if (node.kind === "action") {
      fields.set("result", "dyn");
    } else if (node.kind === "node-kind") {
      const declaration = findDeclaration(nodeKinds, config.plugin, config.kind);
      for (const [name, type] of Object.entries(declaration?.adds_fields ?? {})) fields.set(name, type);
    }
  }
  return [...fields].map(([name, type]) => ({ name, type })).sort((a, b) => a.name.localeCompare(b.name));
}

/// The event type of the flow's source node, if it names one.
export function sourceEventType(body: FlowBody): string | null {
  const source = body.nodes.find((node) => node.kind === "source");
  return typeof source?.config.event_type === "string" ? source.config.event_type : null;
}

/// A node id not yet used in the graph: `<kind>-<n>`.
export function freshId(body: FlowBody, kind: string): string {
  const used = new Set(body.nodes.map((node) => node.id));
  for (let n = 1; ; n += 1) {
    const id = `${kind}-${n}`;
    if (!used.has(id)) return id;
  }
}
