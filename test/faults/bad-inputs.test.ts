/**
 * Inputs checked before anything is made, and one sequence for every failed
 * spawn: a cwd that does not exist (or is a file) is a CwdUnusableError
 * naming it, with no lease and no cgroup made, three times in a row; a
 * wrapper that cannot be spawned at all (a node that is not there) settles
 * its lease and its lease cgroup is drained and removed, never left as an
 * empty "left over" cgroup.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  agentArgv,
  cgroupFolders,
  killGateways,
  killInstance,
  leaseFiles,
  removeTempDirs,
  startGateway,
  tempDir,
} from "./harness.js";

let instance: string | undefined;
afterEach(() => {
  killGateways();
  killInstance(instance);
});
afterAll(removeTempDirs);

describe("inputs checked before anything is made", () => {
  it("ensureSession with a cwd that does not exist, or is a file: a typed error naming it, no lease, no cgroup (3 of 3 tries)", async () => {
    const stateDir = tempDir("cwd");
    const gw = await startGateway();
    ({ instanceId: instance } = await gw.call<{ instanceId: string }>("controller", {
      stateDir,
      maintenanceIntervalMs: 0,
    }));
    const file = join(stateDir, "a-file");
    writeFileSync(file, "x");
    for (const [cwd, code] of [
      ["/does/not/exist", "ENOENT"],
      ["/does/not/exist", "ENOENT"],
      [file, "ENOTDIR"],
    ] as const) {
      const r = await gw.request("ensure", { key: "cwd", command: agentArgv(), cwd });
      expect(r.ok).toBe(false);
      expect(r.error!.name).toBe("CwdUnusableError");
      expect(r.error!.code).toBe(code);
      expect(r.error!.path).toBe(cwd);
      expect(r.error!.message).toContain(cwd);
      expect(r.error!.message).not.toMatch(/spawn .*node/);
    }
    expect(leaseFiles(stateDir)).toEqual([]);
    expect(cgroupFolders().filter((f) => f.includes(instance!))).toEqual([]);
    expect(await gw.lives()).toBe(true);
    await gw.call("dispose");
  }, 60_000);

  it("a supervisor run with a cwd that does not exist: a typed error naming it, no lease written", async () => {
    const stateDir = tempDir("sup-cwd");
    const gw = await startGateway();
    await gw.call("supervisor", { stateDir });
    const r = await gw.request("spawn", {
      runId: "bad-cwd",
      argv: ["/bin/true"],
      background: true,
      cwd: "/does/not/exist",
    });
    expect(r.ok).toBe(false);
    expect(r.error!.name).toBe("CwdUnusableError");
    expect(r.error!.message).toContain("/does/not/exist");
    expect(leaseFiles(stateDir)).toEqual([]);
    expect(await gw.lives()).toBe(true);
  }, 60_000);

  it("a wrapper that cannot be spawned: its lease settles and its lease cgroup is removed (3 of 3 tries)", async () => {
    const stateDir = tempDir("nonode");
    // the Node wrapper, whose node binary is missing (the native wrapper needs no node)
    const gw = await startGateway({ env: { ...process.env, PROCLEASE_WRAPPER: "node" } });
    const c = await gw.call<{ instanceId: string; containment: boolean }>("controller", {
      stateDir,
      maintenanceIntervalMs: 0,
      nodePath: "/does/not/exist/node",
    });
    instance = c.instanceId;
    for (let i = 0; i < 3; i++) {
      const r = await gw.request("ensure", { key: `nonode-${i}`, command: agentArgv() });
      expect(r.ok).toBe(false);
      expect(r.error!.message).toMatch(/ENOENT/);
    }
    const files = leaseFiles(stateDir);
    expect(files).toHaveLength(3);
    for (const f of files) {
      expect(f.lease!.state).toBe("lost");
      if (c.containment) expect(f.lease!.cgroup, "containment is on: each lease had a cgroup").toBeDefined();
      if (f.lease!.cgroup) expect(existsSync(f.lease!.cgroup.path), `${f.lease!.cgroup.path} left behind`).toBe(false);
    }
    expect(cgroupFolders().filter((f) => f.includes(`${instance}/`))).toEqual([]);
    expect(await gw.lives()).toBe(true);
    await gw.call("dispose");
  }, 60_000);
});
