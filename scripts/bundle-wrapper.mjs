// Build step after tsc: bundles the ACPX wrapper (dist/acpx/wrapper/main.js
// and everything it imports) into ONE CommonJS file, dist/acpx/wrapper.cjs.
//
// Why: a wrapper starts once per session and its start is on every
// ensureSession's path. Measured on a loaded 2-core box (bench/wrapper.bench.mjs,
// spawn → "started" report over `node -e 0`): tsc's 24 ESM files ≈ 1.46×, one
// ESM file ≈ 1.23×, one CommonJS file ≈ 1.16× (Node 20 resolves, reads and
// links every ESM file separately, and an ESM entry starts the ESM loader).
// The bundler is vite's (already a devDependency for vitest): no new dependency.
//
// The file sits two levels below the package root like dist/facts/native.js,
// so the addon loader's `new URL("../../", import.meta.url)` still names the
// package root. Node builtins and node-gyp-build stay external (require()).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const entry = join(root, "dist/acpx/wrapper/main.js");
if (!existsSync(entry)) throw new Error(`${entry} missing: run tsc -p tsconfig.build.json first`);

await build({
  configFile: false,
  logLevel: "warn",
  root,
  build: {
    ssr: entry,
    outDir: join(root, "dist/acpx"),
    emptyOutDir: false,
    minify: false,
    sourcemap: false,
    target: "node20",
    rolldownOptions: {
      external: [/^node:/, "node-gyp-build"],
      output: { format: "cjs", entryFileNames: "wrapper.cjs" },
    },
  },
});
