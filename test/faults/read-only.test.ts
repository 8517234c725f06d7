/**
 * EACCES, for real: a gateway running as uid 65534 whose state dir is made
 * read-only under it (chmod 0500 by root). ensureSession fails naming the
 * state dir and the uid; closing the running session still ends its tree,
 * the record as it was and the settlement pending; once the state dir is
 * writable again, the next reconcile settles it. The package is read from a
 * world-readable copy (a checkout may sit in a 0700 folder).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  carriersOf,
  IS_ROOT,
  killGateways,
  killInstance,
  leaseFiles,
  removeTempDirs,
  startGateway,
  waitFor,
  worldReadablePackage,
} from "./harness.js";
import { rmSync } from "node:fs";

const skip = !IS_ROOT
  ? "not root: another uid needs setpriv as root"
  : spawnSync("setpriv", ["--version"]).status !== 0
    ? "setpriv(1) is not installed"
    : null;
if (skip) console.log(`[faults] read-only state dir skipped: ${skip}`);

let instance: string | undefined;
const made: string[] = [];
afterEach(() => {
  killGateways();
  killInstance(instance);
});
afterAll(() => {
  for (const d of made) rmSync(d, { recursive: true, force: true });
  removeTempDirs();
});

const folders = (stateDir: string) => [
  stateDir,
  join(stateDir, "acpx"),
  join(stateDir, "acpx/leases"),
  join(stateDir, "acpx/leases/archive"),
  join(stateDir, "acpx/sessions"),
];

describe.skipIf(skip !== null)(
  `a read-only state dir, gateway as uid 65534 (EACCES)${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    it("ensure names the state dir and the uid; close still ends the tree; the next reconcile settles it once writable", async () => {
      const pkg = worldReadablePackage();
      const parent = mkdtempSync(join(tmpdir(), "proclease-faults-ro-"));
      made.push(parent);
      chmodSync(parent, 0o755);
      const stateDir = join(parent, "state");
      mkdirSync(stateDir, { mode: 0o700 });
      chownSync(stateDir, 65534, 65534);
      const gw = await startGateway({
        prefix: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"],
        dist: pkg.dist,
        gatewayScript: pkg.gateway,
        cwd: pkg.dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      });
      ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
        stateDir,
        maintenanceIntervalMs: 0,
      }));
      const h = await gw.call<{ leaseId: string }>("ensure", {
        key: "ro-1",
        command: [process.execPath, pkg.agent, "--ignore-sigterm", "--grandchild=setsid"],
      });
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length >= 3);

      for (const d of folders(stateDir)) chmodSync(d, 0o500);
      const second = await gw.request("ensure", { key: "ro-2", command: [process.execPath, pkg.agent] });
      expect(second.ok).toBe(false);
      expect(second.error!.code).toBe("EACCES");
      expect(second.error!.message).toContain(`the state dir ${stateDir} is not writable by uid 65534`);

      const close = await gw.call<{ outcome: string; settlementPending?: { to: string; errno: string } }>("close", {
        key: "ro-1",
      });
      expect(close.outcome).toBe("retry-pending");
      expect(close.settlementPending).toMatchObject({ to: "closed", errno: "EACCES" });
      await waitFor(() => carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId).length === 0, 10_000);
      expect(leaseFiles(stateDir).find((f) => f.lease?.leaseId === h.leaseId)?.lease?.state).toBe("open");
      expect(await gw.lives()).toBe(true);

      for (const d of folders(stateDir)) chmodSync(d, 0o700);
      const rep = await gw.call<{ entries: { leaseId: string; stateAfter: string }[] }>("reap");
      expect(rep.entries.find((e) => e.leaseId === h.leaseId)?.stateAfter).toBe("closed");
      const files = leaseFiles(stateDir);
      expect(files.filter((f) => f.corrupt)).toEqual([]);
      expect(files.every((f) => f.lease!.state === "closed" || f.lease!.state === "lost")).toBe(true);
      expect(await gw.lives()).toBe(true);
      await gw.call("dispose");
    }, 90_000);
  },
);
