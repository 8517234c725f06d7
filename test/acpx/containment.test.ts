/**
 * Kernel-enforced containment (README "Containment"): an adapter leaves a
 * grandchild that clears its environment and calls setsid, then the gateway
 * and the wrapper are SIGKILLed together. Nothing ties that grandchild to the
 * lease any more (no markers, reparented to init) except the lease's cgroup.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/types.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import { agentArgv, alive, disposeAfterEach, readJsonLine, spawnGateway, tempStateDir, trackLease, trackPid, waitFor, GRACE_MS } from "./controller-helpers.js";

const controllers = disposeAfterEach();
// run or skip by the independent probe (test/helpers/cgroup-probe.mjs), never by detectContainment()
const probe = await probeCgroup2();
const why = containmentSkipNote(probe);
if (!probe.writable) console.log(`[containment.test] the contained case is skipped: ${probe.why}`);

/**
 * The adapter argv: first an env-scrubbed, setsid'd sleeper, double-forked
 * (its subshell exits at once, so it is nobody's descendant by parent links;
 * its pid goes into `pidfile`), then the fixture agent.
 */
function scrubbingAdapter(pidfile: string): string[] {
  return ["/bin/sh", "-c", `( env -i setsid sleep 1000 & echo $! > ${pidfile} ); exec "$0" "$@"`, ...agentArgv({ stubborn: true, surviveStdinClose: true })];
}

async function orphanScrubbedEscapee(stateDir: string, containment: "auto" | "off"): Promise<{ h: AcpRuntimeHandle; escapee: number }> {
  const pidfile = join(stateDir, "escapee.pid");
  const gw = spawnGateway(stateDir, scrubbingAdapter(pidfile), GRACE_MS, containment);
  const h = await readJsonLine<AcpRuntimeHandle>(gw);
  trackLease(h.leaseId);
  expect(await waitFor(() => /^\d+\n$/.test(readText(pidfile)), 10_000)).not.toBe(-1);
  const escapee = Number(readText(pidfile));
  trackPid(escapee);
  // no markers: its environment is empty
  expect(readFileSync(`/proc/${escapee}/environ`).length).toBe(0);
  const gwExited = new Promise((r) => (gw.exitCode !== null || gw.signalCode !== null ? r(null) : gw.once("exit", r)));
  process.kill(h.rootPid, "SIGKILL");
  gw.kill("SIGKILL");
  expect(await waitFor(() => !alive(h.rootPid), 5000)).not.toBe(-1);
  // its state-dir lock goes with its exit, which a loaded host may deliver after the wrapper's
  await gwExited;
  return { h, escapee };
}

function readText(p: string): string {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return "";
  }
}

const strays: number[] = [];
afterAll(() => {
  for (const pid of strays) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

describe("an env-scrubbed setsid grandchild outlives a SIGKILL of gateway + wrapper", () => {
  it.runIf(probe.writable)(`with containment on, the startup reap kills it through the lease's cgroup and the lease settles closed${why}`, async () => {
    const stateDir = tempStateDir("contained");
    const { h, escapee } = await orphanScrubbedEscapee(stateDir, "auto");
    expect(alive(escapee)).toBe(true);
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const lease = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!;
    expect(lease.cgroup?.path).toMatch(new RegExp(`/proclease/${lease.gatewayInstanceId}/${h.leaseId}$`));
    const r = await ctl.reapStartupOrphans();
    const e = r.entries.find((x) => x.leaseId === h.leaseId)!;
    expect(e, JSON.stringify(e)).toMatchObject({ stateAfter: "closed" });
    expect(e.evidence.some((x) => x.check === "cgroup" && x.result === "match" && /populated 0/.test(x.detail ?? ""))).toBe(true);
    expect(await waitFor(() => !alive(escapee), 5000)).not.toBe(-1);
    // the instance's folder went with its last lease cgroup; disposing the controller finds nothing to remove
    const folder = dirname(lease.cgroup!.path);
    expect(existsSync(folder)).toBe(false);
    await ctl.dispose();
    expect(existsSync(folder)).toBe(false);
  });

  it.runIf(probe.writable)(`dispose keeps the instance's cgroup folder while a live session's cgroup is in it${why}`, async () => {
    const stateDir = tempStateDir("folder");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const h = await ctl.ensureSession({ sessionKey: "agent:folder:1", agentId: "folder", command: agentArgv({}) });
    trackLease(h.leaseId);
    const lease = (await ctl.listLeases()).find((l) => l.leaseId === h.leaseId)!;
    await ctl.dispose();
    expect(existsSync(lease.cgroup!.path)).toBe(true);
    const next = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(next);
    expect(await next.closeSession({ handle: { sessionKey: "agent:folder:1" } })).toMatchObject({ outcome: "closed", leaseState: "closed" });
    await next.dispose();
    expect(existsSync(dirname(lease.cgroup!.path))).toBe(false);
  });

  it("with containment off, nothing ties it to the lease: the startup reap settles the lease without it and the escapee runs on (the documented limit)", async () => {
    const stateDir = tempStateDir("uncontained");
    const { h, escapee } = await orphanScrubbedEscapee(stateDir, "off");
    strays.push(escapee);
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0, containment: "off" });
    controllers.push(ctl);
    const r = await ctl.reapStartupOrphans();
    const e = r.entries.find((x) => x.leaseId === h.leaseId)!;
    // the adapter (stubborn, markers) is reaped as a remnant; the scrubbed sleeper is not found
    expect(e.stateAfter, JSON.stringify(e)).toMatch(/^(closed|lost)$/);
    expect(alive(escapee)).toBe(true);
  });
});
