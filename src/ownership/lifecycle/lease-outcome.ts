/**
 * What the lifecycle reports per lease (LeaseOutcome), and the small rules
 * that word it: which action a move reads as, an outcome for a lease left
 * untouched, and the attached rule for a lease a running gateway may hold.
 */
import type { ProcessSnapshot } from "../../facts/types.js";
import type { PendingSettlement } from "./pending-settlements.js";
import type { TreeKillReport } from "../terminate/tree-kill.js";
import { summarizeKill, type TreeKillSummary } from "../terminate/kill-summary.js";
import type { SettlementCode } from "./settle.js";
import type { LeaseSettledAs, LeaseState, OwnershipEvidence, ProcessLease } from "../leases/types.js";
import type { LeaseVerdict, LeaseVerification } from "../verify/verify.js";

/**
 * What was done to a lease (a dry run: what would be done).
 * - killed / killed-remnants: a verified tree, or the proven remnants of a gone root, was torn down
 * - marked-lost: nothing of it could be alive; nothing signalled
 * - settled: closed without a kill of its own (an exit the caller observed, an earlier kill)
 * - left-alone: not moved to a final state (unknown evidence, another instance's lease, a
 *   closing lease retried later, a lease handed back to open)
 * - skipped-live: a lease this gateway is using right now, or (skipAttached) one a running gateway may be using
 * - awaiting-readoption: a durable session whose wrapper keeps its verified tree for a controller to re-adopt
 *   (ReconcileOptions.spareDurable); the wrapper ends it itself when its window runs out
 */
export type LeaseAction =
  "killed" | "killed-remnants" | "marked-lost" | "settled" | "left-alone" | "skipped-live" | "awaiting-readoption";

/**
 * Why, for code to read: the settlement table's row (SettlementCode), or
 * why a lease was left untouched: in-use (a session or run the caller is
 * using, a spawn in flight), and the attached rule's spawn-may-be-pending,
 * attached-to-live-parent and unknown-evidence.
 */
export type LeaseOutcomeCode =
  SettlementCode | "in-use" | "spawn-may-be-pending" | "attached-to-live-parent" | "awaiting-readoption";

export interface LeaseOutcome {
  leaseId: string;
  sessionKey: string;
  rootPid: number;
  stateBefore: LeaseState;
  /** the lease's state afterwards; in a dry run, the state it would have */
  stateAfter: LeaseState;
  dryRun: boolean;
  action: LeaseAction;
  /** why (machine-readable); `why` says it for people */
  code: LeaseOutcomeCode;
  /** how the lease ended, when `stateAfter` is closed or lost (in a dry run: would end) */
  settledAs?: LeaseSettledAs;
  /** the verdict of the verification that decided what to kill */
  verdict: LeaseVerdict;
  evidence: readonly OwnershipEvidence[];
  /** the settlement rule's reason (or why nothing was done) */
  why: string;
  /** what the kill took (a dry run: would take) */
  target: "tree" | "remnants" | null;
  /** every kill of the lease combined; null when none ran */
  kill: TreeKillReport | null;
  /** a dry run: the pids a kill would be handed, leaves first */
  wouldKill?: number[];
  /** the LAST verification (after the kill when one ran) */
  verification: LeaseVerification;
  /**
   * The settlement could not be written (the record is as it was on disk,
   * `stateAfter`): where the lease should go, why, and what refused the
   * write. The next reconcile that can write settles it.
   */
  pending?: PendingSettlement;
}

/**
 * An outcome as a report keeps it: without the last verification (it holds
 * a whole snapshot), the kill summarised, absent when none ran.
 */
export type OutcomeRow = Omit<LeaseOutcome, "verification" | "kill"> & { kill?: TreeKillSummary };

export function outcomeRow(o: LeaseOutcome): OutcomeRow {
  const { verification: _v, kill, ...rest } = o;
  return kill ? { ...rest, kill: summarizeKill(kill) } : rest;
}

/**
 * An outcome for `lease` (as it was before), decided by `decided` (its
 * verdict and evidence), with `last` the last verification made; no kill
 * unless `extra` says so.
 */
export function outcomeOf(
  lease: ProcessLease,
  decided: LeaseVerification,
  last: LeaseVerification,
  dryRun: boolean,
  o: Pick<LeaseOutcome, "stateAfter" | "action" | "code" | "why"> & Partial<LeaseOutcome>,
): LeaseOutcome {
  return {
    leaseId: lease.leaseId,
    sessionKey: lease.sessionKey,
    rootPid: lease.rootPid,
    stateBefore: lease.state,
    dryRun,
    verdict: decided.verdict,
    evidence: decided.evidence,
    target: null,
    kill: null,
    verification: last,
    ...o,
  };
}

/** A lease nothing was done to: its state (and how it ended, if it did) stays as it is. */
export function untouched(
  lease: ProcessLease,
  v: LeaseVerification,
  action: LeaseAction,
  code: LeaseOutcomeCode,
  why: string,
  dryRun: boolean,
): LeaseOutcome {
  return outcomeOf(lease, v, v, dryRun, {
    stateAfter: lease.state,
    action,
    code,
    why,
    ...(lease.settledAs ? { settledAs: lease.settledAs } : {}),
  });
}

export function actionFor(
  to: LeaseState,
  from: LeaseState,
  target: "tree" | "remnants" | null,
  killed: boolean,
): LeaseAction {
  if (killed && target !== null) return target === "tree" ? "killed" : "killed-remnants";
  if (to === "lost" && from !== "lost") return "marked-lost";
  if (to === "closed" && from !== "closed") return "settled";
  return "left-alone";
}

/**
 * The durable rule (ReconcileOptions.spareDurable): an open durable lease
 * whose tree verifies (its wrapper runs, with its start time and markers) is
 * waiting for a re-adoption, and its wrapper ends it when its window runs
 * out; nothing else about the lease is taken on trust.
 */
export function awaitingReason(v: LeaseVerification): string | null {
  const l = v.lease;
  if (l.durable === undefined || l.state !== "open" || v.verdict !== "owned" || v.tree === null) return null;
  if (l.kind === "supervisor")
    return (
      `a run of a durable session (an ACP terminal): its holder (pid ${l.rootPid}) keeps the verified tree while the session ` +
      `waits for a re-adoption, and ends it (TERM, grace, KILL) when the session's wrapper is gone`
    );
  return (
    `a durable session: its wrapper (pid ${l.rootPid}) keeps the verified tree and awaits re-adoption, ` +
    `for up to ${l.durable.reattachWithinMs} ms after its gateway went away; it ends the tree itself (TERM, grace, KILL) when nobody re-adopts it`
  );
}

/** The attached rule (ReconcileOptions.skipAttached): what a gateway that may still run could be using is left alone. */
export function attachedReason(
  v: LeaseVerification,
  snapshot: ProcessSnapshot | undefined,
): { code: LeaseOutcomeCode; why: string } | null {
  if (v.lease.rootPid === 0)
    return { code: "spawn-may-be-pending", why: "no pid recorded yet: its spawn may be pending in a running gateway" };
  if (v.verdict === "unknown")
    return { code: "unknown-evidence", why: "unknown evidence cannot tell whether a running gateway holds it" };
  const parent = v.tree?.root.ppid;
  if (parent !== undefined && parent > 1 && snapshot?.processes.has(parent)) {
    return {
      code: "attached-to-live-parent",
      why: `its root's parent (pid ${parent}) is alive: attached to a running gateway`,
    };
  }
  return null;
}
