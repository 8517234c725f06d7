/**
 * Display-only labels for processes: the command name (comm) and the wall
 * clock start. ProcessInfo carries neither (they decide nothing), so the CLI
 * reads them beside the snapshot. A comm is shown only when it provably
 * belongs to the process in the snapshot (same start time where the units
 * allow the comparison); otherwise "?" — a label must never name another
 * process that reused the pid.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { findPs } from "../../facts/get.js";
import { parseStat } from "../../facts/procfs.js";
import type { ProcessFacts, ProcessInfo } from "../../facts/types.js";
import { mapLimit } from "../../ownership/leases/fs-safe.js";
import { readStartClock, startTimeToEpochMs, type StartClock } from "../../ownership/verify/start-clock.js";
import { sameProcess } from "../../facts/identity.js";

export interface ProcessLabels {
  /** comm, or null when it could not be read for this very process */
  comm(pid: number): string | null;
  /** epoch ms the process started, or null when the backend's unit cannot be converted */
  startedAt(p: ProcessInfo): number | null;
}

export async function labelProcesses(facts: ProcessFacts, procs: readonly ProcessInfo[]): Promise<ProcessLabels> {
  const [comms, clock] = await Promise.all([
    readComms(facts, procs),
    readStartClock().catch((): StartClock | null => null),
  ]);
  return {
    comm: (pid) => comms.get(pid) ?? null,
    startedAt: (p) => startTimeToEpochMs(p.startTime, facts.backend, clock),
  };
}

async function readComms(facts: ProcessFacts, procs: readonly ProcessInfo[]): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  if (procs.length === 0 || facts.backend === "none") return out;
  if (process.platform === "linux") {
    // native and procfs count start times in the same clock ticks as /proc/PID/stat
    const comparable = facts.backend === "native" || facts.backend === "procfs";
    await mapLimit(procs, 32, async (p) => {
      try {
        const st = parseStat(await readFile(`/proc/${p.pid}/stat`, "utf8"));
        if (st !== null && (!comparable || sameProcess({ pid: p.pid, startTime: st.startTime }, p)))
          out.set(p.pid, st.comm);
      } catch {
        // gone since the snapshot: no label
      }
    });
    return out;
  }
  // elsewhere one `ps` run names them all (a pid reused since the snapshot is
  // possible here; it is a display label only and the ps backend says so)
  const bin = findPs();
  if (bin === null) return out;
  const text = await new Promise<string>((resolve) => {
    execFile(
      bin,
      ["-A", "-o", "pid=,comm="],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, timeout: 10_000 },
      (err, stdout) => resolve(err ? "" : stdout),
    );
  });
  const wanted = new Set(procs.map((p) => p.pid));
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (m && wanted.has(Number(m[1]))) out.set(Number(m[1]), basename(m[2]!.trim()));
  }
  return out;
}
