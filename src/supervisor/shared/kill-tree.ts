/**
 * The OS-level process-tree kill: TERM leaves first, a grace period, KILL to
 * what is left, over the tree that exists NOW under `pid` (its descendants,
 * and the members of its group when it leads one). It owns no rule of its
 * own: targets come from the ownership collector (which already drops pid
 * <= 1, this process, its parent and our ancestors), every signal goes
 * through ownership's tree kill (tree-kill.ts: identity re-checked per process,
 * pidfd on Linux), and the guards are asked first.
 *
 * No group signal (kill(-pgid)) is ever sent: group members are signalled
 * one by one by that tree kill, each with the start time it had in the snapshot.
 * Sweeping a group's members is still as consequential as signalling the
 * group, so that decision asks checkGroupSignal with a proof computed from
 * the snapshot (see groupToSweep), never with literals.
 *
 * `signalProcessTree` sends one signal over the same tree, found the same
 * way (liveTree below is the only path from a pid to signalled members).
 */
import { constants } from "node:os";
import { getProcessFacts } from "../../facts/get.js";
import { createSignaller } from "../../facts/signal.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller, ProcessSnapshot, SignalOutcome } from "../../facts/types.js";
import { assertPid } from "../../facts/validate.js";
import { checkGroupSignal, checkSignalTarget, type GuardRefusal } from "../../facts/guards.js";
import { collectTree, DEFAULT_GRACE_MS, killOwnedTree } from "../../ownership/index.js";
import type { TreeKillReport } from "../../ownership/index.js";
import { compareIdentity, isKnownStartTime, sameProcess } from "../../facts/identity.js";
import { isAlive } from "../../facts/liveness.js";

export interface KillProcessTreeOptions {
  /** ms between TERM and KILL; default DEFAULT_GRACE_MS (ownership's, 3000) */
  graceMs?: number;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
  /**
   * The start time (ProcessInfo.startTime, same facts backend) the caller
   * recorded for `pid`. When given, only that exact process is the root: a
   * live pid with another start time gives "mismatch", one whose start time
   * cannot be read gives "unknown"; either way nothing is sent.
   */
  expectedStartTime?: string;
}

export type KillTreeResult =
  /** the tree was killed (TERM, grace, KILL); the report says per process what happened */
  | { outcome: "killed"; pid: number; members: number; report: TreeKillReport }
  /** no live process with that pid (liveness.ts isAlive: a zombie is gone, a zombie leader whose threads run is not) */
  | { outcome: "gone"; pid: number }
  /** the pid is held by another process than `expectedStartTime` names: nothing was sent */
  | { outcome: "mismatch"; pid: number; expectedStartTime: string; actualStartTime: string }
  /** a guard refused the root (its GuardRefusal; "ancestor" too when the snapshot shows it is this process or one of its ancestors): nothing was sent */
  | { outcome: "refused"; pid: number; code: GuardRefusal; reason: string }
  /** the facts backend cannot see processes, or the root's identity could not be read: nothing was sent (fail closed) */
  | { outcome: "unknown"; pid: number; reason: string };

/** Options of the one-signal tree walk: the same root pinning as killProcessTree, no grace (nothing is escalated). */
export type SignalProcessTreeOptions = Omit<KillProcessTreeOptions, "graceMs">;

/** What happened to one member of the tree: the signaller's typed outcome (nothing is sent to a zombie: "gone"). */
export interface TreeSignalResult {
  pid: number;
  startTime: string;
  outcome: SignalOutcome;
}

export type SignalTreeResult =
  /** every member was handed to the identity-checked signaller, leaves first, root last */
  | { outcome: "signalled"; pid: number; signal: NodeJS.Signals; members: number; results: TreeSignalResult[] }
  | Exclude<KillTreeResult, { outcome: "killed" }>;

/** Validates `pid` (TypeError/RangeError naming it), then kills its live tree. */
export async function killProcessTree(pid: number, opts: KillProcessTreeOptions = {}): Promise<KillTreeResult> {
  assertPid(pid, "pid");
  if (opts.graceMs !== undefined && (!Number.isFinite(opts.graceMs) || opts.graceMs < 0)) {
    throw new RangeError(`graceMs must be a finite number >= 0, got ${opts.graceMs}`);
  }
  const t = await liveTree(pid, opts);
  if (!("members" in t)) return t;
  const report = await killOwnedTree(
    { root: t.root, members: t.members },
    { facts: t.facts, signaller: t.signaller, graceMs: opts.graceMs ?? DEFAULT_GRACE_MS },
  );
  return { outcome: "killed", pid, members: t.members.length, report };
}

/**
 * One signal to the live tree of `pid` (SIGSTOP/SIGCONT to pause a run,
 * SIGINT to interrupt it, SIGTERM without the escalation): the same
 * validation, guards, root pinning (`expectedStartTime`) and tree collection
 * as killProcessTree, then `signal` once per member through the
 * identity-checked signaller, leaves first and the root last. Nothing waits
 * and nothing escalates: the result says what each member's signal did.
 */
export async function signalProcessTree(
  pid: number,
  signal: NodeJS.Signals,
  opts: SignalProcessTreeOptions = {},
): Promise<SignalTreeResult> {
  const table = constants.signals as Readonly<Record<string, number | undefined>>;
  if (typeof signal !== "string" || table[signal] === undefined) {
    throw new TypeError(`signal must be a signal name such as "SIGTERM", got ${JSON.stringify(signal)}`);
  }
  const t = await liveTree(pid, opts);
  if (!("members" in t)) return t;
  const results: TreeSignalResult[] = [];
  for (const m of t.members) {
    const startTime = String(m.startTime);
    // a member that is not alive (liveness.ts) has nothing left to receive the signal
    const outcome: SignalOutcome = isAlive(m) ? await t.signaller.signal(m.pid, startTime, signal) : "gone";
    results.push({ pid: m.pid, startTime, outcome });
  }
  return { outcome: "signalled", pid, signal, members: t.members.length, results };
}

interface LiveTree {
  root: ProcessInfo;
  members: ProcessInfo[];
  facts: ProcessFacts;
  signaller: ProcessSignaller;
}

/**
 * The one path from a pid to the tree that may be signalled, shared by
 * killProcessTree and signalProcessTree: argument checks, the guards, facts
 * that can verify identity, the root pinned to `expectedStartTime`, and the
 * collection (descendants, plus the group's members when the snapshot proves
 * the root leads it). Anything short of that is the result itself.
 */
async function liveTree(
  pid: number,
  opts: SignalProcessTreeOptions,
): Promise<LiveTree | Exclude<KillTreeResult, { outcome: "killed" }>> {
  assertPid(pid, "pid");
  const expected = opts.expectedStartTime;
  if (expected !== undefined && (typeof expected !== "string" || !isKnownStartTime(expected))) {
    throw new TypeError(`expectedStartTime must be a decimal start-time string, got ${JSON.stringify(expected)}`);
  }
  const guard = checkSignalTarget(pid);
  if (!guard.allowed) return { outcome: "refused", pid, code: guard.code, reason: guard.reason };
  const facts = opts.facts ?? getProcessFacts();
  if (facts.identityStrength === "none") {
    return { outcome: "unknown", pid, reason: `facts backend "${facts.backend}" cannot verify process identity` };
  }
  const snapshot = await facts.snapshot();
  const root = snapshot.processes.get(pid);
  if (!root || !isAlive(root)) return { outcome: "gone", pid };
  if (expected !== undefined) {
    const same = compareIdentity(root, { pid, startTime: expected });
    if (same === "unknown") {
      return {
        outcome: "unknown",
        pid,
        reason: `the start time of pid ${pid} could not be read, so it cannot be matched to ${expected}`,
      };
    }
    if (same === "different")
      return { outcome: "mismatch", pid, expectedStartTime: expected, actualStartTime: String(root.startTime) };
  }
  const members = collectTree(snapshot, root, { pgid: groupToSweep(snapshot, root) });
  if (members.length === 0) {
    return { outcome: "refused", pid, code: "ancestor", reason: `pid ${pid} is this process or one of its ancestors` };
  }
  return { root, members, facts, signaller: opts.signaller ?? defaultSignaller(facts) };
}

/**
 * The group whose members are swept with the root, or undefined. The proof
 * handed to the group guard is what this snapshot establishes:
 * - leaderIsVerifiedRoot: the snapshot's process at pid == pgid is the root
 *   itself (same pid and start time, alive by liveness.ts). The root is the process
 *   the caller named (and, with expectedStartTime, the one it recorded).
 * - groupVerifiedAsOwn: the group is the root's own, i.e. the root leads it
 *   (pgid == pid). A pgid cannot be handed to a new process while its leader
 *   lives, so every member is in the group the root created.
 * A root sitting in someone else's group (ours, typically: a non-detached
 * child) contributes descendants only. The guard adds its hard refusals: never
 * our own group, never the one led by us or our parent, and every group when
 * our own group is unknown.
 */
export function groupToSweep(snapshot: ProcessSnapshot, root: ProcessInfo): number | undefined {
  const leader = snapshot.processes.get(root.pgid);
  const leaderIsVerifiedRoot = leader !== undefined && sameProcess(leader, root) && isAlive(leader);
  const groupVerifiedAsOwn = root.pgid === root.pid;
  // the guard decides: it refuses an unproven group as well as the forbidden ones
  const verdict = checkGroupSignal(root.pgid, { groupVerifiedAsOwn, leaderIsVerifiedRoot });
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
