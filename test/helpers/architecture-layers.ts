// The layers of src/ and the folders of each layer that orders its own (the
// tables are layer-order.mjs's, which scripts/import-graph.mjs reads too):
// the layer-import rule (architecture.ts) reads them, and layerDiagram()
// draws them for README.md and docs/architecture.md, which the test compares.
import { posix } from "node:path";
import { FOLDER_LAYERS, LAYERS, orderProblem } from "./layer-order.mjs";

/** What each layer is, in the diagram. */
export const LAYER_ROLES: Readonly<Record<string, string>> = Object.freeze({
  facts: "what the OS says about a process; the one signal module",
  sessions: "the visibility rule; imports nothing of ours",
  containment: "one cgroup v2 per lease",
  ownership: "leases, verification, the tree kill, the one lifecycle",
  supervisor: "background runs, leased through ownership",
  acpx: "the lifecycle controller: the wrapper's launch, the ACP connection, the sessions",
  cli: "the proclease command",
  openclaw: "the OpenClaw plugin (proclease/openclaw)",
  "": "the package root: what a gateway author imports (docs/api.md)",
});

/**
 * The layer diagram, highest first, one rank a line: docs/architecture.md
 * holds it with `root` "src/"; README.md, which is shipped and so names no
 * src/ path (test/docs-links.test.ts), holds it with `root` "" (the same
 * folders, as dist/ has them).
 */
export function layerDiagram(root: "src/" | "" = "src/"): string {
  const ranks = [...new Set(Object.values(LAYERS))].sort((a, b) => b - a);
  const lines = ranks.map((r) => {
    const names = Object.keys(LAYERS).filter((k) => LAYERS[k] === r);
    return names
      .map((n) => `${(n === "" ? `${root}index.ts` : `${root}${n}/`).padEnd(16)} ${LAYER_ROLES[n]}${folderLine(n)}`)
      .join("\n");
  });
  return [
    "```",
    "imports point down only; one rank imports neither way",
    ...lines.flatMap((l, i) => (i === 0 ? [l] : ["        ↓", l])),
    "```",
  ].join("\n");
}

/** A layer's ordered folders, lowest first, as the diagram's second line for it ("" for a layer without). */
function folderLine(layer: string): string {
  const table = FOLDER_LAYERS[layer];
  if (table === undefined) return "";
  const folders = Object.keys(table)
    .filter((k) => k !== "")
    .sort((a, b) => table[a]! - table[b]!);
  return `\n${"".padEnd(16)} inside, each folder imports only those before it: ${folders.map((f) => `${f}/`).join(" → ")}`;
}

/** The diagram between `<!-- layers -->` and `<!-- /layers -->` in a markdown text, or null. */
export function diagramIn(markdown: string): string | null {
  const m = /<!-- layers -->\n([\s\S]*?)\n<!-- \/layers -->/.exec(markdown);
  return m ? m[1]! : null;
}

/** What is wrong with an import of `source` by the file at `fromPath` (a path from the package root): null when it runs down the layers, or is not relative. */
export function layerImportProblem(fromPath: string, source: string): string | null {
  if (!source.startsWith(".")) return null;
  return orderProblem(fromPath, posix.normalize(posix.join(posix.dirname(fromPath), source)));
}
