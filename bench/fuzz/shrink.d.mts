import type { Sequence } from "./plan.mjs";

export interface ShrinkOptions {
  maxRuns?: number;
  /** Date.now() milliseconds */
  deadline?: number;
  /** default: plan.mjs's invalidReason(candidate) === null */
  valid?: (candidate: Sequence) => boolean;
  log?: (line: string) => void;
}
export interface ShrinkBudget {
  readonly exhausted: boolean;
}
/** ddmin: a smallest sublist of `items` (order kept) for which `failsWith` holds */
export function ddmin<T>(
  items: readonly T[],
  failsWith: (subset: T[]) => Promise<boolean>,
  budget: ShrinkBudget,
): Promise<T[]>;
export function shrinkSequence(
  seq: Sequence,
  fails: (candidate: Sequence) => Promise<boolean>,
  opts?: ShrinkOptions,
): Promise<{ seq: Sequence; runs: number; complete: boolean }>;
