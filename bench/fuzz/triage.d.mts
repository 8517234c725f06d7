import type { Sequence } from "./plan.mjs";
import type { ExecutionResult, Failure, Incident } from "./runner.mjs";

export interface Confirmed {
  seq: Sequence;
  failures: Failure[];
  how: string;
}
export function classify(
  results: ExecutionResult[],
  incidents: Incident[],
): { confirmed: Confirmed[]; isolate: Sequence[]; groups: (Incident & { indices: number[] })[] };
