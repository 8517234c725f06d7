/**
 * reconcileLeases: the batch form of the one sequence (lifecycle.ts). Every
 * lease is verified against ONE snapshot, then settled through
 * settleLease's two halves with that verification: all of them marked
 * closing first, then their kills started together (settleTogether).
 */

import type { ProcessSnapshot } from "../../facts/types.js";
import { removeSettledLeftovers } from "../terminate/cgroup-drain.js";
import { attachedReason, awaitingReason, untouched, type LeaseOutcome } from "./lease-outcome.js";
import { coalescingFacts, countingFacts, slicedRunner } from "../verify/batch-facts.js";
import { mapLimit } from "../leases/fs-safe.js";
import {
  beginSettlement,
  endSettlement,
  isSettled,
  type Closing,
  type LifecycleDeps,
  type SettleLeaseOptions,
} from "./lifecycle.js";
import { pendingOf } from "./pending-settlements.js";
import { wakeInChunks } from "../verify/waiters.js";
import type { LeaseKind, ProcessLease } from "../leases/types.js";
import { batchingVerifier } from "../verify/verify-batching.js";
import { verifyLeases, type LeaseVerification } from "../verify/verify.js";
import type { EndRecord } from "../leases/end-records.js";
import { awaitSweeps, dropEndRecords, isSweeping, readEndRecords } from "./wrapper-sweeps.js";

export interface ReconcileOptions {
  /** which leases: of one kind, or all (default) */
  kind?: LeaseKind | "all";
  /** default open and closing */
  states?: readonly ("open" | "closing")[];
  /** only these lease ids (explain); a lease of another instance then shows as such */
  leaseIds?: readonly string[];
  dryRun?: boolean;
  /** a reason to leave a lease untouched now (a session or run this gateway is using, a spawn in flight) */
  skip?: (lease: ProcessLease) => string | undefined;
  /**
   * The same reasons decided for the whole listing at once, where they are
   * another thread's to give (reconcile-away.ts): the leases left without a
   * reason are that thread's to leave alone from then on.
   */
  skipListed?: (leases: readonly ProcessLease[]) => Promise<ReadonlyMap<string, string>>;
  /**
   * For a kill while a gateway may still run (one that holds no state-dir
   * lock, or whose lock was overridden): for the leases this says yes to, an owned tree whose root has a live parent other than
   * init is left alone as attached, and so is every lease whose evidence is
   * unknown or that has no pid yet (its spawn may be pending in that gateway).
   */
  skipAttached?: boolean | ((lease: ProcessLease) => boolean);
  /**
   * A durable session's verified, running tree is left alone as awaiting
   * re-adoption (the startup reap and the keeper); `proclease reap` ends it
   * at once.
   */
  spareDurable?: boolean;
  /** closed/lost leases older than this are removed afterwards (not in a dry run) */
  retentionMs?: number;
  /** called with each settled lease */
  onSettled?: (o: LeaseOutcome) => void;
  /**
   * This instance's cgroup folder: after the settlements, the empty cgroups
   * that settled leases left in it are removed (cgroup-drain.ts
   * removeSettledLeftovers); `isLive` spares the lease files of sessions in use.
   */
  leftovers?: { instanceFolder: string; isLive?: (leaseId: string) => boolean };
}

export interface LeaseReconcileReport {
  gatewayInstanceId: string;
  dryRun: boolean;
  /** leases examined (skipped ones included) */
  examined: number;
  entries: LeaseOutcome[];
  /** snapshot() calls made for the batch's verification (1 when anything was verified) */
  snapshots: number;
  /** closed/lost leases removed by retention */
  expired: string[];
  /** unreadable, refused or quarantined lease files, each once */
  problems: { file: string; detail: string }[];
  elapsedMs: number;
}

/** Verifies a batch of leases against ONE snapshot, then settles each through settleLease. */
export async function reconcileLeases(deps: LifecycleDeps, opts: ReconcileOptions = {}): Promise<LeaseReconcileReport> {
  const t0 = Date.now();
  const dryRun = opts.dryRun === true;
  const { leases, problems } = await leasesToReconcile(deps, opts);
  const entries: LeaseOutcome[] = [];
  const candidates: ProcessLease[] = [];
  const skipped: { lease: ProcessLease; why: string }[] = [];
  const listedWhy = opts.skipListed ? await opts.skipListed(leases) : undefined;
  for (const l of leases) {
    const why = listedWhy?.get(l.leaseId) ?? opts.skip?.(l);
    if (why !== undefined) skipped.push({ lease: l, why });
    else candidates.push(l);
  }
  const { snapshot, snapshots, byId } = await verifyBatch(deps, [...candidates, ...skipped.map((x) => x.lease)]);
  for (const { lease, why } of skipped)
    entries.push(untouched(lease, byId.get(lease.leaseId)!, "skipped-live", "in-use", why, dryRun));
  const settle = (batch: readonly ProcessLease[], ends: ReadonlyMap<string, EndRecord>) =>
    settleTogether(deps, batch, {
      byId,
      ends,
      snapshot,
      skipAttached: opts.skipAttached,
      spareDurable: opts.spareDurable === true,
      dryRun,
      entry: (o) => entries.push(o),
      onSettled: opts.onSettled,
    });
  // a wrapper ending its own tree is waited for, and named (wrapper-sweeps.ts); the other leases do not wait behind it
  const ends = await readEndRecords(deps, candidates);
  const sweeping = dryRun ? [] : candidates.filter((l) => isSweeping(ends, byId, l));
  await Promise.all([
    settle(
      candidates.filter((l) => !sweeping.includes(l)),
      ends,
    ),
    sweeping.length === 0
      ? undefined
      : awaitSweeps(deps, sweeping, byId, ends).then((after) => settle(sweeping, after)),
  ]);
  if (!dryRun)
    await dropEndRecords(
      deps,
      entries.filter((e) => e.stateAfter === "closed" || e.stateAfter === "lost").map((e) => e.leaseId),
      ends,
    );
  const order = new Map(leases.map((l, i) => [l.leaseId, i]));
  entries.sort((a, b) => order.get(a.leaseId)! - order.get(b.leaseId)!);

  if (!dryRun && opts.leftovers) {
    const unsettled = new Set(
      entries.filter((e) => e.stateAfter === "open" || e.stateAfter === "closing").map((e) => e.leaseId),
    );
    const { instanceFolder, isLive } = opts.leftovers;
    await removeSettledLeftovers(instanceFolder, {
      isLive: (id) => unsettled.has(id) || isLive?.(id) === true,
      get: (id) => deps.store.get(id),
    }).catch(() => undefined);
  }
  let expired: string[] = [];
  if (!dryRun && opts.retentionMs !== undefined) {
    const ex = await deps.store.expire(opts.retentionMs);
    expired = ex.removed;
    for (const p of ex.problems) if (!problems.has(p.file)) problems.set(p.file, p.detail);
  }
  return {
    gatewayInstanceId: deps.gatewayInstanceId,
    dryRun,
    examined: leases.length,
    entries,
    snapshots,
    expired,
    problems: [...problems].map(([file, detail]) => ({ file, detail })),
    elapsedMs: Date.now() - t0,
  };
}

/**
 * A batch's settlements, each through settleLease's two halves, with the
 * kills started together so they share their walks (coalescingFacts). At
 * most ADMIT_AT_ONCE leases are on their way to closing at a time; each
 * then waits as a plain record (Closing), not a suspended settlement, until
 * every one is there, and the kills start in chunks (wakeInChunks). A
 * settlement that throws does not stop the others: every one runs, and the
 * first error is thrown once they are done.
 */
async function settleTogether(
  deps: LifecycleDeps,
  leases: readonly ProcessLease[],
  b: {
    byId: ReadonlyMap<string, LeaseVerification>;
    ends: ReadonlyMap<string, EndRecord>;
    snapshot: ProcessSnapshot | undefined;
    skipAttached: ReconcileOptions["skipAttached"];
    spareDurable: boolean;
    dryRun: boolean;
    entry: (o: LeaseOutcome) => void;
    onSettled: ((o: LeaseOutcome) => void) | undefined;
  },
): Promise<void> {
  const sends = slicedRunner();
  const batchFacts = coalescingFacts(deps.facts, sends);
  // the re-verifications after the batch's kills are verified together, a turn of the event loop at a time
  const verifier = batchingVerifier(batchFacts, { gatewayInstanceId: deps.gatewayInstanceId });
  const shared: SettleLeaseOptions = { facts: batchFacts, verifier, pace: sends.run, dryRun: b.dryRun };
  const failures: unknown[] = [];
  const settled = (o: LeaseOutcome) => {
    if (!b.dryRun) b.onSettled?.(o);
    b.entry(o);
  };
  const closing: Closing[] = [];
  await mapLimit(leases, ADMIT_AT_ONCE, async (l) => {
    const v = b.byId.get(l.leaseId)!;
    const waiting = b.spareDurable ? awaitingReason(v) : null;
    if (waiting !== null)
      return void b.entry(untouched(l, v, "awaiting-readoption", "awaiting-readoption", waiting, b.dryRun));
    const guarded = typeof b.skipAttached === "function" ? b.skipAttached(l) : b.skipAttached === true;
    const attached = guarded ? attachedReason(v, b.snapshot) : null;
    if (attached !== null) return void b.entry(untouched(l, v, "skipped-live", attached.code, attached.why, b.dryRun));
    try {
      const end = b.ends.get(l.leaseId);
      const wrapperEnded = end !== undefined ? { wrapperEnded: { reason: end.reason } } : {};
      const begun = await beginSettlement(deps, l, { ...shared, verification: v, ...wrapperEnded });
      if ("outcome" in begun) settled(begun.outcome);
      else closing.push(begun);
    } catch (e) {
      failures.push(e);
    }
  });
  const kills: Promise<void>[] = [];
  const end = (c: Closing) =>
    kills.push(
      endSettlement(deps, c, shared)
        .then(settled)
        .catch((e: unknown) => void failures.push(e)),
    );
  await new Promise<void>((started) => wakeInChunks([...closing.map((c) => () => end(c)), started]));
  await Promise.all(kills);
  if (failures.length > 0) throw failures[0];
}

/**
 * The leases a reconcile looks at: this instance's in the asked states (or
 * exactly `leaseIds`, of any instance), of the asked kind, plus those whose
 * settlement an unwritable record left pending (whatever their state).
 */
async function leasesToReconcile(
  deps: LifecycleDeps,
  opts: ReconcileOptions,
): Promise<{ leases: ProcessLease[]; problems: Map<string, string> }> {
  const states = opts.states ?? ["open", "closing"];
  const ids = opts.leaseIds ? new Set(opts.leaseIds) : null;
  const listed = await deps.store.list(ids ? {} : { gatewayInstanceId: deps.gatewayInstanceId, states });
  const problems = new Map<string, string>();
  for (const p of listed.problems) problems.set(p.file, p.detail);
  if (opts.dryRun !== true && ids === null) {
    const have = new Set(listed.leases.map((l) => l.leaseId));
    for (const id of pendingOf(deps.store).keys()) {
      if (have.has(id)) continue;
      const l = await deps.store.get(id).catch(() => null);
      if (l !== null && l.gatewayInstanceId === deps.gatewayInstanceId) listed.leases.push(l);
      else if (l === null || isSettled(l)) pendingOf(deps.store).delete(id);
    }
  }
  const kind = opts.kind ?? "all";
  const leases = listed.leases.filter(
    (l) => (ids === null || ids.has(l.leaseId)) && (kind === "all" || l.kind === kind),
  );
  return { leases, problems };
}

/** Every lease verified against ONE snapshot (none taken for no lease); without a process list each verification answers "unknown": nothing is signalled. */
async function verifyBatch(
  deps: LifecycleDeps,
  leases: readonly ProcessLease[],
): Promise<{ snapshot: ProcessSnapshot | undefined; snapshots: number; byId: Map<string, LeaseVerification> }> {
  let snapshots = 0;
  if (leases.length === 0) return { snapshot: undefined, snapshots, byId: new Map() };
  const counting = countingFacts(deps.facts, () => snapshots++);
  const snapshot = await counting.snapshot().catch(() => undefined);
  const verifications = await verifyLeases(leases, counting, {
    gatewayInstanceId: deps.gatewayInstanceId,
    ...(snapshot ? { snapshot } : {}),
  });
  return { snapshot, snapshots, byId: new Map(verifications.map((v) => [v.lease.leaseId, v])) };
}

/**
 * A batch's settlements on their way to marking their lease closing at once
 * (settleTogether): enough to keep the store's IO_SLOTS busy
 * many times over. A thousand begun in one turn make their frames, promises
 * and records at once, all young and all alive when the collector next
 * runs, and that one scavenge held the loop for 35 ms (docs/benchmarks.md).
 */
export const ADMIT_AT_ONCE = 64;
