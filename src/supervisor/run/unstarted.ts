/**
 * How a run that never got a process ends: asked to stop while starting, or
 * its startup failed (the lease write, the cgroup, the PTY module, a spawn
 * that threw). Asked to stop first: spawn resolves with a run without pid
 * whose wait() reports the reason asked (a startup error after it is kept in
 * its stderr). A startup that failed with no stop asked rejects spawn with
 * that error, and the record says "spawn-error". Either way its lease
 * settles as never started (open → closing → lost) and the cgroup of a run
 * without a lease is removed.
 */
import type { ManagedRun } from "../types.js";
import type { RunContext } from "./context.js";
import { exitFor } from "./result.js";
import type { Run } from "./run.js";
import type { StartResult } from "./start.js";

export async function endUnstarted(run: Run, ctx: RunContext, outcome: Exclude<StartResult, { kind: "started" }>): Promise<ManagedRun> {
  run.beginFinishing();
  const asked = outcome.kind === "stopped" ? outcome.reason : run.requested;
  ctx.registry.finalize(run.runId, { reason: asked ?? "spawn-error", exitCode: null, exitSignal: null });
  await releaseUnstarted(run, ctx);
  if (asked === undefined) {
    run.settle(null);
    throw outcome.kind === "failed" ? outcome.error : undefined;
  }
  const stderr = outcome.kind === "failed" ? `${outcome.error instanceof Error ? outcome.error.message : String(outcome.error)}\n` : "";
  const exit = exitFor(asked, { exitCode: null, exitSignal: null }, 0, "", stderr);
  run.settle(exit);
  return { runId: run.runId, startedAtMs: run.createdAtMs, wait: () => Promise.resolve(exit), cancel: () => {} };
}

/** No process ever existed: the lease record's convention for that is "lost"; the run's own cgroup goes. */
async function releaseUnstarted(run: Run, ctx: RunContext): Promise<void> {
  const { store, lease, ownCgroup } = run;
  if (store !== undefined && lease !== undefined) await store.neverStarted(lease.leaseId).catch(() => {});
  if (ownCgroup !== undefined) await ctx.runCgroups.settle(ownCgroup).catch(() => {});
}
