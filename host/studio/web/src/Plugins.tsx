// Plugins (`/api/v1/plugins`): the stored WebAssembly components, each with its versions (uploaded when, size,
// content hash, the actions its manifest declares) and the active one. A `.wasm` is uploaded as a new version
// (checked against its manifest by the server, which says why it refuses one), and any stored version can be
// activated: rolling forward or back is the same step.

import { useState } from "react";

import { call, upload } from "./api";
import { useFeedback } from "./feedback";
import { FormError, ResourceSection, useSection, useSubmit } from "./Resources";

interface VersionSummary {
  version: string;
  content_hash: string;
  size_bytes: number;
  uploaded_at: string;
  manifest: { actions?: { name: string }[]; service?: string };
  active: boolean;
}

interface PluginSummary {
  id: string;
  active_version: string | null;
  activated_at: string | null;
  versions: VersionSummary[];
}

export function PluginsView() {
  const section = useSection<PluginSummary>("/api/v1/plugins", (plugin) => plugin.id);
  return (
    <ResourceSection
      title="Plugins"
      newLabel="Upload a plugin"
      entries={section.items.map((plugin) => ({ key: plugin.id, label: plugin.id, detail: plugin.active_version ? `active ${plugin.active_version}` : "inactive" }))}
      chosen={section.chosen}
      onChoose={section.choose}
    >
      {section.current ? (
        <PluginView key={section.current.id} plugin={section.current} onChanged={section.reload} />
      ) : (
        <UploadForm key="new" onUploaded={section.onSaved} />
      )}
    </ResourceSection>
  );
}

function UploadForm(props: { pluginId?: string; onUploaded: (id: string) => Promise<void> }) {
  const { pluginId, onUploaded } = props;
  const [id, setId] = useState(pluginId ?? "");
  const [version, setVersion] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [activate, setActivate] = useState(true);
  const { error, submit } = useSubmit();
  return (
    <form
      className="resource-body"
      aria-label={pluginId ? `Upload a version of ${pluginId}` : "Upload a plugin"}
      onSubmit={async (event) => {
        event.preventDefault();
        if (!file) return;
        const path = `/api/v1/plugins/${encodeURIComponent(id.trim())}/versions/${encodeURIComponent(version.trim())}?activate=${activate}`;
        await submit(
          async () => {
            const answer = await upload<{ created: boolean; active: boolean }>("PUT", path, file, "application/wasm");
            return `Plugin ${id.trim()} ${version.trim()} ${answer.created ? "uploaded" : "was already stored"}${answer.active ? " and active" : ""}.`;
          },
          () => onUploaded(id.trim()),
        );
      }}
    >
      <h2>{pluginId ? `Upload a version of ${pluginId}` : "Upload a plugin"}</h2>
      <label>
        Plugin id <input value={id} onChange={(event) => setId(event.target.value)} readOnly={pluginId !== undefined} required />
      </label>
      <label>
        Version (as its manifest says) <input value={version} onChange={(event) => setVersion(event.target.value)} required />
      </label>
      <label>
        Component (.wasm) <input type="file" accept=".wasm,application/wasm" onChange={(event) => setFile(event.target.files?.[0] ?? null)} required />
      </label>
      <label className="inline">
        <input type="checkbox" checked={activate} onChange={(event) => setActivate(event.target.checked)} /> Activate once stored
      </label>
      <div className="buttons">
        <button type="submit">Upload</button>
      </div>
      <FormError error={error} />
    </form>
  );
}

function PluginView(props: { plugin: PluginSummary; onChanged: () => Promise<void> }) {
  const { plugin, onChanged } = props;
  const { say } = useFeedback();
  const { error, submit } = useSubmit();
  const activeAt = plugin.versions.find((version) => version.active)?.uploaded_at ?? "";
  const activate = async (version: string) => {
    await submit(async () => {
      const answer = await call<{ previous_version: string | null }>("POST", `/api/v1/plugins/${encodeURIComponent(plugin.id)}/activate`, { version });
      return `Plugin ${plugin.id}: ${version} active${answer.previous_version ? ` (was ${answer.previous_version})` : ""}.`;
    }, onChanged);
  };
  return (
    <div className="resource-body">
      <h2>Plugin {plugin.id}</h2>
      <p>
        {plugin.active_version ? `Active version ${plugin.active_version} since ${plugin.activated_at}.` : "No active version."}
      </p>
      <table aria-label={`Versions of ${plugin.id}`}>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Uploaded</th>
            <th scope="col">Size</th>
            <th scope="col">Actions</th>
            <th scope="col">State</th>
          </tr>
        </thead>
        <tbody>
          {plugin.versions.map((version) => (
            <tr key={version.version} className={version.active ? "active" : undefined}>
              <td>
                <code title={version.content_hash}>{version.version}</code>
              </td>
              <td>{version.uploaded_at}</td>
              <td>{(version.size_bytes / 1024).toFixed(0)} KiB</td>
              <td>{(version.manifest.actions ?? []).map((action) => action.name).join(", ")}</td>
              <td>
                {version.active ? (
                  "active"
                ) : (
                  <button onClick={() => void activate(version.version)}>
                    {version.uploaded_at < activeAt ? `Roll back to ${version.version}` : `Activate ${version.version}`}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <FormError error={error} />
      <UploadForm
        pluginId={plugin.id}
        onUploaded={async () => {
          say(`Plugin ${plugin.id} updated.`);
          await onChanged();
        }}
      />
    </div>
  );
}
