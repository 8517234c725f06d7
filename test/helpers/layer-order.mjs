// The order of src/ as tables, lowest first, and the one check of an import
// against it: test/helpers/architecture-layers.ts (the layer-import rule and
// the diagram) and scripts/import-graph.mjs (the back-up arrows) both read
// this file, so the order a test enforces and the order a reader recomputes
// are one.
import { posix } from "node:path";

/**
 * The layers, lowest first, read from the imports of src/ (a module may
 * import from its own directory and from any lower rank; two layers of one
 * rank import neither way).
 */
export const LAYERS = Object.freeze({
  facts: 0,
  sessions: 0,
  containment: 1,
  ownership: 2,
  supervisor: 3,
  acpx: 4,
  cli: 5,
  openclaw: 5,
  "": 6,
});

/**
 * The folders of src/ownership/, lowest first, read from its imports the
 * same way: a file may import from its own folder and from the folders
 * before it (index.ts, directly in src/ownership/, from all of them), so
 * a lease record never reaches up to the kill, nor the kill to the
 * lifecycle that moves the lease.
 */
export const OWNERSHIP_LAYERS = Object.freeze({
  leases: 0,
  verify: 1,
  terminate: 2,
  lifecycle: 3,
  host: 4,
  keeper: 5,
  "": 6,
});

/**
 * The folders of src/acpx/, lowest first, the same way: the wrapper process
 * (its own bundle, importing nothing of ours), the launch of a wrapper, the
 * errors and logger every job reports through, the durable wrapper's wire,
 * the ACP connection, the sessions built on it, the keeper, and the
 * controller on top (index.ts, directly in src/acpx/, above them all).
 */
export const ACPX_LAYERS = Object.freeze({
  wrapper: 0,
  launch: 1,
  report: 2,
  durable: 3,
  connection: 4,
  sessions: 5,
  keeper: 6,
  controller: 7,
  "": 8,
});

/**
 * The folders of src/supervisor/, lowest first, the same way: the shapes and
 * helpers every folder reads (types, output caps, keys, watchdog defaults,
 * the tree kill), the child and PTY adapters, what holds a run beyond its
 * process (its lease, its own cgroup), one run from start to end, the
 * supervisor that owns them all, the exec sessions built on it, and
 * index.ts, directly in src/supervisor/, above them all.
 */
export const SUPERVISOR_LAYERS = Object.freeze({
  shared: 0,
  adapters: 1,
  hold: 2,
  run: 3,
  core: 4,
  exec: 5,
  "": 6,
});

/**
 * The folders of src/cli/: the pieces every command shares (the facts
 * backend, printing, labels, lease rows), the commands, and the dispatch and
 * the binary directly in src/cli/ above them.
 */
export const CLI_LAYERS = Object.freeze({
  shared: 0,
  commands: 1,
  "": 2,
});

/** The layers whose folders are ordered too, each with its table. */
export const FOLDER_LAYERS = Object.freeze({
  ownership: OWNERSHIP_LAYERS,
  acpx: ACPX_LAYERS,
  supervisor: SUPERVISOR_LAYERS,
  cli: CLI_LAYERS,
});

/** The layer of a src/ path: its first directory ("" for a file directly in src/), or null outside src/. */
export function layerOf(path) {
  if (!path.startsWith("src/")) return null;
  const parts = path.split("/");
  return parts.length === 2 ? "" : parts[1];
}

/** The folder of a path inside its layer, src/<layer>/<folder>/… ("" for a file directly in the layer's folder). */
const folderOf = (path) => {
  const parts = path.split("/");
  return parts.length <= 3 ? "" : parts[2];
};

/** What is wrong with an import of the file `toPath` by the file `fromPath` (paths from the package root): null when it runs down the order. */
export function orderProblem(fromPath, toPath) {
  const from = layerOf(fromPath);
  const to = layerOf(toPath);
  if (from !== null && from === to && FOLDER_LAYERS[from] !== undefined) return folderProblem(from, fromPath, toPath);
  if (from === null || to === null || from === to) return null;
  const rf = LAYERS[from];
  const rt = LAYERS[to];
  if (rf === undefined) return `src/${from}/ is not in the layer order (LAYERS): place it`;
  if (rt === undefined) return `imports src/${to}/, which is not in the layer order (LAYERS)`;
  if (from === "sessions" || rt >= rf)
    return `${from || "src"} (rank ${rf}) imports ${to || "src"} (rank ${rt}): only lower layers may be imported${from === "sessions" ? " (sessions imports nothing of ours)" : ""}`;
  return null;
}

function folderProblem(layer, fromPath, toPath) {
  const table = FOLDER_LAYERS[layer];
  const name = `${layer.toUpperCase()}_LAYERS`;
  const from = folderOf(fromPath);
  const to = folderOf(toPath);
  if (from === to) return null;
  const rf = table[from];
  const rt = table[to];
  if (rf === undefined) return `src/${layer}/${from}/ is not in the ${layer} order (${name}): place it`;
  if (rt === undefined) return `imports src/${layer}/${to}/, which is not in the ${layer} order (${name})`;
  if (rt >= rf)
    return `${layer}/${from || "index.ts"} (rank ${rf}) imports ${layer}/${to || "index.ts"} (rank ${rt}): only folders before it may be imported`;
  return null;
}
