/**
 * The one rule for "is this record a live process?" and "could this record
 * be a user-space process of ours?", so nothing else tests state letters by
 * hand.
 *
 * - "X" (dead) records can show up under fork churn between the kernel's
 *   exit and the reap: gone.
 * - "Z" is gone, except for a thread-group leader whose main thread exited
 *   while other threads run on (zombieLeader): that process is alive, and a
 *   signal to its pid reaches the live threads.
 * - A process inside exit(2) (PF_EXITING) has released or is releasing its
 *   memory: its environment reads as unreadable while its state still says
 *   R or D. It is gone for every decision here (a busy host has many), except
 *   a leader whose other threads run on (zombieLeader).
 * - Kernel threads (PF_KTHREAD from stat's flags; where a backend cannot
 *   read flags, kthreadd = pid 2 and its children) never carry our markers:
 *   they are nobody's remnant. The pid-2 guess is only a fallback: inside a
 *   pid namespace pid 2 is an ordinary process.
 */
import { compareIdentity } from "./identity.js";
import type { ProcessDetails, ProcessFacts, ProcessInfo } from "./types.js";

export type LivenessFields = Pick<ProcessInfo, "state"> & {
  zombieLeader?: boolean | undefined;
  exiting?: boolean | undefined;
};

/** A dead task ("X"; "x" on 2.6.33-3.13 kernels) is on its way out of the table: gone, like one that cannot be read at all. */
export function isDeadState(state: string): boolean {
  return state === "X" || state === "x";
}

/**
 * The kernel's "Z" letter as such: a task that exited and waits for its
 * parent's waitpid. This is what a reaper of zombies (waitpid) and a display
 * ask; it is NOT liveness: a zombie leader whose other threads run is alive
 * (isAlive).
 */
export function isZombieState(p: Pick<ProcessInfo, "state">): boolean {
  return p.state === "Z";
}

export function isAlive(p: LivenessFields): boolean {
  if (isDeadState(p.state)) return false;
  if (p.zombieLeader === true) return true;
  return !isZombieState(p) && p.exiting !== true;
}

/**
 * True only when the process is provably gone: no such pid, not alive by the
 * rule above, or its pid now names another process (a readable start time
 * that differs from `startTime`). Facts that cannot tell, or a failed read,
 * prove nothing: false. The one answer to "has it exited?" for whoever
 * waits on a process it does not hold a handle to.
 */
export async function provablyGone(facts: ProcessFacts, id: ProcessId): Promise<boolean> {
  if (facts.identityStrength === "none") return false;
  let d;
  try {
    d = await facts.inspect(id.pid);
  } catch {
    return false;
  }
  return goneBy(d, id);
}

/**
 * provablyGone for many processes, read in one batch (facts.inspectMany). A
 * batch the facts could not answer proves nothing about any of them: all false.
 */
export async function provablyGoneAll(facts: ProcessFacts, ids: readonly ProcessId[]): Promise<boolean[]> {
  if (facts.identityStrength === "none" || ids.length === 0) return ids.map(() => false);
  let ds;
  try {
    ds = await facts.inspectMany(ids.map((id) => id.pid));
  } catch {
    return ids.map(() => false);
  }
  return ids.map((id, i) => goneBy(ds[i] ?? null, id));
}

type ProcessId = { pid: number; startTime?: string | undefined };

function goneBy(d: ProcessDetails | null, id: ProcessId): boolean {
  if (d === null || !isAlive(d)) return true;
  return compareIdentity(d, { pid: id.pid, startTime: id.startTime }) === "different";
}

export function isKernelThread(p: Pick<ProcessInfo, "pid" | "ppid"> & { kernelThread?: boolean | undefined }): boolean {
  if (typeof p.kernelThread === "boolean") return p.kernelThread;
  return p.pid === 2 || p.ppid === 2;
}
