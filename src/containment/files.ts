/**
 * Reading and writing cgroup interface files, and what the kernel says
 * through them: populated (cgroup.events), the members (cgroup.procs of a
 * cgroup and every cgroup below it), a directory's identity (its inode,
 * which is cgroup.id). Outcomes fail closed: "gone" only when the file or
 * directory is missing, anything unreadable is "unknown", never "empty".
 * Joining a cgroup is not here: the one write to cgroup.procs is enter.ts.
 */
import { constants as fsConstants, promises as fsp } from "node:fs";
import { faultOf, type Fault } from "./errors.js";
import { cgroupPathProblem } from "./paths.js";

/** text, null when unreadable, "gone" (only with gone=true) when the file is missing. */
export async function readText(file: string): Promise<string | null>;
export async function readText(file: string, gone: true): Promise<string | null | "gone">;
export async function readText(file: string, gone = false): Promise<string | null | "gone"> {
  try {
    return await fsp.readFile(file, "utf8");
  } catch (e) {
    return gone && faultOf(e).fault === "missing" ? "gone" : null;
  }
}

export async function readSet(file: string): Promise<Set<string> | null> {
  const t = await readText(file);
  return t === null ? null : new Set(parseControllerList(t));
}

export async function exists(p: string): Promise<boolean> {
  try {
    await fsp.access(p, fsConstants.F_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Interface files are written write-only, without O_CREAT or O_TRUNC:
 * cgroup.kill is mode 0200 (a delegated, non-root owner cannot open it
 * read-write), and a missing file must fail, not be created.
 */
export async function writeCgroupFile(file: string, value: string): Promise<void> {
  await fsp.writeFile(file, value, { flag: fsConstants.O_WRONLY });
}

export async function writeIfExists(file: string, value: string): Promise<boolean> {
  try {
    await writeCgroupFile(file, value);
    return true;
  } catch {
    return false;
  }
}

/** Controllers listed in a cgroup.controllers / cgroup.subtree_control text. */
export function parseControllerList(text: string): string[] {
  return text.split(/\s+/).filter((c) => c !== "");
}

/** "populated" / "empty" from cgroup.events text; null when the key is missing or malformed. */
export function parsePopulated(eventsText: string): "populated" | "empty" | null {
  const m = /^populated ([01])$/m.exec(eventsText);
  return m === null ? null : m[1] === "1" ? "populated" : "empty";
}

export function parsePids(text: string): number[] {
  const out: number[] = [];
  for (const l of text.split("\n")) if (/^[1-9][0-9]*$/.test(l)) out.push(Number(l));
  return out;
}

export function parseCounter(text: string): number | null {
  const t = text.trim();
  return /^[0-9]+$/.test(t) ? Number(t) : null;
}

/** The directory's inode number (== cgroup.id on cgroup2) as a decimal string; null when it cannot be read. */
export async function cgroupIdOf(path: string): Promise<string | null> {
  try {
    return (await fsp.stat(path, { bigint: true })).ino.toString();
  } catch {
    return null;
  }
}

/** A cgroup by its path, or a handle to one (handle.ts LeaseCgroup): read by its path. */
type CgroupTarget = string | { readonly path: string };

const pathOf = (target: CgroupTarget): string => (typeof target === "string" ? target : target.path);

export type PopulatedState = "populated" | "empty" | "gone" | "unknown";

/** `populated` of cgroup.events: covers the whole subtree, kept by the kernel. */
export async function isPopulated(target: CgroupTarget): Promise<PopulatedState> {
  const path = pathOf(target);
  const text = await readText(`${path}/cgroup.events`, true);
  // the root cgroup has no cgroup.events: a missing file is "gone" only with its directory
  if (text === "gone") return (await exists(path)) ? "unknown" : "gone";
  if (text === null) return "unknown";
  return parsePopulated(text) ?? "unknown";
}

/** Polls isPopulated until "empty" or "gone", or the deadline; returns the last state. */
export async function waitUntilEmpty(target: CgroupTarget, timeoutMs: number): Promise<PopulatedState> {
  const deadline = Date.now() + timeoutMs;
  let step = 1;
  for (;;) {
    const s = await isPopulated(target);
    if (s === "empty" || s === "gone" || Date.now() >= deadline) return s;
    await sleep(step);
    step = Math.min(step * 2, 25);
  }
}

export type MembersResult = { state: "ok"; pids: number[] } | { state: "gone" } | { state: "unknown"; why: string };

/**
 * Every process in the cgroup and in any cgroup below it (a lease may hold a
 * nested gateway's own cgroups), from cgroup.procs. A sub-cgroup that vanishes
 * during the walk had no members (a populated cgroup cannot be removed). A
 * path given as a string is checked first (absolute, on cgroup2); a handle
 * was checked when it was opened.
 */
export async function membersOf(target: CgroupTarget): Promise<MembersResult> {
  if (typeof target === "string") {
    const bad = await cgroupPathProblem(target);
    if (bad === "gone") return { state: "gone" };
    if (bad !== null) return { state: "unknown", why: bad };
  }
  const pids = new Set<number>();
  const r = await walkMembers(pathOf(target), true, pids);
  if (r === "gone") return { state: "gone" };
  if (r !== null) return { state: "unknown", why: r };
  return { state: "ok", pids: [...pids].sort((a, b) => a - b) };
}

/** null when walked; "gone" when the top vanished; else why it could not be read. */
async function walkMembers(dir: string, top: boolean, pids: Set<number>): Promise<string | null | "gone"> {
  const procs = await readText(`${dir}/cgroup.procs`, true);
  if (procs === "gone") return top ? "gone" : null;
  if (procs === null) return `cannot read ${dir}/cgroup.procs`;
  for (const pid of parsePids(procs)) pids.add(pid);
  const children = await subdirectories(dir);
  if (!children.ok) return children.missing ? (top ? "gone" : null) : children.why;
  for (const c of children.names) {
    const r = await walkMembers(`${dir}/${c}`, false, pids);
    if (r !== null) return r;
  }
  return null;
}

export type Subdirectories =
  { ok: true; names: string[] } | { ok: false; missing: boolean; fault: Fault; code: string; why: string };

/** The child cgroups of `dir` by name; missing when `dir` is gone; else why it cannot be listed. */
export async function subdirectories(dir: string): Promise<Subdirectories> {
  try {
    return {
      ok: true,
      names: (await fsp.readdir(dir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name),
    };
  } catch (e) {
    const f = faultOf(e);
    return {
      ok: false,
      missing: f.fault === "missing",
      fault: f.fault,
      code: f.code,
      why: `cannot list ${dir} (${f.code})`,
    };
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
