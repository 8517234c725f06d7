/**
 * The startup reap on a worker thread (src/ownership/lifecycle/reconcile-away.ts),
 * the mode a controller gets with the default facts: real trees of a former
 * run ended from the worker, a close racing it on a lease the worker holds,
 * the calling-thread mode a caller's own facts get, and a worker that stops.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpxLifecycleControllerOptions } from "../../src/acpx/sessions/types.js";
import { getProcessFacts } from "../../src/facts/get.js";
import {
  computeCommandHash,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  reconcileInWorker,
  ReconcileAwayError,
  WORKER_MIN_LEASES,
} from "../../src/ownership/index.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  readPidfile,
  tempStateDir,
  trackLease,
  trackPid,
  waitFor,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();
const ON_WORKER = { startupReconcile: "worker" } as const;

async function controller(stateDir: string, extra: Partial<AcpxLifecycleControllerOptions> = {}) {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0, ...extra });
  controllers.push(ctl);
  return ctl;
}

/** A former run: `n` sessions left running by a controller that was disposed (it does not end them). */
async function formerRun(label: string, n: number, stubborn = false) {
  const stateDir = tempStateDir(label);
  const first = await controller(stateDir);
  const sessions = [];
  for (let i = 0; i < n; i++) {
    const pidfile = join(stateDir, `agent-${i}.json`);
    const h = await first.ensureSession({
      sessionKey: `k-${label}-${i}`,
      agentId: "main",
      command: agentArgv({ pidfile, kind: "setsid", stubborn }),
    });
    trackLease(h.leaseId);
    const pids = await readPidfile(pidfile);
    for (const p of [h.rootPid, pids.pid, pids.grandchildPid!]) trackPid(p);
    sessions.push({ handle: h, pids: [h.rootPid, pids.pid, pids.grandchildPid!] });
  }
  await first.dispose();
  return { stateDir, sessions };
}

describe("the startup reap on a worker thread", () => {
  it("ends a former run's trees, setsid grandchildren included, and settles their leases", async () => {
    const { stateDir, sessions } = await formerRun("away-default", 3);
    for (const s of sessions) for (const p of s.pids) expect(alive(p)).toBe(true);
    const settled: { leaseId: string; via: string; state: string }[] = [];
    const next = await controller(stateDir, {
      ...ON_WORKER,
      onLeaseSettled: (lease, o) => settled.push({ leaseId: lease.leaseId, via: o.via, state: o.state }),
    });
    const report = await next.reapStartupOrphans();
    expect(report.reconciledOn).toBe("worker-thread");
    for (const s of sessions) {
      const e = report.entries.find((x) => x.leaseId === s.handle.leaseId);
      expect(e).toMatchObject({ action: "killed", stateAfter: "closed" });
      // the row as the worker made it: the kill summarised (its root among the members, no survivor), no verification
      expect(e?.kill?.members.map((m) => m.pid)).toContain(s.handle.rootPid);
      expect(e?.kill?.survivors).toEqual([]);
      expect(e).not.toHaveProperty("verification");
      await waitFor(() => s.pids.every((p) => !alive(p)), 10_000);
    }
    // each settlement the worker reported reaches the hook once
    expect(settled.sort((a, b) => a.leaseId.localeCompare(b.leaseId))).toEqual(
      sessions
        .map((s) => ({ leaseId: s.handle.leaseId, via: "reap", state: "closed" }))
        .sort((a, b) => a.leaseId.localeCompare(b.leaseId)),
    );
    const leases = await next.listLeases();
    for (const s of sessions) expect(leases.find((l) => l.leaseId === s.handle.leaseId)?.state).toBe("closed");
  });

  it("a close of a lease the worker holds waits for it: the worker's settlement stands, the close finds it settled", async () => {
    // adapters that ignore SIGTERM: the worker holds each lease, marked closing, for the grace before its KILL
    const { stateDir, sessions } = await formerRun("away-race", 2, true);
    const next = await controller(stateDir, ON_WORKER);
    const reader = await openLeaseStore(stateDir, { readOnly: true });
    const reap = next.reapStartupOrphans();
    const target = sessions[0]!.handle;
    await waitFor(async () => (await reader.get(target.leaseId))?.state === "closing", 10_000, 2);
    const closed = await next.closeSession({ handle: { sessionKey: target.sessionKey } });
    const report = await reap;
    expect(report.reconciledOn).toBe("worker-thread");
    expect(report.entries.find((e) => e.leaseId === target.leaseId)).toMatchObject({
      action: "killed",
      stateAfter: "closed",
    });
    expect(closed).toMatchObject({ outcome: "noop", code: "already-settled", leaseState: "closed" });
    for (const s of sessions) await waitFor(() => s.pids.every((p) => !alive(p)), 10_000);
  });

  it("closes racing the reap's start: every lease is settled once, by one of them, and nothing throws", async () => {
    const { stateDir, sessions } = await formerRun("away-start", 3);
    const next = await controller(stateDir, ON_WORKER);
    const reap = next.reapStartupOrphans();
    const closes = sessions.map((s) => next.closeSession({ handle: { sessionKey: s.handle.sessionKey } }));
    const [report, ...closed] = await Promise.all([reap, ...closes]);
    for (const [i, s] of sessions.entries()) {
      const byReap = report.entries.find((e) => e.leaseId === s.handle.leaseId);
      const byClose = closed[i]!;
      const killers = [byReap?.action === "killed", byClose.outcome === "closed" && byClose.kill !== undefined].filter(
        Boolean,
      );
      expect(killers).toHaveLength(1);
      await waitFor(() => s.pids.every((p) => !alive(p)), 10_000);
    }
    const leases = await next.listLeases();
    for (const s of sessions) expect(leases.find((l) => l.leaseId === s.handle.leaseId)?.state).toBe("closed");
  });

  it("by default (auto) a handful of leases stay on the calling thread, and the worker takes 64 or more", async () => {
    const few = await formerRun("away-auto-few", 2);
    const a = await controller(few.stateDir);
    expect((await a.reapStartupOrphans()).reconciledOn).toBe("calling-thread");
    for (const s of few.sessions) await waitFor(() => s.pids.every((p) => !alive(p)), 10_000);
    // 64 leases of a former run whose roots are long gone: nothing to kill, each one marked lost
    const stateDir = tempStateDir("away-auto-many");
    await (await controller(stateDir)).dispose();
    const gatewayInstanceId = await loadOrCreateGatewayInstanceId(stateDir);
    const store = await openLeaseStore(stateDir, { durable: false });
    for (let i = 0; i < WORKER_MIN_LEASES; i++) {
      const l = await store.create({
        kind: "acpx",
        gatewayInstanceId,
        sessionKey: `k-many-${i}`,
        wrapperRoot: stateDir,
        wrapperPath: "/bin/sh",
        commandHash: computeCommandHash(["/bin/sh"]),
      });
      await store.update(l.leaseId, {
        rootPid: 4_000_000 + i,
        processGroupId: 4_000_000 + i,
        rootStartTime: "1",
        bootId: "gone",
        pidNamespace: "pid:[0]",
      });
    }
    const b = await controller(stateDir);
    const report = await b.reapStartupOrphans();
    expect(report.reconciledOn).toBe("worker-thread");
    expect(report.entries).toHaveLength(WORKER_MIN_LEASES);
    expect(report.entries.every((e) => e.action === "marked-lost" && e.stateAfter === "lost")).toBe(true);
  });

  it("a caller's own facts put it on the calling thread; asking for a worker with them is a TypeError", async () => {
    const { stateDir, sessions } = await formerRun("away-calling", 1);
    const facts = getProcessFacts();
    const bad = createAcpxLifecycleController({
      stateDir,
      facts,
      startupReconcile: "worker",
      maintenanceIntervalMs: 0,
    });
    await expect(bad).rejects.toThrow(/needs the default facts and signaller/);
    const next = await controller(stateDir, { facts, containment: "off" });
    const report = await next.reapStartupOrphans();
    expect(report.reconciledOn).toBe("calling-thread");
    expect(report.entries.find((e) => e.leaseId === sessions[0]!.handle.leaseId)).toMatchObject({
      action: "killed",
      stateAfter: "closed",
    });
  });

  it("a worker that stops rejects with ReconcileAwayError naming why", async () => {
    const stateDir = tempStateDir("away-stops");
    const store = await openLeaseStore(stateDir);
    // the worker opens its own store under this path: a file where the state dir should be stops it
    const notADir = join(stateDir, "not-a-dir");
    writeFileSync(notADir, "");
    const spec = {
      stateDir: notADir,
      gatewayInstanceId: "gw-test",
      graceMs: GRACE_MS,
      kind: "acpx",
      states: ["open", "closing"],
      dryRun: false,
      skipAttached: false,
    } as const;
    const hooks = { skip: () => undefined, take: () => undefined, live: () => [], onSettled: () => undefined };
    const run = reconcileInWorker(spec, hooks, store);
    await expect(run).rejects.toBeInstanceOf(ReconcileAwayError);
    await expect(run).rejects.toThrow(/worker thread stopped: .*not-a-dir/);
  });
});
