// The soak's own view of the process table: plain reads of /proc, written
// independently of the library under test, so "nothing of ours is left" is
// not judged by the code being judged. Linux only (the soak is).
import { readdirSync, readFileSync } from "node:fs";

export const LEASE_KEY = "OPENCLAW_ACPX_LEASE_ID";
export const INSTANCE_KEY = "OPENCLAW_GATEWAY_INSTANCE_ID";

export function pids() {
  const out = [];
  for (const d of readdirSync("/proc")) if (d.charCodeAt(0) >= 48 && d.charCodeAt(0) <= 57) out.push(Number(d));
  return out;
}

/** {pid, comm, state, ppid, pgid, sid, flags, startTime} or null when gone */
export function stat(pid) {
  let s;
  try {
    s = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  const close = s.lastIndexOf(")");
  const f = s.slice(close + 2).split(" ");
  return {
    pid,
    comm: s.slice(s.indexOf("(") + 1, close),
    state: f[0],
    ppid: Number(f[1]),
    pgid: Number(f[2]),
    sid: Number(f[3]),
    flags: Number(f[6]),
    startTime: f[19],
  };
}

const PF_KTHREAD = 0x00200000;
export const isKernelThread = (st) => (st.flags & PF_KTHREAD) !== 0 || st.pid === 2 || st.ppid === 2;

/** The two markers from a process's environment; null when unreadable or gone. */
export function markers(pid) {
  let raw;
  try {
    raw = readFileSync(`/proc/${pid}/environ`, "latin1");
  } catch {
    return null;
  }
  const out = { lease: null, instance: null };
  for (const kv of raw.split("\0")) {
    if (kv.startsWith(`${LEASE_KEY}=`)) out.lease = kv.slice(LEASE_KEY.length + 1);
    else if (kv.startsWith(`${INSTANCE_KEY}=`)) out.instance = kv.slice(INSTANCE_KEY.length + 1);
  }
  return out;
}

export function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8")
      .split("\0")
      .filter((x, i, a) => x !== "" || i < a.length - 1);
  } catch {
    return null;
  }
}

/** Direct children (every thread's list), from /proc/<pid>/task/<tid>/children. */
export function children(pid) {
  const out = new Set();
  let tids;
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const tid of tids) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim().split(/\s+/))
        if (c) out.add(Number(c));
    } catch {
      /* thread gone */
    }
  }
  return [...out];
}

/** The same process (pid AND start time) is alive and not a zombie. */
export function sameAlive(pid, startTime) {
  const st = stat(pid);
  return st !== null && st.startTime === startTime && st.state !== "Z" && st.state !== "X";
}

/**
 * SIGKILL a process the soak itself decided to end, only if it is still the
 * process we identified (pid + start time). Returns true when sent.
 */
export function killSame(pid, startTime, signal = "SIGKILL") {
  if (!(pid > 1) || pid === process.pid || !sameAlive(pid, startTime)) return false;
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Every live process that carries one of `leaseIds` or `instanceId` in its
 * environment (zombies carry nothing that can run). `exclude` is a Map
 * pid -> startTime of our bystanders, which carry real lease ids on purpose.
 */
export function carriers({ leaseIds, instanceIds, exclude }) {
  const out = [];
  for (const pid of pids()) {
    if (pid === process.pid) continue;
    const m = markers(pid);
    if (m === null || (m.lease === null && m.instance === null)) continue;
    const ours = (m.lease !== null && leaseIds.has(m.lease)) || (m.instance !== null && instanceIds.has(m.instance));
    if (!ours) continue;
    const st = stat(pid);
    if (st === null || st.state === "Z" || st.state === "X") continue;
    if (exclude.get(pid) === st.startTime) continue;
    out.push({ ...st, lease: m.lease, instance: m.instance, argv: cmdline(pid) });
  }
  return out;
}
