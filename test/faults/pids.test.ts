/**
 * EAGAIN, for real: the gateway moved into a pids cgroup (v1 or v2, whichever
 * carries the pids controller here) with no room to spare, then with room
 * for one task. The fork fails, or the wrapper cannot make its threads and
 * aborts or stalls: either way the gateway lives, the error is one line that
 * says "could not create a process or thread: the pids/threads limit" with
 * pids.max and where to read it (never a libc or V8 stack line), the lease
 * settles and nothing is left running; with the limit lifted, the next
 * reconcile settles everything.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  ADDON_WAYS,
  agentArgv,
  instanceCarriers,
  killGateways,
  killInstance,
  leaseFiles,
  removeTempDirs,
  startGateway,
  tempDir,
  waitFor,
} from "./harness.js";
import { makePidsCgroup, type PidsCgroup, pidsCgroupSkipReason } from "./host-faults.js";

const skip = pidsCgroupSkipReason();
if (skip) console.log(`[faults] pids skipped: ${skip}`);

let instance: string | undefined;
let cg: PidsCgroup | undefined;
afterEach(async () => {
  cg?.setMax("max");
  killGateways();
  killInstance(instance);
  await cg?.remove();
  cg = undefined;
});
afterAll(removeTempDirs);

describe.skipIf(skip !== null)(
  `processes run out (EAGAIN from a pids cgroup)${skip ? ` — skipped: ${skip}` : ""}`,
  () => {
    // with the addon disabled the facts, signals and lease files take their portable paths, which fail at other steps
    it.each(ADDON_WAYS)(
      "no room, then room for one task, with $how: the gateway lives, each failure names the pids limit in one line, every lease settles, nothing is left",
      async (way) => {
        const stateDir = tempDir("pids");
        const gw = await startGateway({ way });
        ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
          stateDir,
          maintenanceIntervalMs: 0,
          startTimeoutMs: 8_000,
        }));
        cg = makePidsCgroup("gw");
        cg.add(gw.pid);
        const messages: string[] = [];
        for (const room of [0, 1, 2]) {
          cg.setMax(cg.current() + room);
          const r = await gw.request("ensure", { key: `pids-${room}`, command: agentArgv() }, 60_000);
          cg.setMax("max");
          expect(r.ok, `room ${room}: ensure succeeded`).toBe(false);
          const text = r.error!.message;
          messages.push(text);
          expect(text, text).toMatch(/could not create a process or thread: the pids\/threads limit/);
          expect(text, text).toMatch(/pids\.max \d+ of cgroup /);
          expect(text, text).not.toMatch(/\n/);
          expect(text, text).not.toMatch(/0x[0-9a-f]{6,}|node::|uv_|Native stack/);
          expect(await gw.lives()).toBe(true);
        }
        console.log(
          `[faults] pids: ${messages.map((m) => m.replace(/\(lease [^)]*\)/, "").slice(0, 160)).join(" | ")}`,
        );
        const rep = await gw.call<{ entries: { stateAfter: string }[] }>("reap");
        expect(rep.entries.every((e) => e.stateAfter === "closed" || e.stateAfter === "lost")).toBe(true);
        await waitFor(() => instanceCarriers(instance!).length === 0, 15_000);
        const files = leaseFiles(stateDir);
        expect(files.filter((f) => f.corrupt)).toEqual([]);
        expect(files.map((f) => f.lease!.state).filter((s) => s !== "closed" && s !== "lost")).toEqual([]);
        expect(await gw.lives()).toBe(true);
        await gw.call("dispose");
      },
      180_000,
    );
  },
);
