/**
 * Kernel-enforced containment: one cgroup v2 per lease (Linux only).
 *
 * The model. A process's cgroup does not change when it forks, calls setsid,
 * clears its environment or is re-parented to init; only a write to some
 * cgroup.procs moves it. So when the wrapper moves itself into
 * `<gateway cgroup>/proclease/<instance id>/<leaseId>` before it spawns the adapter, every
 * descendant of the adapter is born there and stays there, and the kernel can
 * answer three questions that a /proc walk cannot answer for an escapee:
 * - who belongs to the lease: cgroup.procs of the lease cgroup (and of any
 *   cgroup below it), whatever their environment or parent;
 * - is anything left: `populated 0|1` in cgroup.events, kept by the kernel,
 *   not a search;
 * - end them all: one write of "1" to cgroup.kill (Linux >= 5.14) sends
 *   SIGKILL to the whole subtree atomically, forks made meanwhile included.
 * A cgroup directory's identity is its inode number (on cgroup2 it equals
 * cgroup.id), recorded beside its path: a directory removed and created again
 * under the same name has a new inode, so it cannot pass for the old one.
 *
 * Layout under the gateway's own cgroup (`base`):
 *   base/proclease/<instance>/<leaseId>
 *                               one leaf per lease (the wrapper moves itself in),
 *                               in one folder per gateway instance: gateways
 *                               sharing `base` never judge each other's leases
 *   base/proclease/_gateway     the gateway itself, only when it had to leave
 *                               `base` to hand controllers to the leases
 *   base/proclease/_probe-*     short-lived, made by detectContainment
 * Names starting with "_" are ours: a lease cgroup name must start with a
 * letter or digit, so no lease can be called like them.
 *
 * The no-internal-processes rule of cgroup v2: a non-root cgroup may hand
 * controllers (memory, pids, …) to its children only while it holds no
 * processes itself, and a process may not join a cgroup that hands out domain
 * controllers. The leases are leaves, and `proclease` and the instance
 * folders never hold processes,
 * so containment as such always works where a child cgroup can be created and
 * written. Only per-lease controllers may need more: `base` must enable them
 * in its cgroup.subtree_control, which it can only do once it is empty. Then
 * the gateway moves itself into `proclease/_gateway` (the pattern systemd
 * documents for Delegate=yes units), or detection says why it cannot.
 *
 * Outcomes are typed and fail closed: "gone" is said only on ENOENT/ESRCH;
 * anything unreadable is "unknown", never "empty". Nothing here throws for a
 * missing cgroup, a vanished process or an unsupported kernel; only bad
 * arguments (a programming error) throw a TypeError.
 */
import { spawn } from "node:child_process";
import { closeSync, constants as fsConstants, openSync, promises as fsp, readFileSync, statfsSync, writeSync } from "node:fs";
import { dirname, basename, normalize, isAbsolute } from "node:path";
import { checkSignalTarget, ancestorsOfThisProcess } from "../facts/guards.js";
import { createProcfsFacts, readStatSync } from "../facts/procfs.js";
import { createSignaller } from "../facts/signal.js";
import type { ProcessSignaller, SignalOutcome } from "../facts/types.js";
import { sameProcess } from "../facts/identity.js";

/** statfs f_type of a cgroup2 filesystem */
export const CGROUP2_SUPER_MAGIC = 0x63677270;
/** the directory under the gateway's cgroup that holds every lease cgroup */
export const PROCLEASE_DIR = "proclease";
/** the leaf the gateway moves into when it has to leave its own cgroup */
export const GATEWAY_LEAF = "_gateway";
const PROBE_PREFIX = "_probe-";
/**
 * A lease cgroup name: letters, digits, "_" and "-", starting with a letter or
 * digit. This is a cgroupfs rule, not the lease-id rule: no "/" or ".." can
 * leave the directory, no "." can collide with an interface file
 * (cgroup.procs, memory.max), and a leading "_" stays reserved for our own
 * leaves (_gateway, _probe-*).
 */
export const CGROUP_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

// ---------------------------------------------------------------- parsers

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
    if (best === null || m.root.length > best.root.length || (m.root.length === best.root.length && best.readOnly && !m.readOnly)) best = m;
  }
  return best;
}

/**
 * The filesystem path of a `0::` cgroup path under a cgroup2 mount, or null
 * when the mount does not show it (outside the mounted subtree, or a path
 * with ".." that lies outside our cgroup namespace).
 */
export function fsPathOf(mount: Cgroup2Mount, cgroupPath: string): string | null {
  if (!cgroupPath.startsWith("/") || cgroupPath.split("/").some((s) => s === ".." || s === ".")) return null;
  const mp = mount.mountPoint.replace(/\/+$/, "") || "/";
  const join = (rest: string) => (rest === "" || rest === "/" ? mp : mp === "/" ? rest : mp + rest);
  if (mount.root === "/") return join(cgroupPath);
  if (cgroupPath === mount.root) return mp;
  if (cgroupPath.startsWith(mount.root + "/")) return join(cgroupPath.slice(mount.root.length));
  return null;
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

// ---------------------------------------------------------- the controller plan

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

export interface ControllerProblem {
  controller: string;
  why: string;
}

/**
 * What it takes to give every lease cgroup the wanted controllers, as pure
 * data (the matrix is unit-tested; detectContainment carries it out).
 */
export function planControllers(p: ControllerPlanInput): ControllerPlan {
  const plan: ControllerPlan = { moveGateway: false, enableInBase: [], enableInRoot: [], missing: [] };
  const others = p.baseProcs.filter((pid) => !(p.selfInBase && pid === p.selfPid));
  for (const c of p.wanted) {
    if (p.rootEnabled.has(c)) continue;
    if (p.baseEnabled.has(c)) {
      plan.enableInRoot.push(c);
      continue;
    }
    if (!p.baseAvailable.has(c)) {
      plan.missing.push({ controller: c, why: unavailableWhy(c, p.base, p.hierarchyAvailable, p.v1Bound) });
      continue;
    }
    if (p.baseIsHierarchyRoot) {
      plan.missing.push({
        controller: c,
        why: `${c} is offered by the root cgroup ${p.base} but not enabled in its cgroup.subtree_control, and proclease does not change the host-wide root (to allow it: echo +${c} > ${p.base}/cgroup.subtree_control)`,
      });
      continue;
    }
    if (others.length > 0) {
      const list = others.slice(0, 5).join(", ") + (others.length > 5 ? ", …" : "");
      plan.missing.push({
        controller: c,
        why: `the gateway's cgroup ${p.base} also holds other processes (pid ${list}), and cgroup v2 lets a cgroup hand ${c} to its children only while it holds no processes itself; run the gateway alone in a unit with Delegate=yes`,
      });
      continue;
    }
    if (p.selfInBase && !p.allowGatewayMove) {
      plan.missing.push({
        controller: c,
        why: `enabling ${c} for the leases needs the gateway to leave ${p.base} for ${p.base}/${PROCLEASE_DIR}/${GATEWAY_LEAF}, and moving it was not allowed`,
      });
      continue;
    }
    if (p.selfInBase) plan.moveGateway = true;
    plan.enableInBase.push(c);
    plan.enableInRoot.push(c);
  }
  return plan;
}

function unavailableWhy(c: string, base: string, hierarchy: ReadonlySet<string>, v1Bound: ReadonlyMap<string, string>): string {
  const v1 = v1Bound.get(c);
  if (v1 !== undefined) {
    return `the ${c} controller is on the cgroup v1 hierarchy on this host${v1 ? ` (mounted at ${v1})` : ""}, not on cgroup v2, so lease cgroups cannot use it`;
  }
  if (!hierarchy.has(c)) return `this kernel offers no ${c} controller on cgroup v2 (not built in, or disabled with cgroup_disable=${c})`;
  return `${c} is not delegated to ${base}: its parent does not enable it in cgroup.subtree_control (systemd: Delegate=yes, or Delegate=${c} on the gateway's unit)`;
}

// ---------------------------------------------------------------- detection

export type ContainmentOffCode =
  | "not-linux"
  | "no-cgroup2"
  | "no-v2-membership"
  | "not-visible"
  | "read-only"
  | "not-delegated"
  | "refused"
  | "limit"
  | "move-denied"
  | "probe-failed"
  | "unreadable";

export type ContainmentSupport =
  | {
      available: true;
      /** where the lease cgroups live: `<base>/proclease` */
      root: string;
      /** the cgroup2 mount point the paths are under */
      mount: string;
      /** the gateway's own cgroup when it started (filesystem path) */
      base: string;
      /** where the gateway is now: base, or root/_gateway after a move */
      gatewayCgroup: string;
      movedGateway: boolean;
      /** controllers every lease cgroup gets (root/cgroup.subtree_control) */
      controllers: string[];
      /** wanted controllers that could not be had, each with why */
      missingControllers: ControllerProblem[];
      /** how killCgroup ends a subtree here */
      kill: "cgroup.kill" | "signal-loop";
      /**
       * cgroup2 is mounted with favordynmods: a move into a lease cgroup does
       * not wait for an RCU grace period (without it, each move does, and
       * forks host-wide wait with it; see bench/containment.bench.mjs)
       */
      favordynmods: boolean;
    }
  | { available: false; code: ContainmentOffCode; why: string };

export interface DetectOptions {
  /** controllers the lease cgroups should get (e.g. ["memory", "pids"]); default none */
  controllers?: readonly string[];
  /** may the gateway move itself into proclease/_gateway to enable them; default true */
  allowGatewayMove?: boolean;
}

const off = (code: ContainmentOffCode, why: string): ContainmentSupport => ({ available: false, code, why });

/**
 * Can this process contain leases in cgroups, and where? Creates
 * `<our cgroup>/proclease` when it is missing and proves the rest with a
 * throwaway probe: a child cgroup is made, a short-lived process is moved into
 * it, shown to be there, killed through the cgroup and the cgroup removed.
 * Moves the gateway only when wanted controllers need it (see the model).
 * Never throws; every "no" carries an operator-readable why.
 */
export async function detectContainment(opts: DetectOptions = {}): Promise<ContainmentSupport> {
  if (process.platform !== "linux") {
    return off("not-linux", `cgroups exist only on Linux (this is ${process.platform}); ownership rests on the process tree and the lease markers`);
  }
  let mountinfo: string;
  let selfCgroup: string;
  try {
    mountinfo = await fsp.readFile("/proc/self/mountinfo", "utf8");
    selfCgroup = await fsp.readFile("/proc/self/cgroup", "utf8");
  } catch (e) {
    return off("unreadable", `cannot read /proc/self/mountinfo or /proc/self/cgroup (${errCode(e)}): is /proc mounted?`);
  }
  const entries = parseMountInfo(mountinfo);
  if (!entries.some((e) => e.fsType === "cgroup2")) {
    return off("no-cgroup2", "no cgroup2 filesystem is mounted (a cgroup v1-only host): containment needs the unified hierarchy (boot with systemd.unified_cgroup_hierarchy=1, or mount cgroup2)");
  }
  const ours = parseProcCgroup(selfCgroup);
  if (ours.v2 === null) {
    return off("no-v2-membership", "/proc/self/cgroup has no cgroup v2 (0::) line, so this process's place in the cgroup2 hierarchy is unknown");
  }
  const mount = findCgroup2Mount(entries, ours.v2);
  if (mount === null) {
    return off("not-visible", `this process's cgroup ${ours.v2} is not visible under any cgroup2 mount (it lies outside the mounted subtree or outside this cgroup namespace)`);
  }
  if (mount.readOnly) {
    return off("read-only", `cgroup2 is mounted read-only at ${mount.mountPoint} (typical of a container without a writable cgroup namespace)`);
  }
  const here = fsPathOf(mount, ours.v2)!;
  cachedMount = mount;
  // Already in our own leaf (a gateway restarted from inside it): the lease
  // root is the same as for the first start, so leftovers are still found.
  const inLeaf = basename(here) === GATEWAY_LEAF && basename(dirname(here)) === PROCLEASE_DIR;
  const base = inLeaf ? dirname(dirname(here)) : here;
  const root = `${base}/${PROCLEASE_DIR}`;
  const uid = process.getuid?.() ?? -1;

  try {
    await fsp.mkdir(root);
  } catch (e) {
    if (errCode(e) !== "EEXIST") return off(...mkdirOff(e, base, uid));
  }
  if (!(await isCgroup2Dir(root))) {
    return off("unreadable", `${root} exists but is not a cgroup2 directory`);
  }

  const probe = await runProbe(root, uid, base);
  if (!probe.ok) return off(probe.code, probe.why);

  // Controllers for the leases, moving the gateway into a leaf when needed.
  const wanted = [...new Set(opts.controllers ?? [])];
  let movedGateway = false;
  let gatewayCgroup = here;
  const missing: ControllerProblem[] = [];
  if (wanted.length > 0) {
    const hierarchyRoot = mount.mountPoint.replace(/\/+$/, "") || "/";
    const [baseAvailable, baseEnabled, rootEnabled, hierarchyAvailable, baseProcsText, baseType] = await Promise.all([
      readSet(`${base}/cgroup.controllers`),
      readSet(`${base}/cgroup.subtree_control`),
      readSet(`${root}/cgroup.subtree_control`),
      readSet(`${hierarchyRoot}/cgroup.controllers`),
      readText(`${base}/cgroup.procs`),
      readText(`${base}/cgroup.type`),
    ]);
    if (baseAvailable === null || baseEnabled === null || rootEnabled === null || baseProcsText === null) {
      for (const c of wanted) missing.push({ controller: c, why: `cannot read the controller files of ${base}` });
    } else {
      const plan = planControllers({
        wanted,
        baseAvailable,
        baseEnabled,
        rootEnabled,
        hierarchyAvailable: hierarchyAvailable ?? new Set(),
        v1Bound: v1BoundControllers(entries),
        base,
        // the real root has no cgroup.type; a cgroup namespace root has one and obeys the rule
        baseIsHierarchyRoot: baseType === null && mount.root === "/" && base === hierarchyRoot,
        baseProcs: parsePids(baseProcsText),
        selfPid: process.pid,
        selfInBase: !inLeaf,
        allowGatewayMove: opts.allowGatewayMove !== false,
      });
      missing.push(...plan.missing);
      let failedMove: string | null = null;
      if (plan.moveGateway) {
        const leaf = `${root}/${GATEWAY_LEAF}`;
        const made = await fsp.mkdir(leaf).then(() => null, (e: unknown) => (errCode(e) === "EEXIST" ? null : errCode(e)));
        const moved = made === null ? await writeProcs(leaf, process.pid) : { outcome: "unknown" as const, detail: `mkdir ${leaf}: ${made}` };
        if (moved.outcome === "moved") {
          movedGateway = true;
          gatewayCgroup = leaf;
        } else {
          failedMove = `the gateway could not move into ${leaf} (${moved.outcome}${moved.detail ? `: ${moved.detail}` : ""})`;
        }
      }
      for (const c of plan.enableInBase) {
        if (failedMove !== null) {
          missing.push({ controller: c, why: failedMove });
          continue;
        }
        const r = await enableController(base, c);
        if (r !== null) missing.push({ controller: c, why: r });
      }
      for (const c of plan.enableInRoot) {
        if (missing.some((m) => m.controller === c)) continue;
        const r = await enableController(root, c);
        if (r !== null) missing.push({ controller: c, why: r });
      }
    }
  }
  const controllers = [...((await readSet(`${root}/cgroup.subtree_control`)) ?? [])];
  return {
    available: true,
    root,
    mount: mount.mountPoint,
    base,
    gatewayCgroup,
    movedGateway,
    controllers,
    missingControllers: missing,
    kill: probe.kill,
    favordynmods: entries.some((e) => e.fsType === "cgroup2" && e.mountPoint === mount.mountPoint && e.superOptions.includes("favordynmods")),
  };
}

function mkdirOff(e: unknown, base: string, uid: number): [ContainmentOffCode, string] {
  const code = errCode(e);
  if (code === "EACCES" || code === "EPERM") {
    if (uid !== 0) {
      return ["not-delegated", `not root (uid ${uid}) and the cgroup ${base} is not delegated to this user: run the gateway as a systemd unit with Delegate=yes (or hand the cgroup to uid ${uid})`];
    }
    return ["refused", `running as root, but the kernel refused to create a cgroup in ${base} (${code}): typically a container whose cgroup namespace is not writable, or a security policy`];
  }
  if (code === "EROFS") return ["read-only", `the cgroup filesystem holding ${base} is read-only (a container without cgroup write access)`];
  if (code === "EAGAIN") return ["limit", `the kernel refused a new cgroup under ${base}: cgroup.max.descendants or cgroup.max.depth is reached`];
  if (code === "ENOENT") return ["unreadable", `this process's cgroup ${base} vanished while it was being checked`];
  return ["probe-failed", `cannot create ${base}/${PROCLEASE_DIR} (${code})`];
}

let probeCounter = 0;

type ProbeResult = { ok: true; kill: "cgroup.kill" | "signal-loop" } | { ok: false; code: ContainmentOffCode; why: string };

/** mkdir a probe cgroup, move a throwaway process in, see it there, kill through the cgroup, rmdir. */
async function runProbe(root: string, uid: number, base: string): Promise<ProbeResult> {
  const probe = `${root}/${PROBE_PREFIX}${process.pid}-${++probeCounter}`;
  try {
    await fsp.mkdir(probe);
  } catch (e) {
    // named after base: that is the cgroup an operator delegates
    const [code, why] = mkdirOff(e, base, uid);
    return { ok: false, code, why };
  }
  const child = await spawnProbeProcess();
  try {
    if (!child.ok) return { ok: false, code: "probe-failed", why: `cannot start a probe process to test moving into a cgroup (${child.why})` };
    const moved = await writeProcs(probe, child.pid);
    if (moved.outcome === "denied") {
      return {
        ok: false,
        code: uid === 0 ? "move-denied" : "not-delegated",
        why:
          uid === 0
            ? `can create cgroups under ${root} but the kernel refused to move a process into one (${moved.detail ?? "denied"})`
            : `can create cgroups under ${root} but not move processes into them: uid ${uid} cannot write ${base}/cgroup.procs (systemd Delegate=yes hands that file to the unit's user)`,
      };
    }
    if (moved.outcome !== "moved") return { ok: false, code: "probe-failed", why: `moving a probe process into ${probe} failed (${moved.outcome}${moved.detail ? `: ${moved.detail}` : ""})` };
    const seen = await readCgroupOf(child.pid);
    if (seen !== probe) return { ok: false, code: "probe-failed", why: `a probe process moved into ${probe} reports its cgroup as ${seen ?? "unreadable"}` };
    const hasKill = await exists(`${probe}/cgroup.kill`);
    const killed = await killSubtree(probe, { method: "auto", waitMs: 5000 });
    if (killed.outcome !== "empty") return { ok: false, code: "probe-failed", why: `killing the probe cgroup ${probe} did not empty it (${describeKill(killed)})` };
    return { ok: true, kill: hasKill ? "cgroup.kill" : "signal-loop" };
  } finally {
    if (child.ok) child.stop();
    await removeTree(probe, 5000);
  }
}

type ProbeProcess = { ok: true; pid: number; stop: () => void } | { ok: false; why: string };

/** `sleep`, or node itself where there is no sleep binary (distroless images). */
async function spawnProbeProcess(): Promise<ProbeProcess> {
  const tries: Array<[string, string[]]> = [
    ["sleep", ["30"]],
    [process.execPath, ["-e", "setTimeout(() => {}, 30000)"]],
  ];
  let last = "";
  for (const [cmd, args] of tries) {
    const r = await new Promise<ProbeProcess>((resolve) => {
      const c = spawn(cmd, args, { stdio: "ignore" });
      // "on", not "once": a ChildProcess can emit "error" again (a failed kill), and an unheard one crashes the gateway
      c.on("error", (e) => resolve({ ok: false, why: `${cmd}: ${errCode(e)}` }));
      c.once("spawn", () => {
        c.unref();
        resolve({
          ok: true,
          pid: c.pid!,
          stop: () => {
            if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
          },
        });
      });
    });
    if (r.ok) return r;
    last = r.why;
  }
  return { ok: false, why: last };
}

async function enableController(cgroup: string, c: string): Promise<string | null> {
  try {
    await writeCgroupFile(`${cgroup}/cgroup.subtree_control`, `+${c}`);
    return null;
  } catch (e) {
    const code = errCode(e);
    if (code === "EBUSY") return `cannot enable ${c} in ${cgroup}/cgroup.subtree_control: the cgroup holds processes (cgroup v2 no-internal-processes rule)`;
    if (code === "EACCES" || code === "EPERM") return `not allowed to enable ${c} in ${cgroup}/cgroup.subtree_control (${code})`;
    return `enabling ${c} in ${cgroup}/cgroup.subtree_control failed (${code})`;
  }
}

function v1BoundControllers(entries: readonly MountInfoEntry[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of entries) {
    if (e.fsType !== "cgroup") continue;
    for (const o of e.superOptions) if (!out.has(o)) out.set(o, e.mountPoint);
  }
  // a v1-bound controller that is not mounted anywhere still is not on v2
  try {
    for (const line of readFileSync("/proc/cgroups", "utf8").split("\n")) {
      const [name, hier, , enabled] = line.split("\t");
      if (name && !name.startsWith("#") && hier !== "0" && enabled === "1" && !out.has(name)) out.set(name, "");
    }
  } catch {
    // no /proc/cgroups: the mounts are all we know
  }
  return out;
}

// ------------------------------------------------------ per-lease operations

export interface LeaseCgroup {
  /** filesystem path of the lease cgroup */
  path: string;
  /** the directory's inode number (== cgroup.id) as a decimal string */
  id: string;
}

export type CreateLeaseCgroupResult =
  | { ok: true; cgroup: LeaseCgroup }
  | { ok: false; code: "unavailable" | "bad-name" | "exists" | "denied" | "limit" | "error"; why: string };

/**
 * Creates `<support.root>/<owner>/<name>` for a lease: one folder per gateway
 * instance (`owner`, its instance id), so two gateways whose cgroups are the
 * same (one systemd unit, a test runner) each see only their own leases'
 * cgroups, and an operator's orphan sweep for one state dir never touches
 * another's. The owner folder holds no process, so it can hand every
 * controller the root hands out down to its leases (no-internal-processes
 * rule); it is made on first use and kept. Never adopts an existing lease directory: a
 * leftover of the same name could still hold processes that are not this
 * lease's.
 */
export async function createLeaseCgroup(support: ContainmentSupport, name: string, owner: string): Promise<CreateLeaseCgroupResult> {
  if (!support.available) return { ok: false, code: "unavailable", why: support.why };
  for (const [what, v] of [["cgroup name", name], ["owner name", owner]] as const) {
    if (typeof v !== "string" || !CGROUP_NAME_RE.test(v)) {
      return { ok: false, code: "bad-name", why: `${what} must match ${CGROUP_NAME_RE}, got ${JSON.stringify(v)}` };
    }
  }
  const parent = `${support.root}/${owner}`;
  const path = `${parent}/${name}`;
  // twice at most: a disposing controller of the same instance may remove the empty folder in between (removeOwnerFolder)
  for (let attempt = 0; ; attempt++) {
    const folder = await mkdirCgroup(parent, true);
    if (folder !== null) return folder;
    // controllers the root hands out reach the lease only through its owner folder; one missing is named by applyLimits
    const enabled = (await readSet(`${parent}/cgroup.subtree_control`)) ?? new Set<string>();
    for (const c of support.controllers) if (!enabled.has(c)) await enableController(parent, c);
    const made = await mkdirCgroup(path, false);
    if (made === null) break;
    if (made.code !== "error" || !made.why.endsWith("ENOENT") || attempt > 0) return made;
  }
  const id = await cgroupIdOf(path);
  if (id === null) return { ok: false, code: "error", why: `${path} was created but its identity cannot be read` };
  return { ok: true, cgroup: { path, id } };
}

/**
 * Removes an instance's owner folder when it is empty (a controller being
 * disposed): one folder per state dir would otherwise outlive it on the host.
 * A folder still holding lease cgroups stays ("busy"): a live session keeps
 * its cgroup whatever happens to the controller.
 */
export async function removeOwnerFolder(support: ContainmentSupport, owner: string): Promise<"removed" | "busy" | "gone" | "refused"> {
  if (!support.available || typeof owner !== "string" || !CGROUP_NAME_RE.test(owner)) return "refused";
  try {
    await fsp.rmdir(`${support.root}/${owner}`);
    return "removed";
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" ? "gone" : code === "ENOTEMPTY" || code === "EBUSY" ? "busy" : "refused";
  }
}

/**
 * The instance folder a lease cgroup lived in (`<proclease root>/<owner>`),
 * removed when nothing is left in it: a folder per state dir (or per
 * supervisor process) would otherwise outlive its last lease on the host.
 * Only a folder of that shape is touched, and rmdir itself refuses one that
 * still holds a cgroup (a lease being made right now keeps it; that maker
 * re-creates a folder removed under it: createLeaseCgroup's retry).
 */
export async function removeEmptyOwnerFolder(leaseCgroupPath: string): Promise<"removed" | "busy" | "gone" | "refused"> {
  const folder = dirname(leaseCgroupPath);
  if (basename(dirname(folder)) !== PROCLEASE_DIR || !CGROUP_NAME_RE.test(basename(folder)) || basename(folder) === GATEWAY_LEAF) return "refused";
  try {
    await fsp.rmdir(folder);
    return "removed";
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" ? "gone" : code === "ENOTEMPTY" || code === "EBUSY" ? "busy" : "refused";
  }
}

/** mkdir of a cgroup; null when made (or, with existingOk, already there). */
async function mkdirCgroup(path: string, existingOk: boolean): Promise<Extract<CreateLeaseCgroupResult, { ok: false }> | null> {
  try {
    await fsp.mkdir(path);
    return null;
  } catch (e) {
    const code = errCode(e);
    if (code === "EEXIST") return existingOk ? null : { ok: false, code: "exists", why: `${path} already exists (a leftover of an earlier lease of that name?)` };
    if (code === "EACCES" || code === "EPERM") return { ok: false, code: "denied", why: `not allowed to create ${path} (${code})` };
    if (code === "EAGAIN") return { ok: false, code: "limit", why: `cgroup.max.descendants or cgroup.max.depth reached above ${path}` };
    return { ok: false, code: "error", why: `mkdir ${path}: ${code}` };
  }
}

export type MoveOutcome = {
  outcome: "moved" | "gone" | "no-cgroup" | "denied" | "busy" | "unsupported" | "refused" | "unknown";
  detail?: string;
};

/**
 * Moves this process (every thread) into the cgroup: what the wrapper does
 * before it spawns the adapter. Synchronous syscalls on purpose: the mover is
 * the caller itself, with nothing else to serve until it is moved, and under
 * load the four thread-pool round trips of the async path (statfs, open,
 * write, close) cost more than the syscalls. The write itself may wait for
 * one RCU grace period (see ContainmentSupport.favordynmods).
 */
export function moveSelfInto(path: string): Promise<MoveOutcome> {
  const bad = cgroupPathProblemSync(path);
  if (bad !== null) return Promise.resolve(bad === "gone" ? { outcome: "no-cgroup" } : { outcome: "refused", detail: bad });
  try {
    const fd = openSync(`${path}/cgroup.procs`, fsConstants.O_WRONLY);
    try {
      writeSync(fd, String(process.pid));
    } finally {
      closeSync(fd);
    }
    return Promise.resolve({ outcome: "moved" });
  } catch (e) {
    return Promise.resolve(moveError(path, e));
  }
}

/**
 * Moves a process (all its threads) into a cgroup by writing cgroup.procs.
 * "gone": no such process; "no-cgroup": the cgroup does not exist; "busy":
 * the cgroup hands out controllers to children (no-internal-processes rule).
 */
export async function moveInto(path: string, pid: number): Promise<MoveOutcome> {
  assertPidArg(pid);
  const bad = await cgroupPathProblem(path);
  if (bad !== null) return bad === "gone" ? { outcome: "no-cgroup" } : { outcome: "refused", detail: bad };
  return writeProcs(path, pid);
}

async function writeProcs(path: string, pid: number): Promise<MoveOutcome> {
  try {
    await writeCgroupFile(`${path}/cgroup.procs`, String(pid));
    return { outcome: "moved" };
  } catch (e) {
    return moveError(path, e);
  }
}

function moveError(path: string, e: unknown): MoveOutcome {
  const code = errCode(e);
  switch (code) {
    case "ESRCH":
      return { outcome: "gone" };
    case "ENOENT":
    case "ENODEV":
      return { outcome: "no-cgroup" };
    case "EACCES":
    case "EPERM":
      return { outcome: "denied", detail: code };
    case "EBUSY":
      return { outcome: "busy", detail: `${path} hands controllers to its children, so it cannot hold processes` };
    case "EOPNOTSUPP":
    case "EINVAL":
      return { outcome: "unsupported", detail: code };
    default:
      return { outcome: "unknown", detail: code };
  }
}

type CgroupRead = { state: "ok"; path: string } | { state: "gone" } | { state: "unknown"; why: string };

/**
 * The filesystem path of a process's cgroup v2 (from /proc/PID/cgroup, the
 * `0::` line), or null when the process is gone or the answer cannot be read
 * (unreadable, no v2 line, not visible under the cgroup2 mount, or a removed
 * cgroup). null is "no answer", never "not a member".
 */
export async function readCgroupOf(pid: number): Promise<string | null> {
  const r = await readCgroupTyped(pid);
  return r.state === "ok" ? r.path : null;
}

async function readCgroupTyped(pid: number): Promise<CgroupRead> {
  assertPidArg(pid);
  let text: string;
  try {
    text = await fsp.readFile(`/proc/${pid}/cgroup`, "utf8");
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" || code === "ESRCH" ? { state: "gone" } : { state: "unknown", why: `/proc/${pid}/cgroup: ${code}` };
  }
  const parsed = parseProcCgroup(text);
  if (parsed.v2 === null) return text === "" ? { state: "gone" } : { state: "unknown", why: "no cgroup v2 line" };
  if (parsed.v2Deleted) return { state: "unknown", why: `in a removed cgroup ${parsed.v2}` };
  const mount = ownMount();
  if (mount === null) return { state: "unknown", why: "no cgroup2 mount" };
  const p = fsPathOf(mount, parsed.v2);
  return p === null ? { state: "unknown", why: `cgroup ${parsed.v2} is not visible under ${mount.mountPoint}` } : { state: "ok", path: p };
}

let cachedMount: Cgroup2Mount | null | undefined;

function ownMount(): Cgroup2Mount | null {
  if (cachedMount !== undefined) return cachedMount;
  try {
    const entries = parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8"));
    const ours = parseProcCgroup(readFileSync("/proc/self/cgroup", "utf8"));
    cachedMount = findCgroup2Mount(entries, ours.v2 ?? undefined) ?? findCgroup2Mount(entries);
  } catch {
    cachedMount = null;
  }
  return cachedMount;
}

export type Membership = "member" | "not-member" | "gone" | "unknown";

/**
 * Is `pid` inside the lease cgroup (or a cgroup below it) right now? Strong
 * ownership evidence: membership survives fork, setsid, a cleared environment
 * and re-parenting. "not-member" also when the directory at that path is no
 * longer the lease's (its identity changed): an impostor cgroup proves nothing.
 * A zombie is "gone".
 */
export async function membershipOf(pid: number, cg: LeaseCgroup): Promise<Membership> {
  const r = await readCgroupTyped(pid);
  // a zombie runs nothing and can be in a removed cgroup ("(deleted)"): it is gone
  const state = readStatSync(pid)?.state;
  if (state === undefined || state === "Z" || state === "X") return r.state === "unknown" && state === undefined ? "unknown" : "gone";
  if (r.state !== "ok") return r.state;
  if (r.path !== cg.path && !r.path.startsWith(cg.path + "/")) return "not-member";
  const idNow = await verifyCgroupIdentity(cg.path, cg.id);
  if (idNow === "match") return "member";
  return idNow === "unknown" ? "unknown" : "not-member";
}

export type IdentityVerdict = "match" | "mismatch" | "gone" | "unknown";

/** Is the directory at `path` still the cgroup that had identity `id`? */
export async function verifyCgroupIdentity(path: string, id: string): Promise<IdentityVerdict> {
  if (typeof id !== "string" || !/^[1-9][0-9]*$/.test(id)) throw new TypeError(`cgroup id must be a decimal string, got ${JSON.stringify(id)}`);
  const bad = await cgroupPathProblem(path);
  if (bad === "gone") return "gone";
  if (bad !== null) return "unknown";
  const now = await cgroupIdOf(path);
  if (now === null) return (await exists(path)) ? "unknown" : "gone";
  return now === id ? "match" : "mismatch";
}

async function cgroupIdOf(path: string): Promise<string | null> {
  try {
    return (await fsp.stat(path, { bigint: true })).ino.toString();
  } catch {
    return null;
  }
}

export type MembersResult = { state: "ok"; pids: number[] } | { state: "gone" } | { state: "unknown"; why: string };

/**
 * Every process in the cgroup and in any cgroup below it (a lease may hold a
 * nested gateway's own cgroups), from cgroup.procs. A sub-cgroup that vanishes
 * during the walk had no members (a populated cgroup cannot be removed).
 */
export async function membersOf(path: string): Promise<MembersResult> {
  const bad = await cgroupPathProblem(path);
  if (bad === "gone") return { state: "gone" };
  if (bad !== null) return { state: "unknown", why: bad };
  const pids = new Set<number>();
  const walk = async (dir: string, top: boolean): Promise<string | null | "gone"> => {
    const procs = await readText(`${dir}/cgroup.procs`, true);
    if (procs === "gone") return top ? "gone" : null;
    if (procs === null) return `cannot read ${dir}/cgroup.procs`;
    for (const pid of parsePids(procs)) pids.add(pid);
    let children: string[];
    try {
      children = (await fsp.readdir(dir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch (e) {
      if (errCode(e) === "ENOENT") return top ? "gone" : null;
      return `cannot list ${dir} (${errCode(e)})`;
    }
    for (const c of children) {
      const r = await walk(`${dir}/${c}`, false);
      if (r !== null) return r;
    }
    return null;
  };
  const r = await walk(path, true);
  if (r === "gone") return { state: "gone" };
  if (r !== null) return { state: "unknown", why: r };
  return { state: "ok", pids: [...pids].sort((a, b) => a - b) };
}

export type PopulatedState = "populated" | "empty" | "gone" | "unknown";

/** `populated` of cgroup.events: covers the whole subtree, kept by the kernel. */
export async function isPopulated(path: string): Promise<PopulatedState> {
  const text = await readText(`${path}/cgroup.events`, true);
  // the root cgroup has no cgroup.events: a missing file is "gone" only with its directory
  if (text === "gone") return (await exists(path)) ? "unknown" : "gone";
  if (text === null) return "unknown";
  return parsePopulated(text) ?? "unknown";
}

/** Polls isPopulated until "empty" or "gone", or the deadline; returns the last state. */
export async function waitUntilEmpty(path: string, timeoutMs: number): Promise<PopulatedState> {
  const deadline = Date.now() + timeoutMs;
  let step = 1;
  for (;;) {
    const s = await isPopulated(path);
    if (s === "empty" || s === "gone" || Date.now() >= deadline) return s;
    await sleep(step);
    step = Math.min(step * 2, 25);
  }
}

export type KillOutcome =
  /** nothing is left (populated 0): `via` says what got it there */
  | { outcome: "empty"; via: "cgroup.kill" | "signal-loop" | "already-empty" }
  /** waitMs 0: cgroup.kill was written; nothing was waited for */
  | { outcome: "sent"; via: "cgroup.kill" }
  /** the cgroup does not exist (any members it had are gone with it) */
  | { outcome: "gone" }
  /** still populated at the deadline (processes in D state, or no permission) */
  | { outcome: "survivors"; via: "cgroup.kill" | "signal-loop"; pids: number[] | null; detail?: string }
  /** a guard refused: the path is not a lease cgroup, or holds this process or an ancestor */
  | { outcome: "refused"; why: string }
  | { outcome: "unknown"; why: string };

export interface KillOptions {
  /** "auto": cgroup.kill where present, else the signal loop. Default "auto". */
  method?: "auto" | "cgroup.kill" | "signal-loop";
  /** how long to wait for populated 0; 0 = write cgroup.kill and return "sent". Default 5000. */
  waitMs?: number;
  /** the identity-checked signaller for the loop (default: procfs facts, pidfd when the addon loads) */
  signaller?: ProcessSignaller;
}

/**
 * SIGKILLs everything in a lease cgroup and its subtree. cgroup.kill is one
 * atomic write that also catches forks made meanwhile. Without it (Linux <
 * 5.14) the cgroup is frozen where cgroup.freeze exists (no forks, no exits
 * that could free a pid for reuse), then each member is SIGKILLed through the
 * identity-checked signaller after its membership was re-read, until
 * populated 0 or the deadline; the cgroup is thawed again before returning.
 * Refuses anything but `…/proclease/<name>`, and any cgroup holding this
 * process or one of its ancestors.
 */
export async function killCgroup(path: string, opts: KillOptions = {}): Promise<KillOutcome> {
  const refusal = await killRefusal(path);
  if (refusal === "gone") return { outcome: "gone" };
  if (refusal !== null) return { outcome: "refused", why: refusal };
  return killSubtree(path, opts);
}

async function killSubtree(path: string, opts: KillOptions): Promise<KillOutcome> {
  const waitMs = opts.waitMs ?? 5000;
  const method = opts.method ?? "auto";
  const before = await isPopulated(path);
  if (before === "gone") return { outcome: "gone" };
  if (before === "empty") return { outcome: "empty", via: "already-empty" };
  const hasKill = method !== "signal-loop" && (await exists(`${path}/cgroup.kill`));
  if (method === "cgroup.kill" && !hasKill) return { outcome: "unknown", why: `${path}/cgroup.kill does not exist (Linux < 5.14)` };
  if (hasKill) {
    try {
      await writeCgroupFile(`${path}/cgroup.kill`, "1");
    } catch (e) {
      const code = errCode(e);
      if (code === "ENOENT" || code === "ENODEV") return { outcome: "gone" };
      return { outcome: "unknown", why: `writing ${path}/cgroup.kill failed (${code})` };
    }
    if (waitMs <= 0) return { outcome: "sent", via: "cgroup.kill" };
    const s = await waitUntilEmpty(path, waitMs);
    if (s === "empty" || s === "gone") return { outcome: "empty", via: "cgroup.kill" };
    const m = await membersOf(path);
    return { outcome: "survivors", via: "cgroup.kill", pids: m.state === "ok" ? m.pids : null, ...(s === "unknown" ? { detail: "cgroup.events unreadable" } : {}) };
  }
  return signalLoop(path, Math.max(waitMs, 1), opts.signaller ?? defaultSignaller());
}

async function signalLoop(path: string, waitMs: number, signaller: ProcessSignaller): Promise<KillOutcome> {
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
        const outcomes = await signalPids(path, m.pids, "SIGKILL", signaller);
        const blocked = outcomes.filter((o) => o.outcome === "denied" || o.outcome === "refused" || o.outcome === "unknown" || o.outcome === "unsupported");
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
 * of a reap, before the grace and cgroup.kill). Each pid is sent to only
 * after its start time was read, its membership re-read and the start time
 * found unchanged, through the identity-checked signaller and the hard
 * guards. "left": it moved out or exited between the reads.
 */
export async function signalMembers(
  path: string,
  signal: NodeJS.Signals,
  opts: { signaller?: ProcessSignaller } = {},
): Promise<{ state: "ok"; sent: MemberSignal[] } | { state: "gone" } | { state: "refused" | "unknown"; why: string }> {
  const refusal = await killRefusal(path);
  if (refusal === "gone") return { state: "gone" };
  if (refusal !== null) return { state: "refused", why: refusal };
  const m = await membersOf(path);
  if (m.state !== "ok") return m;
  return { state: "ok", sent: await signalPids(path, m.pids, signal, opts.signaller ?? defaultSignaller()) };
}

async function signalPids(path: string, pids: readonly number[], signal: NodeJS.Signals, signaller: ProcessSignaller): Promise<MemberSignal[]> {
  const out: MemberSignal[] = [];
  for (const pid of pids) {
    if (!checkSignalTarget(pid).allowed) {
      out.push({ pid, outcome: "refused" });
      continue;
    }
    const st = readStatSync(pid);
    if (st === null) {
      out.push({ pid, outcome: "gone" });
      continue;
    }
    const where = await readCgroupTyped(pid);
    if (where.state === "gone") {
      out.push({ pid, outcome: "gone" });
      continue;
    }
    if (where.state !== "ok") {
      out.push({ pid, outcome: "unknown" });
      continue;
    }
    if (where.path !== path && !where.path.startsWith(path + "/")) {
      out.push({ pid, outcome: "not-member" });
      continue;
    }
    // the membership read above belongs to the process with this start time
    const again = readStatSync(pid);
    if (again === null || !sameProcess({ pid, startTime: again.startTime }, { pid, startTime: st.startTime })) {
      out.push({ pid, outcome: "left" });
      continue;
    }
    out.push({ pid, outcome: await signaller.signal(pid, st.startTime, signal) });
  }
  return out;
}

let signallerCache: ProcessSignaller | undefined;
function defaultSignaller(): ProcessSignaller {
  signallerCache ??= createSignaller(createProcfsFacts());
  return signallerCache;
}

/**
 * The one shape a cgroup must have before this module kills or removes it:
 * `…/proclease/<owner>/<name>` (createLeaseCgroup), both names matching
 * CGROUP_NAME_RE: never the root, an owner's folder, or our `_` leaves.
 */
export function leaseCgroupShapeProblem(path: string): string | null {
  const parent = dirname(path);
  const ok = CGROUP_NAME_RE.test(basename(path)) && CGROUP_NAME_RE.test(basename(parent)) && basename(dirname(parent)) === PROCLEASE_DIR;
  return ok ? null : `${path} is not a lease cgroup (…/${PROCLEASE_DIR}/<owner>/<name>, names matching ${CGROUP_NAME_RE})`;
}

/** null = allowed; "gone" = no such cgroup; else why not. */
async function killRefusal(path: string): Promise<string | "gone" | null> {
  const bad = await cgroupPathProblem(path);
  if (bad !== null) return bad;
  const shape = leaseCgroupShapeProblem(path);
  if (shape !== null) return shape;
  // cgroup.kill takes the whole subtree: never one that holds us or an ancestor
  const watch = [process.pid, process.ppid, ...ancestorsOfThisProcess()];
  for (const pid of new Set(watch)) {
    if (pid <= 1) continue;
    const r = await readCgroupTyped(pid);
    if (r.state === "gone" && pid !== process.pid) continue;
    if (r.state !== "ok") return `cannot tell whether ${pid === process.pid ? "this process" : `ancestor ${pid}`} is inside ${path} (${r.state === "unknown" ? r.why : "gone"})`;
    if (r.path === path || r.path.startsWith(path + "/")) {
      return `${path} holds ${pid === process.pid ? "this process" : pid === process.ppid ? "this process's parent" : `ancestor ${pid}`}`;
    }
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
export async function removeCgroup(path: string, opts: { waitMs?: number } = {}): Promise<RemoveOutcome> {
  const bad = await cgroupPathProblem(path);
  if (bad === "gone") return { outcome: "gone" };
  if (bad !== null) return { outcome: "refused", why: bad };
  const shape = leaseCgroupShapeProblem(path);
  if (shape !== null) return { outcome: "refused", why: shape };
  return removeTree(path, opts.waitMs ?? 5000);
}

async function removeTree(path: string, waitMs: number): Promise<RemoveOutcome> {
  const deadline = Date.now() + waitMs;
  let step = 1;
  for (;;) {
    const r = await rmdirDeep(path);
    if (r === "removed") return { outcome: "removed" };
    if (r === "gone") return { outcome: "gone" };
    if (r.code !== "EBUSY" && r.code !== "ENOTEMPTY") return { outcome: "unknown", why: `rmdir ${r.dir}: ${r.code}` };
    if (Date.now() >= deadline) {
      return { outcome: "busy", populated: await isPopulated(path), detail: `rmdir ${r.dir}: ${r.code}` };
    }
    await sleep(step);
    step = Math.min(step * 2, 25);
  }
}

async function rmdirDeep(dir: string): Promise<"removed" | "gone" | { dir: string; code: string }> {
  let children: string[];
  try {
    children = (await fsp.readdir(dir, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" ? "gone" : { dir, code };
  }
  for (const c of children) {
    const r = await rmdirDeep(`${dir}/${c}`);
    if (typeof r === "object") return r;
  }
  try {
    await fsp.rmdir(dir);
    return "removed";
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" ? "gone" : { dir, code };
  }
}

// ------------------------------------------------------------ resources

export type MemoryReading = { ok: true; current: number; peak: number | null } | { ok: false; why: string };

/**
 * memory.current and memory.peak (bytes) of a lease cgroup. peak is null on
 * kernels before 5.19 (no memory.peak). When the memory controller is not
 * on v2 for this cgroup, the why says where it is instead.
 */
export async function readMemory(path: string): Promise<MemoryReading> {
  const current = await readText(`${path}/memory.current`, true);
  if (current === "gone" || current === null) {
    if (!(await exists(path))) return { ok: false, why: `${path} does not exist` };
    return { ok: false, why: await controllerMissingWhy(path, "memory") };
  }
  const cur = parseCounter(current);
  if (cur === null) return { ok: false, why: `${path}/memory.current is malformed` };
  const peakText = await readText(`${path}/memory.peak`);
  return { ok: true, current: cur, peak: peakText === null ? null : parseCounter(peakText) };
}

export interface Limits {
  /** bytes, or "max" */
  memoryMax?: number | "max";
  /** tasks, or "max" */
  pidsMax?: number | "max";
}

export type ApplyLimitsResult = { ok: true; applied: string[] } | { ok: false; controller: string; why: string };

/**
 * Writes memory.max / pids.max. Checks every needed file first, so a missing
 * controller leaves nothing half-applied; the why names what is missing and
 * where it is instead. Throws a TypeError only for malformed limits.
 */
export async function applyLimits(path: string, limits: Limits): Promise<ApplyLimitsResult> {
  const writes: Array<[controller: string, file: string, value: string]> = [];
  if (limits.memoryMax !== undefined) writes.push(["memory", "memory.max", limitValue("memoryMax", limits.memoryMax)]);
  if (limits.pidsMax !== undefined) writes.push(["pids", "pids.max", limitValue("pidsMax", limits.pidsMax)]);
  for (const [controller, file] of writes) {
    if (!(await exists(`${path}/${file}`))) {
      if (!(await exists(path))) return { ok: false, controller, why: `${path} does not exist` };
      return { ok: false, controller, why: await controllerMissingWhy(path, controller) };
    }
  }
  const applied: string[] = [];
  for (const [controller, file, value] of writes) {
    try {
      await writeCgroupFile(`${path}/${file}`, value);
      applied.push(file);
    } catch (e) {
      return { ok: false, controller, why: `writing ${value} to ${path}/${file} failed (${errCode(e)})${applied.length ? `; already applied: ${applied.join(", ")}` : ""}` };
    }
  }
  return { ok: true, applied };
}

/** The one rule for a limit's value: a positive safe integer, or "max" (no limit). */
export function isLimitValue(v: unknown): v is number | "max" {
  return v === "max" || (typeof v === "number" && Number.isSafeInteger(v) && v > 0);
}

function limitValue(name: string, v: number | "max"): string {
  if (!isLimitValue(v)) throw new TypeError(`${name} must be a positive integer or "max", got ${JSON.stringify(v)}`);
  return String(v);
}

/** Why `controller` has no interface files in `path`, in an operator's words. */
async function controllerMissingWhy(path: string, controller: string): Promise<string> {
  const parent = dirname(path);
  const inParent = await readSet(`${parent}/cgroup.subtree_control`);
  const offered = await readSet(`${parent}/cgroup.controllers`);
  let entries: MountInfoEntry[] = [];
  try {
    entries = parseMountInfo(await fsp.readFile("/proc/self/mountinfo", "utf8"));
  } catch {
    // the reasons below still hold without the mount table
  }
  const v1 = v1BoundControllers(entries);
  if (v1.has(controller)) return unavailableWhy(controller, parent, new Set(), v1);
  if (offered !== null && offered.has(controller) && inParent !== null && !inParent.has(controller)) {
    return `the ${controller} controller is not enabled for lease cgroups: ${parent}/cgroup.subtree_control lacks it (ask detectContainment for it)`;
  }
  const mount = ownMount();
  const hierarchy = mount ? await readSet(`${mount.mountPoint.replace(/\/+$/, "") || "/"}/cgroup.controllers`) : null;
  return unavailableWhy(controller, parent, hierarchy ?? new Set(), v1);
}

// ----------------------------------------------------------- orphan listing

export interface ListedCgroup {
  name: string;
  path: string;
  id: string;
  populated: PopulatedState;
}

export type ListResult = { state: "ok"; cgroups: ListedCgroup[] } | { state: "unknown"; why: string };

/**
 * The lease cgroups under a proclease root (our own `_` leaves left out), with
 * their identities and populated state, for orphan detection: one with no
 * lease file is an orphan. A missing root lists nothing (no cgroup can exist
 * under it); an unreadable one is "unknown".
 */
export async function listLeaseCgroups(root: string): Promise<ListResult> {
  let dirents;
  try {
    dirents = await fsp.readdir(root, { withFileTypes: true });
  } catch (e) {
    const code = errCode(e);
    if (code === "ENOENT") return { state: "ok", cgroups: [] };
    return { state: "unknown", why: `cannot list ${root} (${code})` };
  }
  const out: ListedCgroup[] = [];
  for (const d of dirents) {
    if (!d.isDirectory() || !CGROUP_NAME_RE.test(d.name)) continue;
    const path = `${root}/${d.name}`;
    const id = await cgroupIdOf(path);
    if (id === null) continue; // removed while listing
    out.push({ name: d.name, path, id, populated: await isPopulated(path) });
  }
  out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { state: "ok", cgroups: out };
}

// ----------------------------------------------------------------- helpers

/** null when `path` is an absolute, normalised directory on cgroup2; "gone" when missing; else why not. */
export async function cgroupPathProblem(path: string): Promise<string | "gone" | null> {
  if (typeof path !== "string" || !isAbsolute(path) || normalize(path) !== path || (path.length > 1 && path.endsWith("/"))) {
    return `${JSON.stringify(path)} is not an absolute, normalised path`;
  }
  try {
    const fsType = (await fsp.statfs(path)).type;
    if (fsType !== CGROUP2_SUPER_MAGIC) return `${path} is not on a cgroup2 filesystem`;
    return null;
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" || code === "ENOTDIR" ? "gone" : `cannot statfs ${path} (${code})`;
  }
}

function cgroupPathProblemSync(path: string): string | "gone" | null {
  if (typeof path !== "string" || !isAbsolute(path) || normalize(path) !== path || (path.length > 1 && path.endsWith("/"))) {
    return `${JSON.stringify(path)} is not an absolute, normalised path`;
  }
  try {
    return statfsSync(path).type === CGROUP2_SUPER_MAGIC ? null : `${path} is not on a cgroup2 filesystem`;
  } catch (e) {
    const code = errCode(e);
    return code === "ENOENT" || code === "ENOTDIR" ? "gone" : `cannot statfs ${path} (${code})`;
  }
}

async function isCgroup2Dir(path: string): Promise<boolean> {
  return (await cgroupPathProblem(path)) === null;
}

/** text, null when unreadable, "gone" (only with gone=true) on ENOENT/ENODEV. */
async function readText(file: string): Promise<string | null>;
async function readText(file: string, gone: true): Promise<string | null | "gone">;
async function readText(file: string, gone = false): Promise<string | null | "gone"> {
  try {
    return await fsp.readFile(file, "utf8");
  } catch (e) {
    const code = errCode(e);
    return gone && (code === "ENOENT" || code === "ENODEV") ? "gone" : null;
  }
}

async function readSet(file: string): Promise<Set<string> | null> {
  const t = await readText(file);
  return t === null ? null : new Set(parseControllerList(t));
}

async function exists(p: string): Promise<boolean> {
  try {
    await fsp.access(p, fsConstants.F_OK);
    return true;
  } catch {
    return false;
  }
}

async function writeIfExists(file: string, value: string): Promise<boolean> {
  try {
    await writeCgroupFile(file, value);
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
async function writeCgroupFile(file: string, value: string): Promise<void> {
  await fsp.writeFile(file, value, { flag: fsConstants.O_WRONLY });
}

function parsePids(text: string): number[] {
  const out: number[] = [];
  for (const l of text.split("\n")) if (/^[1-9][0-9]*$/.test(l)) out.push(Number(l));
  return out;
}

function parseCounter(text: string): number | null {
  const t = text.trim();
  return /^[0-9]+$/.test(t) ? Number(t) : null;
}

function assertPidArg(pid: number): void {
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) throw new TypeError(`pid must be a positive integer, got ${String(pid)}`);
}

function errCode(e: unknown): string {
  return (e as NodeJS.ErrnoException | null)?.code ?? String(e);
}

function describeKill(k: KillOutcome): string {
  return "why" in k ? `${k.outcome}: ${k.why}` : "detail" in k && k.detail ? `${k.outcome}: ${k.detail}` : k.outcome;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
