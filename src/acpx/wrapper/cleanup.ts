/**
 * The wrapper's local tree cleanup: SIGTERM to the adapter's group and to
 * every descendant, the grace period, SIGKILL to what is left. Targets come
 * from the project's one collector (collectTree) and go through the one
 * tree kill (killOwnedTree: per-pid, identity-checked, leaves first). The
 * wrapper itself is never a target: the tree is rooted at the adapter and
 * the guards refuse this process and its parent anyway.
 *
 * What counts as the wrapper's tree (all from one snapshot):
 * - the adapter and its descendants by parent links;
 * - the adapter's process group, while the adapter is an unreaped child of
 *   ours (its pid, and so its group id, cannot be reused until we reap it);
 * - every other child of the wrapper: as a Linux subreaper, orphaned
 *   descendants (double-fork, setsid escapees) are re-parented to us;
 * - processes whose environment carries our lease id AND our gateway
 *   instance id (ownership's one marker rule, markerVerdict): escapees on
 *   hosts without a subreaper, with their descendants.
 *
 * The group signals go through ./adapter-group.ts, whose proof is computed
 * from the adapter being our unreaped child, never asserted.
 */
import { isAlive, isKernelThread } from "../../facts/liveness.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller, ProcessSnapshot } from "../../facts/types.js";
import { collectTree } from "../../ownership/verify/collect.js";
import { checkSignalTarget } from "../../facts/guards.js";
import { MARKER_ENV_KEYS, markerVerdict } from "../../ownership/verify/markers.js";
import { escalate } from "../../ownership/terminate/escalate.js";
import { killOwnedTree, type TreeKillOutcome } from "../../ownership/terminate/tree-kill.js";
import { signalAdapterGroup } from "./adapter-group.js";

export interface CleanupDeps {
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  graceMs: number;
  /** our lease id, or undefined when the wrapper runs without one (no marker scan then) */
  leaseId: string | undefined;
  /** our gateway instance id (OPENCLAW_GATEWAY_INSTANCE_ID), or undefined (no marker scan then) */
  gatewayInstanceId: string | undefined;
  /** the group the wrapper created for the adapter (pgid == adapterPid by setsid), null before the spawn */
  adapterPgid: number | null;
  /** the adapter's pid while libuv has not reaped it yet, else null */
  unreapedAdapterPid: () => number | null;
  /** reaps adopted zombies found in this snapshot (subreaper only) */
  reapZombies?: (snapshot: ProcessSnapshot) => void;
  /** ms between exit polls */
  pollMs?: number;
}

/**
 * Outcomes that count as "ended": gone after our signal, or gone before the
 * per-pid signal because the group SIGTERM that opens the cleanup got there
 * first. Every target was in the tree when the snapshot was taken.
 */
const GONE: ReadonlySet<TreeKillOutcome> = new Set<TreeKillOutcome>([
  "exited-after-term",
  "killed",
  "gone-before-signal",
]);

/** Sweeps after the grace: enough for a tree that forks while it dies, bounded so cleanup always ends. */
const FINAL_SWEEPS = 3;

/** Runs the cleanup; resolves with the pids that were signalled and are gone. */
export async function cleanupTree(deps: CleanupDeps): Promise<number[]> {
  const t0 = Date.now();
  const pollMs = deps.pollMs ?? 5;
  const ended = new Set<number>();

  // The adapter's group goes through the one kill order. Its TERM goes first:
  // one syscall, needs no facts, and also reaches a member forked after the
  // snapshot below. Its grace is spent by the per-pid tree kill (its own
  // TERM → grace → KILL, identity-checked), and its KILL always follows.
  await escalate(
    {
      term: (sig) => {
        groupSignal(deps, sig);
        return true;
      },
      ended: async (graceMs) => {
        for (const pid of await killTreeWithinGrace(deps, graceMs, t0, pollMs)) ended.add(pid);
        return false;
      },
      force: (sig) => groupSignal(deps, sig),
    },
    deps.graceMs,
  );

  // Whatever appeared during the grace (a fork racing the snapshot, a child
  // adopted late) gets SIGKILL straight away: its grace has been spent.
  for (let i = 0; i < FINAL_SWEEPS; i++) {
    const snapshot = await snapshotOrNull(deps.facts);
    if (snapshot === null) break;
    deps.reapZombies?.(snapshot);
    // alive by the one rule: a zombie leader whose threads run on is still a target
    const left = (await collectTargets(snapshot, deps)).filter(isAlive);
    if (left.length === 0) break;
    const report = await killOwnedTree(
      { root: left[left.length - 1]!, members: left },
      { facts: deps.facts, signaller: deps.signaller, graceMs: 0, pollMs, confirmMs: Math.max(1000, pollMs * 10) },
    );
    for (const r of report.results) if (GONE.has(r.outcome)) ended.add(r.pid);
  }
  return [...ended].sort((a, b) => a - b);
}

/**
 * The per-pid tree kill within the group's grace (counted from `t0`, the
 * group TERM); the pids it saw end. Without facts nothing can be
 * identity-checked, so nothing is signalled per pid (fail closed): the group
 * is still provably ours while the adapter is unreaped, and gets the grace.
 */
async function killTreeWithinGrace(deps: CleanupDeps, graceMs: number, t0: number, pollMs: number): Promise<number[]> {
  const left = () => Math.max(0, graceMs - (Date.now() - t0));
  const snapshot = await snapshotOrNull(deps.facts);
  if (snapshot === null) {
    await waitForAdapter(deps, left(), pollMs);
    return [];
  }
  const members = await collectTargets(snapshot, deps);
  if (members.length === 0) return [];
  const report = await killOwnedTree(
    { root: members[members.length - 1]!, members },
    { facts: deps.facts, signaller: deps.signaller, graceMs: left(), pollMs, confirmMs: Math.max(1000, pollMs * 10) },
  );
  return report.results.filter((r) => GONE.has(r.outcome)).map((r) => r.pid);
}

/**
 * The wrapper's tree in kill order (leaves first), from one snapshot plus
 * an environment read per candidate for the lease marker.
 */
export async function collectTargets(
  snapshot: ProcessSnapshot,
  deps: Pick<CleanupDeps, "facts" | "leaseId" | "gatewayInstanceId" | "unreapedAdapterPid">,
): Promise<ProcessInfo[]> {
  const self = process.pid;
  const adapterPid = deps.unreapedAdapterPid();
  const seeds = new Set<number>();
  for (const c of snapshot.childrenOf(self)) seeds.add(c.pid);
  for (const pid of await markerPids(snapshot, deps.facts, deps.leaseId, deps.gatewayInstanceId)) seeds.add(pid);

  const adapter = adapterPid === null ? undefined : snapshot.processes.get(adapterPid);
  const root = adapter && adapter.ppid === self ? adapter : firstSeed(snapshot, seeds);
  if (root === undefined) return [];
  seeds.delete(root.pid);
  return collectTree(snapshot, root, {
    markerPids: seeds,
    ...(adapter && adapter.ppid === self ? { pgid: adapter.pid } : {}),
  });
}

function firstSeed(snapshot: ProcessSnapshot, seeds: ReadonlySet<number>): ProcessInfo | undefined {
  for (const pid of seeds) {
    const p = snapshot.processes.get(pid);
    if (p && checkSignalTarget(pid).allowed) return p;
  }
  return undefined;
}

/**
 * Pids whose environment proves them ours by ownership's one marker rule
 * (markerVerdict: lease id AND gateway instance id). Only processes whose
 * environment we can read are candidates (same uid, or any when we are
 * root); kernel threads and processes that are not alive (liveness.ts) have
 * no environment to carry it; and a
 * process started before this wrapper cannot have inherited the environment
 * the gateway gave us (on a busy host this skips nearly every environment
 * read).
 */
async function markerPids(
  snapshot: ProcessSnapshot,
  facts: ProcessFacts,
  leaseId: string | undefined,
  gatewayInstanceId: string | undefined,
): Promise<number[]> {
  // Without both markers in our own environment there is nothing to compare
  // against: a lease id alone could be another installation's copy of a
  // state dir. Nothing is found by marker then; parent links (and, on Linux
  // with the addon, the subreaper) still find the adapter's tree.
  if (leaseId === undefined || leaseId === "" || gatewayInstanceId === undefined || gatewayInstanceId === "") return [];
  const lease = { leaseId, gatewayInstanceId };
  const uid = typeof process.getuid === "function" ? process.getuid() : -1;
  const ourStart = decimal(snapshot.processes.get(process.pid)?.startTime);
  const candidates: number[] = [];
  for (const p of snapshot.processes.values()) {
    if (p.pid === process.pid || p.pid <= 1 || isKernelThread(p) || !isAlive(p)) continue;
    if (uid !== 0 && p.uid !== uid) continue;
    const start = decimal(p.startTime);
    // same unit: both come from the same backend's snapshot
    if (ourStart !== null && start !== null && start < ourStart) continue;
    candidates.push(p.pid);
  }
  const found: number[] = [];
  await Promise.all(
    candidates.map(async (pid) => {
      try {
        const d = await facts.inspect(pid, { envKeys: MARKER_ENV_KEYS });
        if (markerVerdict(d, lease) === "match") found.push(pid);
      } catch {
        // unreadable: not evidence of anything
      }
    }),
  );
  return found;
}

function groupSignal(deps: Pick<CleanupDeps, "adapterPgid" | "unreapedAdapterPid">, sig: NodeJS.Signals): void {
  // the proof is computed from the adapter being our unreaped child (adapter-group.ts)
  signalAdapterGroup(deps.adapterPgid, deps.unreapedAdapterPid(), sig);
}

async function waitForAdapter(
  deps: Pick<CleanupDeps, "unreapedAdapterPid">,
  ms: number,
  pollMs: number,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (deps.unreapedAdapterPid() !== null && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, Math.min(pollMs, Math.max(1, deadline - Date.now()))));
  }
}

function decimal(s: string | undefined): bigint | null {
  return s !== undefined && /^\d+$/.test(s) ? BigInt(s) : null;
}

async function snapshotOrNull(facts: ProcessFacts): Promise<ProcessSnapshot | null> {
  if (facts.identityStrength === "none") return null;
  try {
    return await facts.snapshot();
  } catch {
    return null;
  }
}
