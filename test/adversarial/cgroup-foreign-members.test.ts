/**
 * A root agent on a host where its cgroup namespace does not hold (no
 * `nsdelegate`, or a wrapper that could not unshare) can write any pid into
 * its own lease cgroup's cgroup.procs. The test plays that agent: it writes
 * another session's wrapper and adapter, an unrelated process, and the
 * gateway itself into the hostile session's lease cgroup, then closes that
 * session. Nothing that is not the hostile lease's may be signalled, each is
 * moved back out (the other session's to its own cgroup, the gateway to its
 * own, the stranger to `_foreign`), the close settles in bounded time and
 * names what it refused, and the other session later closes as killed, not
 * as ended on its own. Build first (`npm run build`): the wrapper runs from dist/.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { CloseReport } from "../../src/acpx/sessions/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
const probe = await probeCgroup2();
const note = containmentSkipNote(probe);
if (!probe.writable) console.log(`[cgroup-foreign-members.test] skipped: ${probe.why}`);

/** A process's cgroup (its `0::` line) as a filesystem path under the cgroup2 mount the lease paths use. */
function cgroupOf(pid: number, like: string): string | null {
  try {
    const rel = readFileSync(`/proc/${pid}/cgroup`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3);
    if (rel === undefined) return null;
    return rel === "/" ? mountOf(like) : `${mountOf(like)}${rel}`;
  } catch {
    return null;
  }
}

/** The cgroup2 mount point of a lease path (the lines of /proc/self/mountinfo of type cgroup2). */
function mountOf(leasePath: string): string {
  const points = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .filter((l) => l.includes(" - cgroup2 "))
    .map((l) => l.split(" ")[4]!);
  return points.filter((p) => leasePath.startsWith(`${p}/`)).sort((a, b) => b.length - a.length)[0] ?? "";
}

/** A process nobody here parents: `setsid sleep`, its shell gone, started before the hostile lease. */
async function stranger(): Promise<number> {
  const sh = spawn("/bin/sh", ["-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!"], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  sh.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  await new Promise((r) => sh.once("exit", r));
  const pid = Number(out.trim());
  trackPid(pid);
  return pid;
}

const toKill: number[] = [];
const foreignLeaves: string[] = [];
let homeBack: (() => void) | null = null;
afterEach(() => {
  homeBack?.();
  homeBack = null;
  for (const pid of toKill.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  for (const leaf of foreignLeaves.splice(0)) {
    for (let i = 0; i < 50 && existsSync(leaf); i++) {
      try {
        rmdirSync(leaf);
      } catch {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      }
    }
  }
});

async function twoSessions(label: string): Promise<{
  ctl: AcpxLifecycleController;
  hostile: AcpRuntimeHandle;
  innocent: AcpRuntimeHandle;
  cg: (h: AcpRuntimeHandle) => Promise<string>;
}> {
  const ctl = await createAcpxLifecycleController({
    stateDir: tempStateDir(label),
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
  });
  controllers.push(ctl);
  const hostile = await ctl.ensureSession({ sessionKey: `${label}:hostile`, agentId: "h", command: agentArgv({}) });
  trackLease(hostile.leaseId);
  const innocent = await ctl.ensureSession({ sessionKey: `${label}:innocent`, agentId: "i", command: agentArgv({}) });
  trackLease(innocent.leaseId);
  const cg = async (h: AcpRuntimeHandle) => (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!.cgroup!.path;
  return { ctl, hostile, innocent, cg };
}

function refusedRow(report: CloseReport): string {
  return report.evidence.find((e) => e.code === "members-refused")?.detail ?? "";
}

describe.skipIf(!probe.writable)(`members a root agent moved into its lease cgroup${note}`, () => {
  it("another session's wrapper and adapter and an unrelated process: none is signalled, each goes back, both leases settle as killed", async () => {
    const outsider = await stranger();
    toKill.push(outsider);
    const { ctl, hostile, innocent, cg } = await twoSessions("foreign");
    const hostileCg = await cg(hostile);
    const innocentCg = await cg(innocent);
    const adapter = innocent.processGroupId!;
    expect(adapter).toBeGreaterThan(0);
    for (const pid of [innocent.rootPid, adapter, outsider]) writeFileSync(`${hostileCg}/cgroup.procs`, String(pid));
    for (const pid of [innocent.rootPid, adapter, outsider]) expect(cgroupOf(pid, hostileCg)).toBe(hostileCg);
    foreignLeaves.push(`${dirname(dirname(hostileCg))}/_foreign`);

    const report = await ctl.closeSession({ handle: hostile });
    expect(report, report.detail).toMatchObject({ outcome: "closed", leaseState: "closed", settledAs: "killed" });
    for (const pid of [innocent.rootPid, adapter, outsider]) expect(alive(pid), `pid ${pid} was signalled`).toBe(true);
    expect(cgroupOf(innocent.rootPid, innocentCg)).toBe(innocentCg);
    expect(cgroupOf(adapter, innocentCg)).toBe(innocentCg);
    expect(cgroupOf(outsider, hostileCg)).toBe(`${dirname(dirname(hostileCg))}/_foreign`);
    const refused = refusedRow(report);
    expect(refused).toMatch(new RegExp(`${innocent.rootPid} \\(another-lease:`));
    expect(refused).toMatch(new RegExp(`${adapter} \\(another-lease:`));
    expect(refused).toMatch(new RegExp(`${outsider} \\(started-before-lease:`));
    expect(existsSync(hostileCg)).toBe(false);

    // the innocent session was never touched: its own close ends it, as killed
    const second = await ctl.closeSession({ handle: innocent });
    expect(second, second.detail).toMatchObject({ outcome: "closed", leaseState: "closed", settledAs: "killed" });
    expect(await waitFor(() => !alive(innocent.rootPid) && !alive(adapter), 5000)).not.toBe(-1);
    expect(alive(outsider)).toBe(true);
  });

  it("the gateway itself: the close moves it back to its own cgroup first and settles in bounded time", async () => {
    const { ctl, hostile, innocent, cg } = await twoSessions("gateway");
    const hostileCg = await cg(hostile);
    const before = cgroupOf(process.pid, hostileCg)!;
    homeBack = () => {
      if (cgroupOf(process.pid, hostileCg) !== before) writeFileSync(`${before}/cgroup.procs`, String(process.pid));
    };
    writeFileSync(`${hostileCg}/cgroup.procs`, String(process.pid));
    expect(cgroupOf(process.pid, hostileCg)).toBe(hostileCg);

    const report = await ctl.closeSession({ handle: hostile });
    expect(report, report.detail).toMatchObject({ outcome: "closed", leaseState: "closed", settledAs: "killed" });
    expect(cgroupOf(process.pid, hostileCg)).toBe(before);
    expect(refusedRow(report)).toMatch(new RegExp(`${process.pid} \\(this-process:`));
    expect(alive(hostile.rootPid)).toBe(false);
    expect(existsSync(hostileCg)).toBe(false);
    expect(alive(innocent.rootPid)).toBe(true);
  });
});
