/**
 * Where cgroup2 is mounted and how a process's cgroup reads as a filesystem
 * path: the parsers of /proc/PID/mountinfo and /proc/PID/cgroup, the mount a
 * cgroup path is visible through, and a process's cgroup as a path. Every
 * reader here reads now: nothing is kept between calls, so a caller that
 * needs the mount table twice reads it once and passes it on.
 */
import { promises as fsp } from "node:fs";
import { assertPidArg, faultOf } from "./errors.js";
import { isWithin } from "./paths.js";

export interface MountInfoEntry {
  mountId: number;
  parentId: number;
  /** the path inside the filesystem that is mounted here ("/" = the whole fs) */
  root: string;
  mountPoint: string;
  mountOptions: string[];
  fsType: string;
  source: string;
  superOptions: string[];
}

/** Undoes the octal escapes of /proc/PID/mountinfo (\040 space, \011 tab, \012 newline, \134 backslash). */
export function unescapeMountField(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * Parses /proc/PID/mountinfo. Lines that do not have the documented shape
 * (`id parent maj:min root mountpoint opts [optional…] - fstype source superopts`)
 * are skipped, never half-parsed.
 */
export function parseMountInfo(text: string): MountInfoEntry[] {
  const out: MountInfoEntry[] = [];
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const fields = line.split(" ");
    const sep = fields.indexOf("-", 6);
    if (sep === -1 || fields.length < sep + 3) continue;
    const [id, parent, , root, mountPoint, opts] = fields;
    if (!/^\d+$/.test(id ?? "") || !/^\d+$/.test(parent ?? "")) continue;
    if (root === undefined || mountPoint === undefined || opts === undefined) continue;
    out.push({
      mountId: Number(id),
      parentId: Number(parent),
      root: unescapeMountField(root),
      mountPoint: unescapeMountField(mountPoint),
      mountOptions: opts.split(","),
      fsType: fields[sep + 1]!,
      source: unescapeMountField(fields[sep + 2]!),
      superOptions: (fields[sep + 3] ?? "").split(","),
    });
  }
  return out;
}

export interface ProcCgroup {
  /** the `0::` path (cgroup v2), relative to this reader's cgroup namespace root; null when absent */
  v2: string | null;
  /** true when the v2 path ends with " (deleted)": the cgroup was removed (a zombie's) */
  v2Deleted: boolean;
  /** v1 hierarchies: controller (or "name=…") → path */
  v1: Map<string, string>;
}

/** Parses /proc/PID/cgroup (`hierarchy-id:controllers:path`; the path may itself contain ':'). */
export function parseProcCgroup(text: string): ProcCgroup {
  let v2: string | null = null;
  let v2Deleted = false;
  const v1 = new Map<string, string>();
  for (const line of text.split("\n")) {
    const a = line.indexOf(":");
    const b = a === -1 ? -1 : line.indexOf(":", a + 1);
    if (b === -1) continue;
    const hier = line.slice(0, a);
    const ctrls = line.slice(a + 1, b);
    let path = line.slice(b + 1);
    if (!path.startsWith("/")) continue;
    if (hier === "0" && ctrls === "") {
      if (path.endsWith(" (deleted)")) {
        v2Deleted = true;
        path = path.slice(0, -" (deleted)".length);
      }
      v2 = path;
    } else if (/^\d+$/.test(hier)) {
      for (const c of ctrls.split(",")) if (c !== "") v1.set(c, path);
    }
  }
  return { v2, v2Deleted, v1 };
}

export interface Cgroup2Mount {
  mountPoint: string;
  /** the cgroup path mounted at mountPoint (the mountinfo root field) */
  root: string;
  readOnly: boolean;
}

/**
 * The cgroup2 mount through which `cgroupPath` (a `0::` path) is visible: the
 * one whose root is the longest prefix of it, read-write ones first, earlier
 * ones on a tie. With no path, the first one mounting the namespace root.
 * null when there is none (a v1-only host, or our cgroup is not visible).
 */
export function findCgroup2Mount(entries: readonly MountInfoEntry[], cgroupPath?: string): Cgroup2Mount | null {
  let best: Cgroup2Mount | null = null;
  for (const e of entries) {
    if (e.fsType !== "cgroup2") continue;
    const m: Cgroup2Mount = { mountPoint: e.mountPoint, root: e.root, readOnly: e.mountOptions.includes("ro") };
    if (cgroupPath !== undefined ? fsPathOf(m, cgroupPath) === null : m.root !== "/") continue;
    if (
      best === null ||
      m.root.length > best.root.length ||
      (m.root.length === best.root.length && best.readOnly && !m.readOnly)
    )
      best = m;
  }
  return best;
}

/** The directory a mount shows its root cgroup at (the mount point without trailing "/"). */
export function mountDir(mount: Pick<Cgroup2Mount, "mountPoint">): string {
  return mount.mountPoint.replace(/\/+$/, "") || "/";
}

/**
 * The filesystem path of a `0::` cgroup path under a cgroup2 mount, or null
 * when the mount does not show it (outside the mounted subtree, or a path
 * with ".." that lies outside our cgroup namespace).
 */
export function fsPathOf(mount: Cgroup2Mount, cgroupPath: string): string | null {
  if (!cgroupPath.startsWith("/") || cgroupPath.split("/").some((s) => s === ".." || s === ".")) return null;
  if (!isWithin(cgroupPath, mount.root)) return null;
  const mp = mountDir(mount);
  const rest = mount.root === "/" ? cgroupPath : cgroupPath.slice(mount.root.length);
  return rest === "" || rest === "/" ? mp : mp === "/" ? rest : mp + rest;
}

export interface MountTable {
  entries: MountInfoEntry[];
  /** this process's `0::` cgroup path; null when /proc/self/cgroup has no v2 line */
  selfV2: string | null;
  /** the cgroup2 mount this process's cgroup is visible through, else the first mounting the namespace root; null when none */
  own: Cgroup2Mount | null;
}

/** /proc/self/mountinfo and /proc/self/cgroup, read now. Throws what the reads throw. */
export async function readMountTable(): Promise<MountTable> {
  const [mountinfo, self] = await Promise.all([
    fsp.readFile("/proc/self/mountinfo", "utf8"),
    fsp.readFile("/proc/self/cgroup", "utf8"),
  ]);
  const entries = parseMountInfo(mountinfo);
  const selfV2 = parseProcCgroup(self).v2;
  return { entries, selfV2, own: findCgroup2Mount(entries, selfV2 ?? undefined) ?? findCgroup2Mount(entries) };
}

/** The cgroup2 mount this process's own cgroup is visible through (readMountTable's `own`); null when none or unreadable. */
export async function readOwnMount(): Promise<Cgroup2Mount | null> {
  return readMountTable().then(
    (t) => t.own,
    () => null,
  );
}

export type CgroupRead = { state: "ok"; path: string } | { state: "gone" } | { state: "unknown"; why: string };

/**
 * A process's cgroup v2 as a filesystem path under `mount` (from
 * /proc/PID/cgroup, the `0::` line). "gone": no such process. "unknown":
 * unreadable, no v2 line, a removed cgroup, or not visible under the mount.
 */
export async function readCgroupTyped(pid: number, mount: Cgroup2Mount | null): Promise<CgroupRead> {
  assertPidArg(pid);
  let text: string;
  try {
    text = await fsp.readFile(`/proc/${pid}/cgroup`, "utf8");
  } catch (e) {
    const f = faultOf(e);
    return f.fault === "missing" || f.fault === "no-process"
      ? { state: "gone" }
      : { state: "unknown", why: `/proc/${pid}/cgroup: ${f.code}` };
  }
  const parsed = parseProcCgroup(text);
  if (parsed.v2 === null) return text === "" ? { state: "gone" } : { state: "unknown", why: "no cgroup v2 line" };
  if (parsed.v2Deleted) return { state: "unknown", why: `in a removed cgroup ${parsed.v2}` };
  if (mount === null) return { state: "unknown", why: "no cgroup2 mount" };
  const p = fsPathOf(mount, parsed.v2);
  return p === null
    ? { state: "unknown", why: `cgroup ${parsed.v2} is not visible under ${mount.mountPoint}` }
    : { state: "ok", path: p };
}

/**
 * The filesystem path of a process's cgroup v2, or null when the process is
 * gone or the answer cannot be read. null is "no answer", never "not a
 * member". `mount`: the cgroup2 mount to read it under (detection's, or one
 * the caller read); without it, this process's own mount is read now.
 */
export async function readCgroupOf(pid: number, mount?: Cgroup2Mount | null): Promise<string | null> {
  const r = await readCgroupTyped(pid, mount === undefined ? await readOwnMount() : mount);
  return r.state === "ok" ? r.path : null;
}
