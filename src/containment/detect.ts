/**
 * Can this process contain leases in cgroups, and where? The steps, in order:
 * locate (our cgroup and the cgroup2 mount showing it), make the root
 * (`<our cgroup>/proclease`), prove it with a throwaway probe (a child cgroup
 * is made, a short-lived process joins it, is seen there, is killed through
 * the cgroup, and the cgroup is removed), then set up the controllers the
 * leases should get (controllers.ts), moving the gateway into its own leaf
 * only when they need it. Never throws; every "no" carries a code and an
 * operator-readable why.
 */
import { spawn } from "node:child_process";
import { promises as fsp } from "node:fs";
import { basename, dirname } from "node:path";
import { signalUnreapedChild } from "../facts/signal.js";
import { faultOf } from "./errors.js";
import { enterCgroup, type EnterOutcome } from "./enter.js";
import { exists, parsePids, readSet, readText } from "./files.js";
import { enableController, planControllers, v1BoundControllers, type ControllerProblem } from "./controllers.js";
import { describeKill, killSubtree, removeTree } from "./kill.js";
import { recordHome } from "./members.js";
import { predictBoundary, type Boundary } from "./boundary.js";
import {
  findCgroup2Mount,
  fsPathOf,
  mountDir,
  readCgroupOf,
  readMountTable,
  type Cgroup2Mount,
  type MountTable,
} from "./mountinfo.js";
import { cgroupPathProblem, GATEWAY_LEAF, PROBE_PREFIX, PROCLEASE_DIR } from "./paths.js";

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
      /** the cgroup path mounted there (the mountinfo root field; "/" unless in a cgroup namespace's subtree) */
      mountRoot: string;
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
      /**
       * Whether the kernel keeps an adapter's tree inside its lease cgroup
       * (boundary.ts): each adapter gets its own cgroup namespace rooted at
       * its lease cgroup, and cgroup2 is mounted with nsdelegate. Predicted
       * here from the mount and this process's capabilities; each session's
       * wrapper reports what it got.
       */
      boundary: Boundary;
    }
  | { available: false; code: ContainmentOffCode; why: string };

export interface DetectOptions {
  /** controllers the lease cgroups should get (e.g. ["memory", "pids"]); default none */
  controllers?: readonly string[];
  /** may the gateway move itself into proclease/_gateway to enable them; default true */
  allowGatewayMove?: boolean;
}

type Off = Extract<ContainmentSupport, { available: false }>;
const off = (code: ContainmentOffCode, why: string): Off => ({ available: false, code, why });

/** The cgroup2 mount detection found, as a value for readCgroupOf (no mount table read). */
export function mountOf(support: Extract<ContainmentSupport, { available: true }>): Cgroup2Mount {
  return { mountPoint: support.mount, root: support.mountRoot, readOnly: false };
}

/** Where this process is: the mount table, the mount, our cgroup (`here`), the base and the root. */
interface Place {
  table: MountTable;
  mount: Cgroup2Mount;
  here: string;
  base: string;
  root: string;
  /** we run inside our own `_gateway` leaf already (a gateway restarted from inside it) */
  inLeaf: boolean;
  uid: number;
}

export async function detectContainment(opts: DetectOptions = {}): Promise<ContainmentSupport> {
  if (process.platform !== "linux") {
    return off(
      "not-linux",
      `cgroups exist only on Linux (this is ${process.platform}); ownership rests on the process tree and the lease markers`,
    );
  }
  const place = await locate();
  if ("available" in place) return place;
  const rootProblem = await makeRoot(place);
  if (rootProblem !== null) return rootProblem;
  const probe = await runProbe(place);
  if (!probe.ok) return off(probe.code, probe.why);
  const ctl = await setUpControllers(place, [...new Set(opts.controllers ?? [])], opts.allowGatewayMove !== false);
  // where a drain sends this process back when an agent moved it into a lease cgroup
  recordHome(ctl.gatewayCgroup);
  const { table, mount, base, root } = place;
  return {
    available: true,
    root,
    mount: mount.mountPoint,
    mountRoot: mount.root,
    base,
    gatewayCgroup: ctl.gatewayCgroup,
    movedGateway: ctl.movedGateway,
    controllers: [...((await readSet(`${root}/cgroup.subtree_control`)) ?? [])],
    missingControllers: ctl.missing,
    kill: probe.kill,
    favordynmods: table.entries.some(
      (e) => e.fsType === "cgroup2" && e.mountPoint === mount.mountPoint && e.superOptions.includes("favordynmods"),
    ),
    boundary: await predictBoundary(table.entries, mount),
  };
}

async function locate(): Promise<Place | Off> {
  let table: MountTable;
  try {
    table = await readMountTable();
  } catch (e) {
    return off(
      "unreadable",
      `cannot read /proc/self/mountinfo or /proc/self/cgroup (${faultOf(e).code}): is /proc mounted?`,
    );
  }
  if (!table.entries.some((e) => e.fsType === "cgroup2")) {
    return off(
      "no-cgroup2",
      "no cgroup2 filesystem is mounted (a cgroup v1-only host): containment needs the unified hierarchy (boot with systemd.unified_cgroup_hierarchy=1, or mount cgroup2)",
    );
  }
  if (table.selfV2 === null) {
    return off(
      "no-v2-membership",
      "/proc/self/cgroup has no cgroup v2 (0::) line, so this process's place in the cgroup2 hierarchy is unknown",
    );
  }
  const mount = findCgroup2Mount(table.entries, table.selfV2);
  if (mount === null) {
    return off(
      "not-visible",
      `this process's cgroup ${table.selfV2} is not visible under any cgroup2 mount (it lies outside the mounted subtree or outside this cgroup namespace)`,
    );
  }
  if (mount.readOnly) {
    return off(
      "read-only",
      `cgroup2 is mounted read-only at ${mount.mountPoint} (typical of a container without a writable cgroup namespace)`,
    );
  }
  const here = fsPathOf(mount, table.selfV2)!;
  // Already in our own leaf: the lease root is the same as for the first start, so leftovers are still found.
  const inLeaf = basename(here) === GATEWAY_LEAF && basename(dirname(here)) === PROCLEASE_DIR;
  const base = inLeaf ? dirname(dirname(here)) : here;
  return { table, mount, here, base, root: `${base}/${PROCLEASE_DIR}`, inLeaf, uid: process.getuid?.() ?? -1 };
}

/** `<base>/proclease`, made when missing; null when it is a cgroup2 directory now. */
async function makeRoot(p: Place): Promise<Off | null> {
  try {
    await fsp.mkdir(p.root);
  } catch (e) {
    if (faultOf(e).fault !== "exists") return mkdirOff(e, p.base, p.uid);
  }
  return (await cgroupPathProblem(p.root)) === null
    ? null
    : off("unreadable", `${p.root} exists but is not a cgroup2 directory`);
}

/** Why a cgroup could not be made under `base` (named after base: that is the cgroup an operator delegates). */
function mkdirOff(e: unknown, base: string, uid: number): Off {
  const { fault, code } = faultOf(e);
  switch (fault) {
    case "denied":
      return uid !== 0
        ? off(
            "not-delegated",
            `not root (uid ${uid}) and the cgroup ${base} is not delegated to this user: run the gateway as a systemd unit with Delegate=yes (or hand the cgroup to uid ${uid})`,
          )
        : off(
            "refused",
            `running as root, but the kernel refused to create a cgroup in ${base} (${code}): typically a container whose cgroup namespace is not writable, or a security policy`,
          );
    case "read-only":
      return off(
        "read-only",
        `the cgroup filesystem holding ${base} is read-only (a container without cgroup write access)`,
      );
    case "limit":
      return off(
        "limit",
        `the kernel refused a new cgroup under ${base}: cgroup.max.descendants or cgroup.max.depth is reached`,
      );
    case "missing":
      return off("unreadable", `this process's cgroup ${base} vanished while it was being checked`);
    default:
      return off("probe-failed", `cannot create ${base}/${PROCLEASE_DIR} (${code})`);
  }
}

/** Probe cgroups made by this process so far: each probe gets a fresh name. */
let probeCounter = 0;

type ProbeResult =
  { ok: true; kill: "cgroup.kill" | "signal-loop" } | { ok: false; code: ContainmentOffCode; why: string };

/** mkdir a probe cgroup, move a throwaway process in, see it there, kill through the cgroup, rmdir. */
async function runProbe(p: Place): Promise<ProbeResult> {
  const probe = `${p.root}/${PROBE_PREFIX}${process.pid}-${++probeCounter}`;
  try {
    await fsp.mkdir(probe);
  } catch (e) {
    const o = mkdirOff(e, p.base, p.uid);
    return { ok: false, code: o.code, why: o.why };
  }
  const child = await spawnProbeProcess();
  try {
    if (!child.ok)
      return {
        ok: false,
        code: "probe-failed",
        why: `cannot start a probe process to test moving into a cgroup (${child.why})`,
      };
    const moved = enterCgroup(probe, child.pid);
    if (moved.outcome !== "moved") return probeMoveFailed(p, probe, moved);
    const seen = await readCgroupOf(child.pid, p.mount);
    if (seen !== probe)
      return {
        ok: false,
        code: "probe-failed",
        why: `a probe process moved into ${probe} reports its cgroup as ${seen ?? "unreadable"}`,
      };
    const hasKill = await exists(`${probe}/cgroup.kill`);
    const killed = await killSubtree(probe, { method: "auto", waitMs: 5000 }, p.mount);
    if (killed.outcome !== "empty")
      return {
        ok: false,
        code: "probe-failed",
        why: `killing the probe cgroup ${probe} did not empty it (${describeKill(killed)})`,
      };
    return { ok: true, kill: hasKill ? "cgroup.kill" : "signal-loop" };
  } finally {
    if (child.ok) child.stop();
    await removeTree(probe, 5000);
  }
}

function probeMoveFailed(p: Place, probe: string, moved: EnterOutcome): ProbeResult {
  if (moved.outcome === "denied") {
    return p.uid === 0
      ? {
          ok: false,
          code: "move-denied",
          why: `can create cgroups under ${p.root} but the kernel refused to move a process into one (${moved.detail ?? "denied"})`,
        }
      : {
          ok: false,
          code: "not-delegated",
          why: `can create cgroups under ${p.root} but not move processes into them: uid ${p.uid} cannot write ${p.base}/cgroup.procs (systemd Delegate=yes hands that file to the unit's user)`,
        };
  }
  return {
    ok: false,
    code: "probe-failed",
    why: `moving a probe process into ${probe} failed (${moved.outcome}${moved.detail ? `: ${moved.detail}` : ""})`,
  };
}

type ProbeProcess = { ok: true; pid: number; stop: () => void } | { ok: false; why: string };

function probeEnv(): NodeJS.ProcessEnv {
  return process.env.PATH === undefined ? {} : { PATH: process.env.PATH };
}

/** `sleep`, or node itself where there is no sleep binary (distroless images). */
export async function spawnProbeProcess(): Promise<ProbeProcess> {
  const tries: Array<[string, string[]]> = [
    ["sleep", ["30"]],
    [process.execPath, ["-e", "setTimeout(() => {}, 30000)"]],
  ];
  let last = "";
  for (const [cmd, args] of tries) {
    const r = await new Promise<ProbeProcess>((resolve) => {
      // PATH only: the gateway's environment holds credentials (some envRemove'd from its adapters) that a probe never needs
      const c = spawn(cmd, args, { stdio: "ignore", env: probeEnv() });
      // "on", not "once": a ChildProcess can emit "error" again (a failed kill), and an unheard one crashes the gateway
      c.on("error", (e) => resolve({ ok: false, why: `${cmd}: ${faultOf(e).code}` }));
      c.once("spawn", () => {
        c.unref();
        resolve({
          ok: true,
          pid: c.pid!,
          stop: () => {
            signalUnreapedChild(c, "SIGKILL");
          },
        });
      });
    });
    if (r.ok) return r;
    last = r.why;
  }
  return { ok: false, why: last };
}

interface ControllerSetup {
  missing: ControllerProblem[];
  movedGateway: boolean;
  gatewayCgroup: string;
}

/** Carries out planControllers: the gateway's move into its leaf when needed, then the subtree_control writes. */
async function setUpControllers(
  p: Place,
  wanted: readonly string[],
  allowGatewayMove: boolean,
): Promise<ControllerSetup> {
  const none: ControllerSetup = { missing: [], movedGateway: false, gatewayCgroup: p.here };
  if (wanted.length === 0) return none;
  const hierarchyRoot = mountDir(p.mount);
  const [baseAvailable, baseEnabled, rootEnabled, hierarchyAvailable, baseProcsText, baseType] = await Promise.all([
    readSet(`${p.base}/cgroup.controllers`),
    readSet(`${p.base}/cgroup.subtree_control`),
    readSet(`${p.root}/cgroup.subtree_control`),
    readSet(`${hierarchyRoot}/cgroup.controllers`),
    readText(`${p.base}/cgroup.procs`),
    readText(`${p.base}/cgroup.type`),
  ]);
  if (baseAvailable === null || baseEnabled === null || rootEnabled === null || baseProcsText === null) {
    return {
      ...none,
      missing: wanted.map((c) => ({
        controller: c,
        code: "unreadable" as const,
        why: `cannot read the controller files of ${p.base}`,
      })),
    };
  }
  const plan = planControllers({
    wanted,
    baseAvailable,
    baseEnabled,
    rootEnabled,
    hierarchyAvailable: hierarchyAvailable ?? new Set(),
    v1Bound: await v1BoundControllers(p.table.entries),
    base: p.base,
    // the real root has no cgroup.type; a cgroup namespace root has one and obeys the rule
    baseIsHierarchyRoot: baseType === null && p.mount.root === "/" && p.base === hierarchyRoot,
    baseProcs: parsePids(baseProcsText),
    selfPid: process.pid,
    selfInBase: !p.inLeaf,
    allowGatewayMove,
  });
  const out: ControllerSetup = { ...none, missing: [...plan.missing] };
  const failedMove = plan.moveGateway ? await moveGateway(p, out) : null;
  for (const c of plan.enableInBase) {
    if (failedMove !== null) {
      out.missing.push({ controller: c, code: "move-failed", why: failedMove });
      continue;
    }
    const why = await enableController(p.base, c);
    if (why !== null) out.missing.push({ controller: c, code: "enable-refused", why });
  }
  for (const c of plan.enableInRoot) {
    if (out.missing.some((m) => m.controller === c)) continue;
    const why = await enableController(p.root, c);
    if (why !== null) out.missing.push({ controller: c, code: "enable-refused", why });
  }
  return out;
}

/** The gateway joins `root/_gateway` (made when missing); null when it did, else why not. */
async function moveGateway(p: Place, out: ControllerSetup): Promise<string | null> {
  const leaf = `${p.root}/${GATEWAY_LEAF}`;
  const made = await fsp.mkdir(leaf).then(
    () => null,
    (e: unknown) => (faultOf(e).fault === "exists" ? null : faultOf(e).code),
  );
  const moved: EnterOutcome =
    made === null ? enterCgroup(leaf) : { outcome: "unknown", detail: `mkdir ${leaf}: ${made}` };
  if (moved.outcome !== "moved")
    return `the gateway could not move into ${leaf} (${moved.outcome}${moved.detail ? `: ${moved.detail}` : ""})`;
  out.movedGateway = true;
  out.gatewayCgroup = leaf;
  return null;
}
