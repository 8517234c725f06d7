// The layers of src/ and the folders of src/ownership/, as tables: the
// layer-import rule (architecture.ts) reads them, and layerDiagram() draws
// them for README.md and docs/architecture.md.
import { posix } from "node:path";

/**
 * The layers, lowest first, read from the imports of src/ (a module may
 * import from its own directory and from any lower rank; two layers of one
 * rank import neither way). README.md and docs/architecture.md show the
 * diagram layerDiagram() draws from this table, and the test compares them.
 */
export const LAYERS: Readonly<Record<string, number>> = Object.freeze({
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
export const OWNERSHIP_LAYERS: Readonly<Record<string, number>> = Object.freeze({
  leases: 0,
  verify: 1,
  terminate: 2,
  lifecycle: 3,
  host: 4,
  keeper: 5,
  "": 6,
});

/** What each layer is, in the diagram. */
export const LAYER_ROLES: Readonly<Record<string, string>> = Object.freeze({
  facts: "what the OS says about a process; the one signal module",
  sessions: "the visibility rule; imports nothing of ours",
  containment: "one cgroup v2 per lease",
  ownership: "leases, verification, the tree kill, the one lifecycle",
  supervisor: "background runs, leased through ownership",
  acpx: "the lifecycle controller and its wrapper",
  cli: "the proclease command",
  openclaw: "the OpenClaw plugin (proclease/openclaw)",
  "": "the package root: what a gateway author imports (docs/api.md)",
});

/** The layer diagram, highest first, one rank a line: README.md and docs/architecture.md hold this text. */
export function layerDiagram(): string {
  const ranks = [...new Set(Object.values(LAYERS))].sort((a, b) => b - a);
  const lines = ranks.map((r) => {
    const names = Object.keys(LAYERS).filter((k) => LAYERS[k] === r);
    return names
      .map(
        (n) =>
          `${(n === "" ? "src/index.ts" : `src/${n}/`).padEnd(16)} ${LAYER_ROLES[n]}${n === "ownership" ? ownershipLine() : ""}`,
      )
      .join("\n");
  });
  return [
    "```",
    "imports point down only; one rank imports neither way",
    ...lines.flatMap((l, i) => (i === 0 ? [l] : ["        ↓", l])),
    "```",
  ].join("\n");
}

/** The folders of src/ownership/, lowest first, as the diagram's second ownership line. */
function ownershipLine(): string {
  const folders = Object.keys(OWNERSHIP_LAYERS)
    .filter((k) => k !== "")
    .sort((a, b) => OWNERSHIP_LAYERS[a]! - OWNERSHIP_LAYERS[b]!);
  return `\n${"".padEnd(16)} inside, each folder imports only those before it: ${folders.map((f) => `${f}/`).join(" → ")}`;
}

/** The diagram between `<!-- layers -->` and `<!-- /layers -->` in a markdown text, or null. */
export function diagramIn(markdown: string): string | null {
  const m = /<!-- layers -->\n([\s\S]*?)\n<!-- \/layers -->/.exec(markdown);
  return m ? m[1]! : null;
}

/** The layer of a src/ path: its first directory ("" for a file directly in src/), or null outside src/. */
function layerOf(path: string): string | null {
  const m = /^src\/(?:([^/]+)\/)?[^/]+$/.exec(path) ?? /^src\/([^/]+)\//.exec(path);
  if (!m) return null;
  return path.split("/").length === 2 ? "" : m[1]!;
}

/** What is wrong with an import of `source` by the file at `fromPath` (a path from the package root): null when it runs down the layers, or is not relative. */
export function layerImportProblem(fromPath: string, source: string): string | null {
  if (!source.startsWith(".")) return null;
  const target = posix.normalize(posix.join(posix.dirname(fromPath), source));
  const from = layerOf(fromPath);
  const to = layerOf(target);
  if (from === "ownership" && to === "ownership") return ownershipImportProblem(fromPath, target);
  if (from === null || to === null || from === to) return null;
  const rf = LAYERS[from];
  const rt = LAYERS[to];
  if (rf === undefined) return `src/${from}/ is not in the layer order (LAYERS): place it`;
  if (rt === undefined) return `imports src/${to}/, which is not in the layer order (LAYERS)`;
  if (from === "sessions" || rt >= rf)
    return `${from || "src"} (rank ${rf}) imports ${to || "src"} (rank ${rt}): only lower layers may be imported${from === "sessions" ? " (sessions imports nothing of ours)" : ""}`;
  return null;
}

/** The folder of a src/ownership/ path ("" for a file directly in it). */
const ownershipFolder = (path: string): string => /^src\/ownership\/([^/]+)\//.exec(path)?.[1] ?? "";

function ownershipImportProblem(fromPath: string, toPath: string): string | null {
  const from = ownershipFolder(fromPath);
  const to = ownershipFolder(toPath);
  if (from === to) return null;
  const rf = OWNERSHIP_LAYERS[from];
  const rt = OWNERSHIP_LAYERS[to];
  if (rf === undefined) return `src/ownership/${from}/ is not in the ownership order (OWNERSHIP_LAYERS): place it`;
  if (rt === undefined) return `imports src/ownership/${to}/, which is not in the ownership order (OWNERSHIP_LAYERS)`;
  if (rt >= rf)
    return `ownership/${from || "index.ts"} (rank ${rf}) imports ownership/${to || "index.ts"} (rank ${rt}): only folders before it may be imported`;
  return null;
}
