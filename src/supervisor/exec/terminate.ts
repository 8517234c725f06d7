/**
 * How kill and remove end a session. One the supervisor started is ended
 * through supervisor.cancel only. An adopted one gets the guarded OS tree
 * kill of the process pinned at adopt time, bound to its start time: a pid
 * that now names another process is never signalled.
 */
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { killStoppedPid } from "../../ownership/index.js";
import { killProcessTree } from "../shared/kill-tree.js";
import type { ProcessSupervisor } from "../core/supervisor.js";
import { markExited, type Session } from "./table.js";
import type { TerminateResult } from "./types.js";

export interface TerminateDeps {
  supervisor: ProcessSupervisor;
  graceMs: number;
  facts(): ProcessFacts;
  signaller?: ProcessSignaller;
}

export async function terminateSession(s: Session, deps: TerminateDeps): Promise<TerminateResult> {
  if (s.info.status === "exited") return { via: "none", reason: "already-exited" };
  if (s.info.runId !== undefined && s.exitPromise) {
    if (deps.supervisor.cancel(s.info.runId, "manual-cancel")) return { via: "supervisor", exit: await s.exitPromise };
    // the supervisor has no live record: the root already exited and its
    // exit is on its way; its pid may be someone else's by now, so no kill by pid
    await s.exitPromise;
    return { via: "none", reason: "already-exited" };
  }
  const { pid, startTime } = s.info;
  if (pid === undefined || startTime === undefined) return { via: "none", reason: "no-pid" };
  const result = await killProcessTree(pid, {
    graceMs: deps.graceMs,
    facts: deps.facts(),
    signaller: deps.signaller,
    expectedStartTime: startTime,
  });
  // gone or mismatch: the adopted process is no longer there (a pid reused by
  // another process means ours exited); killed: only if the kill saw it stop
  if (
    result.outcome === "gone" ||
    result.outcome === "mismatch" ||
    (result.outcome === "killed" && killStoppedPid(result.report, pid))
  ) {
    markExited(s);
  }
  return { via: "tree-kill", result };
}
