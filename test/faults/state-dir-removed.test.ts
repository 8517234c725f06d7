/**
 * The state dir removed under a running gateway (rm -rf, a tmp cleaner):
 * ensureSession fails with a LeaseRecordWriteError naming the state dir, not
 * a raw ENOENT on a temp file; the gateway lives; closing the session it
 * already runs still ends its tree (the store remembers the records it wrote
 * of its live leases), the settlement pending; once the state dir is back,
 * the next reconcile writes the lease again, settled.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  agentArgv,
  carriersOf,
  killGateways,
  killInstance,
  leaseFiles,
  removeTempDirs,
  startGateway,
  tempDir,
  waitFor,
} from "./harness.js";

let instance: string | undefined;
afterEach(() => {
  killGateways();
  killInstance(instance);
});
afterAll(removeTempDirs);

describe("the state dir removed under a running gateway", () => {
  it("ensure names the state dir, close still ends the tree, and the record is written again once the dir is back", async () => {
    const stateDir = join(tempDir("removed"), "state");
    const gw = await startGateway();
    ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
      stateDir,
      maintenanceIntervalMs: 0,
    }));
    const h = await gw.call<{ leaseId: string }>("ensure", {
      key: "r1",
      command: agentArgv("--ignore-sigterm", "--grandchild=double-fork"),
    });
    await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length >= 3);

    rmSync(stateDir, { recursive: true, force: true });
    const second = await gw.request("ensure", { key: "r2", command: agentArgv() });
    expect(second.ok).toBe(false);
    expect(second.error!.name).toBe("LeaseRecordWriteError");
    expect(second.error!.code).toBe("ENOENT");
    expect(second.error!.message).toContain(`the state dir ${stateDir}`);
    expect(second.error!.message).toMatch(/no longer exists/);
    expect(second.error!.message).not.toMatch(/\.tmp-/);

    const close = await gw.call<{ outcome: string; settlementPending?: { to: string; errno: string } }>("close", {
      key: "r1",
    });
    expect(close.outcome).toBe("retry-pending");
    expect(close.settlementPending).toMatchObject({ to: "closed", errno: "ENOENT" });
    await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length === 0, 10_000);
    expect(await gw.lives()).toBe(true);

    mkdirSync(stateDir, { mode: 0o700 });
    const rep = await gw.call<{ entries: { leaseId: string; stateAfter: string }[] }>("reap");
    expect(rep.entries.find((e) => e.leaseId === h.leaseId)?.stateAfter).toBe("closed");
    const files = leaseFiles(stateDir);
    expect(files.filter((f) => f.corrupt)).toEqual([]);
    expect(files.map((f) => [f.lease!.leaseId, f.lease!.state])).toEqual([[h.leaseId, "closed"]]);
    expect(await gw.lives()).toBe(true);
    await gw.call("dispose");
  }, 90_000);
});
