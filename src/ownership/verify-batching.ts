/**
 * verifyLeases for leases that concurrent callers ask about one at a time:
 * the leases asked for within one turn of the event loop are verified
 * together, against one snapshot and one batch of reads. A reconcile's
 * re-verifications after hundreds of concurrent kills (kill-verification.ts)
 * would otherwise each walk the process table and each make an env pass
 * over all of it.
 */
import type { ProcessFacts } from "../facts/types.js";
import type { ProcessLease } from "./types.js";
import { verifyLeases } from "./verify.js";
import type { LeaseVerification, VerifyOptions } from "./verify-state.js";

export type LeaseVerifier = (lease: ProcessLease) => Promise<LeaseVerification>;

export function batchingVerifier(facts: ProcessFacts, opts: VerifyOptions = {}): LeaseVerifier {
  let queue = new Map<string, { lease: ProcessLease; waiters: Array<{ resolve: (v: LeaseVerification) => void; reject: (e: unknown) => void }> }>();
  let scheduled = false;
  const flush = async () => {
    const batch = queue;
    queue = new Map();
    scheduled = false;
    const asked = [...batch.values()];
    try {
      const vs = await verifyLeases(
        asked.map((a) => a.lease),
        facts,
        opts,
      );
      asked.forEach((a, i) => a.waiters.forEach((w) => w.resolve(vs[i]!)));
    } catch (e) {
      for (const a of asked) for (const w of a.waiters) w.reject(e);
    }
  };
  return (lease) =>
    new Promise<LeaseVerification>((resolve, reject) => {
      // one lease asked twice in a turn is verified once: both callers get that answer
      const entry = queue.get(lease.leaseId) ?? { lease, waiters: [] };
      entry.waiters.push({ resolve, reject });
      queue.set(lease.leaseId, entry);
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    });
}
