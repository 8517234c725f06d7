/**
 * Where a state dir's lease cgroups live, recorded by the gateway so that the
 * CLI can find them: `proclease status`, `doctor` and `reap --orphan-cgroups`
 * run in another process, in another cgroup, and may not probe (detection
 * creates directories), so `<gateway cgroup>/proclease` is known only from
 * what the gateway wrote here: <stateDir>/acpx/containment.json.
 *
 * Every proclease root this state dir's gateways ever used is kept (newest
 * first, at most MAX_ROOTS): a gateway restarted in another cgroup (a unit
 * renamed, a shell instead of systemd) must not make the cgroups left under
 * the old root invisible. Written like a lease (temp, fsync, rename); read
 * with the same refusals (a symlink, a foreign owner, a loose mode).
 *
 * A root read back is used only when it is an absolute, normalised path
 * ending in /proclease on a cgroup2 filesystem; anything else is refused with
 * the reason, never listed (fail closed: a planted path must not lead the
 * CLI to kill what lives elsewhere).
 */
import { basename, dirname, join, resolve } from "node:path";
import { recordInstance } from "./instance-index.js";
import { CGROUP_NAME_RE, cgroupPathProblem, pathShapeProblem, PROCLEASE_DIR } from "../../containment/index.js";
import { rmdir } from "node:fs/promises";
import { assertPrivate, atomicWrite, ensurePrivateDir, readOwnedFile } from "../leases/fs-safe.js";
import { readGatewayInstanceId } from "../leases/instance-id.js";

export const CONTAINMENT_RECORD_FILE = "containment.json";
/** roots kept per state dir: enough for every cgroup a gateway was ever moved between in practice */
export const MAX_ROOTS = 16;
const RECORD_VERSION = 1;

export interface ContainmentRecord {
  version: number;
  /** proclease roots (`<gateway cgroup>/proclease`, filesystem paths), newest first */
  roots: string[];
  updatedAt: number;
}

export type ContainmentRecordRead =
  | { kind: "none" }
  | { kind: "ok"; record: ContainmentRecord }
  /** present but not usable: the why names the file and what is wrong */
  | { kind: "refused"; why: string };

const fileOf = (stateDir: string) => join(stateDir, "acpx", CONTAINMENT_RECORD_FILE);

/** null when `root` may name a proclease root (before any filesystem check); else why not. */
export function rootShapeProblem(root: unknown): string | null {
  if (typeof root !== "string" || root.length === 0) return `${JSON.stringify(root)} is not a path`;
  const shape = pathShapeProblem(root);
  if (shape !== null) return shape;
  if (basename(root) !== PROCLEASE_DIR) return `${root} does not end in /${PROCLEASE_DIR}`;
  return null;
}

/**
 * null when `dir` is a gateway instance's folder of lease cgroups
 * (`<proclease root>/<instance id>`, the instance folder createLeaseCgroup makes) on
 * cgroup2; "absent" when it does not exist; else why not. Orphans are looked
 * for only in such folders, never in a proclease root itself: the root also
 * holds the folders of other gateways sharing the cgroup, which are not this
 * state dir's to judge.
 */
export async function checkInstanceFolder(dir: string): Promise<string | "absent" | null> {
  const shape = rootShapeProblem(dirname(dir));
  if (shape !== null) return `${dir} is not in a proclease root: ${shape}`;
  if (!CGROUP_NAME_RE.test(basename(dir)))
    return `${dir} is not an instance folder (its name must match ${CGROUP_NAME_RE})`;
  const fs = await cgroupPathProblem(dir);
  return fs === "gone" ? "absent" : fs;
}

/** Reads the record without creating anything. */
export async function readContainmentRecord(stateDir: string): Promise<ContainmentRecordRead> {
  const file = fileOf(stateDir);
  const r = await readOwnedFile(file, 64 * 1024);
  switch (r.kind) {
    case "missing":
      return { kind: "none" };
    case "symlink":
      return { kind: "refused", why: `${file} is a symlink; refusing to trust it` };
    case "foreign-owner":
      return { kind: "refused", why: `${file} is owned by uid ${r.uid}; refusing to trust it` };
    case "unreadable":
      return { kind: "refused", why: `${file} is unreadable: ${r.detail}` };
    case "ok":
      break;
  }
  try {
    assertPrivate(file, r, "file");
  } catch (e) {
    return { kind: "refused", why: (e as Error).message };
  }
  let v: unknown;
  try {
    v = JSON.parse(r.text);
  } catch {
    return { kind: "refused", why: `${file} is not valid JSON` };
  }
  const o = v as Partial<ContainmentRecord> | null;
  if (
    typeof o !== "object" ||
    o === null ||
    o.version !== RECORD_VERSION ||
    !Array.isArray(o.roots) ||
    typeof o.updatedAt !== "number"
  ) {
    return {
      kind: "refused",
      why: `${file} does not have the shape {version: ${RECORD_VERSION}, roots: [paths], updatedAt}`,
    };
  }
  // each root is checked where it is used (checkInstanceFolder), so one bad entry refuses only itself
  return {
    kind: "ok",
    record: {
      version: RECORD_VERSION,
      roots: o.roots.map((x) => (typeof x === "string" ? x : JSON.stringify(x))),
      updatedAt: o.updatedAt,
    },
  };
}

/**
 * Records `root` as this state dir's current proclease root (the gateway, once
 * containment is available), keeping the earlier ones, and, given the
 * instance id its folders are named by, the same in the host's index. Needs the lease store's
 * folder (<stateDir>/acpx, made by openLeaseStore); throws what the write throws.
 */
export async function recordContainmentRoot(stateDir: string, root: string, instanceId?: string): Promise<void> {
  const bad = rootShapeProblem(root);
  if (bad !== null) throw new TypeError(`containment root: ${bad}`);
  const dir = join(stateDir, "acpx");
  if (!(await ensurePrivateDir(dir, false))) throw new Error(`${dir} does not exist: open the lease store first`);
  const prev = await readContainmentRecord(stateDir);
  const earlier = prev.kind === "ok" ? prev.record.roots.filter((x) => x !== root && rootShapeProblem(x) === null) : [];
  const record: ContainmentRecord = {
    version: RECORD_VERSION,
    roots: [root, ...earlier].slice(0, MAX_ROOTS),
    updatedAt: Date.now(),
  };
  // a restart in the same cgroup changes nothing: no write (a full disk must not keep a gateway from starting)
  const same =
    prev.kind === "ok" &&
    prev.record.roots.length === record.roots.length &&
    prev.record.roots.every((x, i) => x === record.roots[i]);
  if (!same) await atomicWrite(dir, CONTAINMENT_RECORD_FILE, JSON.stringify(record) + "\n", true);
  // the host's index finds this instance's folder once the state dir is deleted (instance-index.ts)
  if (instanceId !== undefined) await recordInstance(instanceId, resolve(stateDir), root);
  await removeEmptyInstanceFolders(stateDir, [root, ...earlier]);
}

/**
 * At a start on the state dir: this instance's folder under each recorded
 * root is removed when it is empty (an earlier incarnation died, or ran
 * under another cgroup, and left it). rmdir refuses a folder that still
 * holds a lease cgroup, so nothing of a lease is touched, and only this
 * state dir's own instance folder is ever tried: another gateway's never.
 * A lease being made in it right now re-creates it (createLeaseCgroup).
 */
async function removeEmptyInstanceFolders(stateDir: string, roots: readonly string[]): Promise<void> {
  const id = await readGatewayInstanceId(stateDir).catch(() => null);
  if (id === null || !CGROUP_NAME_RE.test(id)) return;
  for (const r of roots) {
    const folder = join(r, id);
    if ((await checkInstanceFolder(folder)) !== null) continue;
    await rmdir(folder).catch(() => undefined);
  }
}
