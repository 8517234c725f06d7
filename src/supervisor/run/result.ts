/**
 * A run's result: the one reason it ended with, and the one shape of its
 * `RunExit`.
 *
 * When several reasons apply, priority is forced (`manual-cancel`) >
 * deadline (`overall-timeout`, `no-output-timeout`) > `signal` > `exit`. A
 * spawn error (the OS never started the program) is the reason whatever was
 * asked: nothing ran that a stop could have ended.
 */
import type { AdapterExit } from "../adapters/adapter.js";
import type { RunExit, TerminationReason } from "../shared/types.js";

const RANK: Record<TerminationReason, number> = {
  "manual-cancel": 3,
  "overall-timeout": 2,
  "no-output-timeout": 2,
  "spawn-error": 2,
  signal: 1,
  exit: 0,
};

/** The reason a run asked to stop twice ends with: an explicit cancel relabels a deadline, never the other way round. */
export function stronger(asked: TerminationReason | undefined, next: TerminationReason): TerminationReason {
  return asked === undefined || RANK[next] > RANK[asked] ? next : asked;
}

/** Why a run whose root exited ended: its spawn error, else the stop it was asked for, else how the root ended. */
export function exitReason(exit: AdapterExit, asked: TerminationReason | undefined): TerminationReason {
  if (exit.spawnError) return "spawn-error";
  if (asked !== undefined) return asked;
  return exit.exitSignal ? "signal" : "exit";
}

/** The one shape of a run's result; `timedOut` is true for both deadlines (OpenClaw's meaning). */
export function exitFor(
  reason: TerminationReason,
  exit: Pick<AdapterExit, "exitCode" | "exitSignal">,
  durationMs: number,
  stdout: string,
  stderr: string,
): RunExit {
  return {
    reason,
    exitCode: exit.exitCode,
    exitSignal: exit.exitSignal,
    durationMs,
    stdout,
    stderr,
    timedOut: reason === "overall-timeout" || reason === "no-output-timeout",
    noOutputTimedOut: reason === "no-output-timeout",
  };
}
