/**
 * verifyLeases for leases that concurrent callers ask about one at a time:
 * the leases asked for within one turn of the event loop, or while the
 * verification before them runs, are verified together, against one
 * snapshot and one batch of reads (waiters.ts oneCallAtATime). A reconcile's
 * re-verifications after hundreds of concurrent kills (kill-verification.ts)
 * would otherwise each walk the process table and each make an env pass
 * over all of it; so would the settlements a gateway starts at once (a
 * session's close ending its terminals, other sessions closing meanwhile).
 */
import type { ProcessFacts } from "../../facts/types.js";
import type { ProcessLease } from "../leases/types.js";
import { oneCallAtATime } from "./waiters.js";
import { verifyLeases } from "./verify.js";
import type { LeaseVerification, VerifyOptions } from "./verify-state.js";

export type LeaseVerifier = (lease: ProcessLease) => Promise<LeaseVerification>;

export function batchingVerifier(facts: ProcessFacts, opts: VerifyOptions = {}): LeaseVerifier {
  return oneCallAtATime(async (asked: readonly ProcessLease[]) => {
    const records = new Records();
    const slots = asked.map((l) => records.slot(l));
    const vs = await verifyLeases(records.all, facts, opts);
    return slots.map((i) => vs[i]!);
  });
}

/** One record asked twice in a turn is verified once (both callers get that answer); two versions of one lease's record are each verified. */
class Records {
  readonly all: ProcessLease[] = [];
  private readonly byId = new Map<string, number[]>();

  slot(l: ProcessLease): number {
    const seen = this.byId.get(l.leaseId);
    if (seen === undefined) {
      this.byId.set(l.leaseId, [this.all.push(l) - 1]);
      return this.all.length - 1;
    }
    const same = seen.find((i) => this.all[i] === l) ?? seen.find((i) => sameRecord(this.all[i]!, l));
    if (same !== undefined) return same;
    seen.push(this.all.push(l) - 1);
    return this.all.length - 1;
  }
}

function sameRecord(a: ProcessLease, b: ProcessLease): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The batching verifier of one facts backend and gateway instance, made
 * once: every settlement of that gateway's leases that verifies in the same
 * turn shares its snapshot and env pass, whoever started it. On a host where
 * an agent forked two thousand processes, seventeen settlements each making
 * its own env pass over them queued every other session's reads behind
 * theirs for seconds.
 */
export function sharedVerifier(facts: ProcessFacts, gatewayInstanceId: string): LeaseVerifier {
  let byInstance = shared.get(facts);
  if (byInstance === undefined) shared.set(facts, (byInstance = new Map()));
  let v = byInstance.get(gatewayInstanceId);
  if (v === undefined) byInstance.set(gatewayInstanceId, (v = batchingVerifier(facts, { gatewayInstanceId })));
  return v;
}

const shared = new WeakMap<ProcessFacts, Map<string, LeaseVerifier>>();
