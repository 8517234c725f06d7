// What every run of one supervisor shares: RunContext, declared beside the
// Run its maps hold (run.ts), so the two do not import each other.
export type { RunContext } from "./run.js";
