/**
 * The OS-level process-tree kill: TERM leaves first, a grace period, KILL to
 * what is left, over the tree that exists NOW under `pid` (its descendants,
 * and its group when it leads one). It owns no rule of its own: targets come
 * from the ownership collector (which already drops pid <= 1, this process,
 * its parent and our ancestors), every signal goes through the ownership
 * reaper (identity re-checked per process, pidfd on Linux), and the guards
 * are asked first. So it can never reach the caller's own process group: a
 * root that does not lead its own group contributes no group at all.
 */
import { getProcessFacts } from "../facts/get.js";
import { createSignaller } from "../facts/signal.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller } from "../facts/types.js";
import { assertPid } from "../facts/validate.js";
import { collectTree } from "../ownership/collect.js";
import { checkGroupSignal, checkSignalTarget } from "../ownership/guards.js";
import { reapOwnedTree, type ReapReport } from "../ownership/reap.js";

export interface KillProcessTreeOptions {
  /** ms between TERM and KILL; default 3000 (the ownership reaper's default) */
  graceMs?: number;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
}

export type KillTreeResult =
  /** the tree was reaped; the report says per process what happened */
  | { outcome: "reaped"; pid: number; members: number; report: ReapReport }
  /** no live process with that pid (or only its zombie) */
  | { outcome: "gone"; pid: number }
  /** a guard refused the root: nothing was sent */
  | { outcome: "refused"; pid: number; reason: string }
  /** the facts backend cannot see processes: nothing was sent (fail closed) */
  | { outcome: "unknown"; pid: number; reason: string };

export const DEFAULT_KILL_GRACE_MS = 3000;

/** Validates `pid` (TypeError/RangeError naming it), then kills its live tree. */
export async function killProcessTree(pid: number, opts: KillProcessTreeOptions = {}): Promise<KillTreeResult> {
  assertPid(pid, "pid");
  if (opts.graceMs !== undefined && (!Number.isFinite(opts.graceMs) || opts.graceMs < 0)) {
    throw new RangeError(`graceMs must be a finite number >= 0, got ${opts.graceMs}`);
  }
  const guard = checkSignalTarget(pid);
  if (!guard.allowed) return { outcome: "refused", pid, reason: guard.reason };
  const facts = opts.facts ?? getProcessFacts();
  if (facts.identityStrength === "none") {
    return { outcome: "unknown", pid, reason: `facts backend "${facts.backend}" cannot verify process identity` };
  }
  const snapshot = await facts.snapshot();
  const root = snapshot.processes.get(pid);
  if (!root || root.state === "Z") return { outcome: "gone", pid };
  const members = collectTree(snapshot, root, { pgid: ownGroupOf(root) });
  if (members.length === 0) {
    return { outcome: "refused", pid, reason: `pid ${pid} is this process or one of its ancestors` };
  }
  const signaller = opts.signaller ?? defaultSignaller(facts);
  const report = await reapOwnedTree(
    { root, members },
    { facts, signaller, graceMs: opts.graceMs ?? DEFAULT_KILL_GRACE_MS },
  );
  return { outcome: "reaped", pid, members: members.length, report };
}

/**
 * The group to sweep with the root: only the one the root itself leads, and
 * only if the group guard would accept it (never our own group, never the one
 * led by us or our parent). A root sitting in someone else's group (ours,
 * typically: a non-detached child) contributes descendants only.
 * The proofs passed are "true" because no group signal is ever sent: members
 * are signalled one by one, each identity-checked by the reaper, and the
 * leader is the live root itself. The guard is asked for its hard refusals.
 */
function ownGroupOf(root: ProcessInfo): number | undefined {
  if (root.pgid !== root.pid) return undefined;
  const verdict = checkGroupSignal(root.pgid, { groupVerifiedAsOwn: true, leaderIsVerifiedRoot: true });
  return verdict.allowed ? root.pgid : undefined;
}

const signallers = new WeakMap<ProcessFacts, ProcessSignaller>();
function defaultSignaller(facts: ProcessFacts): ProcessSignaller {
  let s = signallers.get(facts);
  if (!s) {
    s = createSignaller(facts);
    signallers.set(facts, s);
  }
  return s;
}

