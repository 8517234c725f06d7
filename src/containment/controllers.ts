/**
 * Controllers (memory, pids, …) for the lease cgroups. The cgroup v2
 * no-internal-processes rule: a non-root cgroup may hand controllers to its
 * children only while it holds no processes itself, and a process may not
 * join a cgroup that hands out domain controllers. The leases are leaves,
 * and `proclease` and the instance folders never hold processes, so
 * containment as such always works where a child cgroup can be created and
 * written. Only per-lease controllers may need more: `base` must enable them
 * in its cgroup.subtree_control, which it can only do once it is empty. Then
 * the gateway moves itself into `proclease/_gateway` (the pattern systemd
 * documents for Delegate=yes units), or detection says why it cannot.
 *
 * planControllers is pure (its matrix is unit-tested); the rest reads and
 * writes the controller files and words what is missing for an operator.
 */
import { promises as fsp } from "node:fs";
import { dirname } from "node:path";
import { faultOf } from "./errors.js";
import { readSet, writeCgroupFile } from "./files.js";
import { mountDir, readMountTable, type MountInfoEntry } from "./mountinfo.js";
import { GATEWAY_LEAF, PROCLEASE_DIR } from "./paths.js";

export interface ControllerPlanInput {
  wanted: readonly string[];
  /** base/cgroup.controllers: what base may hand out */
  baseAvailable: ReadonlySet<string>;
  /** base/cgroup.subtree_control: what base hands out now (= what proclease/ gets) */
  baseEnabled: ReadonlySet<string>;
  /** proclease/cgroup.subtree_control: what each lease gets now */
  rootEnabled: ReadonlySet<string>;
  /** the controllers the hierarchy root offers at all (mount root cgroup.controllers) */
  hierarchyAvailable: ReadonlySet<string>;
  /** controllers bound to a v1 hierarchy → where it is mounted ("" when unknown) */
  v1Bound: ReadonlyMap<string, string>;
  base: string;
  /** base is the real root cgroup (exempt from the rule, and host-wide) */
  baseIsHierarchyRoot: boolean;
  /** pids in base/cgroup.procs */
  baseProcs: readonly number[];
  /** this process's pid, and whether it is in base (false: already in the _gateway leaf) */
  selfPid: number;
  selfInBase: boolean;
  allowGatewayMove: boolean;
}

export interface ControllerPlan {
  moveGateway: boolean;
  enableInBase: string[];
  enableInRoot: string[];
  missing: ControllerProblem[];
}

/**
 * Why a controller does not reach the leases: bound to a cgroup v1
 * hierarchy, not in the kernel, not delegated to the gateway's cgroup, the
 * host-wide root (never changed), the gateway's cgroup holding other
 * processes, the gateway's move not allowed or failed, the enabling write
 * refused, or the controller files unreadable.
 */
export type ControllerProblemCode =
  | "v1-hierarchy"
  | "not-in-kernel"
  | "not-delegated"
  | "host-root"
  | "base-not-empty"
  | "move-not-allowed"
  | "move-failed"
  | "enable-refused"
  | "unreadable";

export interface ControllerProblem {
  controller: string;
  code: ControllerProblemCode;
  /** the same, for an operator: names the cause and the fix */
  why: string;
}

type Problem = Omit<ControllerProblem, "controller">;

/** What it takes to give every lease cgroup the wanted controllers, as pure data (detectContainment carries it out). */
export function planControllers(p: ControllerPlanInput): ControllerPlan {
  const plan: ControllerPlan = { moveGateway: false, enableInBase: [], enableInRoot: [], missing: [] };
  const others = p.baseProcs.filter((pid) => !(p.selfInBase && pid === p.selfPid));
  for (const c of p.wanted) {
    if (p.rootEnabled.has(c)) continue;
    if (p.baseEnabled.has(c)) {
      plan.enableInRoot.push(c);
      continue;
    }
    const blocked = blockedBy(p, c, others);
    if (blocked !== null) {
      plan.missing.push({ controller: c, ...blocked });
      continue;
    }
    if (p.selfInBase) plan.moveGateway = true;
    plan.enableInBase.push(c);
    plan.enableInRoot.push(c);
  }
  return plan;
}

/** Why base cannot start handing `c` out (null: it can, after the gateway left it if it is in it). */
function blockedBy(p: ControllerPlanInput, c: string, others: readonly number[]): Problem | null {
  if (!p.baseAvailable.has(c)) return unavailable(c, p.base, p.hierarchyAvailable, p.v1Bound);
  if (p.baseIsHierarchyRoot) {
    return {
      code: "host-root",
      why: `${c} is offered by the root cgroup ${p.base} but not enabled in its cgroup.subtree_control, and proclease does not change the host-wide root (to allow it: echo +${c} > ${p.base}/cgroup.subtree_control)`,
    };
  }
  if (others.length > 0) {
    const list = others.slice(0, 5).join(", ") + (others.length > 5 ? ", …" : "");
    return {
      code: "base-not-empty",
      why: `the gateway's cgroup ${p.base} also holds other processes (pid ${list}), and cgroup v2 lets a cgroup hand ${c} to its children only while it holds no processes itself; run the gateway alone in a unit with Delegate=yes`,
    };
  }
  if (p.selfInBase && !p.allowGatewayMove) {
    return {
      code: "move-not-allowed",
      why: `enabling ${c} for the leases needs the gateway to leave ${p.base} for ${p.base}/${PROCLEASE_DIR}/${GATEWAY_LEAF}, and moving it was not allowed`,
    };
  }
  return null;
}

/** Why `c` is not available to base at all: on v1, not in the kernel, or not delegated. */
function unavailable(
  c: string,
  base: string,
  hierarchy: ReadonlySet<string>,
  v1Bound: ReadonlyMap<string, string>,
): Problem {
  const v1 = v1Bound.get(c);
  if (v1 !== undefined) {
    return {
      code: "v1-hierarchy",
      why: `the ${c} controller is on the cgroup v1 hierarchy on this host${v1 ? ` (mounted at ${v1})` : ""}, not on cgroup v2, so lease cgroups cannot use it`,
    };
  }
  if (!hierarchy.has(c))
    return {
      code: "not-in-kernel",
      why: `this kernel offers no ${c} controller on cgroup v2 (not built in, or disabled with cgroup_disable=${c})`,
    };
  return {
    code: "not-delegated",
    why: `${c} is not delegated to ${base}: its parent does not enable it in cgroup.subtree_control (systemd: Delegate=yes, or Delegate=${c} on the gateway's unit)`,
  };
}

/** `+c` into cgroup.subtree_control; null when done, else why not. */
export async function enableController(cgroup: string, c: string): Promise<string | null> {
  try {
    await writeCgroupFile(`${cgroup}/cgroup.subtree_control`, `+${c}`);
    return null;
  } catch (e) {
    const { fault, code } = faultOf(e);
    if (fault === "busy")
      return `cannot enable ${c} in ${cgroup}/cgroup.subtree_control: the cgroup holds processes (cgroup v2 no-internal-processes rule)`;
    if (fault === "denied") return `not allowed to enable ${c} in ${cgroup}/cgroup.subtree_control (${code})`;
    return `enabling ${c} in ${cgroup}/cgroup.subtree_control failed (${code})`;
  }
}

/** Controllers bound to a cgroup v1 hierarchy → where it is mounted ("" when bound but not mounted). */
export async function v1BoundControllers(entries: readonly MountInfoEntry[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of entries) {
    if (e.fsType !== "cgroup") continue;
    for (const o of e.superOptions) if (!out.has(o)) out.set(o, e.mountPoint);
  }
  // a v1-bound controller that is not mounted anywhere still is not on v2
  try {
    for (const line of (await fsp.readFile("/proc/cgroups", "utf8")).split("\n")) {
      const [name, hier, , enabled] = line.split("\t");
      if (name && !name.startsWith("#") && hier !== "0" && enabled === "1" && !out.has(name)) out.set(name, "");
    }
  } catch {
    // no /proc/cgroups: the mounts are all we know
  }
  return out;
}

/** Why `controller` has no interface files in `path`, in an operator's words. */
export async function controllerMissingWhy(path: string, controller: string): Promise<string> {
  const parent = dirname(path);
  const inParent = await readSet(`${parent}/cgroup.subtree_control`);
  const offered = await readSet(`${parent}/cgroup.controllers`);
  // the reasons below still hold without the mount table
  const table = await readMountTable().catch(() => null);
  const v1 = await v1BoundControllers(table?.entries ?? []);
  if (v1.has(controller)) return unavailable(controller, parent, new Set(), v1).why;
  if (offered !== null && offered.has(controller) && inParent !== null && !inParent.has(controller)) {
    return `the ${controller} controller is not enabled for lease cgroups: ${parent}/cgroup.subtree_control lacks it (ask detectContainment for it)`;
  }
  const mount = table?.own ?? null;
  const hierarchy = mount ? await readSet(`${mountDir(mount)}/cgroup.controllers`) : null;
  return unavailable(controller, parent, hierarchy ?? new Set(), v1).why;
}
