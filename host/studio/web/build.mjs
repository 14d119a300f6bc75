// Builds Studio into dist/ (or `--outdir <dir>`: index.html, studio.js, studio.css), or with --tests the unit
// tests into build-tests/ for `node --test`, or with --anchor the benchmark's anchor (anchor/, React Flow alone:
// index.html, anchor.js, anchor.css) into the outdir. esbuild bundles and minifies; TypeScript checks types
// (`npm run check`). host/studio/build.rs runs it for the binary.
import { build } from "esbuild";
import { copyFile, mkdir, readdir, rm, writeFile } from "node:fs/promises";

const tests = process.argv.includes("--tests");
const anchor = process.argv.includes("--anchor");
const outdirAt = process.argv.indexOf("--outdir");
const outdir = outdirAt > 0 ? process.argv[outdirAt + 1] : "dist";
if (tests) {
  await rm("build-tests", { recursive: true, force: true });
  const entryPoints = (await readdir("src")).filter((name) => name.endsWith(".test.ts")).map((name) => `src/${name}`);
  await build({ entryPoints, bundle: true, platform: "node", format: "esm", outdir: "build-tests", outExtension: { ".js": ".mjs" }, logLevel: "warning" });
} else {
  await rm(outdir, { recursive: true, force: true });
  await mkdir(outdir, { recursive: true });
  await build({
    entryPoints: anchor ? { anchor: "anchor/reactFlowAlone.tsx" } : { studio: "src/main.tsx" },
    bundle: true,
    minify: true,
    sourcemap: false,
    format: "esm",
    target: "es2022",
    outdir,
    jsx: "automatic",
    legalComments: "none",
    define: { "process.env.NODE_ENV": '"production"' },
    logLevel: "warning",
  });
  if (anchor) {
    const page = `<!doctype html><html lang="en"><head><meta charset="utf-8" /><title>React Flow alone</title>
<link rel="stylesheet" href="anchor.css" /></head><body style="margin:0"><div id="root"></div>
<script type="module" src="anchor.js"></script></body></html>\n`;
    await writeFile(`${outdir}/index.html`, page);
  } else {
    await copyFile("src/index.html", `${outdir}/index.html`);
  }
}
