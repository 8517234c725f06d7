/**
 * The tree kill: tears down a verified tree, leaves first, in the one kill
 * order (escalate.ts: TERM → grace → KILL).
 *
 * Every signal is per pid and goes through `ProcessSignaller.signal(pid,
 * startTime, sig)`, which re-checks that pid still is the process we verified
 * (pidfd on Linux: open, re-read start time, send). No group signal is ever
 * sent here: kill(-pgid) cannot be identity-checked per member.
 */
import { isAlive, provablyGoneAll } from "../../facts/liveness.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller, SignalOutcome } from "../../facts/types.js";
import { MAX_PID, nonNegativeOption } from "../../facts/validate.js";
import { selfAndAncestorsIn } from "../verify/collect.js";
import { checkGroupTarget, checkSignalTarget } from "../../facts/guards.js";
import { DEFAULT_GRACE_MS } from "../leases/types.js";
import { sameProcess } from "../../facts/identity.js";
import type { Pacer } from "../verify/batch-facts.js";
import { escalate } from "./escalate.js";
import type { KillTarget } from "../verify/verify-state.js";

export type TreeKillOutcome =
  | "exited-after-term"
  | "killed"
  | "gone-before-signal"
  | "identity-mismatch"
  | "permission-denied"
  | "refused-by-guard"
  | "survived"
  | "unknown";

export interface TreeKillReport {
  results: { pid: number; startTime: string; outcome: TreeKillOutcome }[];
  termSent: number;
  killSent: number;
  durationMs: number;
}

export interface TreeKillOptions {
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  /** ms to wait for exits after SIGTERM before SIGKILL (default DEFAULT_GRACE_MS, 3000) */
  graceMs?: number;
  /** ms between exit polls (default 25) */
  pollMs?: number;
  /** ms to wait for exits after SIGKILL before reporting "survived" (default 2000) */
  confirmMs?: number;
  /**
   * Overrides `target.group`. Pass only a group verified as the lease's own.
   * The re-checks after TERM and before KILL then also add processes that
   * are in this group now and were not known, each with its own start time,
   * provided they are in the session of a member that was in the group at
   * verification (a group id cannot be recycled into that session by a
   * stranger), and are neither our ancestors nor refused by the guards.
   * Never this process's own group.
   */
  group?: number;
  /** runs each signal send; a batch of kills shares one that keeps the sends in short slices (batch-facts.ts slicedRunner) */
  pace?: Pacer;
}

/**
 * What each outcome leaves behind: the one rule for "did the kill finish?",
 * so every settlement reads a report alike. The
 * Record type makes a new outcome a compile error until it is classed here.
 * - stopped: the tree kill saw the verified process exit, or found it gone.
 * - not-ours: nothing was sent and nothing of ours is there to stop: the pid
 *   now names another process (ours exited), or a guard refused it (pid <= 1,
 *   this process, its parent: never signalled, whatever a lease says).
 * - may-run: the verified process may still be alive: it survived KILL, the
 *   signal was denied (the process is there and not ours to signal from
 *   here), or its identity could not be re-established so nothing was sent.
 *   A lease with such a member must not be settled closed.
 */
const AFTER_KILL: Readonly<Record<TreeKillOutcome, "stopped" | "not-ours" | "may-run">> = Object.freeze({
  "exited-after-term": "stopped",
  killed: "stopped",
  "gone-before-signal": "stopped",
  "identity-mismatch": "not-ours",
  "refused-by-guard": "not-ours",
  "permission-denied": "may-run",
  survived: "may-run",
  unknown: "may-run",
});

/** Pids of the report whose verified process may still be running (see AFTER_KILL), in report order. */
export function survivorsOf(report: Pick<TreeKillReport, "results">): number[] {
  return report.results.filter((r) => AFTER_KILL[r.outcome] === "may-run").map((r) => r.pid);
}

/** True when nothing the tree kill was handed may still be running: the lease may be settled closed. */
export function killCompleted(report: Pick<TreeKillReport, "results">): boolean {
  return survivorsOf(report).length === 0;
}

/**
 * True only when the tree kill itself saw `pid` stop (exit after TERM or KILL,
 * or already gone). A mismatch or a guard refusal proves nothing about a
 * process the caller still holds a handle to, so it is not counted.
 */
export function killStoppedPid(report: Pick<TreeKillReport, "results">, pid: number): boolean {
  const r = report.results.find((x) => x.pid === pid);
  return r !== undefined && AFTER_KILL[r.outcome] === "stopped";
}

/** Results of two kills of one lease: a pid (with its start time) killed twice keeps its later outcome. */
export function mergeKillResults(
  a: Pick<TreeKillReport, "results">,
  b: Pick<TreeKillReport, "results">,
): TreeKillReport["results"] {
  const byKey = new Map<string, TreeKillReport["results"][number]>();
  for (const x of [...a.results, ...b.results]) {
    byKey.delete(`${x.pid}:${x.startTime}`);
    byKey.set(`${x.pid}:${x.startTime}`, x);
  }
  return [...byKey.values()];
}

type Phase = "pending" | "termed" | "killed" | "done";
interface Entry {
  pid: number;
  startTime: string;
  phase: Phase;
  outcome: TreeKillOutcome;
}

/**
 * Per pid, the report says what happened: exited after TERM, killed, gone
 * before any signal, identity mismatch (pid reused: skipped), permission
 * denied, refused by a guard, survived KILL, or unknown (the signaller could
 * not establish identity, so nothing was sent). One pid's failure never stops
 * the others. A zombie counts as exited. Children that appear under a member
 * while we tear the tree down are added (with their own start time) from one
 * fresh snapshot after TERM and one before KILL.
 */
export async function killOwnedTree(tree: KillTarget, opts: TreeKillOptions): Promise<TreeKillReport> {
  const t0 = Date.now();
  const { facts } = opts;
  const graceMs = nonNegativeOption(opts.graceMs, DEFAULT_GRACE_MS, "graceMs");
  const pollMs = Math.max(1, nonNegativeOption(opts.pollMs, 25, "pollMs"));
  const confirmMs = nonNegativeOption(opts.confirmMs, 2000, "confirmMs");
  const group = groupToWatch(
    opts.group !== undefined ? opts.group : tree.group,
    opts.group !== undefined ? "opts.group" : "target.group",
    tree,
  );

  const entries: Entry[] = [];
  const byPid = new Map<number, Entry>();
  const add = (p: ProcessInfo): Entry | null => {
    if (byPid.has(p.pid)) return null;
    const e: Entry = { pid: p.pid, startTime: String(p.startTime), phase: "pending", outcome: "unknown" };
    if (!checkSignalTarget(p.pid).allowed) {
      e.phase = "done";
      e.outcome = "refused-by-guard";
    }
    byPid.set(p.pid, e);
    entries.push(e);
    return e;
  };
  // members leaves first; the root always last even if a caller listed it earlier
  for (const m of tree.members) if (m.pid !== tree.root.pid) add(m);
  add(tree.root);
  const rootEntry = entries.pop()!;
  entries.push(rootEntry);

  let termSent = 0;
  let killSent = 0;

  await escalate(
    {
      term: async (sig) => {
        for (const e of entries) if (await termEntry(e, sig, opts)) termSent++;
        // new children forked while we were signalling: TERM them too
        for (const e of await newChildren(facts, entries, byPid, add, group))
          if (await termEntry(e, sig, opts)) termSent++;
        return true;
      },
      ended: async (ms) => {
        await pollUntil(facts, entries, "termed", "exited-after-term", ms, pollMs);
        // with a watched group, newcomers can still join it: look once more before KILL
        return group === null && !entries.some((e) => e.phase === "termed" || e.phase === "pending");
      },
      force: async (sig) => {
        for (const e of await newChildren(facts, entries, byPid, add, group)) {
          if (e.phase === "pending") e.phase = "termed"; // grace already spent: straight to KILL
        }
        for (const e of killOrder(entries, rootEntry)) if (await killEntry(e, sig, opts)) killSent++;
      },
    },
    graceMs,
  );
  await pollUntil(facts, entries, "killed", "killed", confirmMs, pollMs);
  for (const e of entries) {
    if (e.phase === "killed") {
      e.phase = "done";
      e.outcome = "survived";
    }
  }
  return {
    results: killOrder(entries, rootEntry).map((e) => ({ pid: e.pid, startTime: e.startTime, outcome: e.outcome })),
    termSent,
    killSent,
    durationMs: Date.now() - t0,
  };
}

/** Members in the order they are killed: as collected (leaves first), newcomers after them, the root last. */
function killOrder(entries: readonly Entry[], rootEntry: Entry): Entry[] {
  return [...entries.filter((e) => e !== rootEntry), rootEntry];
}

/** TERM to a pending member: true when sent (it is termed), else it is done with what the signaller found. */
async function termEntry(e: Entry, sig: "SIGTERM", opts: TreeKillOptions): Promise<boolean> {
  if (e.phase !== "pending") return false;
  const r = await send(opts.signaller, e, sig, opts.pace);
  if (r === "signalled") {
    e.phase = "termed";
    return true;
  }
  e.phase = "done";
  e.outcome = outcomeBeforeSignal(r);
  return false;
}

/** KILL to a member still there after the grace: true when sent (it is killed), else it is done. */
async function killEntry(e: Entry, sig: "SIGKILL", opts: TreeKillOptions): Promise<boolean> {
  if (e.phase !== "termed") return false;
  const r = await send(opts.signaller, e, sig, opts.pace);
  if (r === "signalled") {
    e.phase = "killed";
    return true;
  }
  e.phase = "done";
  // gone/mismatch after TERM: it exited (and the pid may already be someone else's)
  e.outcome = r === "gone" || r === "mismatch" ? "exited-after-term" : r === "denied" ? "permission-denied" : "unknown";
  return false;
}

async function send(
  signaller: ProcessSignaller,
  e: Entry,
  sig: NodeJS.Signals,
  pace: Pacer | undefined,
): Promise<SignalOutcome> {
  const now = async (): Promise<SignalOutcome> => {
    // the guard is re-asked at send time: our parent can change under us
    if (!checkSignalTarget(e.pid).allowed) return "unknown";
    return signaller.signal(e.pid, e.startTime, sig);
  };
  try {
    return await (pace ? pace(now) : now());
  } catch {
    return "unknown";
  }
}

function outcomeBeforeSignal(r: SignalOutcome): TreeKillOutcome {
  switch (r) {
    case "gone":
      return "gone-before-signal";
    case "mismatch":
      return "identity-mismatch";
    case "denied":
      return "permission-denied";
    default:
      return "unknown";
  }
}

/** Polls the entries in `phase` until each has exited or `budgetMs` passed; exited ones get `outcome`. */
async function pollUntil(
  facts: ProcessFacts,
  entries: Entry[],
  phase: Phase,
  outcome: TreeKillOutcome,
  budgetMs: number,
  pollMs: number,
): Promise<void> {
  const deadline = Date.now() + budgetMs;
  for (;;) {
    const waiting = entries.filter((e) => e.phase === phase);
    if (waiting.length === 0) return;
    // one batch per poll, however many are waiting
    const states = await provablyGoneAll(facts, waiting);
    waiting.forEach((e, i) => {
      if (states[i]) {
        e.phase = "done";
        e.outcome = outcome;
      }
    });
    if (states.every(Boolean)) return;
    const left = deadline - Date.now();
    if (left <= 0) return;
    await sleep(Math.min(pollMs, left));
  }
}

interface WatchedGroup {
  pgid: number;
  /** sessions of the target's members that were in the group when it was verified */
  sids: ReadonlySet<number>;
}

/** Validates the group argument; null when there is none or it cannot be watched safely. */
function groupToWatch(value: number | undefined, name: string, tree: KillTarget): WatchedGroup | null {
  if (value === undefined) return null;
  if (typeof value !== "number" || !Number.isInteger(value))
    throw new TypeError(`${name} must be an integer process group id, got ${String(value)}`);
  if (value <= 1 || value > MAX_PID) throw new RangeError(`${name} must be between 2 and ${MAX_PID}, got ${value}`);
  // fail closed: our own group (or one we cannot tell apart from it) is never watched
  if (!checkGroupTarget(value).allowed) return null;
  const sids = new Set<number>();
  for (const m of [...tree.members, tree.root]) if (m.pgid === value) sids.add(m.sid);
  return sids.size > 0 ? { pgid: value, sids } : null;
}

/**
 * One fresh snapshot: every process whose parent is a member we are tearing
 * down (pending, termed or killed, still alive with its recorded start time)
 * and not yet known is added, with its descendants; and with a watched group,
 * every new member of it in one of its recorded sessions (with its
 * descendants). A member the guards refused never seeds the search (its
 * children are not the lease's: it may be this process's parent), and every
 * newcomer must pass checkSignalTarget and not be an ancestor of this
 * process, or it is neither added nor walked through.
 */
async function newChildren(
  facts: ProcessFacts,
  entries: Entry[],
  byPid: Map<number, Entry>,
  add: (p: ProcessInfo) => Entry | null,
  group: WatchedGroup | null,
): Promise<Entry[]> {
  // with a watched group, newcomers can join it even after every known member exited
  if (group === null && !entries.some((e) => e.phase === "termed" || e.phase === "pending")) return [];
  let snap;
  try {
    snap = await facts.snapshot();
  } catch {
    return [];
  }
  const ancestors = selfAndAncestorsIn(snap);
  const eligible = (p: ProcessInfo) =>
    !byPid.has(p.pid) && isAlive(p) && !ancestors.has(p.pid) && checkSignalTarget(p.pid).allowed;
  const found: Entry[] = [];
  const stack: number[] = [];
  for (const e of entries) {
    if (e.phase !== "pending" && e.phase !== "termed" && e.phase !== "killed") continue;
    if (ancestors.has(e.pid) || !checkSignalTarget(e.pid).allowed) continue;
    const live = snap.processes.get(e.pid);
    if (sameProcess(live, e)) stack.push(e.pid);
  }
  const take = (p: ProcessInfo) => {
    const e = add(p);
    if (e) {
      found.push(e);
      stack.push(p.pid);
    }
  };
  if (group !== null) {
    for (const p of snap.groupMembers(group.pgid)) if (group.sids.has(p.sid) && eligible(p)) take(p);
  }
  while (stack.length > 0) {
    const parent = stack.pop()!;
    for (const c of snap.childrenOf(parent)) if (eligible(c)) take(c);
  }
  // leaves first among the newcomers
  return found.reverse();
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
