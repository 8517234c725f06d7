// What /proc says about one process or all of them, for the session-cost
// bench: a process's private memory and CPU ticks.
import { readFileSync } from "node:fs";

/** Private_Clean + Private_Dirty in kB, or null when the process is gone. */
export function privateKb(pid) {
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(t)?.[1] ?? NaN);
    return kb("Private_Clean") + kb("Private_Dirty");
  } catch {
    return null;
  }
}

/** utime + stime in clock ticks, or null when gone. */
export function cpuTicks(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]);
  } catch {
    return null;
  }
}

/** kB (privateKb) → MB, for the tables */
export const kb = (v) => `${(v / 1024).toFixed(2)} MB`;
