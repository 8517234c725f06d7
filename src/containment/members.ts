/**
 * What a drain needs to end only the members of a lease cgroup that it can
 * attribute to the lease (the rule is ownership's: terminate/cgroup-attribution.ts):
 * hold the cgroup still (cgroup.freeze), list its members with their start
 * times, move a member out, and signal a member named by pid AND start time.
 *
 * Why freezing: a frozen cgroup's processes run no code, so they can neither
 * fork nor write any cgroup.procs while the drain judges them, and a process
 * moved in meanwhile is frozen on arrival. SIGKILL still ends a frozen
 * process (cgroup v2 freezer), and a process moved to a cgroup that is not
 * frozen runs again.
 *
 * Never freeze a cgroup that holds this process: it would stop the very
 * process that has to thaw it. freeze() checks that first, and callers move
 * this process out before they freeze.
 */
import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import { sameProcess } from "../facts/identity.js";
import { readStatSync } from "../facts/procfs.js";
import { enterCgroupAsync, type EnterOutcome } from "./enter.js";
import { faultOf } from "./errors.js";
import { exists, isPopulated, membersOf, readText, sleep, writeIfExists } from "./files.js";
import type { LeaseCgroup } from "./handle.js";
import { readCgroupTyped, type Cgroup2Mount } from "./mountinfo.js";
import { FOREIGN_LEAF, GATEWAY_LEAF, isWithin } from "./paths.js";

/** One member as listed: its pid and the start time read right after the listing (null: gone since). */
export interface ListedMember {
  pid: number;
  startTime: string;
}

export type ListMembers =
  { state: "ok"; members: ListedMember[] } | { state: "gone" } | { state: "unknown"; why: string };

/** Every process in the cgroup's subtree with its start time; one gone between the two reads is left out. */
export async function listMembers(cg: LeaseCgroup): Promise<ListMembers> {
  const m = await membersOf(cg);
  if (m.state !== "ok") return m;
  const members: ListedMember[] = [];
  for (const [i, pid] of m.pids.entries()) {
    // a fork storm lists thousands: the reads are synchronous, so the loop gets a turn between slices
    if (i > 0 && i % 256 === 0) await new Promise((r) => setImmediate(r));
    const st = readStatSync(pid);
    if (st !== null) members.push({ pid, startTime: st.startTime });
  }
  return { state: "ok", members };
}

export type FreezeOutcome = "frozen" | "freezing" | "unsupported" | "holds-us" | "failed";

/**
 * Freezes the cgroup and waits up to `waitMs` for the kernel's `frozen 1`
 * (a task in an uninterruptible sleep freezes when it leaves it: "freezing"
 * then, and the caller goes on; its processes that did freeze stay frozen).
 * Refused when this process is inside.
 */
export async function freeze(cg: LeaseCgroup, waitMs: number, mount: Cgroup2Mount | null): Promise<FreezeOutcome> {
  if (!(await exists(`${cg.path}/cgroup.freeze`))) return "unsupported";
  const self = await readCgroupTyped(process.pid, mount);
  if (self.state !== "ok" || isWithin(self.path, cg.path)) return "holds-us";
  if (!(await writeIfExists(`${cg.path}/cgroup.freeze`, "1"))) return "failed";
  const deadline = Date.now() + waitMs;
  for (let step = 1; ; step = Math.min(step * 2, 20)) {
    const events = await readText(`${cg.path}/cgroup.events`);
    if (events !== null && /^frozen 1$/m.test(events)) return "frozen";
    if (events === null || Date.now() >= deadline) return "freezing";
    await sleep(step);
  }
}

/** Thaws the cgroup (a cgroup removed meanwhile needs nothing). */
export async function thaw(cg: LeaseCgroup): Promise<void> {
  await writeIfExists(`${cg.path}/cgroup.freeze`, "0");
}

/**
 * Moves one member out of a lease cgroup into `to` (enter.ts, the one write
 * to cgroup.procs), only while it still is the process that was listed
 * (start time read again right before the write). "gone": it exited.
 */
export async function moveOut(m: ListedMember, to: string): Promise<EnterOutcome> {
  if (!sameProcess(readStatSync(m.pid), m)) return { outcome: "gone" };
  return enterCgroupAsync(to, m.pid);
}

/**
 * The leaf a drain moves a member into when it is not the lease's and has
 * no better place: `<proclease root>/_foreign` (made when missing). No
 * lease cgroup is ever named like it, so no drain, kill or removal of
 * proclease touches what is in it: an operator decides. Removed again by
 * removeForeignLeaf once empty. null with why when it cannot be made.
 */
export async function foreignLeaf(leaseCgroupPath: string): Promise<{ path: string } | { path: null; why: string }> {
  const path = `${dirname(dirname(leaseCgroupPath))}/${FOREIGN_LEAF}`;
  try {
    await fsp.mkdir(path);
  } catch (e) {
    const f = faultOf(e);
    if (f.fault !== "exists") return { path: null, why: `mkdir ${path}: ${f.code}` };
  }
  return { path };
}

/** The `_foreign` leaf next to a lease cgroup's instance folder removed when nothing is in it (rmdir refuses a populated one). */
export async function removeForeignLeaf(leaseCgroupPath: string): Promise<void> {
  const path = `${dirname(dirname(leaseCgroupPath))}/${FOREIGN_LEAF}`;
  if ((await isPopulated(path)) !== "empty") return;
  await fsp.rmdir(path).catch(() => undefined);
}

let home: string | null = null;

/** Where detectContainment left this process: the cgroup it belongs in (set by detection, read by a drain that finds this process in a lease cgroup). */
export function recordHome(path: string): void {
  home = path;
}

/**
 * Where this process goes back to when it is found inside a lease cgroup,
 * in the order tried: where detection left it, the gateway's own cgroup
 * (the proclease root's parent), its `_gateway` leaf. Only places outside
 * every lease cgroup.
 */
export function homesOf(leaseCgroupPath: string): string[] {
  const root = dirname(dirname(leaseCgroupPath));
  const base = dirname(root);
  const out = home !== null && !isWithin(home, leaseCgroupPath) ? [home] : [];
  for (const p of [base, `${root}/${GATEWAY_LEAF}`]) if (!out.includes(p)) out.push(p);
  return out;
}
