// The tests' own oracle for liveness, stat fields and environment markers:
// minimal /proc reads written here, independent of the library on purpose.
// It imports nothing from src/, so a defect in the library's stat parser or
// liveness rule cannot move the library and the tests that judge it
// together. Keep it so: it is not a copy of facts/liveness.ts to fold in.
//
// Alive = the pid's thread group still has a thread that runs: some
// /proc/PID/task/TID/stat that is neither Z nor X nor inside exit(2)
// (PF_EXITING in stat's flags). The kernel's view of the leader alone (its
// own stat line) says Z when the main thread has exited while others run on;
// the library counts that process alive on purpose (a signal to its pid still
// reaches the live threads), and so does this oracle, by scanning the tasks.
// test/helpers/liveness.test.ts names that case and asserts both readings.
import { readFileSync, readdirSync } from "node:fs";

/** PF_EXITING from include/linux/sched.h: the task is inside exit(2) */
const PF_EXITING = 0x4;

export interface StatFields {
  pid: number;
  comm: string;
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  flags: number;
  /** clock ticks since boot, as the kernel prints it */
  starttime: string;
}

/**
 * /proc/PID/stat (or `${base}/PID/stat`) split by hand: the comm is whatever
 * lies between the first "(" and the last ")" (it may hold spaces and
 * parentheses); fields after it are counted from 3 (state) as in proc(5).
 * null when the file cannot be read (no such process, or not ours).
 */
export function readStat(pid: number, base = "/proc"): StatFields | null {
  let s: string;
  try {
    s = readFileSync(`${base}/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  const open = s.indexOf("(");
  const close = s.lastIndexOf(")");
  if (open < 0 || close < open) return null;
  const f = s
    .slice(close + 2)
    .trim()
    .split(" ");
  // f[0] is field 3 (state); field N is f[N - 3]
  const field = (n: number) => f[n - 3] ?? "";
  return {
    pid: Number(s.slice(0, open).trim()),
    comm: s.slice(open + 1, close),
    state: field(3),
    ppid: Number(field(4)),
    pgrp: Number(field(5)),
    session: Number(field(6)),
    flags: Number(field(9)),
    starttime: field(22),
  };
}

const runs = (t: StatFields | null): boolean =>
  t !== null && t.state !== "Z" && t.state !== "X" && t.state !== "x" && (t.flags & PF_EXITING) === 0;

/** The leader's own stat line alone: what a reading that ignores the other threads says. */
export function leaderRuns(pid: number): boolean {
  return runs(readStat(pid));
}

export function isAliveSync(pid: number): boolean {
  const leader = readStat(pid);
  if (leader === null) return false;
  if (runs(leader)) return true;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tids.some((tid) => tid !== String(pid) && runs(readStat(Number(tid), `/proc/${pid}/task`)));
}

/** A live process's environment as raw NUL-separated entries; null when unreadable. */
export function environEntries(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1")
      .split("\0")
      .filter((e) => e !== "");
  } catch {
    return null;
  }
}

/** Live pids whose environment holds exactly `key=value` (a zombie has no environment). */
export function markerCarriers(key: string, value: string): number[] {
  const want = `${key}=${value}`;
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    if (environEntries(Number(name))?.includes(want) && isAliveSync(Number(name))) out.push(Number(name));
  }
  return out;
}
