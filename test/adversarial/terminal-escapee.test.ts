/**
 * A hostile agent's terminal whose root exits at once and leaves a `setsid`
 * + `env -i` child behind (no lease markers, SIGTERM ignored): only the
 * terminal's cgroup still knows it. The session's close, the controller's
 * shutdown and (for a lease left closing) the maintenance timer each end it
 * and settle the terminal's lease. Build first (`npm run build`): the
 * wrapper and the stand-in gateway run from dist/.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { openLeaseStore, type AcpxProcessLease } from "../../src/ownership/index.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  ROOT,
  say,
  tempStateDir,
  trackChild,
  trackLease,
  trackPid,
  waitFor,
} from "../acpx/controller-helpers.js";

const controllers = disposeAfterEach();
// run or skip by the independent probe, never by the library's own detection
const probe = await probeCgroup2();

/** The escapee writes its own pid, clears its environment, ignores SIGTERM and outlives its root, which exits 0 at once. */
const escapee = (pidfile: string): string =>
  `setsid env -i sh -c 'trap "" TERM; echo $$ > ${pidfile}; while :; do sleep 1; done' & exit 0`;

async function readPid(file: string): Promise<number> {
  let pid = 0;
  const found = await waitFor(() => {
    try {
      pid = Number(readFileSync(file, "utf8").trim());
    } catch {
      return false;
    }
    return pid > 0;
  }, 10_000);
  expect(found).toBeGreaterThanOrEqual(0);
  trackPid(pid);
  return pid;
}

async function terminalLease(ctl: AcpxLifecycleController, terminalId: string): Promise<AcpxProcessLease | undefined> {
  return (await ctl.listLeases()).find((l) => l.sessionKey === `supervisor:${terminalId}`);
}

/** A session whose terminal's root has exited, its lease left closing, its escapee alive. */
async function sessionWithEscapee(
  label: string,
): Promise<{ ctl: AcpxLifecycleController; h: AcpRuntimeHandle; pid: number; leaseId: string; stateDir: string }> {
  const stateDir = tempStateDir(label);
  const ctl = await createAcpxLifecycleController({
    stateDir,
    graceMs: GRACE_MS,
    maintenanceIntervalMs: 0,
    clientCapabilities: { terminal: true },
  });
  controllers.push(ctl);
  const h = await ctl.ensureSession({ sessionKey: `k-${label}`, agentId: "main", command: agentArgv({}) });
  trackLease(h.leaseId);
  const terminalId = (await say(ctl, h, `/terminal-start ${escapee(join(stateDir, "escapee.pid"))}`)).replace(
    /^terminal /,
    "",
  );
  const pid = await readPid(join(stateDir, "escapee.pid"));
  // the root exited; what it left keeps the lease from settling
  expect(
    await waitFor(async () => (await terminalLease(ctl, terminalId))?.state === "closing", 10_000),
  ).toBeGreaterThanOrEqual(0);
  const lease = (await terminalLease(ctl, terminalId))!;
  trackLease(lease.leaseId);
  expect(alive(pid)).toBe(true);
  return { ctl, h, pid, leaseId: lease.leaseId, stateDir };
}

async function leaseState(ctl: AcpxLifecycleController, leaseId: string): Promise<string | undefined> {
  return (await ctl.listLeases()).find((l) => l.leaseId === leaseId)?.state;
}

describe.skipIf(!probe.writable)(`a terminal's escapee ends with its session${containmentSkipNote(probe)}`, () => {
  it("closeSession ends the escapee of a terminal whose root already exited, and closes its lease", async () => {
    const { ctl, h, pid, leaseId } = await sessionWithEscapee("esc-close");
    const report = await ctl.closeSession({ handle: h });
    expect(report.outcome).toBe("closed");
    expect(alive(pid)).toBe(false);
    expect(await leaseState(ctl, leaseId)).toBe("closed");
  });

  it("a terminal its live session still holds is not reaped from under it: a reap leaves its escapee, the close ends it", async () => {
    const { ctl, h, pid, leaseId } = await sessionWithEscapee("esc-held");
    await ctl.reapStartupOrphans();
    expect(alive(pid)).toBe(true);
    expect(await leaseState(ctl, leaseId)).toBe("closing");
    await ctl.closeSession({ handle: h });
    expect(alive(pid)).toBe(false);
    expect(await leaseState(ctl, leaseId)).toBe("closed");
  });

  it("shutdown ends the escapee of a terminal whose root already exited, and closes its lease", async () => {
    const { ctl, pid, leaseId, stateDir } = await sessionWithEscapee("esc-shutdown");
    await ctl.shutdown();
    expect(alive(pid)).toBe(false);
    expect((await leasesOnDisk(stateDir)).find((l) => l.leaseId === leaseId)?.state).toBe("closed");
  });

  it("a terminal lease left closing by a dead gateway: the next gateway's maintenance tick ends its escapee, no startup reap needed", async () => {
    const stateDir = tempStateDir("esc-maint");
    const pidfile = join(stateDir, "escapee.pid");
    const gw = trackChild(
      spawn(
        process.execPath,
        [
          join(ROOT, "test/fixtures/acpx/conversation-gateway.mjs"),
          stateDir,
          "k-esc-maint",
          JSON.stringify(agentArgv({})),
          `/terminal-start ${escapee(pidfile)}`,
        ],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      ),
    );
    let terminalId = "";
    for await (const line of createInterface({ input: gw.stdout! })) {
      const ev = JSON.parse(line) as { type: string; text?: string; handle?: AcpRuntimeHandle };
      if (ev.type === "ready") trackLease(ev.handle!.leaseId);
      if (ev.type === "chunk") terminalId = ev.text!.replace(/^terminal /, "");
      if (ev.type === "result") break;
    }
    const pid = await readPid(pidfile);
    // wait for the root's exit to leave the lease closing, then the gateway dies
    const leaseFile = async () =>
      (await leasesOnDisk(stateDir)).find((l) => l.sessionKey === `supervisor:${terminalId}`);
    expect(await waitFor(async () => (await leaseFile())?.state === "closing", 10_000)).toBeGreaterThanOrEqual(0);
    const leaseId = (await leaseFile())!.leaseId;
    trackLease(leaseId);
    gw.kill("SIGKILL");
    await new Promise((r) => gw.once("exit", r));
    expect(alive(pid)).toBe(true);
    const next = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 100 });
    controllers.push(next);
    expect(await waitFor(() => !alive(pid), 15_000)).toBeGreaterThanOrEqual(0);
    expect(await waitFor(async () => (await leaseState(next, leaseId)) === "closed", 10_000)).toBeGreaterThanOrEqual(0);
  });
});

/** The leases on disk, read without taking the state dir (a gateway may still hold it). */
async function leasesOnDisk(stateDir: string): Promise<AcpxProcessLease[]> {
  return (await (await openLeaseStore(stateDir)).list()).leases;
}
