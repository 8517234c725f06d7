/**
 * endRun: a run ends with whatever it left, also after its root exited on
 * its own. A leased run whose root exits at once, leaving a `setsid` +
 * `env -i` child (no markers, SIGTERM ignored) in its cgroup: its lease
 * stays closing; endRun ends the child through the lease's cgroup and
 * closes the lease. A run without a lease has no lease to end (undefined).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";
import { isAlive, trackedCleanup, waitFor } from "./helpers.js";

const probe = await probeCgroup2();
const { dirs, pids } = trackedCleanup();

describe(`supervisor endRun${containmentSkipNote(probe)}`, () => {
  it.skipIf(!probe.writable)(
    "ends the cgroup escapee of a leased run whose root already exited, and closes its lease",
    async () => {
      const stateDir = mkdtempSync(join(tmpdir(), "proclease-endrun-"));
      dirs.push(stateDir);
      const pidfile = join(stateDir, "escapee.pid");
      const sup = createProcessSupervisor({ stateDir, graceMs: 300 });
      try {
        const script = `setsid env -i sh -c 'trap "" TERM; echo $$ > ${pidfile}; while :; do sleep 1; done' & exit 0`;
        const run = await sup.spawn({
          mode: "child",
          argv: ["sh", "-c", script],
          sessionId: "s",
          backendId: "exec",
          background: true,
        });
        expect((await run.wait()).exitCode).toBe(0);
        let pid = 0;
        await waitFor(() => {
          try {
            pid = Number(readFileSync(pidfile, "utf8"));
          } catch {
            return false;
          }
          return pid > 0;
        });
        pids.add(pid);
        const leaseId = sup.getRecord(run.runId)!.leaseId!;
        const store = await openLeaseStore(stateDir);
        expect((await store.get(leaseId))?.state).toBe("closing");
        expect(isAlive(pid)).toBe(true);
        expect(await sup.endRun(run.runId)).toBe("closed");
        expect(isAlive(pid)).toBe(false);
        expect((await store.get(leaseId))?.state).toBe("closed");
        // a second call finds the lease settled and changes nothing
        expect(await sup.endRun(run.runId)).toBe("closed");
      } finally {
        await sup.shutdown();
      }
    },
  );

  it("a run without a lease, or one it never had: nothing to end", async () => {
    const sup = createProcessSupervisor({ containment: "off" });
    try {
      const run = await sup.spawn({ mode: "child", argv: ["true"], sessionId: "s", backendId: "exec" });
      await run.wait();
      expect(await sup.endRun(run.runId)).toBeUndefined();
      expect(await sup.endRun("no-such-run")).toBeUndefined();
    } finally {
      await sup.shutdown();
    }
  });
});
