// What /proc says about one process or all of them, for the session-cost
// bench: a process's private memory and CPU ticks, and which processes still
// carry one of a set of lease ids.
import { readdirSync, readFileSync } from "node:fs";

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

export function carriersOfAny(leaseIds) {
  const key = "OPENCLAW_ACPX_LEASE_ID=";
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const entry = readFileSync(`/proc/${d}/environ`, "latin1")
        .split("\0")
        .find((e) => e.startsWith(key));
      if (entry !== undefined && leaseIds.has(entry.slice(key.length))) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** kB (privateKb) → MB, for the tables */
export const kb = (v) => `${(v / 1024).toFixed(2)} MB`;
