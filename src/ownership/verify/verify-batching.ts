/**
 * verifyLeases for leases that concurrent callers ask about one at a time:
 * the leases asked for within one turn of the event loop are verified
 * together, against one snapshot and one batch of reads. A reconcile's
 * re-verifications after hundreds of concurrent kills (kill-verification.ts)
 * would otherwise each walk the process table and each make an env pass
 * over all of it.
 */
import type { ProcessFacts } from "../../facts/types.js";
import type { ProcessLease } from "../leases/types.js";
import { perTurn } from "./waiters.js";
import { verifyLeases } from "./verify.js";
import type { LeaseVerification, VerifyOptions } from "./verify-state.js";

export type LeaseVerifier = (lease: ProcessLease) => Promise<LeaseVerification>;

export function batchingVerifier(facts: ProcessFacts, opts: VerifyOptions = {}): LeaseVerifier {
  return perTurn(async (asked: readonly ProcessLease[]) => {
    // one lease asked twice in a turn is verified once: both callers get that answer
    const unique = new Map<string, ProcessLease>();
    for (const l of asked) if (!unique.has(l.leaseId)) unique.set(l.leaseId, l);
    const vs = await verifyLeases([...unique.values()], facts, opts);
    const byId = new Map([...unique.keys()].map((id, i) => [id, vs[i]!]));
    return asked.map((l) => byId.get(l.leaseId)!);
  });
}
