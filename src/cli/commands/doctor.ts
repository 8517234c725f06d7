/**
 * `proclease doctor [--json] [--backend NAME] [--strict]`: what this host allows, one row
 * per capability, each with yes/no and the reason (the rows are
 * ownership/host/doctor-rows.ts's, shared with the plugin's doctor), and with
 * --strict, the "no" rows a host like this one should say "yes" to.
 */
import { constants as fsc, promises as fsp } from "node:fs";
import { join } from "node:path";
import { release } from "node:os";
import type { DoctorRow } from "../../facts/host-capabilities.js";
import { loadNative } from "../../facts/native.js";
import type { ProcessFacts } from "../../facts/types.js";
import { collectDoctorRows } from "../../ownership/host/doctor-rows.js";
import { backendLine, factsFromFlag, forcedBackend } from "../shared/backend.js";
import { flag, jsonLine, resolveStateDir, table, type CliIo, type ParsedArgs, factsHead } from "../shared/io.js";

export interface StrictFailure {
  capability: string;
  /** why this host should support it */
  expected: string;
}

/** The "no" rows this host should support (`doctor --strict`), each with why it should. */
export async function rowsTheHostShouldSupport(
  rows: readonly DoctorRow[],
  facts: ProcessFacts,
): Promise<StrictFailure[]> {
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
      return process.platform === "win32"
        ? null
        : `a ${process.platform} host has a facts backend (procfs or ps at least)`;
    case "identity":
      return proc ? `the ${facts.backend} backend reads exact start times` : null;
    case "pidfd":
      return linux && binding !== null && proc && kernelAtLeast(5, 3)
        ? `Linux ${release()} (>= 5.3), the addon loaded, ${facts.backend} start times`
        : null;
    case "subreaper":
      return linux && binding !== null ? "Linux with the addon loaded" : null;
    case "foreign-env":
      return linux && root && proc && (await pid1CapsWithinOurs())
        ? `root reading /proc (${facts.backend}), and pid 1 holds no capability this process lacks`
        : null;
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
    const own = (await fsp.readFile("/proc/self/cgroup", "utf8"))
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3);
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
    io.out(
      jsonLine({
        ...factsHead(facts),
        rows,
        ...(strict ? { strictFailures: failing } : {}),
      }),
    );
    return failing.length > 0 ? 1 : 0;
  }
  io.out(backendLine(facts) + table(rows.map((r) => [r.capability, r.ok ? "yes" : "no", r.detail])));
  for (const f of failing)
    io.err(`doctor --strict: ${f.capability} is "no" on a host that should support it: ${f.expected}`);
  return failing.length > 0 ? 1 : 0;
}
