/**
 * A lease cgroup as a checked value. Its path is checked once, when the
 * handle is made (createLeaseCgroup) or opened (openLeaseCgroup): absolute
 * and normalised, on cgroup2, shaped `…/proclease/<instance>/<name>`, and with
 * the identity the caller expects. Kill, signal, remove and the reads take
 * the handle and do not check the path again. A directory's identity is its
 * inode number (on cgroup2 it equals cgroup.id): a directory removed and
 * created again under the same name has a new one, so it cannot pass for
 * the old one.
 *
 * What a lease records is the plain reference ({path, id}, refOf); a handle
 * is never written anywhere.
 */
import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import { ContainmentArgumentError, faultOf } from "./errors.js";
import { cgroupIdOf, exists, isPopulated, readSet, type PopulatedState } from "./files.js";
import { enableController } from "./controllers.js";
import { CGROUP_NAME_RE, cgroupPathProblem, leaseCgroupShapeProblem, instanceFolderShapeProblem } from "./paths.js";

declare const checked: unique symbol;

/** What a lease records about its cgroup. */
export interface LeaseCgroupRef {
  /** filesystem path of the lease cgroup */
  path: string;
  /** the directory's inode number (== cgroup.id) as a decimal string */
  id: string;
}

/** A lease cgroup whose path and identity were checked when it was made or opened (see the header). */
export interface LeaseCgroup extends LeaseCgroupRef {
  readonly [checked]: true;
}

const handle = (path: string, id: string): LeaseCgroup => Object.freeze({ path, id }) as LeaseCgroup;

/** The plain reference a lease records (never the handle itself). */
export function refOf(cg: LeaseCgroupRef): LeaseCgroupRef {
  return { path: cg.path, id: cg.id };
}

/**
 * What making and removing lease cgroups reads of the host's support
 * (detect.ts ContainmentSupport, which is one): declared here, so the
 * detection (which ends cgroups through this module) and the handle do not
 * import each other.
 */
type LeaseRoot = { available: true; root: string; controllers: readonly string[] } | { available: false; why: string };

export type CreateLeaseCgroupResult =
  | { ok: true; cgroup: LeaseCgroup }
  | { ok: false; code: "unavailable" | "bad-name" | "exists" | "denied" | "limit" | "error"; why: string };

/**
 * Creates `<support.root>/<instance>/<name>` for a lease: one instance folder
 * per gateway instance (`instance`, its instance id), so two gateways whose
 * cgroups are the same (one systemd unit, a test runner) each see only their
 * own leases' cgroups, and an operator's orphan sweep for one state dir never
 * touches another's. The instance folder holds no process, so it can hand every
 * controller the root hands out down to its leases (no-internal-processes
 * rule); it is made on first use and kept. Never adopts an existing lease
 * directory: a leftover of the same name could still hold processes that are
 * not this lease's.
 */
export async function createLeaseCgroup(
  support: LeaseRoot,
  name: string,
  instance: string,
): Promise<CreateLeaseCgroupResult> {
  if (!support.available) return { ok: false, code: "unavailable", why: support.why };
  for (const [what, v] of [
    ["cgroup name", name],
    ["instance folder name", instance],
  ] as const) {
    if (typeof v !== "string" || !CGROUP_NAME_RE.test(v)) {
      return { ok: false, code: "bad-name", why: `${what} must match ${CGROUP_NAME_RE}, got ${JSON.stringify(v)}` };
    }
  }
  const parent = `${support.root}/${instance}`;
  const path = `${parent}/${name}`;
  // twice at most: a disposing controller of the same instance may remove the empty folder in between (removeInstanceFolder)
  for (let attempt = 0; ; attempt++) {
    const folder = await mkdirCgroup(parent, true);
    if (folder !== null) return folder.result;
    // controllers the proclease root hands out reach the lease only through its instance folder; one missing is named by applyLimits
    const enabled = (await readSet(`${parent}/cgroup.subtree_control`)) ?? new Set<string>();
    for (const c of support.controllers) if (!enabled.has(c)) await enableController(parent, c);
    const made = await mkdirCgroup(path, false);
    if (made === null) break;
    if (made.fault !== "missing" || attempt > 0) return made.result;
  }
  const id = await cgroupIdOf(path);
  if (id === null) return { ok: false, code: "error", why: `${path} was created but its identity cannot be read` };
  return { ok: true, cgroup: handle(path, id) };
}

type MkdirFailure = {
  result: Extract<CreateLeaseCgroupResult, { ok: false }>;
  fault: ReturnType<typeof faultOf>["fault"];
};

/** mkdir of a cgroup; null when made (or, with existingOk, already there). */
async function mkdirCgroup(path: string, existingOk: boolean): Promise<MkdirFailure | null> {
  try {
    await fsp.mkdir(path);
    return null;
  } catch (e) {
    const { fault, code } = faultOf(e);
    const fail = (c: MkdirFailure["result"]["code"], why: string): MkdirFailure => ({
      result: { ok: false, code: c, why },
      fault,
    });
    if (fault === "exists")
      return existingOk
        ? null
        : fail("exists", `${path} already exists (a leftover of an earlier lease of that name?)`);
    if (fault === "denied") return fail("denied", `not allowed to create ${path} (${code})`);
    if (fault === "limit") return fail("limit", `cgroup.max.descendants or cgroup.max.depth reached above ${path}`);
    return fail("error", `mkdir ${path}: ${code}`);
  }
}

export type OpenLeaseCgroupResult =
  | { state: "open"; cgroup: LeaseCgroup }
  /** no such directory (a populated cgroup cannot be removed: nothing was left in it) */
  | { state: "gone" }
  /** another directory now has this name (its identity differs from `id`) */
  | { state: "mismatch"; why: string }
  /** not a lease cgroup: not on cgroup2, or not shaped …/proclease/<instance>/<name> */
  | { state: "refused"; why: string }
  | { state: "unknown"; why: string };

/**
 * Opens an existing lease cgroup: the path is checked (see the header) and,
 * when `id` is given, the directory must still have it; without `id` the
 * handle takes the identity the directory has now.
 */
export async function openLeaseCgroup(ref: { path: string; id?: string }): Promise<OpenLeaseCgroupResult> {
  if (ref.id !== undefined) assertCgroupId(ref.id);
  const bad = await cgroupPathProblem(ref.path);
  if (bad === "gone") return { state: "gone" };
  if (bad !== null) return { state: "refused", why: bad };
  const shape = leaseCgroupShapeProblem(ref.path);
  if (shape !== null) return { state: "refused", why: shape };
  const now = await cgroupIdOf(ref.path);
  if (now === null)
    return (await exists(ref.path))
      ? { state: "unknown", why: `the identity of ${ref.path} cannot be read` }
      : { state: "gone" };
  if (ref.id !== undefined && now !== ref.id)
    return { state: "mismatch", why: `${ref.path} is now cgroup ${now}, not ${ref.id}` };
  return { state: "open", cgroup: handle(ref.path, now) };
}

export type IdentityVerdict = "match" | "mismatch" | "gone" | "unknown";

/** Is the directory at `path` still the cgroup that had identity `id`? (Any cgroup2 directory; no lease shape needed.) */
export async function verifyCgroupIdentity(path: string, id: string): Promise<IdentityVerdict> {
  assertCgroupId(id);
  const bad = await cgroupPathProblem(path);
  if (bad === "gone") return "gone";
  if (bad !== null) return "unknown";
  const now = await cgroupIdOf(path);
  if (now === null) return (await exists(path)) ? "unknown" : "gone";
  return now === id ? "match" : "mismatch";
}

function assertCgroupId(id: unknown): void {
  if (typeof id !== "string" || !/^[1-9][0-9]*$/.test(id))
    throw new ContainmentArgumentError("cgroup id", `cgroup id must be a decimal string, got ${JSON.stringify(id)}`);
}

/**
 * Removes an instance folder when it is empty: one folder per instance would
 * otherwise outlive it on the host. A folder still holding lease cgroups
 * stays ("busy"): a lease cgroup outlives whoever made it.
 */
export async function removeInstanceFolder(
  support: LeaseRoot,
  instance: string,
): Promise<"removed" | "busy" | "gone" | "refused"> {
  if (!support.available || typeof instance !== "string" || !CGROUP_NAME_RE.test(instance)) return "refused";
  return rmdirFolder(`${support.root}/${instance}`);
}

/**
 * The instance folder a lease cgroup lived in (`<proclease root>/<instance>`),
 * removed when nothing is left in it: a folder per state dir (or per
 * supervisor process) would otherwise outlive its last lease on the host.
 * Only a folder of that shape is touched, and rmdir itself refuses one that
 * still holds a cgroup (a lease being made right now keeps it; that maker
 * re-creates a folder removed under it: createLeaseCgroup's retry).
 */
export async function removeEmptyInstanceFolder(
  leaseCgroupPath: string,
): Promise<"removed" | "busy" | "gone" | "refused"> {
  const folder = dirname(leaseCgroupPath);
  if (instanceFolderShapeProblem(folder) !== null) return "refused";
  return rmdirFolder(folder);
}

async function rmdirFolder(folder: string): Promise<"removed" | "busy" | "gone" | "refused"> {
  try {
    await fsp.rmdir(folder);
    return "removed";
  } catch (e) {
    const { fault } = faultOf(e);
    return fault === "missing" ? "gone" : fault === "busy" ? "busy" : "refused";
  }
}

export interface ListedCgroup {
  name: string;
  path: string;
  id: string;
  populated: PopulatedState;
}

export type ListResult = { state: "ok"; cgroups: ListedCgroup[] } | { state: "unknown"; why: string };

/**
 * The lease cgroups in a folder (our own `_` leaves left out), with their
 * identities and populated state, for orphan detection: one with no lease
 * file is an orphan. A missing folder lists nothing (no cgroup can exist
 * under it); an unreadable one is "unknown".
 */
export async function listLeaseCgroups(folder: string): Promise<ListResult> {
  let dirents;
  try {
    dirents = await fsp.readdir(folder, { withFileTypes: true });
  } catch (e) {
    const f = faultOf(e);
    if (f.fault === "missing") return { state: "ok", cgroups: [] };
    return { state: "unknown", why: `cannot list ${folder} (${f.code})` };
  }
  const out: ListedCgroup[] = [];
  for (const d of dirents) {
    if (!d.isDirectory() || !CGROUP_NAME_RE.test(d.name)) continue;
    const path = `${folder}/${d.name}`;
    const id = await cgroupIdOf(path);
    if (id === null) continue; // removed while listing
    out.push({ name: d.name, path, id, populated: await isPopulated(path) });
  }
  out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { state: "ok", cgroups: out };
}
