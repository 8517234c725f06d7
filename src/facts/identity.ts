/**
 * A process is its pid AND its start time: once a pid is reused, the same
 * number names another process. This module is the one comparison of the two,
 * so no caller checks a pid/start pair by hand (and none forgets one half).
 *
 * Start times are the backend's decimal strings (facts/types.ts): two
 * identities compare only when read by backends of the same unit, which every
 * caller already guarantees by reading both through one ProcessFacts.
 */

/** One process, as one value. */
export interface ProcessIdentity {
  readonly pid: number;
  readonly startTime: string;
}

/** Anything that names a process: a facts record, a reap entry, a lock holder, a lease's root. */
export interface IdentityLike {
  readonly pid: number;
  readonly startTime: string | number | bigint | undefined | null;
}

/** The identity of a facts record (or anything pid+startTime shaped). */
export function identityOf(p: IdentityLike): ProcessIdentity {
  return { pid: p.pid, startTime: startText(p.startTime) };
}

/**
 * The same process: equal pids and equal, known start times. An unknown start
 * time on either side is never "the same" (fail closed: a signal needs proof).
 */
export function sameProcess(a: IdentityLike | null | undefined, b: IdentityLike | null | undefined): boolean {
  if (a === null || a === undefined || b === null || b === undefined) return false;
  if (a.pid !== b.pid || !Number.isInteger(a.pid) || a.pid <= 0) return false;
  // on the verify and signal paths: compared without building identity objects
  const sa = startText(a.startTime);
  return sa !== "" && sa === startText(b.startTime);
}

function startText(t: IdentityLike["startTime"]): string {
  return t === undefined || t === null ? "" : typeof t === "string" ? t : String(t);
}
