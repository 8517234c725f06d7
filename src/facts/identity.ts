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
 * How two names of a process compare (psutil's three answers):
 * - "same": equal pids, both start times known and equal;
 * - "different": the pids differ, or both start times are known and differ
 *   (the pid was reused);
 * - "unknown": a start time is unreadable on either side, or a pid is not a
 *   pid; nothing follows from it (fail closed: never signal on "unknown",
 *   never call a process gone on it either).
 */
export type IdentityComparison = "same" | "different" | "unknown";

export function compareIdentity(
  a: IdentityLike | null | undefined,
  b: IdentityLike | null | undefined,
): IdentityComparison {
  if (a === null || a === undefined || b === null || b === undefined) return "unknown";
  if (!validPid(a.pid) || !validPid(b.pid)) return "unknown";
  if (a.pid !== b.pid) return "different";
  // on the verify and signal paths: compared without building identity objects
  const sa = startText(a.startTime);
  const sb = startText(b.startTime);
  if (!isKnownStartTime(sa) || !isKnownStartTime(sb)) return "unknown";
  return sa === sb ? "same" : "different";
}

/**
 * The same process ("same" above). An unknown start time on either side is
 * never "the same" (fail closed: a signal needs proof).
 */
export function sameProcess(a: IdentityLike | null | undefined, b: IdentityLike | null | undefined): boolean {
  return compareIdentity(a, b) === "same";
}

/**
 * A start time that was read: every backend writes one as a decimal string
 * (facts/types.ts); anything else (empty, missing, garbled) was not read.
 */
export function isKnownStartTime(t: IdentityLike["startTime"]): boolean {
  return /^\d+$/.test(startText(t));
}

const validPid = (pid: number): boolean => Number.isInteger(pid) && pid > 0;

function startText(t: IdentityLike["startTime"]): string {
  return t === undefined || t === null ? "" : typeof t === "string" ? t : String(t);
}
