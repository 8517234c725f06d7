/**
 * How a run is killed once it was asked to stop while its process exists
 * (cancel, cancelScope, cancelAll, a same-scope replacement, a deadline).
 * Every kill waits until the lease names the live root (run.attached), then
 * takes the first of these that applies:
 * 1. A leased run: through its lease (durability.ts RunLeases.kill:
 *    ownership's verification, then the kill of the tree it verified,
 *    processes that escaped the parent links but carry the run's markers
 *    included). It settles the lease by ownership's one rule.
 * 2. No lease, or a lease that proves nothing killable (unknown on ps, say):
 *    the identity-checked tree kill, bound to the root's start time read at
 *    spawn. A root whose start time was never read gets no tree kill.
 * 3. Neither stopped the root (facts "none", identity unknown, signal
 *    denied): the root alone, through the run's own handle (see below).
 * A run without a lease then has its cgroup drained: whatever it still
 * holds (a setsid escapee that cleared its environment) ends too.
 */
import { escalate, killStoppedPid } from "../../ownership/index.js";
import type { SpawnedProcess } from "../adapters/adapter.js";
import type { LeaseCgroup } from "../../containment/index.js";
import type { RunLease, RunLeaseKill, RunLeases } from "../hold/durability.js";
import type { KillTreeResult } from "../shared/kill-tree.js";
import type { RunCgroups } from "../hold/run-cgroups.js";
import type { RootStart } from "./root-start.js";

/** What the kill reads and records of a run: run.ts's Run, which calls the kill, declared here so the two do not import each other. */
export interface KilledRun {
  readonly ownCgroup: LeaseCgroup | undefined;
  readonly attached: Promise<void>;
  readonly store: RunLeases | undefined;
  readonly lease: RunLease | undefined;
  readonly rootStart: Promise<RootStart>;
  killResult: KillTreeResult | undefined;
  leaseKill: RunLeaseKill | null | undefined;
}

/** What the kill needs of the runs' shared context (RunContext). */
export interface KillContext {
  readonly runCgroups: RunCgroups;
  readonly graceMs: number;
  killTree(pid: number, expectedStartTime: string): Promise<KillTreeResult>;
}

export function terminate(run: KilledRun, ctx: KillContext, proc: SpawnedProcess): Promise<void> {
  const killed = proc.pid === undefined ? Promise.resolve() : killRoot(run, ctx, proc, proc.pid);
  const own = run.ownCgroup;
  return own === undefined ? killed : killed.finally(() => ctx.runCgroups.drain(own).catch(() => undefined));
}

async function killRoot(run: KilledRun, ctx: KillContext, proc: SpawnedProcess, rootPid: number): Promise<void> {
  await run.attached;
  const stopped = (await killThroughLease(run, rootPid)) ?? (await killTreeOfRoot(run, ctx, rootPid));
  if (stopped || proc.exitObserved) return;
  await signalThroughHandle(proc, ctx.graceMs);
}

/** Whether the kill through the lease saw the root stop; undefined when it killed nothing (no lease, or nothing verified). */
async function killThroughLease(run: KilledRun, rootPid: number): Promise<boolean | undefined> {
  const { store, lease } = run;
  if (store === undefined || lease === undefined) return undefined;
  const r = await store.kill(lease.leaseId).catch(() => null);
  run.leaseKill = r;
  return r?.report ? killStoppedPid(r.report, rootPid) : undefined;
}

/** Whether the tree kill saw the root stop; false when no start time binds it (said in the run's record: rootIdentityUnavailable). */
async function killTreeOfRoot(run: KilledRun, ctx: KillContext, rootPid: number): Promise<boolean> {
  const id = await run.rootStart;
  if (id.startTime === undefined) return false;
  const result = await ctx.killTree(rootPid, id.startTime).catch(() => undefined);
  run.killResult = result;
  return result?.outcome === "killed" && killStoppedPid(result.report, rootPid);
}

/**
 * The one signal not derived from facts: the root alone, through our own
 * handle, whose identity is the handle itself. The adapter sends it only
 * while the child is provably unreaped (so its pid cannot have been reused)
 * and the guard allows the pid; a PTY handle cannot prove that and sends
 * nothing (SpawnedProcess.signalRoot). The one kill order (escalate): a
 * TERM the handle did not send has nothing to wait for.
 */
async function signalThroughHandle(proc: SpawnedProcess, graceMs: number): Promise<void> {
  await escalate(
    {
      term: (sig) => proc.signalRoot(sig) === "signalled",
      ended: (ms) => Promise.race([proc.wait().then(() => true), delay(ms).then(() => false)]),
      force: (sig) => proc.signalRoot(sig),
    },
    graceMs,
  );
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
