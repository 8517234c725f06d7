/**
 * The lease lifecycle under real conditions, one test per thing seen going
 * wrong on a busy host: a lease with no pid whose survivor carries the
 * markers, stale handles, two gateways on one state dir, loose permissions,
 * same-uid churn during closes, and problems reported once.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmod, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { AcpxNoSessionError } from "../../src/acpx/report/errors.js";
import { computeCommandHash, loadOrCreateGatewayInstanceId, openLeaseStore } from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  leaseCarriers,
  readJsonLine,
  spawnGateway,
  tempStateDir,
  trackChild,
  trackLease,
  waitFor,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();

describe("a lease whose gateway died before the wrapper's pid was recorded", () => {
  it("is a gone root: the startup reap finds what carries both markers and reaps it (closed); one with no carrier is lost", async () => {
    const stateDir = tempStateDir("no-pid");
    const instance = await loadOrCreateGatewayInstanceId(stateDir);
    const store = await openLeaseStore(stateDir);
    const fields = {
      gatewayInstanceId: instance,
      wrapperRoot: join(stateDir, "acpx", "wrappers"),
      wrapperPath: join(stateDir, "acpx", "wrappers", "w.cjs"),
      commandHash: computeCommandHash(["x"]),
    };
    // what the dead gateway left: leases with rootPid 0, state open (or closing, if a failed ensure began settling)
    const withSurvivor = await store.create({ kind: "acpx", ...fields, sessionKey: "agent:main:acp:np1" });
    const empty = await store.create({ kind: "acpx", ...fields, sessionKey: "agent:main:acp:np2" });
    await store.transition(empty.leaseId, "closing");
    trackLease(withSurvivor.leaseId);
    trackLease(empty.leaseId);
    // the survivor: a SIGTERM-ignoring grandchild in its own session that carries both markers
    const survivor = trackChild(
      spawn(
        process.execPath,
        ["-e", "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000)"],
        {
          detached: true,
          stdio: ["ignore", "pipe", "ignore"],
          env: { ...process.env, OPENCLAW_ACPX_LEASE_ID: withSurvivor.leaseId, OPENCLAW_GATEWAY_INSTANCE_ID: instance },
        },
      ),
    );
    survivor.unref();
    // its SIGTERM handler is in place once it says so
    await new Promise((r) => survivor.stdout!.once("data", r));
    survivor.stdout!.destroy();
    expect(leaseCarriers(withSurvivor.leaseId)).toContain(survivor.pid!);

    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const r = await ctl.reapStartupOrphans();
    const a = r.entries.find((e) => e.leaseId === withSurvivor.leaseId)!;
    const b = r.entries.find((e) => e.leaseId === empty.leaseId)!;
    expect(a, JSON.stringify(a)).toMatchObject({ verdict: "gone", action: "killed-remnants", stateAfter: "closed" });
    expect(a.kill?.members.map((m) => m.pid)).toContain(survivor.pid);
    expect(a.kill?.members.find((m) => m.pid === survivor.pid)?.outcome).toBe("killed");
    expect(b, JSON.stringify(b)).toMatchObject({ verdict: "gone", action: "marked-lost", stateAfter: "lost" });
    expect(r.snapshots).toBe(1);
    expect(alive(survivor.pid!)).toBe(false);
  });
});

describe("handles are exact", () => {
  it("a stale handle (closed, then the key started again) never touches the current session: close is a no-op naming the mismatch, cancel does nothing, prompt refuses", async () => {
    const stateDir = tempStateDir("stale");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const key = "agent:main:acp:stale";
    const h1 = await ctl.ensureSession({
      sessionKey: key,
      agentId: "main",
      command: agentArgv({ turn: "until-cancel" }),
    });
    trackLease(h1.leaseId);
    expect((await ctl.closeSession({ handle: h1 })).outcome).toBe("closed");
    const h2 = await ctl.ensureSession({
      sessionKey: key,
      agentId: "main",
      command: agentArgv({ turn: "until-cancel" }),
    });
    trackLease(h2.leaseId);
    expect(h2.leaseId).not.toBe(h1.leaseId);

    const turn = ctl.prompt(h2, "long");
    const stale = await ctl.closeSession({ handle: h1, reason: "stale" });
    expect(stale.outcome).toBe("noop");
    expect(stale.detail).toMatch(
      new RegExp(`stale handle: it names lease ${h1.leaseId}, the key's current session is lease ${h2.leaseId}`),
    );
    expect(stale.kill).toBeUndefined();
    await ctl.cancelTurn(h1); // nothing: the running turn of h2 is not cancelled by it
    await expect(ctl.prompt(h1, "x")).rejects.toBeInstanceOf(AcpxNoSessionError);
    expect(alive(h2.rootPid)).toBe(true);
    expect((await ctl.listLeases()).find((l) => l.leaseId === h2.leaseId)?.state).toBe("open");
    // h2 is untouched: its turn is still running, and its own cancel ends it
    await ctl.cancelTurn(h2);
    expect(await turn).toEqual({ stopReason: "cancelled" });
    expect((await ctl.closeSession({ handle: h2 })).outcome).toBe("closed");
  });
});

describe("one gateway per state dir", () => {
  it("a second controller (same process) is refused with StateDirLockedError naming the holder; after dispose it starts", async () => {
    const stateDir = tempStateDir("lock-same");
    const first = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    const err = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "StateDirLockedError", holderPid: process.pid });
    await first.dispose();
    const second = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(second);
    await expect(second.reapStartupOrphans()).resolves.toMatchObject({ examined: 0 });
  });

  it("a live gateway in another process holds it (no second tree for its key); its SIGKILL frees it at once (the kernel drops the lock)", async () => {
    const stateDir = tempStateDir("lock-other");
    const gw = spawnGateway(stateDir, agentArgv({}));
    const h = await readJsonLine<{ leaseId: string; rootPid: number }>(gw);
    trackLease(h.leaseId);
    const err = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "StateDirLockedError", holderPid: gw.pid });
    gw.kill("SIGKILL");
    await new Promise((r) => gw.once("exit", r));
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const r = await ctl.reapStartupOrphans();
    expect(r.entries.find((e) => e.leaseId === h.leaseId)?.stateAfter).toMatch(/^(closed|lost)$/);
    expect(await waitFor(() => leaseCarriers(h.leaseId).length === 0, 5000)).not.toBe(-1);
  });
});

describe("permissions like ssh", () => {
  it("a state dir writable by others, or a loose instance id file, is refused with the path and the fix", async () => {
    const loose = tempStateDir("perm-dir");
    await chmod(loose, 0o777);
    await expect(createAcpxLifecycleController({ stateDir: loose, maintenanceIntervalMs: 0 })).rejects.toThrow(
      new RegExp(`${loose} is writable by group and others \\(mode 777\\).*chmod 700 ${loose}`),
    );
    const idLoose = tempStateDir("perm-id");
    await loadOrCreateGatewayInstanceId(idLoose);
    await chmod(join(idLoose, "gateway-instance-id"), 0o666);
    await expect(createAcpxLifecycleController({ stateDir: idLoose, maintenanceIntervalMs: 0 })).rejects.toMatchObject({
      name: "InsecurePathError",
      message: expect.stringMatching(/gateway-instance-id is writable by group and others.*chmod 600/),
    });
    // nothing was minted or moved in either
    expect((await readdir(loose)).filter((n) => n !== "gateway.lock")).toEqual([]);
  });
});

describe("problems are reported once", () => {
  it("a corrupt lease file appears once in reapStartupOrphans().problems", async () => {
    const stateDir = tempStateDir("problems");
    const ctl0 = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 });
    await ctl0.dispose();
    await writeFile(join(stateDir, "acpx", "leases", "11111111-2222-3333-4444-555555555555.json"), "{ torn", {
      mode: 0o600,
    });
    const ctl = await createAcpxLifecycleController({ stateDir, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const r = await ctl.reapStartupOrphans();
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]!.detail).toMatch(/invalid JSON/);
  });
});

describe("same-uid churn while sessions close", () => {
  const loops: ChildProcess[] = [];
  afterAll(() => {
    for (const l of loops) {
      try {
        process.kill(-l.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }
  });

  it("8 clean closes with 8 loops of /bin/true running all settle closed (processes exiting mid-read never keep a lease closing)", async () => {
    for (let i = 0; i < 8; i++) {
      const l = spawn("/bin/sh", ["-c", "while :; do /bin/true; done"], { detached: true, stdio: "ignore" });
      l.unref();
      loops.push(l);
    }
    const stateDir = tempStateDir("churn");
    const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
    controllers.push(ctl);
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const h = await ctl.ensureSession({
        sessionKey: `agent:main:acp:churn-${i}`,
        agentId: "main",
        command: agentArgv({ kind: i % 2 ? "setsid" : "plain" }),
      });
      trackLease(h.leaseId);
      const r = await ctl.closeSession({ handle: h });
      outcomes.push(r.outcome === "closed" ? "closed" : `${r.outcome}: ${r.detail}`);
    }
    expect(outcomes).toEqual(Array(8).fill("closed"));
  }, 120_000);
});
