// Build step after tsc: bundles the two processes proclease starts from its
// own code, each with everything it imports, into ONE CommonJS file:
//
// - the ACPX wrapper (dist/acpx/wrapper/main.js → dist/acpx/wrapper.cjs). A
//   wrapper starts once per session and its start is on every
//   ensureSession's path. Measured on a loaded 2-core box
//   (bench/wrapper.bench.mjs, spawn → "started" report over `node -e 0`):
//   tsc's 24 ESM files ≈ 1.46×, one ESM file ≈ 1.23×, one CommonJS file
//   ≈ 1.16× (Node 20 resolves, reads and links every ESM file separately,
//   and an ESM entry starts the ESM loader).
// - the keeper (dist/ownership/keeper/keeper-main.js → dist/ownership/keeper-main.cjs),
//   one per gateway for the gateway's whole life: its cost is its memory.
//   Idle, tsc's ~100 ESM files held 10.1 MB private (1.80× an idle bare
//   `node`), one CommonJS file 7.3 MB (1.30×), minified 6.4 MB (1.14×)
//   (bench/session-cost.bench.mjs, docs/benchmarks.md). One file read at
//   its start is also all the package code it ever runs: a package upgraded
//   on disk while it waits changes nothing it runs when it acts. It prints
//   nothing, so the minified names cost no one a readable trace.
//
// The bundler is vite's (already a devDependency for vitest): no new dependency.
//
// Each file sits two levels below the package root like dist/facts/native.js,
// so the addon loader's `new URL("../../", import.meta.url)` still names the
// package root. Node builtins and node-gyp-build stay external (require()).
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bundles = [
  { entry: "dist/acpx/wrapper/main.js", outDir: "dist/acpx", file: "wrapper.cjs", minify: false },
  { entry: "dist/ownership/keeper/keeper-main.js", outDir: "dist/ownership", file: "keeper-main.cjs", minify: true },
];

for (const b of bundles) {
  const entry = join(root, b.entry);
  if (!existsSync(entry)) throw new Error(`${entry} missing: run tsc -p tsconfig.build.json first`);
  await build({
    configFile: false,
    logLevel: "warn",
    root,
    build: {
      ssr: entry,
      outDir: join(root, b.outDir),
      emptyOutDir: false,
      minify: b.minify,
      sourcemap: false,
      target: "node20",
      rolldownOptions: {
        external: [/^node:/, "node-gyp-build"],
        output: { format: "cjs", entryFileNames: b.file },
      },
    },
  });
}
