/**
 * How an early death or stall is told: a process that ended before it
 * reported (the wrapper) or during the handshake (the adapter) is named by
 * the host limit it ran into when one shows (a pids cgroup at its limit,
 * EMFILE, ENFILE, ENOMEM), else by the first stderr line that says
 * something.
 */
import {
  hostResourceErrorInText,
  pidsLimitReached,
  processLimitError,
  type HostResourceError,
} from "../../ownership/leases/host-faults.js";
import type { ChildExit } from "./wrapper-end.js";

/**
 * Why a wrapper died (or stalled) before its "started" report, in one line,
 * from its exit and its stderr: never a stack line. A node that cannot make
 * its threads (a pids cgroup or RLIMIT_NPROC at its limit) prints
 * "pthread_create: Resource temporarily unavailable" and aborts or stalls;
 * one with no descriptor or memory left says so. `host` is the typed error
 * when the cause was a host limit.
 */
export function describeEarlyExit(
  exit: ChildExit | null,
  stderr: string,
  pid?: number,
): { cause: string; host?: HostResourceError } {
  const how =
    exit === null
      ? "stalled"
      : exit.signal === "SIGABRT"
        ? "aborted (SIGABRT)"
        : exit.signal
          ? `was killed by ${exit.signal}`
          : `exited with code ${exit.code}`;
  const what = `the wrapper ${how} before it reported`;
  const host = hostLimitOf(what, stderr, exit === null ? pid : undefined);
  if (host !== undefined) return { cause: host.message, host };
  const line = firstCauseLine(stderr);
  return { cause: line ? `${what}: ${line}` : what };
}

/**
 * The host limit a process that died or stalled early ran into, from what it
 * wrote on stderr or, silent, from a pids cgroup with no task left (that of
 * `pid` while it stalls; else ours); undefined when nothing points to one.
 */
export function hostLimitOf(what: string, stderr: string, pid?: number): HostResourceError | undefined {
  if (
    /pthread_create|uv_thread_create|Resource temporarily unavailable|EAGAIN|fork: retry/i.test(stderr) ||
    pidsLimitReached(pid)
  ) {
    return processLimitError(what, undefined, pid);
  }
  return hostResourceErrorInText(stderr, what) ?? undefined;
}

/** The first stderr line that says something: not a stack frame, a source excerpt, a caret or a separator. */
function firstCauseLine(stderr: string): string | null {
  for (const raw of stderr.split("\n")) {
    const l = raw.trim();
    if (
      l === "" ||
      /^at\s|^\d+:\s+0x|^----- |^\^+$|^node:internal|^Node\.js v|^\(Use `node --trace/.test(l) ||
      /^[/\w.-]+:\d+$/.test(l)
    )
      continue;
    return l.length > 300 ? `${l.slice(0, 300)}…` : l;
  }
  return null;
}
