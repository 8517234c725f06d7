/**
 * reconcileOrphans({ isSessionTracked }): after a restart the caller may
 * still track some runs of the previous incarnation (it adopted them, say);
 * those are kept: not verified, not reaped, not settled, not reported. A
 * predicate that throws keeps the run too (unknown never leads to a signal).
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import type { SupervisorRunRef } from "../../src/supervisor/shared/types.js";
import { isAlive, waitFor, trackedCleanup } from "./helpers.js";

// on ps a supervisor lease verifies as unknown (no argv or environment to back a one-second start time): nothing is reaped there
const NO_ENV = ["ps", "none"].includes(getProcessFacts().backend);
const NOTE = NO_ENV ? ` [skipped: the ${getProcessFacts().backend} backend cannot verify supervisor leases]` : "";
if (NO_ENV) console.log(`reconcile-tracked.test:${NOTE}`);

const { dirs, pids } = trackedCleanup();

const base = { sessionId: "s", backendId: "t", mode: "child", background: true } as const;

/** An earlier incarnation (its own supervisor on the state dir) that leaves two leased runs behind. */
async function previousIncarnation(instance: string) {
  const dir = await mkdtemp(join(tmpdir(), "proclease-tracked-"));
  dirs.push(dir);
  const before = createProcessSupervisor({ stateDir: dir, gatewayInstanceId: instance, graceMs: 200 });
  const keep = await before.spawn({ ...base, runId: "keep", argv: ["sleep", "30"] });
  const drop = await before.spawn({ ...base, runId: "drop", argv: ["sleep", "30"] });
  pids.add(keep.pid!);
  pids.add(drop.pid!);
  const leaseOf = (runId: string) => before.getRecord(runId)!.leaseId!;
  return { dir, keep, drop, keepLease: leaseOf("keep"), dropLease: leaseOf("drop") };
}

describe("reconcileOrphans({ isSessionTracked })", () => {
  it.skipIf(NO_ENV)(
    `a run the caller still tracks is kept alive with its lease open; the other orphan is reaped and closed${NOTE}`,
    async () => {
      const instance = `tracked-${process.pid}-a`;
      const prev = await previousIncarnation(instance);
      const seen: SupervisorRunRef[] = [];
      const after = createProcessSupervisor({ stateDir: prev.dir, gatewayInstanceId: instance, graceMs: 200 });
      const report = await after.reconcileOrphans({
        isSessionTracked: (ref) => {
          seen.push(ref);
          return ref.runId === "keep";
        },
      });
      expect(report.runs).toEqual([
        expect.objectContaining({ runId: "drop", leaseId: prev.dropLease, action: "killed", state: "closed" }),
      ]);
      expect(seen).toEqual(
        expect.arrayContaining([
          { runId: "keep", leaseId: prev.keepLease, sessionKey: "supervisor:keep" },
          { runId: "drop", leaseId: prev.dropLease, sessionKey: "supervisor:drop" },
        ]),
      );
      await waitFor(() => !isAlive(prev.drop.pid!));
      expect(isAlive(prev.keep.pid!)).toBe(true);
      const store = await openLeaseStore(prev.dir);
      expect((await store.get(prev.keepLease))?.state).toBe("open");
      expect((await store.get(prev.dropLease))?.state).toBe("closed");

      // once the caller stops tracking it, the next reconcile takes it like any orphan
      const next = await after.reconcileOrphans({ isSessionTracked: () => false });
      expect(next.runs).toEqual([expect.objectContaining({ runId: "keep", action: "killed", state: "closed" })]);
      await waitFor(() => !isAlive(prev.keep.pid!));
    },
  );

  it("a predicate that throws keeps every run (fail closed); a non-function is a TypeError", async () => {
    const instance = `tracked-${process.pid}-b`;
    const prev = await previousIncarnation(instance);
    const after = createProcessSupervisor({ stateDir: prev.dir, gatewayInstanceId: instance, graceMs: 200 });
    const report = await after.reconcileOrphans({
      isSessionTracked: () => {
        throw new Error("session store unavailable");
      },
    });
    expect(report.runs).toEqual([]);
    expect(isAlive(prev.keep.pid!)).toBe(true);
    expect(isAlive(prev.drop.pid!)).toBe(true);
    const store = await openLeaseStore(prev.dir);
    expect((await store.get(prev.keepLease))?.state).toBe("open");
    expect((await store.get(prev.dropLease))?.state).toBe("open");
    await expect(after.reconcileOrphans({ isSessionTracked: true as never })).rejects.toThrow(/isSessionTracked/);
  });
});
