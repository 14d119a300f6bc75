// "Test this node": runs the selected condition or plugin action against the live plugin with a sample event
// generated from the fields that reach the node (editable; "Pin" keeps it for this flow and node in the
// browser). A condition is evaluated by the bundled `condition` plugin; an action's config is rendered with
// the sample (its `{{placeholders}}`) and sent to its component (`POST /api/v1/plugins/:id/invoke`).

import { useEffect, useId, useState } from "react";

import type { ServiceView } from "./ActionForm";
import { ApiError, call } from "./api";
import { fieldsAt, parentService, type FieldInfo, type FlowBody, type FlowNode } from "./graph";
import type { NodeKindDeclaration } from "./nodeKinds";
import { pin, pinned, render, sampleEvent } from "./sample";

interface Invocation {
  output: unknown;
  duration_us: number;
  version: string;
}

export function NodeTest(props: {
  flowId: string;
  node: FlowNode;
  body: FlowBody;
  schemaFields: FieldInfo[];
  /// The plugin node kinds, whose added fields reach the nodes after them.
  nodeKinds: readonly NodeKindDeclaration[];
}) {
  const { flowId, node, body, schemaFields, nodeKinds } = props;
  const generated = JSON.stringify(sampleEvent(fieldsAt(body, node.id, schemaFields, nodeKinds)), null, 2);
  const [sample, setSample] = useState(() => pinned(flowId, node.id) ?? generated);
  const [isPinned, setPinned] = useState(() => pinned(flowId, node.id) !== null);
  const [result, setResult] = useState<{ text: string; error: boolean } | null>(null);
  const [running, setRunning] = useState(false);
  const id = useId();
  // Until pinned, the sample follows the schema as it arrives.
  useEffect(() => {
    if (!isPinned) setSample(generated);
  }, [generated, isPinned]);

  const run = async () => {
    setRunning(true);
    setResult(null);
    try {
      const event = JSON.parse(sample) as Record<string, unknown>;
      let invoked: Invocation;
      if (node.kind === "condition") {
        invoked = await call<Invocation>("POST", "/api/v1/plugins/condition/invoke", {
          action: "condition",
          input: { config: { expression: node.config.expression ?? "" }, event },
        });
      } else {
        const service = parentService(body, node.id);
        const actionRef = node.config.action_ref;
        if (!service || typeof actionRef !== "string") throw new Error("choose the action and its service segment first");
        const view = await call<ServiceView>("GET", `/api/v2/services/${encodeURIComponent(service)}`);
        const component = view.components.find((candidate) => candidate.actions.some((action) => action.name === actionRef));
        if (!component) throw new Error(`service ${service} declares no action ${actionRef}`);
        const { action_ref: _action, ...config } = node.config;
        invoked = await call<Invocation>("POST", `/api/v1/plugins/${encodeURIComponent(component.component_id)}/invoke`, {
          action: actionRef,
          input: render(config, event),
        });
      }
      setResult({ text: `${JSON.stringify(invoked.output)} (version ${invoked.version}, ${invoked.duration_us} µs)`, error: false });
    } catch (error) {
      const body = error instanceof ApiError ? (error.body as { outcome?: string; kind?: string } | null) : null;
      const detail = body?.outcome ? ` (${body.outcome}${body.kind ? `, ${body.kind}` : ""})` : "";
      setResult({ text: `${error instanceof Error ? error.message : String(error)}${detail}`, error: true });
    } finally {
      setRunning(false);
    }
  };

  return (
    <details className="node-test">
      <summary>Test this node</summary>
      <label htmlFor={`${id}-sample`}>Sample event (JSON)</label>
      <textarea id={`${id}-sample`} rows={6} spellCheck={false} value={sample} onChange={(event) => setSample(event.target.value)} />
      <div className="buttons">
        <button onClick={() => void run()} disabled={running}>
          Run test
        </button>
        <button
          onClick={() => {
            pin(flowId, node.id, isPinned ? null : sample);
            setPinned(!isPinned);
            if (isPinned) setSample(generated);
          }}
          aria-pressed={isPinned}
        >
          {isPinned ? "Unpin sample" : "Pin sample"}
        </button>
      </div>
      <p className={`test-result${result?.error ? " problem-blocking" : ""}`} role="status" aria-live="polite">
        {result?.text ?? ""}
      </p>
    </details>
  );
}
