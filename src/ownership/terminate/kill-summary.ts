/**
 * A tree kill as a report keeps it: each member's pid, start time and
 * outcome, and who survived, without the snapshots and evidence the kill
 * worked from. One shape for every report that says what a kill took (a
 * close, a reap's rows, whichever thread made them).
 */
import { survivorsOf, type TreeKillOutcome, type TreeKillReport } from "./tree-kill.js";

/** What happened to one process the tree kill meant to stop. */
export interface TreeKillMember {
  pid: number;
  startTime: string;
  /** its outcome, as ownership's tree kill reported it */
  outcome: TreeKillOutcome;
}

export interface TreeKillSummary {
  /** every verified member, leaves first */
  members: TreeKillMember[];
  /** members still alive after the SIGKILL fallback (normally empty) */
  survivors: number[];
  termSent: number;
  killSent: number;
  durationMs: number;
}

export function summarizeKill(r: TreeKillReport): TreeKillSummary {
  return {
    members: r.results.map((x) => ({ pid: x.pid, startTime: x.startTime, outcome: x.outcome })),
    survivors: survivorsOf(r),
    termSent: r.termSent,
    killSent: r.killSent,
    durationMs: r.durationMs,
  };
}
