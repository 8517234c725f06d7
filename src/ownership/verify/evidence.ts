/**
 * One row of verification evidence: the check, its result, the code that
 * says what it found (for code to read) and the detail (for people). Every
 * row is made here, so none goes without a code.
 */
import type { EvidenceCheck, EvidenceCode, OwnershipEvidence } from "../leases/types.js";

export function evidence(
  check: EvidenceCheck,
  result: OwnershipEvidence["result"],
  code: EvidenceCode,
  detail?: string,
): OwnershipEvidence {
  return detail === undefined ? { check, result, code } : { check, result, code, detail };
}

/**
 * The rows both verifications (verify.ts for leases, legacy.ts for records
 * that predate them) write about a root: one wording each.
 */
export const rootRows = {
  backendVerifiesNothing: (backend: string) =>
    evidence("facts-backend", "unknown", "backend-verifies-nothing", `backend "${backend}" cannot verify anything`),
  processListUnavailable: (e: unknown) =>
    evidence(
      "process-list",
      "unknown",
      "process-list-unavailable",
      `process list unavailable: ${e instanceof Error ? e.message : String(e)}`,
    ),
  absent: (pid: number) => evidence("root-alive", "mismatch", "absent", `pid ${pid} is not in the process table`),
  zombie: (pid: number) => evidence("root-alive", "mismatch", "zombie", `pid ${pid} is a zombie`),
  inspectFailed: () => evidence("inspect", "unknown", "inspect-failed", "the root could not be inspected"),
  exitedDuringVerification: (pid: number) =>
    evidence("root-alive", "mismatch", "exited-during-verification", `pid ${pid} exited during verification`),
  reusedDuringVerification: () => evidence("start-time", "mismatch", "pid-reused", "pid reused during verification"),
};
