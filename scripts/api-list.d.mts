// Types for scripts/api-list.mjs, so test/api-list.test.ts imports it typed.
export interface ApiName {
  name: string;
  kind: "value" | "type";
  /** the module that defines it, from the package root */
  from: string;
}
export interface ApiEntry {
  specifier: string;
  names: ApiName[];
}
export declare const ENTRIES: readonly { specifier: string; source: string }[];
export declare function listExports(root?: string): ApiEntry[];
export declare function renderApiDoc(entries: readonly ApiEntry[]): string;
/** [module path or prefix, the shipped docs/ page (and anchor) that documents its names], first match wins */
export declare const DOC_PAGES: readonly (readonly [string, string])[];
export declare function docPageOf(from: string): string;
