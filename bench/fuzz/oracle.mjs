// The fuzzer's own view of what a sequence left: plain reads of /proc and the
// cgroup2 tree, independent of the library under test (the soak's readers,
// bench/soak/proc.mjs). A process is the sequence's when ANY of these says so:
//   marker   its environment carries one of the sequence's lease ids or its instance id
//   tag      its argv carries the sequence's nonce (everything the hostile agent starts does)
//   pidfile  the agent wrote "<pid> <start time>" for it and that same process lives
//   cgroup   it sits in a cgroup of the sequence (a lease's, or below the instance folder)
// so an escapee that cleared its environment, left its session and moved to
// the root cgroup is still found (by its tag and the pid file).
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { cmdline, isKernelThread, markers, pids, stat } from "../soak/proc.mjs";

export function cgroupOf(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"));
    return line ? line.slice(3) : null;
  } catch {
    return null;
  }
}

/** The cgroup2 mount point, from /proc/self/mountinfo (null without one). */
export function cgroup2Mount() {
  try {
    for (const l of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
      const f = l.split(" ");
      const dash = f.indexOf("-");
      if (dash > 0 && f[dash + 1] === "cgroup2") return f[4];
    }
  } catch {
    // no /proc
  }
  return null;
}

/** Every pid in `dir` and the cgroups below it. */
export function cgroupMembers(dir) {
  const out = [];
  const walk = (d) => {
    try {
      for (const p of readFileSync(join(d, "cgroup.procs"), "utf8").split("\n")) if (p) out.push(Number(p));
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
    } catch {
      // gone meanwhile
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

/** "<pid> <start time>" lines of a pids file. */
export function pidFileEntries(file) {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length === 2 && /^\d+$/.test(f[0]))
      .map(([pid, startTime]) => ({ pid: Number(pid), startTime }));
  } catch {
    return [];
  }
}

const alive = (st) => st !== null && st.state !== "Z" && st.state !== "X";

/**
 * Live processes of a sequence. `who`: { tags: [] (argv substrings), leaseIds: Set, instanceId?,
 * pidFiles: [], cgroupDirs: [], exclude: Map pid -> start time (sentinels,
 * gateways: never counted) }. Each row: pid, startTime, state, argv, cgroup
 * and `why` (which evidence named it).
 */
export function leftovers(who) {
  const found = new Map();
  const add = (pid, why) => {
    if (pid === process.pid) return;
    const st = stat(pid);
    if (!alive(st) || isKernelThread(st)) return;
    if (who.exclude?.get(pid) === st.startTime) return;
    const row = found.get(pid) ?? { pid, startTime: st.startTime, state: st.state, ppid: st.ppid, why: [] };
    if (!row.why.includes(why)) row.why.push(why);
    found.set(pid, row);
  };
  for (const pid of pids()) {
    const argv = who.tags?.length ? cmdline(pid) : null;
    if (argv && argv.some((a) => who.tags.some((t) => a.includes(t)))) add(pid, "tag");
    const m = who.leaseIds.size || who.instanceId ? markers(pid) : null;
    if (m && ((m.lease && who.leaseIds.has(m.lease)) || (who.instanceId && m.instance === who.instanceId)))
      add(pid, "marker");
  }
  for (const f of who.pidFiles ?? [])
    for (const e of pidFileEntries(f)) if (stat(e.pid)?.startTime === e.startTime) add(e.pid, "pidfile");
  for (const d of who.cgroupDirs ?? []) for (const pid of cgroupMembers(d)) add(pid, "cgroup");
  for (const row of found.values()) {
    row.argv = (cmdline(row.pid) ?? []).join(" ").slice(0, 160);
    row.cgroup = cgroupOf(row.pid);
  }
  return [...found.values()];
}

/** Polls `leftovers(who)` until none is left or `deadline` (ms since the epoch) passes; answers the last look. */
export async function leftoversUntil(who, deadline) {
  for (;;) {
    const rows = leftovers(who);
    if (rows.length === 0 || Date.now() >= deadline) return rows;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Lease files of a state dir (live and archived), read directly: [{leaseId, state, cgroup, sessionKey, where}]. */
export function leaseFiles(stateDir) {
  const out = [];
  const dir = join(stateDir, "acpx", "leases");
  for (const [d, where] of [
    [dir, "live"],
    [join(dir, "archive"), "archive"],
  ]) {
    let names = [];
    try {
      names = readdirSync(d).filter((n) => n.endsWith(".json") && !n.startsWith("."));
    } catch {
      continue;
    }
    for (const n of names) {
      try {
        const l = JSON.parse(readFileSync(join(d, n), "utf8"));
        out.push({ leaseId: l.leaseId, state: l.state, cgroup: l.cgroup?.path ?? null, key: l.sessionKey, where });
      } catch (e) {
        out.push({ leaseId: n, state: "unreadable", error: String(e.message), where });
      }
    }
  }
  let quarantined = [];
  try {
    quarantined = readdirSync(join(dir, "quarantine"));
  } catch {
    // none
  }
  return { leases: out, quarantined };
}
