/**
 * How a run that never got a process ends. The starting window's rule:
 * - A run is live from spawn's first line (record "starting"): cancel,
 *   cancelScope, cancelAll and a same-scope replacement reach it, and a stop
 *   request shows on its record at once (state "exiting", `terminationReason`
 *   the reason asked). No process is made after it.
 * - A startup that failed (the lease write, the cgroup, the PTY module, a
 *   spawn that threw) rejects spawn with that error, and the record says
 *   "spawn-error", whether or not a stop was asked first: a cancel or a
 *   replacement never hides why the run could not start.
 * - A run asked to stop whose startup did not fail: spawn resolves with a run
 *   without pid whose wait() reports the reason asked and whose cancel does
 *   nothing. A run is cancellable from the moment spawn returns (CONTRACT
 *   §6); this one is already over.
 * Either way its lease settles as never started (open → closing → lost) and
 * the cgroup of a run without a lease is removed.
 */
import type { ManagedRun } from "../shared/types.js";
import { exitFor } from "./result.js";
import type { Run, RunContext } from "./run.js";
import type { StartResult } from "./start.js";

export async function endUnstarted(
  run: Run,
  ctx: RunContext,
  outcome: Exclude<StartResult, { kind: "started" }>,
): Promise<ManagedRun> {
  run.beginFinishing();
  const reason = outcome.kind === "failed" ? "spawn-error" : outcome.reason;
  ctx.registry.finalize(run.runId, { reason, exitCode: null, exitSignal: null });
  await releaseUnstarted(run, ctx);
  if (outcome.kind === "failed") {
    run.settle(null);
    throw outcome.error;
  }
  const exit = exitFor(reason, { exitCode: null, exitSignal: null }, 0, "", "");
  run.settle(exit);
  return { runId: run.runId, startedAtMs: run.createdAtMs, wait: () => Promise.resolve(exit), cancel: () => {} };
}

/** No process ever existed: the lease record's convention for that is "lost"; the run's own cgroup goes. */
async function releaseUnstarted(run: Run, ctx: RunContext): Promise<void> {
  const { store, lease, ownCgroup } = run;
  if (store !== undefined && lease !== undefined) await store.neverStarted(lease.leaseId).catch(() => {});
  if (ownCgroup !== undefined) await ctx.runCgroups.settle(ownCgroup).catch(() => {});
}
