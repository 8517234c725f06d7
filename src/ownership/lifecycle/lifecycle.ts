/**
 * The one place a lease moves. Ending a lease goes through settleLease or
 * reconcileLeases, so the sequence
 *
 *   verify → mark closing → kill what the verification proves ours →
 *   (our own lever: the lifeline) → verify again → drain the lease's cgroup
 *   → settle by settle.ts
 *
 * is written once. Both return one neutral outcome type (LeaseOutcome).
 *
 * - settleLease: one lease, now. The caller may hand in a verification it
 *   already has (a batch's), a `release` (its own pipe to a wrapper it
 *   spawned: closing it makes the wrapper clean up its tree, which is our
 *   lever, not a signal) and what it witnessed (the root's exit reported by
 *   its own child handle, or an earlier tree kill not derived from the
 *   lease). A release is pulled first when the verification is "unknown"
 *   (nothing may be signalled, but the wrapper may still be told to clean
 *   up), else after the kill; when it was the only thing that ran, the lease
 *   is verified again and whatever that proves ours is killed too.
 * - reconcileLeases (reconcile.ts): the batch form: ONE snapshot for every
 *   lease's verification, then settleLease's two halves per lease with that
 *   verification (beginSettlement, endSettlement). A dry run changes
 *   nothing and says, per lease, what the same code would do.
 *
 * The settlement rule itself (which state after which evidence, the
 * cgroup drain and a dry run included) is settle.ts's table; this module
 * runs the steps that feed it, applies its answer (applySettlement) and is
 * the only caller of the store's transitions outside the store.
 *
 * Ending a verified tree never waits on the disk. When the lease record
 * cannot be written (host-faults.ts LeaseRecordWriteError: a full, read-only
 * or failing disk, a removed or unwritable state dir), the sequence goes on
 * without the writes: what the verification proved ours is killed and its
 * cgroup drained, the record stays as it was on disk (writes are temp +
 * rename: never half-written), and the outcome says the settlement is
 * pending and why (LeaseOutcome.pending). The settlement is remembered for
 * the store (in this process) and the next reconcileLeases that can write
 * settles it, whatever states it was asked for: the tree ended under our
 * eyes, so a root found gone then settles closed. After a restart the
 * memory is gone, and the record (open or closing) is settled like any
 * other by the startup reap.
 */
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import {
  cgroupMembers,
  drainEvidence,
  drainLeaseCgroup,
  lookIntoLeaseCgroup,
  type CgroupDrain,
  type DrainDeps,
} from "../terminate/cgroup-drain.js";
import {
  actionFor,
  outcomeOf,
  untouched,
  type LeaseAction,
  type LeaseOutcome,
  type LeaseOutcomeCode,
} from "./lease-outcome.js";
import type { LeaseStore } from "../leases/lease-store.js";
import { TERMINAL_STATES, isLegalTransition } from "../leases/lease-record.js";
import type { TreeKillReport } from "../terminate/tree-kill.js";
import { killLeaseVerification, killTargetOf, type LeaseKillResult } from "../terminate/kill-verification.js";
import { sharedVerifier, type LeaseVerifier } from "../verify/verify-batching.js";
import {
  drainsCgroup,
  isOtherInstance,
  settlementAfterKill,
  settlementFor,
  settlementForDryRun,
  settlementUnstarted,
  type Settlement,
  type SettlementTarget,
  type SettleContext,
} from "./settle.js";
import type { LeaseSettledAs, LeaseState, ProcessLease } from "../leases/types.js";
import type { LeaseVerification } from "../verify/verify.js";
import { pendingOf, writeGuard, type PendingSettlement } from "./pending-settlements.js";
import type { Pacer } from "../verify/batch-facts.js";

export type { LeaseAction, LeaseOutcome, LeaseOutcomeCode, PendingSettlement };

export interface LifecycleDeps {
  store: LeaseStore;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  graceMs: number;
  /** the gateway these leases belong to; a lease of another instance is never moved */
  gatewayInstanceId: string;
}

export interface SettleLeaseOptions {
  /** a verification already made (a batch's); else one is made now */
  verification?: LeaseVerification;
  /** facts for the kills (a batch shares a coalescing one) */
  facts?: ProcessFacts;
  /** makes the re-verification after a kill (a batch shares a batching one: verify-batching.ts) */
  verifier?: LeaseVerifier;
  /**
   * the caller's own lever on the root: ends the lifeline and waits for its
   * wrapper child; says whether that child reported the root's exit
   */
  release?: () => Promise<ReleaseResult>;
  /** runs after the lease is marked closing and before any signal (a live session fails its prompt here) */
  beforeSignals?: () => void | Promise<void>;
  /** runs the kills' signal sends (a batch shares one: batch-facts.ts slicedRunner) */
  pace?: Pacer;
  /** the root's exit was reported by the caller's own handle (its child, unreaped until then) */
  rootExitObserved?: boolean;
  /** a kill the caller ran earlier, not derived from this lease (a plain tree kill): it never settles anything by itself */
  prior?: TreeKillReport | null;
  /** the root's wrapper's record that it ended the tree itself (end-records.ts): names who did, never signals */
  wrapperEnded?: SettleContext["wrapperEnded"];
  /**
   * false: verify and settle, never signal (a supervised run that ended on
   * its own: what it left running, a daemonised child, is not killed by its
   * exit, as in OpenClaw; the lease stays closing and reconcile decides).
   * Default true.
   */
  kill?: boolean;
  dryRun?: boolean;
}

/**
 * What pulling a release witnessed. `rootExitObserved`: the caller's own
 * child (the wrapper, which the adapter never outlives as a parent: it reaps
 * it) reported the root's exit after the lifeline closed. That is the same
 * evidence as a supervised run's exit seen on its own handle, so "nothing of
 * ours is left" then reads closed (settle.ts, the prior rule and row D1),
 * never lost: the tree ended under our eyes, at our request.
 */
export interface ReleaseResult {
  rootExitObserved: boolean;
}

/** A lease as it stands, verified now (or with the given verification), killed where proven ours, and settled. */
export async function settleLease(
  deps: LifecycleDeps,
  lease: ProcessLease,
  opts: SettleLeaseOptions = {},
): Promise<LeaseOutcome> {
  const begun = await beginSettlement(deps, lease, opts);
  if ("outcome" in begun) return begun.outcome;
  await opts.beforeSignals?.();
  return endSettlement(deps, begun, opts);
}

/**
 * A settlement past its move to closing and before any signal. Plain data,
 * no suspended frame: a batch holds a thousand of these at once while their
 * kills wait to start together, and each object it holds is copied by every
 * young collection it survives (docs/benchmarks.md).
 */
export interface Closing {
  cur: ProcessLease;
  v: LeaseVerification;
  ctx: SettleContext & { prior: TreeKillReport | null };
  writes: ReturnType<typeof writeGuard>;
}

/** settleLease's first half: the lease as stored, verified, and marked closing; or its outcome when nothing more is to be done. */
export async function beginSettlement(
  deps: LifecycleDeps,
  lease: ProcessLease,
  opts: SettleLeaseOptions,
): Promise<{ outcome: LeaseOutcome } | Closing> {
  const dryRun = opts.dryRun === true;
  // with a verification in hand, a real settlement's first read of the record is its move to closing (below)
  const cur =
    opts.verification !== undefined && !dryRun
      ? lease
      : ((await deps.store.get(lease.leaseId).catch(() => null)) ?? lease);
  const v = opts.verification ?? (await verify(deps, cur));
  if (isSettled(cur)) return { outcome: alreadySettled(deps, cur, v, dryRun) };
  // a settlement left pending by an earlier attempt: the tree ended then, under our eyes
  const earlier = dryRun ? undefined : pendingOf(deps.store).get(cur.leaseId);
  const ctx = {
    rootExitObserved: opts.rootExitObserved === true || earlier?.ended === true,
    prior: opts.prior ?? earlier?.prior ?? null,
    wrapperEnded: opts.wrapperEnded ?? null,
  };
  if (dryRun) return { outcome: await planDryRun(deps, cur, v, ctx) };
  // another gateway instance's lease is not ours to move at all (settle.ts row 8)
  if (isOtherInstance(v)) {
    const s = settlementFor(v, null);
    return { outcome: untouched(cur, v, "left-alone", s.code, s.why, false) };
  }
  // the record may be unwritable (a full disk): the tree is ended all the same
  const writes = writeGuard();
  const now = await writes.run(() => moveToClosing(deps.store, cur.leaseId));
  // the record as stored, read under its lock: a concurrent settle that won leaves its state standing
  if (now !== null && isSettled(now)) return { outcome: alreadySettled(deps, now, v, false) };
  return { cur, v, ctx, writes };
}

/** closed or lost: terminal (lease-record.ts), never moved again. */
export function isSettled(l: ProcessLease): boolean {
  return TERMINAL_STATES.has(l.state);
}

/** A lease a concurrent settle (or an earlier one) already settled: its state stands, and nothing is pending for it. */
function alreadySettled(deps: LifecycleDeps, cur: ProcessLease, v: LeaseVerification, dryRun: boolean): LeaseOutcome {
  pendingOf(deps.store).delete(cur.leaseId);
  return untouched(cur, v, "left-alone", "already-settled", `already ${cur.state}`, dryRun);
}

/** What the same code would do, from the same table (settle.ts rows R), changing nothing. */
async function planDryRun(
  deps: LifecycleDeps,
  cur: ProcessLease,
  v: LeaseVerification,
  ctx: SettleContext,
): Promise<LeaseOutcome> {
  const t = killTargetOf(v);
  const contained = (await cgroupMembers(cur, drainDeps(deps))) ?? [];
  const members = t === "tree" ? v.tree!.members : t === "remnants" ? v.remnants!.members : [];
  const pids = [...new Set([...members.map((m) => m.pid), ...contained])];
  const s = settlementForDryRun(v, { target: t, pids, contained: contained.length }, ctx);
  const to = s.to === "unchanged" ? cur.state : s.to;
  const how = { code: s.code, why: s.why, ...(s.settledAs ? { settledAs: s.settledAs } : {}) };
  if (!s.kills)
    return outcomeOf(cur, v, v, true, { stateAfter: to, action: actionFor(to, cur.state, null, false), ...how });
  return outcomeOf(cur, v, v, true, {
    stateAfter: to,
    action: t === "tree" ? "killed" : "killed-remnants",
    ...how,
    target: t ?? "remnants",
    wouldKill: pids,
  });
}

/** What the verify → kill → release → verify steps leave for the settlement. */
interface Killed {
  /** the verification that decided what to kill (reported as the verdict) */
  decided: LeaseVerification;
  /** the last verification made */
  v: LeaseVerification;
  /** what the report's why starts with */
  note: string;
  /** the kill of what was proven ours (null: none ran) */
  last: LeaseKillResult | null;
  /** what the first kill took */
  firstTarget: "tree" | "remnants" | null;
  /** the release reported the root's exit (ReleaseResult) */
  exitObserved: boolean;
}

/** settleLease's second half: kill → (release) → drain → settle by the table → write (or leave pending). */
export async function endSettlement(
  deps: LifecycleDeps,
  { cur, v: v0, ctx, writes }: Closing,
  opts: SettleLeaseOptions,
): Promise<LeaseOutcome> {
  const r = await killAndRelease(deps, cur, v0, opts);
  const seen = { ...ctx, rootExitObserved: ctx.rootExitObserved || r.exitObserved };
  const settle = (drain: CgroupDrain | null): Settlement =>
    r.last !== null ? settlementAfterKill(r.last, { ...seen, drain }) : settlementFor(r.v, null, { ...seen, drain });
  // the lease's own cgroup (cgroup-drain.ts) holds every process it started: emptied as a unit after the kill,
  // or, without a kill, only looked into; what it found is the table's last input (settle.ts rows D)
  const drain = !drainsCgroup(settle(null))
    ? null
    : opts.kill !== false
      ? await drainLeaseCgroup(cur, { graceMs: deps.graceMs, signaller: deps.signaller, ...drainDeps(deps) })
      : await lookIntoLeaseCgroup(cur);
  const s = settle(drain);
  const kill = r.last?.report ?? null;
  // processes ended through the cgroup alone count as remnants killed
  const drained = drain !== null && drain.members > 0;
  const target = r.firstTarget ?? r.last?.target ?? (drained ? "remnants" : null);
  const prior = ctx.prior;
  const ended = seen.rootExitObserved || r.last !== null || drained || prior !== null;
  const { stateAfter, settledAs, pending } = await writeSettlement(deps.store, cur, s, writes, {
    ended,
    prior: kill ?? prior,
  });
  const why = pending
    ? `${r.note}${s.why}; settlement pending (${pending.to}): ${pending.blockedBy}; the next reconcile that can write settles it`
    : `${r.note}${s.why}`;
  return outcomeOf(cur, r.decided, r.last?.final ?? r.v, false, {
    stateAfter,
    action: actionFor(stateAfter, cur.state, target, kill !== null || drained),
    code: s.code,
    ...(settledAs ? { settledAs } : {}),
    why,
    target,
    kill,
    ...(drain ? { evidence: [...r.decided.evidence, ...drainEvidence(drain)] } : {}),
    ...(pending ? { pending } : {}),
  });
}

/**
 * Kills what the verification proves ours, with the caller's release: pulled
 * first when the verdict is "unknown" (nothing may be signalled, but our own
 * wrapper child can still be told to clean up; its exit proves nothing about
 * its tree, so the facts are asked once more), else after the kill; when the
 * release was the only thing that ran, what it left is verified (and killed)
 * now.
 */
async function killAndRelease(
  deps: LifecycleDeps,
  cur: ProcessLease,
  v0: LeaseVerification,
  opts: SettleLeaseOptions,
): Promise<Killed> {
  const facts = opts.facts ?? deps.facts;
  const mayKill = opts.kill !== false;
  const killNow = (v: LeaseVerification) =>
    mayKill ? killProven(deps, v, { facts, verifier: opts.verifier, pace: opts.pace }) : Promise.resolve(null);
  const again = async (v: LeaseVerification) => (await verify(deps, cur).catch(() => null)) ?? v;
  let released = false;
  let exitObserved = false;
  const release = async () => {
    if (released || !opts.release) return;
    released = true;
    exitObserved = (await opts.release()).rootExitObserved;
  };
  let v = v0;
  let decided = v0;
  let note = "";
  if (v.verdict === "unknown" && opts.release) {
    await release();
    v = decided = await again(v);
    note = "the wrapper was told to clean up (its lifeline closed); its exit proves nothing about its tree; ";
  }
  let last = await killNow(v);
  const firstTarget = last?.target ?? null;
  if (opts.release && !released) {
    await release();
    if (last === null) {
      v = await again(v);
      last = await killNow(v);
    }
  }
  return { decided, v, note, last, firstTarget, exitObserved };
}

/**
 * The one sequence for a spawn that failed before a process of it was known:
 * the lease's cgroup, if it was made, is drained and removed (cgroup-drain.ts:
 * anything born in it is ended, and populated 0 is the proof nothing is
 * left), then the lease settles by settle.ts rows U. `lease` may name a
 * cgroup the record could not take (its write failed): that one is drained
 * too. A record that cannot be written leaves the settlement pending, as in
 * settleLease.
 */
export async function settleUnstarted(
  deps: LifecycleDeps,
  lease: ProcessLease,
): Promise<{ state: LeaseState; settledAs?: LeaseSettledAs; pending?: PendingSettlement }> {
  const stored = await deps.store.get(lease.leaseId).catch(() => null);
  const cur = stored ?? lease;
  if (isSettled(cur)) return { state: cur.state, ...(cur.settledAs ? { settledAs: cur.settledAs } : {}) };
  const cgroup = cur.cgroup ?? lease.cgroup;
  const drain = cgroup
    ? await drainLeaseCgroup(
        { ...cur, cgroup },
        { graceMs: deps.graceMs, signaller: deps.signaller, ...drainDeps(deps) },
      )
    : null;
  const { stateAfter, settledAs, pending } = await writeSettlement(
    deps.store,
    cur,
    settlementUnstarted(drain),
    writeGuard(),
    { ended: true, prior: null },
  );
  return { state: stateAfter, ...(settledAs ? { settledAs } : {}), ...(pending ? { pending } : {}) };
}

/**
 * applySettlement through the write guard: when the record cannot be
 * written, the state reported is the one on disk (never half-written) and
 * the settlement is remembered for the next reconcile.
 */
async function writeSettlement(
  store: LeaseStore,
  cur: ProcessLease,
  s: Settlement,
  writes: ReturnType<typeof writeGuard>,
  memo: { ended: boolean; prior: TreeKillReport | null },
): Promise<{ stateAfter: LeaseState; settledAs?: LeaseSettledAs; pending?: PendingSettlement }> {
  const settled = await writes.run(() => applySettlement(store, cur.leaseId, s));
  if (settled !== null || writes.error === null) {
    pendingOf(store).delete(cur.leaseId);
    const settledAs = settled?.settledAs;
    return { stateAfter: settled?.state ?? cur.state, ...(settledAs ? { settledAs } : {}) };
  }
  const stateAfter = (await store.get(cur.leaseId).catch(() => null))?.state ?? cur.state;
  if (s.to === "unchanged" || s.to === stateAfter) return { stateAfter };
  pendingOf(store).set(cur.leaseId, memo);
  return {
    stateAfter,
    pending: { to: s.to, settlement: s.code, why: s.why, errno: writes.error.code, blockedBy: writes.error.message },
  };
}

/**
 * Moves the lease as `s` says (settle.ts's answer; NOTHING_STARTED for a
 * spawn that never produced a process), through the legal transitions (see
 * nextState). Each step is decided on the record as stored at that moment,
 * under its lock (store.advance): a concurrent settle that won leaves its
 * state standing. Returns the lease as stored afterwards (null when it no
 * longer exists).
 */
export async function applySettlement(store: LeaseStore, leaseId: string, s: Settlement): Promise<ProcessLease | null> {
  if (s.to === "unchanged") return store.get(leaseId);
  const target = s.to;
  // how it ended is written with the final state (settle.ts sets it for every closed or lost row)
  const patch = s.settledAs ? { settledAs: s.settledAs } : undefined;
  const step = (cur: ProcessLease) => {
    const to = nextState(cur.state, target);
    return to === null ? null : { to, ...(to === target && patch ? { patch } : {}) };
  };
  let cur = await store.advance(leaseId, step);
  // open → closing → closed|lost is two steps; each reads the record again, so at most two more are needed
  for (let i = 0; i < 2 && cur !== null && nextState(cur.state, target) !== null; i++)
    cur = await store.advance(leaseId, step);
  return cur;
}

/**
 * The next state on the way from `from` to a settlement's target, through
 * the legal transitions alone (lease-record.ts isLegalTransition): the
 * target itself when that move is legal, else closing when the target is
 * legal from there (open → closing → closed|lost); null when the lease is
 * there already or no legal way leads there (a lease closed or lost never
 * moves; open is reached only from closing).
 */
function nextState(from: LeaseState, to: Exclude<SettlementTarget, "unchanged">): LeaseState | null {
  if (from === to) return null;
  if (isLegalTransition(from, to)) return to;
  return isLegalTransition(from, "closing") && isLegalTransition("closing", to) ? "closing" : null;
}

/** open → closing through the store; a lease already past open is returned as stored (null: it no longer exists). */
function moveToClosing(store: LeaseStore, leaseId: string): Promise<ProcessLease | null> {
  return store.advance(leaseId, (cur) => (cur.state === "open" ? { to: "closing" } : null));
}

/** What a drain reads besides the cgroup: the facts, and this instance's leases (where another lease's process goes back to). */
function drainDeps(deps: LifecycleDeps): DrainDeps {
  return {
    facts: deps.facts,
    leaseOf: async (id) => {
      const l = await deps.store.get(id).catch(() => null);
      return l !== null && l.gatewayInstanceId === deps.gatewayInstanceId ? l : null;
    },
  };
}

/** through the gateway's shared verifier: settlements under way at once share one snapshot and env pass */
function verify(deps: LifecycleDeps, lease: ProcessLease): Promise<LeaseVerification> {
  return sharedVerifier(deps.facts, deps.gatewayInstanceId)(lease);
}

/** Kills what the verification proves ours (killLeaseVerification's one choice); null when nothing is. */
async function killProven(
  deps: LifecycleDeps,
  v: LeaseVerification,
  batch: { facts: ProcessFacts; verifier: LeaseVerifier | undefined; pace: Pacer | undefined },
): Promise<LeaseKillResult | null> {
  if (killTargetOf(v) === null) return null;
  const verifier = batch.verifier ?? sharedVerifier(deps.facts, deps.gatewayInstanceId);
  const shared = { verify: verifier, ...(batch.pace ? { pace: batch.pace } : {}) };
  return killLeaseVerification(v, {
    facts: batch.facts,
    signaller: deps.signaller,
    graceMs: deps.graceMs,
    gatewayInstanceId: deps.gatewayInstanceId,
    ...shared,
  });
}
