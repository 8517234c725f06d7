/**
 * Ending what a lease cgroup holds, and removing it. cgroup.kill (Linux >=
 * 5.14) is one atomic write that SIGKILLs the whole subtree, forks made
 * meanwhile included. Without it the cgroup is frozen where cgroup.freeze
 * exists (no forks, no exits that could free a pid for reuse), then each
 * member is SIGKILLed through the identity-checked signaller after its
 * membership was re-read, until populated 0 or the deadline; the cgroup is
 * thawed again before returning.
 *
 * Only a checked lease cgroup (handle.ts) is killed, signalled or removed: a
 * path given as a string is opened (and so checked) first. A cgroup holding
 * this process or one of its ancestors is refused at every kill and signal
 * (membership changes, so this is read each time).
 */
import { promises as fsp } from "node:fs";
import { ancestorsOfThisProcess, checkSignalTarget } from "../facts/guards.js";
import { sameProcess } from "../facts/identity.js";
import { createProcfsFacts, readStatSync } from "../facts/procfs.js";
import { createSignaller } from "../facts/signal.js";
import type { ProcessSignaller, SignalOutcome } from "../facts/types.js";
import { faultOf, type Fault } from "./errors.js";
import {
  exists,
  isPopulated,
  membersOf,
  sleep,
  subdirectories,
  waitUntilEmpty,
  writeCgroupFile,
  writeIfExists,
  type PopulatedState,
} from "./files.js";
import { openLeaseCgroup, type LeaseCgroup } from "./handle.js";
import { readCgroupTyped, readOwnMount, type Cgroup2Mount } from "./mountinfo.js";
import { isWithin } from "./paths.js";

export type KillOutcome =
  /** nothing is left (populated 0): `via` says what got it there */
  | { outcome: "empty"; via: "cgroup.kill" | "signal-loop" | "already-empty" }
  /** waitMs 0: cgroup.kill was written; nothing was waited for */
  | { outcome: "sent"; via: "cgroup.kill" }
  /** the cgroup does not exist (any members it had are gone with it) */
  | { outcome: "gone" }
  /** still populated at the deadline (processes in D state, or no permission) */
  | { outcome: "survivors"; via: "cgroup.kill" | "signal-loop"; pids: number[] | null; detail?: string }
  /** a guard refused (KillRefusal): the path is not a lease cgroup, or holds this process or an ancestor, or whether it does cannot be told */
  | { outcome: "refused"; code: KillRefusal; why: string }
  | { outcome: "unknown"; why: string };

/** Why a kill (or a member signal) was refused. */
export type KillRefusal = "not-a-lease-cgroup" | "holds-us" | "cannot-tell-if-holds-us";

export interface KillOptions {
  /** "auto": cgroup.kill where present, else the signal loop. Default "auto". */
  method?: "auto" | "cgroup.kill" | "signal-loop";
  /** how long to wait for populated 0; 0 = write cgroup.kill and return "sent". Default 5000. */
  waitMs?: number;
  /** the identity-checked signaller for the loop (default: procfs facts, pidfd when the addon loads) */
  signaller?: ProcessSignaller;
}

type Opened =
  | { ok: true; cg: LeaseCgroup }
  | { ok: false; outcome: "gone" }
  | { ok: false; outcome: "refused"; code: KillRefusal; why: string }
  | { ok: false; outcome: "unknown"; why: string };

async function opened(target: string | LeaseCgroup): Promise<Opened> {
  if (typeof target !== "string") return { ok: true, cg: target };
  const o = await openLeaseCgroup({ path: target });
  if (o.state === "open") return { ok: true, cg: o.cgroup };
  if (o.state === "gone") return { ok: false, outcome: "gone" };
  return o.state === "unknown"
    ? { ok: false, outcome: "unknown", why: o.why }
    : { ok: false, outcome: "refused", code: "not-a-lease-cgroup", why: o.why };
}

/** SIGKILLs everything in a lease cgroup and its subtree (see the header). */
export async function killCgroup(target: string | LeaseCgroup, opts: KillOptions = {}): Promise<KillOutcome> {
  const o = await opened(target);
  if (!o.ok) {
    const { ok: _ok, ...answer } = o;
    return answer;
  }
  const mount = await readOwnMount();
  const refusal = await holdsUsProblem(o.cg.path, mount);
  if (refusal !== null) return { outcome: "refused", ...refusal };
  return killSubtree(o.cg.path, opts, mount);
}

/** The kill itself, on a path already checked (a handle's, or detection's own probe). */
export async function killSubtree(path: string, opts: KillOptions, mount: Cgroup2Mount | null): Promise<KillOutcome> {
  const waitMs = opts.waitMs ?? 5000;
  const method = opts.method ?? "auto";
  const before = await isPopulated(path);
  if (before === "gone") return { outcome: "gone" };
  if (before === "empty") return { outcome: "empty", via: "already-empty" };
  const hasKill = method !== "signal-loop" && (await exists(`${path}/cgroup.kill`));
  if (method === "cgroup.kill" && !hasKill)
    return { outcome: "unknown", why: `${path}/cgroup.kill does not exist (Linux < 5.14)` };
  if (!hasKill) return signalLoop(path, Math.max(waitMs, 1), opts.signaller ?? defaultSignaller(), mount);
  try {
    await writeCgroupFile(`${path}/cgroup.kill`, "1");
  } catch (e) {
    const f = faultOf(e);
    if (f.fault === "missing") return { outcome: "gone" };
    return { outcome: "unknown", why: `writing ${path}/cgroup.kill failed (${f.code})` };
  }
  if (waitMs <= 0) return { outcome: "sent", via: "cgroup.kill" };
  const s = await waitUntilEmpty(path, waitMs);
  if (s === "empty" || s === "gone") return { outcome: "empty", via: "cgroup.kill" };
  const m = await membersOf(path);
  return {
    outcome: "survivors",
    via: "cgroup.kill",
    pids: m.state === "ok" ? m.pids : null,
    ...(s === "unknown" ? { detail: "cgroup.events unreadable" } : {}),
  };
}

async function signalLoop(
  path: string,
  waitMs: number,
  signaller: ProcessSignaller,
  mount: Cgroup2Mount | null,
): Promise<KillOutcome> {
  const deadline = Date.now() + waitMs;
  const froze = await writeIfExists(`${path}/cgroup.freeze`, "1");
  let lastPids: number[] | null = null;
  let detail: string | undefined;
  try {
    for (;;) {
      const s = await isPopulated(path);
      if (s === "empty" || s === "gone") return { outcome: "empty", via: "signal-loop" };
      const m = await membersOf(path);
      if (m.state === "gone") return { outcome: "empty", via: "signal-loop" };
      if (m.state === "ok") {
        lastPids = m.pids;
        const outcomes = await signalPids(path, m.pids, "SIGKILL", signaller, mount);
        const blocked = outcomes.filter(
          (o) =>
            o.outcome === "denied" || o.outcome === "refused" || o.outcome === "unknown" || o.outcome === "unsupported",
        );
        detail = blocked.length ? blocked.map((o) => `${o.pid}: ${o.outcome}`).join(", ") : undefined;
      } else {
        detail = m.why;
      }
      if (Date.now() >= deadline) break;
      await sleep(5);
    }
    const s = await waitUntilEmpty(path, 0);
    if (s === "empty" || s === "gone") return { outcome: "empty", via: "signal-loop" };
    return { outcome: "survivors", via: "signal-loop", pids: lastPids, ...(detail !== undefined ? { detail } : {}) };
  } finally {
    if (froze) await writeIfExists(`${path}/cgroup.freeze`, "0");
  }
}

export interface MemberSignal {
  pid: number;
  outcome: SignalOutcome | "left" | "not-member";
}

/**
 * Sends `signal` to every current member of a lease cgroup (the TERM phase
 * of ending it, before the grace and cgroup.kill). Each pid is sent to only
 * after its start time was read, its membership re-read and the start time
 * found unchanged, through the identity-checked signaller and the hard
 * guards. "left": it moved out or exited between the reads.
 */
export async function signalMembers(
  target: string | LeaseCgroup,
  signal: NodeJS.Signals,
  opts: { signaller?: ProcessSignaller } = {},
): Promise<{ state: "ok"; sent: MemberSignal[] } | { state: "gone" } | { state: "refused" | "unknown"; why: string }> {
  const o = await opened(target);
  if (!o.ok) return o.outcome === "gone" ? { state: "gone" } : { state: o.outcome, why: o.why };
  const mount = await readOwnMount();
  const refusal = await holdsUsProblem(o.cg.path, mount);
  if (refusal !== null) return { state: "refused", why: refusal.why };
  const m = await membersOf(o.cg);
  if (m.state !== "ok") return m;
  return {
    state: "ok",
    sent: await signalPids(o.cg.path, m.pids, signal, opts.signaller ?? defaultSignaller(), mount),
  };
}

async function signalPids(
  path: string,
  pids: readonly number[],
  signal: NodeJS.Signals,
  signaller: ProcessSignaller,
  mount: Cgroup2Mount | null,
): Promise<MemberSignal[]> {
  const out: MemberSignal[] = [];
  for (const pid of pids) out.push({ pid, outcome: await signalMember(path, pid, signal, signaller, mount) });
  return out;
}

async function signalMember(
  path: string,
  pid: number,
  signal: NodeJS.Signals,
  signaller: ProcessSignaller,
  mount: Cgroup2Mount | null,
): Promise<MemberSignal["outcome"]> {
  if (!checkSignalTarget(pid).allowed) return "refused";
  const st = readStatSync(pid);
  if (st === null) return "gone";
  const where = await readCgroupTyped(pid, mount);
  if (where.state !== "ok") return where.state;
  if (!isWithin(where.path, path)) return "not-member";
  // the membership read above belongs to the process with this start time
  const again = readStatSync(pid);
  if (again === null || !sameProcess({ pid, startTime: again.startTime }, { pid, startTime: st.startTime }))
    return "left";
  return signaller.signal(pid, st.startTime, signal);
}

/** The signaller when the caller gives none: procfs facts, pidfd when the addon loads (made per call: nothing is kept here). */
function defaultSignaller(): ProcessSignaller {
  return createSignaller(createProcfsFacts());
}

/** null when `path` holds neither this process, its parent nor an ancestor; else why it must not be killed. cgroup.kill takes the whole subtree. */
async function holdsUsProblem(
  path: string,
  mount: Cgroup2Mount | null,
): Promise<{ code: KillRefusal; why: string } | null> {
  const watch = [process.pid, process.ppid, ...ancestorsOfThisProcess()];
  for (const pid of new Set(watch)) {
    if (pid <= 1) continue;
    const r = await readCgroupTyped(pid, mount);
    if (r.state === "gone" && pid !== process.pid) continue;
    const who = pid === process.pid ? "this process" : `ancestor ${pid}`;
    if (r.state !== "ok")
      return {
        code: "cannot-tell-if-holds-us",
        why: `cannot tell whether ${who} is inside ${path} (${r.state === "unknown" ? r.why : "gone"})`,
      };
    if (isWithin(r.path, path))
      return {
        code: "holds-us",
        why: `${path} holds ${pid === process.pid ? "this process" : pid === process.ppid ? "this process's parent" : `ancestor ${pid}`}`,
      };
  }
  return null;
}

export type RemoveOutcome =
  | { outcome: "removed" }
  | { outcome: "gone" }
  /** still populated (or a sub-cgroup could not go) at the deadline */
  | { outcome: "busy"; populated: PopulatedState; detail: string }
  | { outcome: "refused"; why: string }
  | { outcome: "unknown"; why: string };

/**
 * rmdir of a lease cgroup, sub-cgroups first (all empty by then). The kernel
 * refuses while anything is populated, so it retries as long as populated is
 * clearing, until `waitMs` (default 5000).
 */
export async function removeCgroup(
  target: string | LeaseCgroup,
  opts: { waitMs?: number } = {},
): Promise<RemoveOutcome> {
  const o = await opened(target);
  if (!o.ok) return o.outcome === "gone" ? { outcome: "gone" } : { outcome: o.outcome, why: o.why };
  return removeTree(o.cg.path, opts.waitMs ?? 5000);
}

/** The removal itself, on a path already checked (a handle's, or detection's own probe). */
export async function removeTree(path: string, waitMs: number): Promise<RemoveOutcome> {
  const deadline = Date.now() + waitMs;
  let step = 1;
  for (;;) {
    const r = await rmdirDeep(path);
    if (r === "removed") return { outcome: "removed" };
    if (r === "gone") return { outcome: "gone" };
    if (r.fault !== "busy") return { outcome: "unknown", why: `rmdir ${r.dir}: ${r.code}` };
    if (Date.now() >= deadline)
      return { outcome: "busy", populated: await isPopulated(path), detail: `rmdir ${r.dir}: ${r.code}` };
    await sleep(step);
    step = Math.min(step * 2, 25);
  }
}

async function rmdirDeep(dir: string): Promise<"removed" | "gone" | { dir: string; fault: Fault; code: string }> {
  const children = await subdirectories(dir);
  if (!children.ok) return children.missing ? "gone" : { dir, fault: children.fault, code: children.code };
  for (const c of children.names) {
    const r = await rmdirDeep(`${dir}/${c}`);
    if (typeof r === "object") return r;
  }
  try {
    await fsp.rmdir(dir);
    return "removed";
  } catch (e) {
    const f = faultOf(e);
    return f.fault === "missing" ? "gone" : { dir, ...f };
  }
}

export function describeKill(k: KillOutcome): string {
  return "why" in k ? `${k.outcome}: ${k.why}` : "detail" in k && k.detail ? `${k.outcome}: ${k.detail}` : k.outcome;
}
