// The flows section, Studio's flow editor: its layout (the toolbar above; the palette, the canvas and the
// inspector side by side; the panels below) around the editor's state, which useFlowEditor.ts owns.

import { FlowCanvas } from "./FlowCanvas";
import { FlowPanels } from "./FlowPanels";
import { FlowToolbar } from "./FlowToolbar";
import { InspectorPanel } from "./Inspector";
import { Palette } from "./Palette";
import { useFlowEditor } from "./useFlowEditor";

/// The flows section; `visible`: whether it is the section shown (see useFlowEditor).
export function FlowsView({ visible }: { visible: boolean }) {
  const editor = useFlowEditor(visible);
  return (
    <div className="flows-view">
      <FlowToolbar editor={editor} />
      <div className="workspace">
        <Palette editor={editor} />
        <FlowCanvas editor={editor} />
        <InspectorPanel editor={editor} />
      </div>
      <FlowPanels editor={editor} />
    </div>
  );
}
