// Types for scripts/shipped-docs.mjs.
export declare function packageFiles(root: string): string[];
export declare function isShipped(path: string, files: readonly string[]): boolean;
export declare function shippedDocs(root: string, files?: readonly string[]): string[];
