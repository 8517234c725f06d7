/**
 * Kernel-enforced containment (docs/containment.md): an adapter leaves a
 * grandchild that clears its environment and calls setsid, then the gateway
 * and the wrapper are SIGKILLed together. Nothing ties that grandchild to the
 * lease any more (no markers, reparented to init) except the lease's cgroup.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  readJsonLine,
  spawnGateway,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
  GRACE_MS,
} from "./controller-helpers.js";

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
  return [
    "/bin/sh",
    "-c",
    `( env -i setsid sleep 1000 & echo $! > ${pidfile} ); exec "$0" "$@"`,
    ...agentArgv({ stubborn: true, surviveStdinClose: true }),
  ];
}

async function orphanScrubbedEscapee(
  stateDir: string,
  containment: "auto" | "off",
): Promise<{ h: AcpRuntimeHandle; escapee: number }> {
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
  it.runIf(probe.writable)(
    `with containment on, the startup reap kills it through the lease's cgroup and the lease settles closed${why}`,
    async () => {
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
      expect(
        e.evidence.some((x) => x.check === "cgroup" && x.result === "match" && /populated 0/.test(x.detail ?? "")),
      ).toBe(true);
      expect(await waitFor(() => !alive(escapee), 5000)).not.toBe(-1);
      // the instance's folder went with its last lease cgroup; disposing the controller finds nothing to remove
      const folder = dirname(lease.cgroup!.path);
      expect(existsSync(folder)).toBe(false);
      await ctl.dispose();
      expect(existsSync(folder)).toBe(false);
    },
  );

  it.runIf(probe.writable)(
    `dispose keeps the instance's cgroup folder while a live session's cgroup is in it${why}`,
    async () => {
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
      expect(await next.closeSession({ handle: { sessionKey: "agent:folder:1" } })).toMatchObject({
        outcome: "closed",
        leaseState: "closed",
      });
      await next.dispose();
      expect(existsSync(dirname(lease.cgroup!.path))).toBe(false);
    },
  );

  it.runIf(probe.writable)(
    `a reap removes the empty cgroups settled leases left in the instance folder, and nothing else${why}`,
    async () => {
      // A host that refuses a write right after the mkdir (EMFILE) leaves a lease
      // whose record never named its cgroup; one that refuses the rmdir leaves a
      // settled lease's folder. Neither has anybody left to remove it but the reap.
      const stateDir = tempStateDir("leftovers");
      const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
      controllers.push(ctl);
      const c = ctl.containment;
      if (!c.available) throw new Error(`the probe says containment works here, the controller says: ${c.why}`);
      const store = await openLeaseStore(stateDir);
      const lease = (sessionKey: string) =>
        store.create({
          kind: "acpx",
          gatewayInstanceId: ctl.gatewayInstanceId,
          sessionKey,
          wrapperRoot: stateDir,
          wrapperPath: join(stateDir, "w"),
          commandHash: "0".repeat(64),
        });
      const settled = await lease("settled");
      await store.transition(settled.leaseId, "closing");
      await store.transition(settled.leaseId, "lost");
      const live = await ctl.ensureSession({
        sessionKey: "agent:leftovers:1",
        agentId: "leftovers",
        command: agentArgv({}),
      });
      trackLease(live.leaseId);
      const liveCgroup = (await ctl.listLeases()).find((l) => l.leaseId === live.leaseId)!.cgroup!.path;
      const folder = `${c.root}/${ctl.gatewayInstanceId}`;
      const made = { settled: `${folder}/${settled.leaseId}`, noLease: `${folder}/${randomUUID()}` };
      for (const d of Object.values(made)) mkdirSync(d);
      try {
        await ctl.reapStartupOrphans();
        expect(existsSync(made.settled)).toBe(false);
        // a live session's cgroup stays; one no lease file names is the operator's to judge (proclease status)
        expect(existsSync(liveCgroup)).toBe(true);
        expect(existsSync(made.noLease)).toBe(true);
      } finally {
        for (const d of Object.values(made)) if (existsSync(d)) rmdirSync(d);
      }
      expect(await ctl.closeSession({ handle: live })).toMatchObject({ leaseState: "closed" });
      expect(existsSync(liveCgroup)).toBe(false);
    },
  );

  it("with containment off, nothing ties it to the lease: the startup reap settles the lease without it and the escapee runs on (the documented limit)", async () => {
    const stateDir = tempStateDir("uncontained");
    const { h, escapee } = await orphanScrubbedEscapee(stateDir, "off");
    strays.push(escapee);
    const ctl = await createAcpxLifecycleController({
      stateDir,
      graceMs: GRACE_MS,
      maintenanceIntervalMs: 0,
      containment: "off",
    });
    controllers.push(ctl);
    const r = await ctl.reapStartupOrphans();
    const e = r.entries.find((x) => x.leaseId === h.leaseId)!;
    // the adapter (stubborn, markers) is reaped as a remnant; the scrubbed sleeper is not found
    expect(e.stateAfter, JSON.stringify(e)).toMatch(/^(closed|lost)$/);
    expect(alive(escapee)).toBe(true);
  });
});
