/**
 * Where lease cgroups live and what a path must look like before anything
 * here acts on it: the names, the one "inside that cgroup" test, and the
 * shape checks (a string check, then one statfs).
 *
 * Layout under the gateway's own cgroup (`base`); `base/proclease` is the
 * proclease root, `base/proclease/<instance>` an instance folder:
 *   base/proclease/<instance>/<leaseId>
 *                               one leaf per lease (its processes join it),
 *                               in one instance folder per gateway instance
 *                               (its instance id) or per supervisor process
 *                               without a state dir (fg-<pid>-<start time>):
 *                               gateways sharing `base` never judge each
 *                               other's leases
 *   base/proclease/_gateway     the gateway itself, only when it had to leave
 *                               `base` to hand controllers to the leases
 *   base/proclease/_probe-*     short-lived, made by detectContainment
 *   base/proclease/_foreign     members a drain found in a lease cgroup that
 *                               were not the lease's (another session's, the
 *                               gateway's side, older than the lease), moved
 *                               out instead of killed
 * Names starting with "_" are ours: a lease cgroup name must start with a
 * letter or digit, so no lease can be called like them.
 */
import { promises as fsp } from "node:fs";
import { basename, dirname, isAbsolute, normalize } from "node:path";
import { faultOf } from "./errors.js";

/** statfs f_type of a cgroup2 filesystem */
export const CGROUP2_SUPER_MAGIC = 0x63677270;
/** the directory under the gateway's cgroup that holds every lease cgroup */
export const PROCLEASE_DIR = "proclease";
/** the leaf the gateway moves into when it has to leave its own cgroup */
export const GATEWAY_LEAF = "_gateway";
/**
 * The leaf a drain moves a lease cgroup's member into when that member is
 * not the lease's and has no better place (containment/members.ts): nothing
 * in it is ever signalled by proclease.
 */
export const FOREIGN_LEAF = "_foreign";
export const PROBE_PREFIX = "_probe-";
/**
 * A lease cgroup name: letters, digits, "_" and "-", starting with a letter or
 * digit. This is a cgroupfs rule, not the lease-id rule: no "/" or ".." can
 * leave the directory, no "." can collide with an interface file
 * (cgroup.procs, memory.max), and a leading "_" stays reserved for our own
 * leaves (_gateway, _probe-*, _foreign).
 */
export const CGROUP_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Is `path` the cgroup (or filesystem directory) `cgroup` itself, or somewhere below it? The one spelling of "inside". */
export function isWithin(path: string, cgroup: string): boolean {
  if (cgroup === "/") return path.startsWith("/");
  return path === cgroup || path.startsWith(cgroup + "/");
}

/** null when `path` is an absolute, normalised path without a trailing "/"; else why not. No filesystem access. */
export function pathShapeProblem(path: unknown): string | null {
  if (
    typeof path !== "string" ||
    !isAbsolute(path) ||
    normalize(path) !== path ||
    (path.length > 1 && path.endsWith("/"))
  ) {
    return `${JSON.stringify(path)} is not an absolute, normalised path`;
  }
  return null;
}

/** null when `path` is an absolute, normalised directory on cgroup2; "gone" when missing; else why not. */
export async function cgroupPathProblem(path: string): Promise<string | "gone" | null> {
  const shape = pathShapeProblem(path);
  if (shape !== null) return shape;
  try {
    return (await fsp.statfs(path)).type === CGROUP2_SUPER_MAGIC ? null : `${path} is not on a cgroup2 filesystem`;
  } catch (e) {
    const f = faultOf(e);
    return f.fault === "missing" ? "gone" : `cannot statfs ${path} (${f.code})`;
  }
}

/**
 * The one shape a cgroup must have before this layer kills or removes it:
 * `…/proclease/<instance>/<name>` (createLeaseCgroup), both names matching
 * CGROUP_NAME_RE: never the proclease root, an instance folder, or our `_`
 * leaves.
 */
export function leaseCgroupShapeProblem(path: string): string | null {
  const parent = dirname(path);
  const ok =
    CGROUP_NAME_RE.test(basename(path)) &&
    CGROUP_NAME_RE.test(basename(parent)) &&
    basename(dirname(parent)) === PROCLEASE_DIR;
  return ok
    ? null
    : `${path} is not a lease cgroup (…/${PROCLEASE_DIR}/<instance>/<name>, names matching ${CGROUP_NAME_RE})`;
}

/** null when `folder` is an instance folder (`…/proclease/<instance>`, the name matching CGROUP_NAME_RE); else why not. */
export function instanceFolderShapeProblem(folder: string): string | null {
  const ok = basename(dirname(folder)) === PROCLEASE_DIR && CGROUP_NAME_RE.test(basename(folder));
  return ok
    ? null
    : `${folder} is not an instance folder (…/${PROCLEASE_DIR}/<instance>, the name matching ${CGROUP_NAME_RE})`;
}
