/**
 * The hard guards. Every signal path in proclease, the signaller's own
 * included, asks here first, whatever a lease or a caller says. A guard only ever refuses; passing it is necessary, never
 * sufficient. They sit in the facts layer, beside the signaller, so that
 * even a direct `createSignaller().signal()` cannot reach a forbidden pid.
 */
import { execFileSync } from "node:child_process";
import { readStatSync } from "./procfs.js";
import { MAX_PID } from "./validate.js";

/** Why a guard refused (the reason says it for people). */
export type GuardRefusal =
  | "not-an-integer"
  | "at-most-1"
  | "beyond-max-pid"
  | "this-process"
  | "parent"
  | "ancestor"
  | "own-group"
  | "own-group-unknown"
  | "group-not-verified"
  | "leader-not-verified-root";

export type GuardVerdict = { allowed: true } | { allowed: false; code: GuardRefusal; reason: string };

const ALLOWED: GuardVerdict = Object.freeze({ allowed: true });

/**
 * Refuses a per-pid signal to pid <= 1 (init, "every process" for -1, "my
 * group" for 0), a non-integer, a pid beyond 2^22, this process, its parent
 * and any other ancestor of this process. `process.ppid` is re-read on every
 * call: the parent can change when the original one dies and we are
 * re-parented; the rest of the ancestor chain comes from a cache refreshed
 * on such a change (see ancestorsOfThisProcess).
 */
export function checkSignalTarget(pid: number): GuardVerdict {
  return checkTarget(pid, process.ppid, ancestorsOfThisProcess);
}

/**
 * checkSignalTarget's rule with this process's parent and ancestors read
 * once, for one pass over many pids (every process of a snapshot) within a
 * turn of the event loop: each call would otherwise re-read them. A signal
 * still asks checkSignalTarget itself right before it is sent.
 */
export function signalTargetGuard(): (pid: number) => GuardVerdict {
  const parent = process.ppid;
  const ancestors = ancestorsOfThisProcess();
  return (pid) => checkTarget(pid, parent, () => ancestors);
}

function checkTarget(pid: number, parent: number, ancestors: () => ReadonlySet<number>): GuardVerdict {
  if (typeof pid !== "number" || !Number.isInteger(pid))
    return refuse("not-an-integer", `pid ${String(pid)} is not an integer`);
  if (pid <= 1) return refuse("at-most-1", `pid ${pid} is <= 1`);
  if (pid > MAX_PID) return refuse("beyond-max-pid", `pid ${pid} is beyond ${MAX_PID}`);
  if (pid === process.pid) return refuse("this-process", `pid ${pid} is this process`);
  if (pid === parent) return refuse("parent", `pid ${pid} is this process's parent`);
  if (ancestors().has(pid)) return refuse("ancestor", `pid ${pid} is an ancestor of this process`);
  return ALLOWED;
}

/**
 * The refusals of a group signal that hold whatever proof a caller brings:
 * pgid <= 1, beyond 2^22, this process's own group, a group led by this
 * process or its parent, and any group at all when our own pgid cannot be
 * learned (fail closed). A tree kill asks it before it watches a verified
 * group for newcomers; checkGroupSignal adds the proofs.
 */
export function checkGroupTarget(pgid: number): GuardVerdict {
  if (typeof pgid !== "number" || !Number.isInteger(pgid))
    return refuse("not-an-integer", `pgid ${String(pgid)} is not an integer`);
  if (pgid <= 1) return refuse("at-most-1", `pgid ${pgid} is <= 1`);
  if (pgid > MAX_PID) return refuse("beyond-max-pid", `pgid ${pgid} is beyond ${MAX_PID}`);
  const own = isOwnProcessGroup(pgid);
  if (own === null)
    return refuse(
      "own-group-unknown",
      "this process's own process group is unknown, so no group can be told apart from it",
    );
  if (own)
    return refuse(
      "own-group",
      `pgid ${pgid} is this process's own process group, or led by this process or its parent`,
    );
  return ALLOWED;
}

/**
 * Refuses a group signal (kill(-pgid)) unless the caller proves the group is
 * the lease's own AND its leader is the verified root, on top of every
 * refusal of checkGroupTarget.
 *
 * A group signal cannot be identity-checked per member: a tree kill signals
 * members one by one and asks this only to decide whether a group's
 * members may be swept with the root.
 */
export function checkGroupSignal(
  pgid: number,
  proof: { groupVerifiedAsOwn: boolean; leaderIsVerifiedRoot: boolean },
): GuardVerdict {
  const target = checkGroupTarget(pgid);
  if (!target.allowed) return target;
  if (proof?.groupVerifiedAsOwn !== true)
    return refuse("group-not-verified", `pgid ${pgid} was not verified as the lease's own group`);
  if (proof?.leaderIsVerifiedRoot !== true)
    return refuse("leader-not-verified-root", `the leader of pgid ${pgid} is not the verified root`);
  return ALLOWED;
}

/**
 * True when `pgid` is this process's own process group, or a group led by
 * this process or by its parent (a live process's pid cannot name a group it
 * did not create); null when our own group cannot be learned and `pgid` is
 * neither of those pids; false otherwise. The one answer to "is this group
 * ours?".
 */
export function isOwnProcessGroup(pgid: number): boolean | null {
  if (pgid === process.pid || pgid === process.ppid) return true;
  const own = ownProcessGroupId();
  if (own === null) return null;
  return pgid === own;
}

let cachedPgid: number | null | undefined;

/**
 * This process's process group id, or null when it cannot be learned. Node
 * has no getpgid(), so it is read once: /proc/self/stat on Linux (field 5,
 * parsed after the last ")" because comm may contain spaces and parens),
 * else `ps -o pgid= -p <pid>` from /bin or /usr/bin. Cached for the life of
 * the process: nothing in this package calls setpgid or setsid on the
 * running process.
 */
export function ownProcessGroupId(): number | null {
  if (cachedPgid !== undefined) return cachedPgid;
  cachedPgid = readOwnPgid();
  return cachedPgid;
}

function readOwnPgid(): number | null {
  if (process.platform === "linux") {
    const pgid = readStatSync("self")?.pgid;
    if (pgid !== undefined && pgid > 0) return pgid;
    // else fall through to ps
  }
  for (const ps of ["/bin/ps", "/usr/bin/ps"]) {
    try {
      const out = execFileSync(ps, ["-o", "pgid=", "-p", String(process.pid)], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
        timeout: 5000,
      });
      const pgid = Number(out.trim());
      if (Number.isInteger(pgid) && pgid > 0) return pgid;
    } catch {
      // try the next location
    }
  }
  return null;
}

// ---- ancestors of this process, for checkSignalTarget (the hot signal path)

interface AncestorCache {
  ppid: number;
  at: number;
  set: ReadonlySet<number>;
}
let ancestorCache: AncestorCache | undefined;
/** how long a walked chain is trusted while process.ppid stays the same: an ancestor further up can die and hand us to a subreaper */
const ANCESTOR_TTL_MS = process.platform === "linux" ? 1000 : 30_000;
const MAX_ANCESTOR_DEPTH = 4096;

/**
 * Every ancestor of this process (parent, grandparent, … up to but not
 * including pid 1), as far as it can be read. Cached: re-walked when
 * process.ppid changes (we were re-parented) or the cache is older than
 * ANCESTOR_TTL_MS. On Linux one small /proc/<pid>/stat read per level; else
 * one `ps -A -o pid=,ppid=`. When nothing can be read, the set holds the
 * parent alone (checkSignalTarget refuses it anyway).
 */
export function ancestorsOfThisProcess(): ReadonlySet<number> {
  const ppid = process.ppid;
  const now = Date.now();
  const c = ancestorCache;
  if (c !== undefined && c.ppid === ppid && now - c.at < ANCESTOR_TTL_MS) return c.set;
  const set = walkAncestors(ppid);
  ancestorCache = { ppid, at: now, set };
  return set;
}

function walkAncestors(ppid: number): ReadonlySet<number> {
  const set = new Set<number>();
  const parentOf = process.platform === "linux" ? procfsParent : psParents();
  let pid = ppid;
  while (pid > 1 && !set.has(pid) && set.size < MAX_ANCESTOR_DEPTH) {
    set.add(pid);
    const next = parentOf(pid);
    if (next === null) break;
    pid = next;
  }
  return set;
}

function procfsParent(pid: number): number | null {
  const ppid = readStatSync(pid)?.ppid;
  return ppid !== undefined && ppid >= 0 ? ppid : null;
}

function psParents(): (pid: number) => number | null {
  const parents = new Map<number, number>();
  for (const ps of ["/bin/ps", "/usr/bin/ps"]) {
    try {
      const out = execFileSync(ps, ["-A", "-o", "pid=,ppid="], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
        timeout: 5000,
      });
      for (const line of out.split("\n")) {
        const [a, b] = line.trim().split(/\s+/).map(Number);
        if (Number.isInteger(a) && Number.isInteger(b)) parents.set(a!, b!);
      }
      break;
    } catch {
      // try the next location
    }
  }
  return (pid) => parents.get(pid) ?? null;
}

function refuse(code: GuardRefusal, reason: string): GuardVerdict {
  return { allowed: false, code, reason };
}
