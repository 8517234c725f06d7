/**
 * No cgroup folder left on the host: an instance folder goes away with its
 * last lease cgroup, so a controller that is never disposed leaves none once
 * its sessions are closed; a gateway SIGKILLed with a session open leaves its
 * folder to the next start on that state dir, whose startup reap drains the
 * lease cgroup and removes the folder with it.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { detectContainment } from "../../src/containment/index.js";
import {
  agentArgv,
  cgroupFolders,
  instanceCarriers,
  killGateways,
  killInstance,
  removeTempDirs,
  startGateway,
  tempDir,
  waitFor,
} from "./harness.js";

const support = await detectContainment();
const skip = support.available ? null : `containment is not available here: ${support.why}`;
if (skip) console.log(`[faults] hygiene skipped: ${skip}`);

let instance: string | undefined;
afterEach(() => {
  killGateways();
  killInstance(instance);
});
afterAll(removeTempDirs);

const mine = () => cgroupFolders().filter((f) => instance !== undefined && f.includes(instance));

describe.skipIf(skip !== null)(`cgroup hygiene${skip ? ` — skipped: ${skip}` : ""}`, () => {
  it("a controller never disposed leaves no instance folder once its sessions are closed", async () => {
    const gw = await startGateway();
    ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
      stateDir: tempDir("hyg"),
      maintenanceIntervalMs: 0,
    }));
    await gw.call("ensure", { key: "h1", command: agentArgv() });
    await gw.call("ensure", { key: "h2", command: agentArgv() });
    expect(mine().length).toBe(3);
    await gw.call("close", { key: "h1" });
    expect(mine().length).toBe(2);
    await gw.call("close", { key: "h2" });
    expect(mine()).toEqual([]);
    gw.kill();
    await gw.exited;
    expect(mine()).toEqual([]);
  }, 60_000);

  it("a gateway SIGKILLed with a session open: the next start's reap removes the lease cgroup and the instance folder", async () => {
    const stateDir = tempDir("hyg-crash");
    const first = await startGateway();
    ({ instanceId: instance } = await first.call<{ instanceId: string }>("controller", {
      stateDir,
      maintenanceIntervalMs: 0,
    }));
    await first.call("ensure", { key: "c1", command: agentArgv("--ignore-sigterm") });
    first.kill();
    await first.exited;
    expect(mine().length).toBe(2);
    const next = await startGateway();
    await next.call("controller", { stateDir, maintenanceIntervalMs: 0 });
    await next.call("reap");
    await waitFor(() => instanceCarriers(instance!).length === 0, 10_000);
    expect(mine()).toEqual([]);
    expect(await next.lives()).toBe(true);
    await next.call("dispose");
  }, 60_000);
});
