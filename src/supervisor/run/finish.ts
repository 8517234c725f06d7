/**
 * The end of a run whose process existed. Once the root's exit is known (its
 * handle, or the PTY exit fallback) and any kill started for it has finished
 * with the rest of the tree, the run leaves the live runs, its record is
 * finalized with the one reason (result.ts), its handle is released, its
 * cgroup and lease are settled, and wait() resolves with the result.
 */
import type { AdapterExit, SpawnedProcess } from "../adapters/adapter.js";
import type { RunExit } from "../shared/types.js";
import type { CapturedOutput } from "./capture.js";
import { exitFor, exitReason } from "./result.js";
import type { Run, RunContext } from "./run.js";

export function finishOnExit(
  run: Run,
  ctx: RunContext,
  proc: SpawnedProcess,
  output: CapturedOutput,
): Promise<RunExit> {
  const exits = run.exitFallback === undefined ? [proc.wait()] : [proc.wait(), run.exitFallback.exit];
  return Promise.race(exits).then((exit) => finish(run, ctx, proc, exit, output));
}

async function finish(
  run: Run,
  ctx: RunContext,
  proc: SpawnedProcess,
  exit: AdapterExit,
  output: CapturedOutput,
): Promise<RunExit> {
  run.exitFallback?.stop();
  // An exit during a kill is only final once the kill has finished with the rest of the tree.
  if (run.kill) await run.kill;
  run.deadlines?.clear();
  run.beginFinishing();
  const reason = exitReason(exit, run.requested);
  const fin = ctx.registry.finalize(run.runId, { reason, exitCode: exit.exitCode, exitSignal: exit.exitSignal });
  proc.dispose();
  await settleAfterExit(run, ctx, proc.pid);
  const spawnError = exit.spawnError ? `${exit.spawnError.message}\n` : "";
  const result = exitFor(
    fin?.record.terminationReason ?? reason,
    exit,
    Date.now() - run.startedAtMs,
    output.stdout(),
    output.stderr() + spawnError,
  );
  run.settle(result);
  return result;
}

/**
 * The run's own cgroup, when it ended on its own (nothing is signalled; the
 * cgroup goes once it is empty), and its lease: closed only when nothing of
 * ours may still run (a kill that left survivors keeps it closing, for
 * reconcileOrphans to retry), settled by ownership's one rule from the kill
 * through the lease when one ran, else a fresh verification (a plain tree
 * kill only counts as prior). A spawn that produced no pid: never started.
 */
async function settleAfterExit(run: Run, ctx: RunContext, pid: number | undefined): Promise<void> {
  if (run.ownCgroup !== undefined && run.kill === undefined) await ctx.runCgroups.settle(run.ownCgroup).catch(() => {});
  const { store, lease } = run;
  if (store === undefined || lease === undefined) return;
  const prior = run.killResult?.outcome === "killed" ? run.killResult.report : null;
  const settled =
    pid === undefined ? store.neverStarted(lease.leaseId) : store.finish(lease.leaseId, run.leaseKill ?? null, prior);
  await settled.catch(() => {});
}
