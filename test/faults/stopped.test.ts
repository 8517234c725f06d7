/**
 * SIGSTOPped processes at close, for real: the wrapper, the adapter or the
 * (setsid) grandchild is stopped before closeSession. A stopped process
 * acts on no SIGTERM and reads no lifeline EOF; SIGKILL still ends it. The
 * close ends every process of the tree, the lease settles closed and the
 * gateway lives.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  agentArgv,
  alive,
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
const stopped: number[] = [];
afterEach(() => {
  for (const pid of stopped.splice(0)) if (alive(pid)) process.kill(pid, "SIGCONT");
  killGateways();
  killInstance(instance);
});
afterAll(removeTempDirs);

describe("SIGSTOPped processes at close", () => {
  const cases = (["auto", "off"] as const).flatMap((containment) =>
    (["wrapper", "adapter", "grandchild"] as const).map((which) => ({ containment, which })),
  );
  for (const { containment, which } of cases) {
    it(`a stopped ${which} (containment ${containment}): closeSession ends the whole tree and the lease settles closed`, async () => {
      const stateDir = tempDir(`stop-${which}`);
      const pidfile = join(stateDir, "agent.json");
      const gw = await startGateway();
      ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
        stateDir,
        graceMs: 300,
        maintenanceIntervalMs: 0,
        containment,
      }));
      const h = await gw.call<{ leaseId: string; rootPid: number }>("ensure", {
        key: "stop",
        command: agentArgv("--ignore-sigterm", "--grandchild=setsid", `--pidfile=${pidfile}`),
      });
      await waitFor(() => existsSync(pidfile));
      const agent = JSON.parse(readFileSync(pidfile, "utf8")) as { pid: number; grandchildPid: number };
      const target = which === "wrapper" ? h.rootPid : which === "adapter" ? agent.pid : agent.grandchildPid;
      process.kill(target, "SIGSTOP");
      stopped.push(target);
      await waitFor(() => readFileSync(`/proc/${target}/stat`, "utf8").split(") ")[1]!.startsWith("T"));
      const report = await gw.call<{ outcome: string; leaseState: string; detail: string }>(
        "close",
        { key: "stop" },
        60_000,
      );
      expect(report.leaseState, report.detail).toBe("closed");
      for (const pid of [h.rootPid, agent.pid, agent.grandchildPid])
        expect(alive(pid), `pid ${pid} outlived the close`).toBe(false);
      expect(carriersOf("OPENCLAW_ACPX_LEASE_ID", h.leaseId)).toEqual([]);
      expect(leaseFiles(stateDir).find((f) => f.lease?.leaseId === h.leaseId)?.lease?.state).toBe("closed");
      expect(await gw.lives()).toBe(true);
      await gw.call("dispose");
    }, 90_000);
  }
});
