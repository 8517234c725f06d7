// Types for layer-order.mjs.

/** A layer (or a folder of one) → its rank, lowest first; "" is the file directly in it (index.ts). */
export type Order = Readonly<Record<string, number>>;

export declare const LAYERS: Order;
export declare const OWNERSHIP_LAYERS: Order;
export declare const ACPX_LAYERS: Order;
export declare const CLI_LAYERS: Order;
/** The layers whose folders are ordered too, each with its table. */
export declare const FOLDER_LAYERS: Readonly<Record<string, Order>>;
/** The layer of a src/ path: its first directory ("" for a file directly in src/), or null outside src/. */
export declare function layerOf(path: string): string | null;
/** What is wrong with an import of the file `toPath` by the file `fromPath`: null when it runs down the order. */
export declare function orderProblem(fromPath: string, toPath: string): string | null;
