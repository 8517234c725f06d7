/**
 * `--backend NAME` for every command that reads process facts, and the line
 * each text output starts with: what a row means (start-time unit, what
 * could be seen) depends on which backend answered.
 */
import { getProcessFacts, isFactsBackend } from "../../facts/get.js";
import type { FactsBackend, ProcessFacts } from "../../facts/types.js";
import { option, UsageError, type ParsedArgs } from "./io.js";

export function factsFromFlag(p: ParsedArgs): ProcessFacts {
  const value = option(p, "backend");
  if (value === undefined) return getProcessFacts();
  if (value !== "auto" && !isFactsBackend(value)) {
    throw new UsageError(`--backend must be one of auto, native, procfs, ps, none; got ${JSON.stringify(value)}`);
  }
  return getProcessFacts({ backend: value as "auto" | FactsBackend });
}

/** The backend named on the command line, when one other than auto was. */
export function forcedBackend(p: ParsedArgs): FactsBackend | undefined {
  const value = option(p, "backend");
  return value !== undefined && value !== "auto" && isFactsBackend(value) ? value : undefined;
}

export function backendLine(facts: Pick<ProcessFacts, "backend" | "identityStrength">): string {
  return `backend: ${facts.backend} (identity: ${facts.identityStrength})\n`;
}
