/**
 * A transport that may never report the root's exit (node-pty:
 * SpawnedProcess.mayMissExit). Once the forced kill has finished, the root
 * is looked up every `ptyFallbackMs`, and the run settles as soon as it is
 * provably gone (liveness.ts provablyGone, against the start time read at
 * spawn: absent, not alive, or its pid now names another process). Evidence
 * that cannot tell settles nothing: the root is looked up again.
 */
import { provablyGone } from "../../facts/liveness.js";
import type { AdapterExit, SpawnedProcess } from "../adapters/adapter.js";
import type { ExitFallback, Run, RunContext } from "./run.js";

export function createExitFallback(run: Run, ctx: RunContext, proc: SpawnedProcess, rootPid: number): ExitFallback {
  let timer: NodeJS.Timeout | undefined;
  let resolveExit: ((exit: AdapterExit) => void) | undefined;
  const exit = new Promise<AdapterExit>((r) => (resolveExit = r));
  const watch = (): void => {
    if (proc.exitObserved || resolveExit === undefined) return;
    timer = setTimeout(async () => {
      timer = undefined;
      if (proc.exitObserved || resolveExit === undefined) return;
      const { startTime } = await run.rootStart;
      if (await provablyGone(ctx.facts, { pid: rootPid, startTime }))
        resolveExit?.({ exitCode: null, exitSignal: signalThatStopped(run, rootPid) });
      else watch();
    }, ctx.ptyFallbackMs);
  };
  return {
    exit,
    watch,
    stop() {
      resolveExit = undefined;
      if (timer) clearTimeout(timer);
    },
  };
}

/** The signal the kill saw stop the root (TERM or KILL), or null when its reports do not say. */
function signalThatStopped(run: Run, rootPid: number): NodeJS.Signals | null {
  const results = [
    ...(run.leaseKill?.report?.results ?? []),
    ...(run.killResult?.outcome === "killed" ? run.killResult.report.results : []),
  ].filter((r) => r.pid === rootPid);
  const last = results[results.length - 1]?.outcome;
  return last === "killed" ? "SIGKILL" : last === "exited-after-term" ? "SIGTERM" : null;
}
