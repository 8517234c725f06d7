/**
 * Small pieces of a supervised run kept out of supervisor.ts: the shape of
 * its result, the root's start time read at spawn, input validation, and
 * timing helpers.
 */
import type { ProcessFacts } from "../facts/types.js";
import { isAlive } from "../facts/liveness.js";
import { checkCwd } from "../ownership/index.js";
import type { AdapterExit, SpawnedProcess } from "./adapters/adapter.js";
import type { RunExit, SpawnInput, TerminationReason } from "./types.js";

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

export type RootStart = { startTime: string; why?: undefined } | { startTime?: undefined; why: string };

/**
 * The root's start time, read right after the spawn, kept only when the
 * process read provably was this run's child:
 * - child: Node had reported no exit once the read finished. libuv reaps a
 *   child and reports its exit in one callback, so the child was unreaped for
 *   the whole read and its pid could not name another process.
 * - PTY: node-pty reaps on its own thread, so the handle proves nothing; the
 *   process read must name this process as its parent (node-pty forks it
 *   from here) and be alive (liveness.ts). A pid reused within the read would have
 *   to be another child of ours, forked after our PTY child was reaped.
 * Anything else (backend "none", the read failed, it exited first) is
 * reported with why, and no tree kill is ever bound to a guess.
 */
export async function readRootStart(facts: ProcessFacts, proc: SpawnedProcess, pid: number, mode: SpawnInput["mode"]): Promise<RootStart> {
  if (facts.identityStrength === "none") return { why: `the facts backend "${facts.backend}" cannot read start times` };
  let d;
  try {
    d = await facts.inspect(pid);
  } catch (err) {
    return { why: `pid ${pid} could not be inspected: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (d === null || !isAlive(d)) return { why: `pid ${pid} had exited before its start time could be read` };
  if (mode === "child" && proc.exitObserved) return { why: `pid ${pid} exited while its start time was read, so the read proves nothing` };
  if (mode === "pty" && d.ppid !== process.pid) return { why: `pid ${pid} is not this process's child any more, so its start time is not the PTY's` };
  if (!/^\d+$/.test(String(d.startTime))) return { why: `pid ${pid} has no readable start time` };
  return { startTime: String(d.startTime) };
}


export function validate(input: SpawnInput): void {
  if (input === null || typeof input !== "object") throw new TypeError("spawn input must be an object");
  if (typeof input.sessionId !== "string") throw new TypeError("sessionId must be a string");
  if (typeof input.backendId !== "string") throw new TypeError("backendId must be a string");
  if (input.mode === "child") {
    if (!Array.isArray(input.argv) || input.argv.length === 0) throw new TypeError("argv must be a non-empty array");
    input.argv.forEach((a: unknown, i) => {
      if (typeof a !== "string") throw new TypeError(`argv[${i}] must be a string`);
    });
    if (input.argv[0] === "") throw new TypeError("argv[0] must be a non-empty program name");
    if (input.stdinMode !== undefined && !["inherit", "pipe-open", "pipe-closed"].includes(input.stdinMode)) {
      throw new TypeError(`stdinMode must be inherit, pipe-open or pipe-closed, got ${String(input.stdinMode)}`);
    }
  } else if (input.mode === "pty") {
    if (typeof input.ptyCommand !== "string" || input.ptyCommand.trim() === "") {
      throw new TypeError("ptyCommand must be a non-empty command string (PTY runs never rebuild one from argv)");
    }
  } else {
    throw new TypeError(`mode must be "child" or "pty", got ${JSON.stringify((input as { mode?: unknown }).mode)}`);
  }
  // exists, is a directory, may be entered: else a CwdUnusableError naming it, before any lease or cgroup is made
  if (input.cwd !== undefined) checkCwd(input.cwd);
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

export function positiveMs(v: number | undefined): number | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) return undefined;
  return Math.max(1, Math.floor(v));
}
