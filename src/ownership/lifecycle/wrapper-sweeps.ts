/**
 * A reconcile beside a wrapper that is ending its own tree (its gateway went
 * away: end-records.ts): the wrapper's record is read for every lease, and
 * a tree whose wrapper says it is sweeping is left to it, for at most the
 * grace plus a margin, then verified again. So a keeper (or a startup reap)
 * that arrives while the wrapper's TERM → grace → KILL runs neither kills
 * beside it nor settles on a half-ended tree, and the settlement names the
 * wrapper every time (settle.ts, ended-by-wrapper), whichever came first.
 */
import { endRecordsDir, readEndRecord, removeEndRecord, type EndRecord } from "../leases/end-records.js";
import { mapLimit } from "../leases/fs-safe.js";
import type { ProcessLease } from "../leases/types.js";
import { verifyLeases, type LeaseVerification } from "../verify/verify.js";
import type { LifecycleDeps } from "./lifecycle.js";

/** past the grace, what a sweep may still take (the wrapper's KILL confirmation and its exit) */
export const SWEEP_MARGIN_MS = 3000;
const POLL_MS = 50;

/** Each lease's end record, when its wrapper wrote one. */
export async function readEndRecords(
  deps: LifecycleDeps,
  leases: readonly ProcessLease[],
): Promise<Map<string, EndRecord>> {
  const records = new Map<string, EndRecord>();
  await mapLimit(leases, 8, async (l) => {
    const r = l.rootPid > 0 ? await readEndRecord(deps.store.dir, l) : null;
    if (r !== null) records.set(l.leaseId, r);
  });
  return records;
}

/** A verified tree whose wrapper says it is ending it now. */
export function isSweeping(
  records: ReadonlyMap<string, EndRecord>,
  byId: ReadonlyMap<string, LeaseVerification>,
  l: ProcessLease,
): boolean {
  return records.get(l.leaseId)?.phase === "sweeping" && byId.get(l.leaseId)?.verdict === "owned";
}

/**
 * The sweeps under way, waited for (at most the grace plus a margin past
 * the records' times, and past now), `byId` updated with each lease's last
 * verification; the records as the wrappers left them.
 */
export async function awaitSweeps(
  deps: LifecycleDeps,
  sweeping: readonly ProcessLease[],
  byId: Map<string, LeaseVerification>,
  records: ReadonlyMap<string, EndRecord>,
): Promise<Map<string, EndRecord>> {
  // bounded by the records' times and by now: a record from the future waits no longer than a fresh one
  const latest = Math.max(...sweeping.map((l) => records.get(l.leaseId)!.at));
  const until = Math.min(latest, Date.now()) + deps.graceMs + SWEEP_MARGIN_MS;
  let left = [...sweeping];
  while (left.length > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    for (const v of await verifyLeases(left, deps.facts, { gatewayInstanceId: deps.gatewayInstanceId }))
      byId.set(v.lease.leaseId, v);
    left = left.filter((l) => byId.get(l.leaseId)?.verdict === "owned");
  }
  // what the wrappers said once done
  const after = new Map(records);
  for (const [id, r] of await readEndRecords(deps, sweeping)) after.set(id, r);
  return after;
}

/** The records of leases that settled are no longer needed: the lease says it now. */
export async function dropEndRecords(
  deps: LifecycleDeps,
  settled: readonly string[],
  records: ReadonlyMap<string, EndRecord>,
): Promise<void> {
  const ids = settled.filter((id) => records.has(id));
  await mapLimit(ids, 8, (id) => removeEndRecord(deps.store.dir, id));
}

export { endRecordsDir };
