/**
 * The hard guards. Every signal path in proclease (reaper, supervisor,
 * wrapper, controller) asks here first, whatever a lease or a caller says.
 * A guard only ever refuses; passing it is necessary, never sufficient.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { MAX_PID } from "../facts/validate.js";

export type GuardVerdict = { allowed: true } | { allowed: false; reason: string };

const ALLOWED: GuardVerdict = Object.freeze({ allowed: true });

/**
 * Refuses a per-pid signal to pid <= 1 (init, "every process" for -1, "my
 * group" for 0), a non-integer, a pid beyond 2^22, this process and its
 * parent. `process.ppid` is re-read on every call: the parent can change when
 * the original one dies and we are re-parented.
 */
export function checkSignalTarget(pid: number): GuardVerdict {
  if (typeof pid !== "number" || !Number.isInteger(pid)) return refuse(`pid ${String(pid)} is not an integer`);
  if (pid <= 1) return refuse(`pid ${pid} is <= 1`);
  if (pid > MAX_PID) return refuse(`pid ${pid} is beyond ${MAX_PID}`);
  if (pid === process.pid) return refuse(`pid ${pid} is this process`);
  if (pid === process.ppid) return refuse(`pid ${pid} is this process's parent`);
  return ALLOWED;
}

/**
 * Refuses a group signal (kill(-pgid)) unless the caller proves the group is
 * the lease's own AND its leader is the verified root; and always refuses
 * pgid <= 1, this process's own group, and the group led by this process or
 * its parent. When our own pgid cannot be learned, every group signal is
 * refused (fail closed).
 *
 * Note: the reaper never sends group signals at all (a group signal cannot be
 * identity-checked per member); this guard is for the wrapper/supervisor.
 */
export function checkGroupSignal(
  pgid: number,
  proof: { groupVerifiedAsOwn: boolean; leaderIsVerifiedRoot: boolean },
): GuardVerdict {
  if (typeof pgid !== "number" || !Number.isInteger(pgid)) return refuse(`pgid ${String(pgid)} is not an integer`);
  if (pgid <= 1) return refuse(`pgid ${pgid} is <= 1`);
  if (pgid > MAX_PID) return refuse(`pgid ${pgid} is beyond ${MAX_PID}`);
  const own = ownProcessGroupId();
  if (own === null) return refuse("this process's own process group is unknown, so no group signal can be proven safe");
  if (pgid === own) return refuse(`pgid ${pgid} is this process's own process group`);
  if (pgid === process.pid) return refuse(`pgid ${pgid} is led by this process`);
  if (pgid === process.ppid) return refuse(`pgid ${pgid} is led by this process's parent`);
  if (proof?.groupVerifiedAsOwn !== true) return refuse(`pgid ${pgid} was not verified as the lease's own group`);
  if (proof?.leaderIsVerifiedRoot !== true) return refuse(`the leader of pgid ${pgid} is not the verified root`);
  return ALLOWED;
}

let cachedPgid: number | null | undefined;

/**
 * This process's process group id, or null when it cannot be learned. Node
 * has no getpgid(), so it is read once: /proc/self/stat on Linux (field 5,
 * parsed after the last ")" because comm may contain spaces and parens),
 * else `ps -o pgid= -p <pid>` from /bin or /usr/bin. Cached for the life of
 * the process: Node itself never calls setpgid/setsid on the running process,
 * and a native helper that did would be the one to call
 * `resetOwnProcessGroupCache()`.
 */
export function ownProcessGroupId(): number | null {
  if (cachedPgid !== undefined) return cachedPgid;
  cachedPgid = readOwnPgid();
  return cachedPgid;
}

export function resetOwnProcessGroupCache(): void {
  cachedPgid = undefined;
}

function readOwnPgid(): number | null {
  if (process.platform === "linux") {
    try {
      const stat = readFileSync("/proc/self/stat", "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // rest: state ppid pgrp ...
      const pgid = Number(rest[2]);
      if (Number.isInteger(pgid) && pgid > 0) return pgid;
    } catch {
      // fall through to ps
    }
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

function refuse(reason: string): GuardVerdict {
  return { allowed: false, reason };
}
