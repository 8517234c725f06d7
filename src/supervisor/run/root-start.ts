/**
 * The root's start time, read right after the spawn: every tree kill of the
 * root is bound to it, so a reused pid is never signalled.
 */
import { isAlive } from "../../facts/liveness.js";
import { isKnownStartTime } from "../../facts/identity.js";
import type { ProcessFacts } from "../../facts/types.js";
import type { SpawnedProcess } from "../adapters/adapter.js";
import type { SpawnInput } from "../shared/types.js";

export type RootStart = { startTime: string; why?: undefined } | { startTime?: undefined; why: string };

/**
 * Kept only when the process read provably was this run's child:
 * - child: Node had reported no exit once the read finished. libuv reaps a
 *   child and reports its exit in one callback, so the child was unreaped for
 *   the whole read and its pid could not name another process.
 * - PTY: node-pty reaps on its own thread, so the handle proves nothing; the
 *   process read must name this process as its parent (node-pty forks it
 *   from here) and be alive (liveness.ts). A pid reused within the read would
 *   have to be another child of ours, forked after our PTY child was reaped.
 * Anything else (backend "none", the read failed, it exited first) is
 * reported with why, and no tree kill is ever bound to a guess.
 */
export async function readRootStart(
  facts: ProcessFacts,
  proc: SpawnedProcess,
  pid: number,
  mode: SpawnInput["mode"],
): Promise<RootStart> {
  if (facts.identityStrength === "none") return { why: `the facts backend "${facts.backend}" cannot read start times` };
  let d;
  try {
    d = await facts.inspect(pid);
  } catch (err) {
    return { why: `pid ${pid} could not be inspected: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (d === null || !isAlive(d)) return { why: `pid ${pid} had exited before its start time could be read` };
  if (mode === "child" && proc.exitObserved)
    return { why: `pid ${pid} exited while its start time was read, so the read proves nothing` };
  if (mode === "pty" && d.ppid !== process.pid)
    return { why: `pid ${pid} is not this process's child any more, so its start time is not the PTY's` };
  if (!isKnownStartTime(d.startTime)) return { why: `pid ${pid} has no readable start time` };
  return { startTime: String(d.startTime) };
}
