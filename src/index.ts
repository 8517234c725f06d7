// Kept in dist/index.d.ts (preserve): the declarations use Node's types, so a consumer needs @types/node installed and no "types" entry.
/// <reference types="node" preserve="true" />
/**
 * proclease: process ownership as a first-class fact.
 * Data flows one way: facts → ownership → acpx / supervisor; sessions is
 * independent; the CLI reads all of them.
 */
export * from "./facts/index.js";
export * from "./ownership/index.js";
export * from "./acpx/index.js";
export * from "./sessions/index.js";
export * from "./supervisor/index.js";
