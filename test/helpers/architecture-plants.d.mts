// Types for architecture-plants.mjs.
import type { RuleName } from "./architecture.js";

export interface Plant {
  /** what the copy is, in a word or three */
  name: string;
  /** the rule that must find it */
  rule: RuleName;
  /** where it is planted, from the package root */
  at: string;
  text: string;
}

export declare const PLANTS: readonly Plant[];
