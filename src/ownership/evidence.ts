/**
 * One row of verification evidence: the check, its result, the code that
 * says what it found (for code to read) and the detail (for people). Every
 * row is made here, so none goes without a code.
 */
import type { EvidenceCheck, EvidenceCode, OwnershipEvidence } from "./types.js";

export function evidence(check: EvidenceCheck, result: OwnershipEvidence["result"], code: EvidenceCode, detail?: string): OwnershipEvidence {
  return detail === undefined ? { check, result, code } : { check, result, code, detail };
}
