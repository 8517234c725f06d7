/** Types for scripts/import-graph.mjs (see its header). */
/** file → the files it imports (src/) or includes (native/), paths from the package root */
export type ImportGraph = Map<string, Set<string>>;
export function importGraph(root?: string): ImportGraph;
export function circles(graph: ReadonlyMap<string, ReadonlySet<string>>): string[][];
export function folderGraph(graph: ReadonlyMap<string, ReadonlySet<string>>): ImportGraph;
export function folderDepths(
  graph: ReadonlyMap<string, ReadonlySet<string>>,
): { folder: string; files: number; depth: number }[];
export function backUpArrows(graph: ReadonlyMap<string, ReadonlySet<string>>): [string, string, string][];
