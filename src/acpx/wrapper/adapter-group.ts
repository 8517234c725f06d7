/**
 * The wrapper's group signal and the proof checkGroupSignal asks for,
 * computed from the wrapper's own state instead of asserted.
 *
 * For the wrapper, the kill target is the adapter's tree, and the adapter IS
 * its verified root: the wrapper spawned it and holds its pid from spawn()
 * itself, not from a process list. Its group is provably the adapter's own:
 * `detached: true` makes libuv call setsid() in the child before exec (a
 * failed setsid fails the spawn, so having a pid means it succeeded), so the
 * adapter leads a new session and group with pgid == adapterPid, and a
 * session leader can never move to another group. Both facts last exactly as
 * long as the adapter is our unreaped child: until we reap it the kernel
 * cannot hand its pid (and so that group id) to anyone else. Once libuv has
 * reaped it, the proof is gone and no group signal is sent.
 */
import { checkGroupSignal, type GuardVerdict } from "../../facts/guards.js";

export interface AdapterGroupProof {
  groupVerifiedAsOwn: boolean;
  leaderIsVerifiedRoot: boolean;
}

/**
 * @param pgid the group about to be signalled
 * @param unreapedAdapterPid the adapter's pid while it is our unreaped child, else null
 */
export function adapterGroupProof(pgid: number, unreapedAdapterPid: number | null): AdapterGroupProof {
  // the group setsid() created for our unreaped child, and only that one
  const own = unreapedAdapterPid !== null && pgid === unreapedAdapterPid;
  return { groupVerifiedAsOwn: own, leaderIsVerifiedRoot: own };
}

/** The guard's verdict for signalling `pgid`, with the proof computed above. */
export function checkAdapterGroup(pgid: number, unreapedAdapterPid: number | null): GuardVerdict {
  return checkGroupSignal(pgid, adapterGroupProof(pgid, unreapedAdapterPid));
}

/**
 * Signals the adapter's group when the guard allows it; true when the signal
 * was sent. ESRCH (the group is empty already) counts as not sent.
 */
export function signalAdapterGroup(
  pgid: number | null,
  unreapedAdapterPid: number | null,
  sig: NodeJS.Signals,
): boolean {
  if (pgid === null || !checkAdapterGroup(pgid, unreapedAdapterPid).allowed) return false;
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false;
  }
}
