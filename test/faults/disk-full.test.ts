/**
 * ENOSPC, for real: the state dir on a 512 KB tmpfs, filled while a session
 * runs. The gateway lives; ensureSession fails naming the cause and leaves
 * nothing; closeSession still ends the verified tree (ending a tree never
 * waits on the disk), the record stays as it was, the outcome says the
 * settlement is pending and why; once space is back the next reconcile
 * settles it.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { agentArgv, carriersOf, killGateways, killInstance, leaseFiles, mountTmpfs, startGateway, tempFiles, tmpfsSkipReason, waitFor, type Tmpfs } from "./harness.js";

const skip = tmpfsSkipReason();
if (skip) console.log(`[faults] disk-full skipped: ${skip}`);

let fs: Tmpfs | undefined;
let instance: string | undefined;
afterEach(() => {
  killGateways();
  killInstance(instance);
  fs?.umount();
  fs = undefined;
});

describe.skipIf(skip !== null)(`a full disk (ENOSPC from a 512 KB tmpfs)${skip ? ` — skipped: ${skip}` : ""}`, () => {
  it("closeSession ends the verified tree, the record is left whole, the settlement is pending and the next reconcile settles it", async () => {
    fs = mountTmpfs(512);
    const stateDir = join(fs.dir, "state");
    const gw = await startGateway();
    ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", { stateDir, maintenanceIntervalMs: 0 }));
    const h = await gw.call<{ leaseId: string; rootPid: number }>("ensure", { key: "full-1", command: agentArgv("--ignore-sigterm", "--grandchild=setsid") });
    await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length >= 3);
    const before = leaseFiles(stateDir);

    fs.fill();
    const second = await gw.request("ensure", { key: "full-2", command: agentArgv() });
    expect(second.ok).toBe(false);
    expect(second.error!.code ?? second.error!.cause?.code).toBe("ENOSPC");
    expect(second.error!.message).toMatch(/ENOSPC|no space/i);
    expect(second.error!.message).toContain(stateDir);
    expect(tempFiles(stateDir)).toEqual([]);
    expect(leaseFiles(stateDir).map((f) => f.file)).toEqual(before.map((f) => f.file));

    const close = await gw.request("close", { key: "full-1" });
    expect(close.ok, JSON.stringify(close.error)).toBe(true);
    const report = close.value as { outcome: string; leaseState: string; detail: string; settlementPending?: { to: string; code: string; blockedBy: string } };
    expect(report.outcome).toBe("retry-pending");
    expect(report.settlementPending?.to).toBe("closed");
    expect(report.settlementPending?.code).toBe("ENOSPC");
    expect(report.settlementPending?.blockedBy).toContain(stateDir);
    expect(report.detail).toMatch(/ENOSPC/);
    // the tree verification proved ours is gone, setsid grandchild included
    await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length === 0, 10_000);
    expect(await gw.lives()).toBe(true);
    // the record is as it was: whole, still open
    const during = leaseFiles(stateDir);
    expect(during.filter((f) => f.corrupt)).toEqual([]);
    expect(during.find((f) => f.lease?.leaseId === h.leaseId)?.lease?.state).toBe("open");
    expect(tempFiles(stateDir)).toEqual([]);

    fs.unfill();
    const rep = await gw.call<{ entries: { leaseId: string; stateAfter: string }[] }>("reap");
    expect(rep.entries.find((e) => e.leaseId === h.leaseId)?.stateAfter).toBe("closed");
    const after = leaseFiles(stateDir);
    expect(after.filter((f) => f.corrupt)).toEqual([]);
    expect(after.every((f) => f.lease!.state === "closed" || f.lease!.state === "lost")).toBe(true);
    expect(await gw.lives()).toBe(true);
    await gw.call("dispose");
  }, 90_000);
});
