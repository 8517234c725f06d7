/**
 * The host's index of gateway instances that made cgroups: one small record
 * per instance id, `{ instanceId, stateDir, roots }`, written beside the
 * state dir's own containment record (containment-record.ts). It is what
 * lets the CLI find an instance folder (`<proclease root>/<instance id>`)
 * once its state dir is deleted: the state dir was the only place that named
 * the folder's root, so without this record no command could find it.
 *
 * Where: `$PROCLEASE_INSTANCE_INDEX` when set (an absolute path), else
 * `/run/proclease/instances` for root, else `$XDG_RUNTIME_DIR/proclease/instances`,
 * else nowhere (nothing is recorded, and an orphan folder stays unknown:
 * the CLI then leaves it alone). Records are written like a lease (temp,
 * rename) in a private directory and read with the same refusals. One
 * record per instance id, so the index grows with the state dirs a host
 * ever had, never with runs; the CLI removes a record once its state dir and
 * folders are gone.
 */
import { readdir } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { CGROUP_NAME_RE } from "../../containment/index.js";
import { assertPrivate, atomicWrite, ensurePrivateDir, readOwnedFile, removeDurably } from "../leases/fs-safe.js";

export const INSTANCE_INDEX_ENV = "PROCLEASE_INSTANCE_INDEX";
const VERSION = 1;
/** roots kept per instance (as containment-record.ts keeps per state dir) */
const MAX_ROOTS = 16;

export interface InstanceIndexRecord {
  instanceId: string;
  /** the state dir the instance id lives in (absolute) */
  stateDir: string;
  /** proclease roots its folders were made under, newest first */
  roots: string[];
}

/** The index directory, or null when this host gives none (see above). */
export function instanceIndexDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const set = env[INSTANCE_INDEX_ENV];
  if (set !== undefined && set !== "") return isAbsolute(set) ? set : null;
  if (process.getuid?.() === 0) return "/run/proclease/instances";
  const xdg = env.XDG_RUNTIME_DIR;
  return xdg !== undefined && isAbsolute(xdg) ? join(xdg, "proclease", "instances") : null;
}

/**
 * Records that `instanceId`'s folders live under `root` and belong to
 * `stateDir`. Best effort by design: a host without an index directory, or
 * a write that fails, costs only the CLI's view of the folder after the
 * state dir is deleted (it is then left alone), never a lease.
 */
export async function recordInstance(instanceId: string, stateDir: string, root: string): Promise<void> {
  const dir = instanceIndexDir();
  if (dir === null || !CGROUP_NAME_RE.test(instanceId) || !isAbsolute(stateDir)) return;
  try {
    await ensurePrivateDir(dir);
    const prev = await readInstance(dir, instanceId);
    const earlier =
      prev.kind === "ok" && prev.record.stateDir === stateDir ? prev.record.roots.filter((r) => r !== root) : [];
    const record = { version: VERSION, instanceId, stateDir, roots: [root, ...earlier].slice(0, MAX_ROOTS) };
    await atomicWrite(dir, `${instanceId}.json`, JSON.stringify(record), false);
  } catch {
    // see above: the folder stays unknown to the CLI after its state dir is gone
  }
}

export type InstanceRead =
  { kind: "ok"; record: InstanceIndexRecord } | { kind: "missing" } | { kind: "refused"; why: string };

/** One record, with the store's refusals (a symlink, a foreign owner, a loose mode, a bad shape). */
export async function readInstance(dir: string, instanceId: string): Promise<InstanceRead> {
  const file = join(dir, `${instanceId}.json`);
  const r = await readOwnedFile(file, 64 * 1024);
  if (r.kind === "missing") return { kind: "missing" };
  if (r.kind !== "ok")
    return {
      kind: "refused",
      why: `${file}: ${r.kind === "unreadable" ? r.detail : r.kind === "foreign-owner" ? `owned by uid ${r.uid}` : "a symlink"}; refusing to trust it`,
    };
  try {
    assertPrivate(file, r, "file");
    const o = JSON.parse(r.text) as Partial<InstanceIndexRecord> & { version?: unknown };
    const ok =
      o.version === VERSION &&
      o.instanceId === instanceId &&
      typeof o.stateDir === "string" &&
      isAbsolute(o.stateDir) &&
      Array.isArray(o.roots) &&
      o.roots.every((x) => typeof x === "string");
    if (!ok)
      return {
        kind: "refused",
        why: `${file} does not have the shape {version: ${VERSION}, instanceId, stateDir, roots}`,
      };
    return { kind: "ok", record: { instanceId, stateDir: o.stateDir!, roots: o.roots! } };
  } catch (e) {
    return { kind: "refused", why: `${file}: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** Every record's instance id in the index (file names only; each is read and checked by readInstance). */
export async function listInstanceIds(dir: string): Promise<{ ids: string[] } | { why: string }> {
  try {
    if (!(await ensurePrivateDir(dir, false))) return { ids: [] };
    const names = await readdir(dir);
    return {
      ids: names
        .filter((n) => n.endsWith(".json") && CGROUP_NAME_RE.test(n.slice(0, -5)))
        .map((n) => n.slice(0, -5))
        .sort(),
    };
  } catch (e) {
    return { why: `cannot list ${dir}: ${e instanceof Error ? e.message : String(e)}` };
  }
}

/** The record goes once its state dir and its folders are gone. */
export async function forgetInstance(dir: string, instanceId: string): Promise<void> {
  if (CGROUP_NAME_RE.test(instanceId)) await removeDurably(dir, `${instanceId}.json`, false);
}
