/**
 * From the moment a run's process exists to spawn's return, as named steps:
 * the run is "running" (a stop request from now on starts the termination),
 * the root's start time is read (every tree kill is bound to it), the record
 * names the pid, the lease is told the live root, the deadlines are armed,
 * the output is captured, and the exit is awaited (finish.ts). spawn returns
 * once the lease names the root, so a crash from then on leaves a lease the
 * next incarnation can verify.
 */
import { untilSessionLeader } from "../adapters/pty.js";
import type { SpawnedProcess } from "../adapters/adapter.js";
import type { ManagedRun } from "../shared/types.js";
import { captureOutput } from "./capture.js";
import { armDeadlines } from "./deadlines.js";
import { finishOnExit } from "./finish.js";
import { createExitFallback } from "./pty-exit-fallback.js";
import { readRootStart } from "./root-start.js";
import type { Run, RunContext } from "./run.js";

export async function enterRunning(
  run: Run,
  ctx: RunContext,
  proc: SpawnedProcess,
  maxOutputChars: number,
): Promise<ManagedRun> {
  run.started(proc);
  const pid = proc.pid;
  readRootIdentity(run, ctx, proc);
  // A root that leads its group leads the group of its own pid (the adapter's
  // contract), which is what the lease records: read from the live root it
  // could still be the gateway's, before a PTY's child has called setsid.
  const ownGroup = pid !== undefined && proc.leadsGroup ? pid : undefined;
  ctx.registry.setState(run.runId, "running", { pid, processGroupId: ownGroup, leaseId: run.lease?.leaseId });
  run.attached = attachLease(run, ctx, pid, ownGroup);
  run.deadlines = armDeadlines(run.input, (reason) => run.requestStop(reason));
  if (proc.mayMissExit && pid !== undefined) run.exitFallback = createExitFallback(run, ctx, proc, pid);
  const output = captureOutput(run, ctx, proc, maxOutputChars);
  const exit = finishOnExit(run, ctx, proc, output);
  await run.attached;
  return {
    runId: run.runId,
    pid,
    startedAtMs: run.startedAtMs,
    stdin: proc.stdin,
    wait: () => exit,
    cancel: (reason) => run.requestStop(reason ?? "manual-cancel"),
  };
}

/** Read now, concurrently with the rest of the bookkeeping (a spawn must stay cheap); the tree kill waits for it. */
function readRootIdentity(run: Run, ctx: RunContext, proc: SpawnedProcess): void {
  const pid = proc.pid;
  run.rootStart =
    pid === undefined
      ? Promise.resolve({ why: "the spawn produced no pid" })
      : readRootStart(ctx.facts, proc, pid, run.input.mode);
  void run.rootStart.then((r) =>
    ctx.registry.noteRootIdentity(
      run.runId,
      r.startTime !== undefined ? { rootStartTime: r.startTime } : { rootIdentityUnavailable: r.why },
    ),
  );
}

/**
 * Records the live root's identity in the lease; a kill meanwhile waits for
 * it, so it kills only once the lease names the root. A PTY run is attached
 * once its shell leads its own group, so what is recorded and verified from
 * then on is the run's own group, never a moment before setsid.
 */
function attachLease(run: Run, ctx: RunContext, pid: number | undefined, ownGroup: number | undefined): Promise<void> {
  const led =
    run.input.mode === "pty" && pid !== undefined
      ? untilSessionLeader((p) => ctx.facts.inspect(p), pid)
      : Promise.resolve();
  const { store, lease } = run;
  if (store === undefined || lease === undefined || pid === undefined) return led;
  return led.then(() => store.attach(lease.leaseId, pid, ownGroup)).catch(() => {});
}
