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
import {
  ADDON_WAYS,
  agentArgv,
  carriersOf,
  killGateways,
  killInstance,
  leaseFiles,
  startGateway,
  tempFiles,
  waitFor,
} from "./harness.js";
import { mountTmpfs, type Tmpfs, tmpfsSkipReason } from "./host-faults.js";

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

// the addon and node:fs stop at different steps when the disk fills: each case runs both ways
describe.skipIf(skip !== null).each(ADDON_WAYS)(
  `a full disk (ENOSPC from a 512 KB tmpfs), with $how${skip ? ` — skipped: ${skip}` : ""}`,
  (way) => {
    it("closeSession ends the verified tree, the record is left whole, the settlement is pending and the next reconcile settles it", async () => {
      fs = mountTmpfs(512);
      const stateDir = join(fs.dir, "state");
      const gw = await startGateway({ way });
      ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
        stateDir,
        maintenanceIntervalMs: 0,
      }));
      const h = await gw.call<{ leaseId: string; rootPid: number }>("ensure", {
        key: "full-1",
        command: agentArgv("--ignore-sigterm", "--grandchild=setsid"),
      });
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
      const report = close.value as {
        outcome: string;
        leaseState: string;
        detail: string;
        settlementPending?: { to: string; errno: string; blockedBy: string };
      };
      expect(report.outcome).toBe("retry-pending");
      expect(report.settlementPending?.to).toBe("closed");
      expect(report.settlementPending?.errno).toBe("ENOSPC");
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

    it("a supervisor's leased run cancelled on a full disk ends all the same; its reconcile settles the lease once space is back", async () => {
      fs = mountTmpfs(512);
      const stateDir = join(fs.dir, "state");
      const gw = await startGateway({ way });
      await gw.call("supervisor", { stateDir });
      const run = await gw.call<{ pid: number; leaseId: string }>("spawn", {
        runId: "full-run",
        argv: ["/bin/sh", "-c", "trap '' TERM; sleep 1000 & exec sleep 1000"],
        background: true,
      });
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", run.leaseId).length === 2);
      fs.fill();
      expect(await gw.call("cancel", { runId: "full-run" })).toBe(true);
      const exit = await gw.call<{ reason: string }>("wait", { runId: "full-run" }, 30_000);
      expect(exit.reason).toBe("manual-cancel");
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", run.leaseId).length === 0, 10_000);
      const during = leaseFiles(stateDir);
      expect(during.filter((f) => f.corrupt)).toEqual([]);
      expect(during.find((f) => f.lease?.leaseId === run.leaseId)?.lease?.state).toBe("open");
      expect(await gw.lives()).toBe(true);
      fs.unfill();
      const rep = await gw.call<{ runs: { leaseId: string; state: string }[] }>("reconcile");
      expect(rep.runs).toEqual([expect.objectContaining({ leaseId: run.leaseId, state: "closed" })]);
      expect(leaseFiles(stateDir).filter((f) => f.lease?.state !== "closed" && f.lease?.state !== "lost")).toEqual([]);
      await gw.call("shutdown");
    }, 90_000);

    it("the startup reap on a full disk ends what the crashed gateway left, and settles it once space is back", async () => {
      fs = mountTmpfs(512);
      const stateDir = join(fs.dir, "state");
      const first = await startGateway({ way });
      ({ instanceId: instance } = await first.call<{ instanceId: string }>("controller", {
        stateDir,
        maintenanceIntervalMs: 0,
      }));
      const h = await first.call<{ leaseId: string; rootPid: number }>("ensure", {
        key: "crash-1",
        command: agentArgv("--ignore-sigterm", "--survive-stdin-close", "--grandchild=setsid"),
      });
      // gateway and wrapper killed together: the adapter and its grandchild are left for the next start
      process.kill(h.rootPid, "SIGKILL");
      first.kill();
      await first.exited;
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length === 2);
      const next = await startGateway({ way });
      await next.call("controller", { stateDir, maintenanceIntervalMs: 0 });
      fs.fill();
      const rep = await next.call<{
        entries: { leaseId: string; stateAfter: string; pending?: { to: string; errno: string } }[];
      }>("reap");
      const e = rep.entries.find((x) => x.leaseId === h.leaseId)!;
      expect(e.pending).toMatchObject({ to: "closed", errno: "ENOSPC" });
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length === 0, 10_000);
      expect(leaseFiles(stateDir).filter((f) => f.corrupt)).toEqual([]);
      fs.unfill();
      const again = await next.call<{ entries: { leaseId: string; stateAfter: string }[] }>("reap");
      expect(again.entries.find((x) => x.leaseId === h.leaseId)?.stateAfter).toBe("closed");
      expect(await next.lives()).toBe(true);
      await next.call("dispose");
    }, 90_000);
  },
);
