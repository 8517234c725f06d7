/**
 * `proclease doctor [--json] [--backend NAME] [--strict]`: what this host allows, one row
 * per capability, each with yes/no and the reason. Every check is a real
 * attempt (load the addon, open pidfds, set the subreaper bit in a throwaway
 * child, read pid 1's environment), never a guess from the platform name.
 * Rows that depend on the facts backend (identity, signals, environments)
 * describe the backend that was asked, not the best one the host has.
 * The orphan-cgroups row reads the state dir (read-only): cgroups in its
 * instance folders that are no lease's own; and the host's instance index:
 * instance folders whose state dir is gone.
 */
import { execFile } from "node:child_process";
import { constants as fsc, existsSync, promises as fsp } from "node:fs";
import { join } from "node:path";
import { release } from "node:os";
import { describeBackendChoice, type BackendChoiceCode } from "../../facts/get.js";
import { loadError, loadNative } from "../../facts/native.js";
import { createSignaller } from "../../facts/signal.js";
import type { NativeBinding } from "../../facts/native-binding.js";
import { hidepidOf, procMountOptions } from "../../facts/procfs.js";
import type { ProcessFacts } from "../../facts/types.js";
import { backendLine, factsFromFlag, forcedBackend } from "../backend.js";
import { openLeaseStore } from "../../ownership/index.js";
import { flag, jsonLine, plural, resolveStateDir, table, type CliIo, type ParsedArgs } from "../io.js";
import { scanOrphanCgroups } from "../lease-view.js";
import { scanOrphanInstanceFolders } from "../orphan-instances.js";

export interface DoctorRow {
  capability: string;
  ok: boolean;
  /** why, where a row has more than one (the backend choice, pidfd, foreign environments) */
  code?: DoctorCode;
  detail: string;
}

/** A row's why, for code to read: the backend's choice (BackendChoiceCode, or forced), pidfd's, foreign-env's. */
export type DoctorCode =
  | BackendChoiceCode
  | "forced"
  | "not-linux"
  | "no-addon"
  | "kernel-refuses-pidfd"
  | "backend-none"
  | "not-race-free"
  | "race-free"
  | "ps-reads-no-env"
  | "pid-1"
  | "env-readable"
  | "env-unreadable";

function nativeWhy(): string {
  return loadError() ?? `not built for ${process.platform}`;
}

function backendRow(facts: ProcessFacts, forced: string | undefined, binding: NativeBinding | null): DoctorRow {
  const choice = forced !== undefined ? null : describeBackendChoice();
  const how = choice === null ? `forced by --backend ${forced}` : choice.reason;
  let native = "";
  // the auto choice already says why the addon was not used; a forced or env choice does not
  if (facts.backend !== "native" && choice?.code !== "native-unavailable") {
    native = binding === null ? `; native addon unavailable: ${nativeWhy()}` : "; native addon loads but was not chosen";
  }
  return { capability: "backend", ok: facts.backend !== "none", code: choice?.code ?? "forced", detail: `${facts.backend}: ${how}${native}` };
}

function identityRow(facts: ProcessFacts): DoctorRow {
  const detail = {
    exact: "start times are unique per process (Linux clock ticks + boot id, macOS µs)",
    coarse: "ps lstart: one-second start times; a pid reused within the same second looks identical",
    none: "nothing can be verified: every ownership check fails closed",
  }[facts.identityStrength];
  return { capability: "identity", ok: facts.identityStrength === "exact", detail: `${facts.identityStrength}: ${detail}` };
}

/** Whether the signaller built for THIS backend (facts/signal.ts decides) checks and sends without a window. */
function pidfdRow(facts: ProcessFacts, binding: NativeBinding | null): DoctorRow {
  const cap = "pidfd";
  if (process.platform !== "linux") return { capability: cap, ok: false, code: "not-linux", detail: `Linux only (this is ${process.platform}): check-then-kill has a pid-reuse window` };
  if (binding === null) return { capability: cap, ok: false, code: "no-addon", detail: `needs the native addon: ${nativeWhy()}` };
  if (!binding.pidfdSupported()) return { capability: cap, ok: false, code: "kernel-refuses-pidfd", detail: `kernel ${release()} refuses pidfd_open/pidfd_send_signal (needs Linux >= 5.3)` };
  if (facts.backend === "none") return { capability: cap, ok: false, code: "backend-none", detail: "the kernel supports pidfd, but backend none verifies nothing, so it signals nothing" };
  if (!createSignaller(facts, binding).raceFree) {
    return {
      capability: cap,
      ok: false,
      code: "not-race-free",
      detail: `the kernel supports pidfd, but ${facts.backend} start times are not the kernel's clock ticks: signals are inspect-then-kill, NOT race-free`,
    };
  }
  return { capability: cap, ok: true, code: "race-free", detail: `pidfd_open + pidfd_send_signal work with ${facts.backend} start times: identity-checked signals are race-free` };
}

/** Sets PR_SET_CHILD_SUBREAPER in a throwaway child, so this process keeps its own state. */
async function subreaperRow(binding: NativeBinding | null): Promise<DoctorRow> {
  if (process.platform !== "linux") return { capability: "subreaper", ok: false, detail: `Linux only (this is ${process.platform})` };
  if (binding === null) return { capability: "subreaper", ok: false, detail: `needs the native addon: ${nativeWhy()}` };
  const nativeUrl = new URL("../../facts/native.js", import.meta.url).href;
  const script =
    'const m = await import(process.argv[1]); const b = m.loadNative();' +
    'process.stdout.write(b === null ? "noaddon" : String(b.setChildSubreaper()));';
  const out = await new Promise<string>((resolve) => {
    execFile(process.execPath, ["--input-type=module", "-e", script, nativeUrl], { timeout: 10_000, encoding: "utf8" }, (err, stdout, stderr) =>
      resolve(err === null ? stdout.trim() : `error: ${(stderr.trim().split("\n").pop() ?? "") || err.message}`),
    );
  });
  if (out === "0") return { capability: "subreaper", ok: true, detail: "prctl(PR_SET_CHILD_SUBREAPER) succeeded in a test child" };
  if (/^-\d+$/.test(out)) return { capability: "subreaper", ok: false, detail: `prctl(PR_SET_CHILD_SUBREAPER) failed with errno ${-Number(out)} (kernel ${release()})` };
  return { capability: "subreaper", ok: false, detail: `check could not run: ${out}` };
}

async function foreignEnvRow(facts: ProcessFacts): Promise<DoctorRow> {
  const cap = "foreign-env";
  if (facts.backend === "none") return { capability: cap, ok: false, code: "backend-none", detail: "backend none reads nothing" };
  if (facts.backend === "ps") return { capability: cap, ok: false, code: "ps-reads-no-env", detail: "the ps backend reads no environments: the lease-env and marker checks report \"unknown\"" };
  if (process.pid === 1) return { capability: cap, ok: false, code: "pid-1", detail: "this process is pid 1: no other process to test against" };
  if (process.platform === "linux") {
    try {
      const fh = await fsp.open("/proc/1/environ", "r");
      await fh.close();
      return { capability: cap, ok: true, code: "env-readable", detail: "/proc/1/environ is readable: lease ids in other processes' environments can be checked" };
    } catch (err) {
      const code = (err as { code?: string }).code ?? "error";
      return { capability: cap, ok: false, code: "env-unreadable", detail: `/proc/1/environ: ${code}; the lease-id environment check reports "unknown"` };
    }
  }
  try {
    const d = await facts.inspect(1, { envKeys: ["PATH"] });
    const ok = d?.envReadable === true;
    return { capability: cap, ok, code: ok ? "env-readable" : "env-unreadable", detail: ok ? `pid 1's environment is readable via ${facts.backend}` : `pid 1's environment is not readable via ${facts.backend}` };
  } catch (err) {
    return { capability: cap, ok: false, code: "env-unreadable", detail: err instanceof Error ? err.message : String(err) };
  }
}

async function visibilityRow(): Promise<DoctorRow> {
  const cap = "proc-visibility";
  if (process.platform !== "linux") return { capability: cap, ok: true, detail: `no /proc hidepid on ${process.platform}` };
  let mounts: string;
  try {
    mounts = await fsp.readFile("/proc/mounts", "utf8");
  } catch (err) {
    return { capability: cap, ok: false, detail: `/proc/mounts unreadable: ${(err as { code?: string }).code ?? String(err)}` };
  }
  const opts = procMountOptions(mounts);
  if (opts === null) return { capability: cap, ok: false, detail: "/proc is not mounted" };
  const hp = hidepidOf(opts);
  if (hp === null) return { capability: cap, ok: true, detail: `/proc mounted without hidepid (${opts.join(",")}): every process is visible` };
  return { capability: cap, ok: false, detail: `/proc mounted with hidepid=${hp}: other users' processes are hidden or opaque` };
}

/** What a gateway started here would get (docs/containment.md); asked without moving this process anywhere. */
async function containmentRow(): Promise<DoctorRow> {
  const cap = "containment";
  const { detectContainment } = await import("../../containment/index.js");
  const c = await detectContainment({ allowGatewayMove: false });
  if (!c.available) {
    return {
      capability: cap,
      ok: false,
      detail: `off: ${c.why}. Without it, a grandchild that clears its environment and calls setsid outlives a SIGKILL of gateway + wrapper (its lease settles lost); no per-session memory figures`,
    };
  }
  const missing = c.missingControllers.map((m) => `${m.controller}: ${m.why}`).join("; ");
  return {
    capability: cap,
    ok: true,
    detail: `contained: each lease in ${c.root}/<instance id>/<leaseId> (cgroup v2 at ${c.mount}; ended with ${c.kill})${missing ? `; not per session: ${missing}` : ""}`,
  };
}

/**
 * Cgroups in the state dir's instance folders that no lease owns, and
 * instance folders of any state dir that is gone (orphan-instances.ts).
 * Read-only; `reap --orphan-cgroups` removes them.
 */
export async function orphanCgroupsRow(stateDir: string): Promise<DoctorRow> {
  const own = await stateDirOrphansRow(stateDir);
  const scan = await scanOrphanInstanceFolders();
  if (scan.orphans.length === 0 && scan.problems.length === 0) return own;
  const folders = scan.orphans.map((o) => `${o.folder} (${o.state}: ${o.why}; its state dir ${o.stateDir} is gone)`);
  const more = [
    ...(folders.length > 0
      ? [`${plural(folders.length, "instance folder")} whose state dir is gone: ${folders.join(", ")}; \`proclease reap --orphan-cgroups\` removes the empty ones`]
      : []),
    ...scan.problems.map((p) => `instance index: ${p}`),
  ];
  return { capability: own.capability, ok: false, detail: [own.detail, ...more].join("; ") };
}

async function stateDirOrphansRow(stateDir: string): Promise<DoctorRow> {
  const cap = "orphan-cgroups";
  let leases: Parameters<typeof scanOrphanCgroups>[1] = [];
  let unreadable: string[] = [];
  try {
    if (existsSync(join(stateDir, "acpx", "leases"))) {
      const listed = await (await openLeaseStore(stateDir, { readOnly: true })).list();
      leases = listed.leases;
      unreadable = listed.problems.map((p) => p.file);
    }
  } catch (e) {
    return { capability: cap, ok: false, detail: `cannot read the leases of ${stateDir}: ${e instanceof Error ? e.message : String(e)}` };
  }
  const scan = await scanOrphanCgroups(stateDir, leases, unreadable);
  const bad = [
    ...scan.folders.filter((r) => r.state === "refused" || r.state === "unknown").map((r) => `instance folder ${r.state}: ${r.why ?? r.folder}`),
    ...scan.problems,
  ];
  if (scan.folders.length === 0) {
    return { capability: cap, ok: bad.length === 0, detail: bad.length > 0 ? bad.join("; ") : `none: ${stateDir} records no proclease cgroup root and no lease records a cgroup` };
  }
  const where = scan.folders.filter((r) => r.state === "listed").map((r) => r.folder);
  if (scan.orphans.length === 0) {
    return { capability: cap, ok: bad.length === 0, detail: [`none in ${where.join(", ") || "the recorded instance folders (none exists now)"}`, ...bad].join("; ") };
  }
  const list = scan.orphans.map((o) => `${o.path} (${o.populated}: ${o.caution ?? o.why})`).join(", ");
  return { capability: cap, ok: false, detail: [`${plural(scan.orphans.length, "orphan cgroup")}: ${list}; \`proclease reap --orphan-cgroups --state-dir ${stateDir}\` ends and removes them`, ...bad].join("; ") };
}

export async function collectDoctorRows(facts: ProcessFacts, forced: string | undefined, stateDir?: string): Promise<DoctorRow[]> {
  const binding = loadNative();
  return [
    backendRow(facts, forced, binding),
    identityRow(facts),
    pidfdRow(facts, binding),
    await subreaperRow(binding),
    await foreignEnvRow(facts),
    await visibilityRow(),
    await containmentRow(),
    ...(stateDir !== undefined ? [await orphanCgroupsRow(stateDir)] : []),
  ];
}

export interface StrictFailure {
  capability: string;
  /** why this host should support it */
  expected: string;
}

/** The "no" rows this host should support (`doctor --strict`), each with why it should. */
export async function rowsTheHostShouldSupport(rows: readonly DoctorRow[], facts: ProcessFacts): Promise<StrictFailure[]> {
  const out: StrictFailure[] = [];
  for (const r of rows) {
    if (r.ok) continue;
    const expected = await shouldSupport(r.capability, facts);
    if (expected !== null) out.push({ capability: r.capability, expected });
  }
  return out;
}

/**
 * Whether a host like this one should say "yes" to a capability, from what
 * the row cannot cause itself (platform, kernel, uid, the addon, the backend
 * asked, the mounts); null when a "no" is the host's own choice or limit:
 * - proc-visibility: hidepid is the administrator's policy;
 * - foreign-env: only root reading /proc expects other environments, and not
 *   when pid 1 (the process the row reads) holds a capability this process
 *   lacks: the kernel then refuses its environment to us by design;
 * - containment: root on Linux whose own cgroup on a cgroup2 mount is writable.
 */
async function shouldSupport(capability: string, facts: ProcessFacts): Promise<string | null> {
  const linux = process.platform === "linux";
  const root = process.getuid?.() === 0;
  const binding = loadNative();
  const proc = facts.backend === "native" || facts.backend === "procfs";
  switch (capability) {
    case "backend":
      return process.platform === "win32" ? null : `a ${process.platform} host has a facts backend (procfs or ps at least)`;
    case "identity":
      return proc ? `the ${facts.backend} backend reads exact start times` : null;
    case "pidfd":
      return linux && binding !== null && proc && kernelAtLeast(5, 3) ? `Linux ${release()} (>= 5.3), the addon loaded, ${facts.backend} start times` : null;
    case "subreaper":
      return linux && binding !== null ? "Linux with the addon loaded" : null;
    case "foreign-env":
      return linux && root && proc && (await pid1CapsWithinOurs()) ? `root reading /proc (${facts.backend}), and pid 1 holds no capability this process lacks` : null;
    case "containment": {
      const dir = linux && root ? await ownCgroup2Dir() : null;
      return dir !== null ? `root on Linux, and this process's cgroup ${dir} on a cgroup2 mount is writable` : null;
    }
    case "orphan-cgroups":
      return "orphan cgroups, or a state dir whose leases cannot be read, are always something to fix";
    default:
      return null;
  }
}

function kernelAtLeast(major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(release());
  return m !== null && (Number(m[1]) > major || (Number(m[1]) === major && Number(m[2]) >= minor));
}

async function pid1CapsWithinOurs(): Promise<boolean> {
  const caps = async (pid: string): Promise<bigint | null> => {
    try {
      const line = (await fsp.readFile(`/proc/${pid}/status`, "utf8")).split("\n").find((l) => l.startsWith("CapPrm:"));
      return line === undefined ? null : BigInt(`0x${line.slice(7).trim()}`);
    } catch {
      return null;
    }
  };
  const [theirs, ours] = await Promise.all([caps("1"), caps("self")]);
  return theirs !== null && ours !== null && (theirs & ~ours) === 0n;
}

/** This process's cgroup directory on a cgroup2 mount when it is writable, else null. */
async function ownCgroup2Dir(): Promise<string | null> {
  try {
    const own = (await fsp.readFile("/proc/self/cgroup", "utf8")).split("\n").find((l) => l.startsWith("0::"))?.slice(3);
    if (own === undefined) return null;
    for (const line of (await fsp.readFile("/proc/self/mountinfo", "utf8")).split("\n")) {
      const [left, right] = line.split(" - ");
      if (right?.split(" ")[0] !== "cgroup2") continue;
      const [, , , mountRoot = "", point = ""] = (left ?? "").split(" ");
      if (mountRoot !== "/" && own !== mountRoot && !own.startsWith(`${mountRoot}/`)) continue;
      const dir = join(point.replace(/\\040/g, " "), mountRoot === "/" ? own : own.slice(mountRoot.length));
      try {
        await fsp.access(dir, fsc.W_OK);
        return dir;
      } catch {
        // not writable here; another cgroup2 mount may be
      }
    }
  } catch {
    // no /proc: nothing to expect
  }
  return null;
}

export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const facts = factsFromFlag(parsed);
  const rows = await collectDoctorRows(facts, forcedBackend(parsed), resolveStateDir(parsed));
  const strict = flag(parsed, "strict");
  // --strict: exit 1 when a row says "no" that this host should support (shouldSupport decides which)
  const failing = strict ? await rowsTheHostShouldSupport(rows, facts) : [];
  if (flag(parsed, "json")) {
    io.out(jsonLine({ backend: facts.backend, identityStrength: facts.identityStrength, rows, ...(strict ? { strictFailures: failing } : {}) }));
    return failing.length > 0 ? 1 : 0;
  }
  io.out(backendLine(facts) + table(rows.map((r) => [r.capability, r.ok ? "yes" : "no", r.detail])));
  for (const f of failing) io.err(`doctor --strict: ${f.capability} is "no" on a host that should support it: ${f.expected}`);
  return failing.length > 0 ? 1 : 0;
}
