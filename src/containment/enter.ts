/**
 * Joining a cgroup: the one write to cgroup.procs in the package. Every
 * join goes through this file: a process moving itself before it starts
 * anything, a parent moving its own unreaped child, a shell that joins and
 * then execs. The rule:
 *
 * - cgroup.procs is opened write-only, never created and never truncated
 *   (O_WRONLY without O_CREAT or O_TRUNC): a directory that is not a cgroup
 *   has no cgroup.procs, so the join fails instead of writing a plain file;
 * - "0" moves the writer (every thread of it), a pid moves that process;
 * - a join that fails is a typed outcome, never a throw.
 *
 * A process's cgroup does not change when it forks, calls setsid, clears its
 * environment or is re-parented: only such a write moves it. So a process
 * that joins before it starts anything has every descendant born inside.
 *
 * Synchronous on purpose: a joiner has nothing else to serve until it is
 * in, and under load the thread-pool round trips of the async calls cost
 * more than the syscalls. The write itself may wait for one RCU grace period
 * (see ContainmentSupport.favordynmods).
 *
 * Imports only paths.ts and errors.ts (node builtins below them): the
 * wrapper bundles this file without the rest of src/containment.
 */
import { closeSync, constants as fsConstants, openSync, readFileSync, writeSync } from "node:fs";
import { open } from "node:fs/promises";
import { assertPidArg, faultOf } from "./errors.js";
import { pathShapeProblem } from "./paths.js";

const PROCS = "cgroup.procs";
/** what a writer writes to cgroup.procs to move itself */
const SELF = "0";

export type EnterOutcome = {
  /**
   * moved; gone: no such process; no-cgroup: no cgroup (or no cgroup.procs)
   * at that path; denied; busy: the cgroup hands controllers to its children
   * (no-internal-processes rule); unsupported; refused: not an absolute,
   * normalised path; unknown: any other error (named in detail)
   */
  outcome: "moved" | "gone" | "no-cgroup" | "denied" | "busy" | "unsupported" | "refused" | "unknown";
  detail?: string;
};

/** Moves `pid` (default: the caller itself) into the cgroup at `path`, by the rule above. A pid that is not a positive integer throws (ContainmentArgumentError). */
export function enterCgroup(path: string, pid: number | "self" = "self"): EnterOutcome {
  if (pid !== "self") assertPidArg(pid);
  const bad = pathShapeProblem(path);
  if (bad !== null) return { outcome: "refused", detail: bad };
  let fd: number;
  try {
    fd = openSync(`${path}/${PROCS}`, fsConstants.O_WRONLY);
  } catch (e) {
    return enterError(path, e);
  }
  try {
    writeSync(fd, pid === "self" ? SELF : String(pid));
    return { outcome: "moved" };
  } catch (e) {
    return enterError(path, e);
  } finally {
    closeSync(fd);
  }
}

/**
 * The same join, for another process (our own unreaped child, so its pid
 * cannot name anyone else), off the event loop: a parent moves the child it
 * just spawned while the child starts up, so the write's wait (one RCU grace
 * period per move on a host without favordynmods, about 10 ms) is not on
 * the caller's critical path.
 */
export async function enterCgroupAsync(path: string, pid: number): Promise<EnterOutcome> {
  assertPidArg(pid);
  const bad = pathShapeProblem(path);
  if (bad !== null) return { outcome: "refused", detail: bad };
  let fh;
  try {
    fh = await open(`${path}/${PROCS}`, fsConstants.O_WRONLY);
  } catch (e) {
    return enterError(path, e);
  }
  try {
    await fh.write(String(pid));
    return { outcome: "moved" };
  } catch (e) {
    return enterError(path, e);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * Whether the caller already is in the cgroup at `path` (its /proc/self/cgroup
 * `0::` line names it). The line is relative to the cgroup namespace's root,
 * so it is matched as a suffix of `path` that ends in the same two last
 * components (a lease cgroup's `<instance id>/<lease id>`, both unique);
 * false when that cannot be told.
 */
export function isInCgroup(path: string): boolean {
  let text: string;
  try {
    text = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return false;
  }
  const rel = text
    .split("\n")
    .find((l) => l.startsWith("0::"))
    ?.slice(3);
  if (rel === undefined || rel.endsWith(" (deleted)")) return false;
  const tail = path.split("/").slice(-2).join("/");
  return rel.split("/").length >= 3 && rel.endsWith(`/${tail}`) && path.endsWith(rel);
}

function enterError(path: string, e: unknown): EnterOutcome {
  const f = faultOf(e);
  switch (f.fault) {
    case "no-process":
      return { outcome: "gone" };
    case "missing":
      return { outcome: "no-cgroup", detail: f.code };
    case "denied":
      return { outcome: "denied", detail: f.code };
    case "busy":
      return { outcome: "busy", detail: `${path} hands controllers to its children, so it cannot hold processes` };
    case "unsupported":
      return { outcome: "unsupported", detail: f.code };
    default:
      return { outcome: "unknown", detail: f.code };
  }
}

/**
 * The same join as a POSIX sh command list, for a shell that joins and then
 * execs its command: it succeeds only when the shell
 * moved itself into the cgroup named by the shell word `dir` (e.g. `"$1"`).
 * A shell cannot open a file without O_CREAT, so it first tests that
 * cgroup.procs exists: a cgroup keeps its interface files for as long as it
 * exists, and a removed one fails the write with ENOENT, so nothing is ever
 * created. A path that is not absolute and normalised is refused, as
 * enterCgroup refuses it (pathShapeProblem, as shell patterns).
 */
export function enterCgroupShell(dir: string): string {
  const file = `${dir}/${PROCS}`;
  return `case ${dir} in *//*|*/./*|*/../*|*/.|*/..|*/) false ;; /*) [ -f ${file} ] && echo ${SELF} > ${file} ;; *) false ;; esac`;
}
