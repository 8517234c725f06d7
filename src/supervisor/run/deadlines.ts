/**
 * A run's two deadlines: the overall one, counted from the spawn, and the
 * no-output one, reset by every output chunk. Either asks the run to stop
 * with its own reason (`timedOut` on the result says so, OpenClaw's
 * meaning). The timers are unref'd: the child handle keeps the event loop
 * alive, the timers must not. Once cleared (a termination started, or the
 * root exited) nothing arms them again.
 */
import type { SpawnInput } from "../shared/types.js";
import { resolveRunNoOutputTimeoutMs } from "../shared/watchdog.js";

export type DeadlineReason = "overall-timeout" | "no-output-timeout";

export interface Deadlines {
  /** output arrived: the no-output deadline starts over */
  touch(): void;
  clear(): void;
}

export function armDeadlines(
  input: Pick<SpawnInput, "timeoutMs" | "noOutputTimeoutMs">,
  onDeadline: (reason: DeadlineReason) => void,
): Deadlines {
  const timeoutMs = positiveMs(input.timeoutMs);
  // the watchdog's one resolver: clamped below the overall deadline, never under its minimum
  const quietMs = resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: input.noOutputTimeoutMs, timeoutMs });
  let cleared = false;
  const overall = timeoutMs === undefined ? undefined : unrefTimer(() => onDeadline("overall-timeout"), timeoutMs);
  let quiet: NodeJS.Timeout | undefined;
  const touch = (): void => {
    if (quietMs === undefined || cleared) return;
    if (quiet) quiet.refresh();
    else quiet = unrefTimer(() => onDeadline("no-output-timeout"), quietMs);
  };
  touch();
  return {
    touch,
    clear() {
      cleared = true;
      clearTimeout(overall);
      clearTimeout(quiet);
    },
  };
}

/** A deadline in whole ms >= 1, or none for an absent, zero, negative or non-finite value. */
export function positiveMs(v: number | undefined): number | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) return undefined;
  return Math.max(1, Math.floor(v));
}

function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, ms);
  t.unref();
  return t;
}
