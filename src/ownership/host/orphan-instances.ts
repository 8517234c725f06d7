/**
 * Instance folders whose state dir is gone: `<proclease root>/<instance id>`
 * left on the host after an operator deleted the state dir that named it.
 * Found through the host's instance index (ownership/host/instance-index.ts), the
 * only record of the folder's root once the state dir is deleted.
 *
 * An orphan here is a folder that exists, whose indexed state dir does not
 * (lstat says ENOENT; any other answer is not "gone"). `doctor` lists them;
 * `reap --orphan-cgroups` removes the EMPTY ones: no cgroup below it and
 * populated 0, checked again right before the rmdir, which itself refuses
 * a folder that is not empty. A folder that holds cgroups or processes is
 * reported and left alone; so is everything this code cannot read (fail
 * closed: an unreadable record, folder or state dir is never "gone").
 * A record whose state dir and folders are all gone is forgotten.
 */
import { promises as fsp } from "node:fs";
import { join } from "node:path";
import { isPopulated, subdirectories } from "../../containment/index.js";
import {
  forgetInstance,
  instanceIndexDir,
  listInstanceIds,
  readInstance,
  type InstanceIndexRecord,
} from "./instance-index.js";
import { checkInstanceFolder } from "./containment-record.js";
import { hostFaultOfCode } from "../leases/host-faults.js";

export type FolderState = "empty" | "holds-cgroups" | "populated" | "unknown";

export interface OrphanInstanceFolder {
  instanceId: string;
  /** the state dir the index names for it (gone) */
  stateDir: string;
  folder: string;
  state: FolderState;
  why: string;
}

export interface InstanceFolderScan {
  /** the index read, or null when this host has none */
  index: string | null;
  orphans: OrphanInstanceFolder[];
  /** instance ids whose state dir and folders are all gone: their records can go */
  forgettable: string[];
  /** instance ids with a folder this scan could not judge: their records stay */
  unsure: string[];
  problems: string[];
}

export interface InstanceFolderEntry extends OrphanInstanceFolder {
  action: "would-remove" | "removed" | "gone" | "left-alone" | "failed";
  detail: string;
}

export interface InstanceFolderReport {
  index: string | null;
  dryRun: boolean;
  entries: InstanceFolderEntry[];
  /** records dropped (or, in a dry run, that would be) */
  forgotten: string[];
  problems: string[];
}

/** Read-only: what the index says is left of deleted state dirs. */
export async function scanOrphanInstanceFolders(): Promise<InstanceFolderScan> {
  const index = instanceIndexDir();
  const scan: InstanceFolderScan = { index, orphans: [], forgettable: [], unsure: [], problems: [] };
  if (index === null) return scan;
  const listed = await listInstanceIds(index);
  if ("why" in listed) return { ...scan, problems: [listed.why] };
  for (const id of listed.ids) {
    const r = await readInstance(index, id);
    if (r.kind === "refused") scan.problems.push(r.why);
    if (r.kind !== "ok") continue;
    const gone = await stateDirGone(r.record.stateDir);
    if (gone !== true) {
      if (gone !== false) scan.problems.push(`instance ${id}: ${gone}; its folders are left alone`);
      continue;
    }
    const before = scan.orphans.length + scan.problems.length;
    await scanFolders(r.record, scan);
    if (scan.orphans.length + scan.problems.length === before) scan.forgettable.push(id);
  }
  return scan;
}

async function scanFolders(record: InstanceIndexRecord, scan: InstanceFolderScan): Promise<void> {
  for (const root of record.roots) {
    const folder = join(root, record.instanceId);
    const shape = await checkInstanceFolder(folder);
    if (shape === "absent") continue;
    if (shape !== null) {
      scan.problems.push(`instance ${record.instanceId}: ${shape}; left alone`);
      scan.unsure.push(record.instanceId);
      continue;
    }
    const { state, why } = await folderState(folder);
    scan.orphans.push({ instanceId: record.instanceId, stateDir: record.stateDir, folder, state, why });
  }
}

/** true: lstat says it does not exist; false: it exists; else why it cannot tell. */
async function stateDirGone(stateDir: string): Promise<boolean | string> {
  try {
    await fsp.lstat(stateDir);
    return false;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return hostFaultOfCode(code) === "missing"
      ? true
      : `cannot tell whether its state dir ${stateDir} exists (${code ?? String(e)})`;
  }
}

async function folderState(folder: string): Promise<{ state: FolderState; why: string }> {
  const subs = await subdirectories(folder);
  if (!subs.ok) return { state: "unknown", why: subs.why };
  if (subs.names.length > 0)
    return { state: "holds-cgroups", why: `holds ${subs.names.length} cgroup(s): ${subs.names.join(", ")}` };
  const p = await isPopulated(folder);
  if (p === "empty") return { state: "empty", why: "its state dir is gone and nothing is in it" };
  return {
    state: p === "populated" ? "populated" : "unknown",
    why: p === "populated" ? "processes are in it" : `its populated state is ${p}`,
  };
}

/** The scan, then (unless a dry run) the rmdir of each EMPTY folder, checked again first, and the records that can go. */
export async function reapOrphanInstanceFolders(dryRun: boolean): Promise<InstanceFolderReport> {
  const scan = await scanOrphanInstanceFolders();
  const entries: InstanceFolderEntry[] = [];
  for (const o of scan.orphans) entries.push(await reapOne(o, dryRun));
  const forgotten: string[] = [];
  const cleared = new Set(scan.orphans.map((o) => o.instanceId).filter((id) => !scan.unsure.includes(id)));
  for (const e of entries)
    if (e.action !== "removed" && e.action !== "gone" && e.action !== "would-remove") cleared.delete(e.instanceId);
  const problems = [...scan.problems];
  for (const id of [...scan.forgettable, ...cleared]) {
    if (!dryRun) {
      const done = await forgetInstance(scan.index!, id).then(
        () => true,
        (e: unknown) => (
          problems.push(`cannot remove the index record of ${id}: ${e instanceof Error ? e.message : String(e)}`),
          false
        ),
      );
      if (!done) continue;
    }
    forgotten.push(id);
  }
  return { index: scan.index, dryRun, entries, forgotten, problems };
}

async function reapOne(o: OrphanInstanceFolder, dryRun: boolean): Promise<InstanceFolderEntry> {
  if (o.state !== "empty") return { ...o, action: "left-alone", detail: `never removed while not empty (${o.state})` };
  if (dryRun) return { ...o, action: "would-remove", detail: "rmdir" };
  // what was listed must still hold: the state dir still gone, the folder still empty
  if ((await stateDirGone(o.stateDir)) !== true)
    return { ...o, action: "left-alone", detail: `its state dir ${o.stateDir} is back (or cannot be read)` };
  const now = await folderState(o.folder);
  if (now.state !== "empty") return { ...o, action: "left-alone", detail: `no longer empty: ${now.why}` };
  try {
    await fsp.rmdir(o.folder);
    return { ...o, action: "removed", detail: "removed" };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (hostFaultOfCode(code) === "missing") return { ...o, action: "gone", detail: "removed by someone else first" };
    if (hostFaultOfCode(code) === "busy") return { ...o, action: "left-alone", detail: `not empty any more (${code})` };
    return { ...o, action: "failed", detail: `rmdir: ${code ?? String(e)}` };
  }
}
