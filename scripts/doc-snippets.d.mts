/** Types for scripts/doc-snippets.mjs (see its header). */
export interface Snippet {
  doc: string;
  line: number;
  ext: "ts" | "js";
  kind: "check" | "run" | "fragment";
  code: string;
  file: string;
  expected?: string;
}
export const BLOCKS_PER_FRAGMENT: number;
export function fencedBlocks(text: string): { lang: string; line: number; code: string; marker: string | undefined }[];
export function collectSnippets(docsRoot: string): { snippets: Snippet[]; problems: string[] };
export function checkSnippets(opts: {
  docsRoot?: string;
  packageRoot?: string;
  tarball?: string;
  run?: boolean;
  keep?: boolean;
  log?: (line: string) => void;
}): { snippets: Snippet[]; problems: string[]; dir: string | undefined };
