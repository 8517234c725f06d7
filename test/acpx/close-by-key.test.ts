/**
 * closeSession({ sessionKey }): the form the docs give for a caller that holds
 * a key and no handle (after a restart). It type-checks, closes what the key
 * holds with the same outcomes as `{ handle }`, and is refused with the same
 * kind of TypeError when malformed; a stale handle still closes nothing.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import {
  agentArgv,
  alive,
  disposeAfterEach,
  GRACE_MS,
  readPidfile,
  tempStateDir,
  trackLease,
  trackPid,
} from "./controller-helpers.js";

const controllers = disposeAfterEach();
async function open(stateDir: string) {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  return ctl;
}

describe("closeSession({ sessionKey })", () => {
  it("after a restart, the key alone closes the tree an earlier controller left (closed, nothing alive)", async () => {
    const stateDir = tempStateDir("close-by-key");
    const pidfile = join(stateDir, "agent.json");
    const first = await open(stateDir);
    const h = await first.ensureSession({
      sessionKey: "agent:main:acp:by-key",
      agentId: "main",
      command: agentArgv({ kind: "setsid", pidfile }),
    });
    trackLease(h.leaseId);
    trackPid(h.rootPid);
    const pids = await readPidfile(pidfile);
    // a restart: this controller goes, its session's processes stay (their lifeline is this test process)
    await first.dispose();
    const next = await open(stateDir);

    const report = await next.closeSession({ sessionKey: "agent:main:acp:by-key", reason: "closed by key" });
    expect(report).toMatchObject({ outcome: "closed", leaseId: h.leaseId, leaseState: "closed", path: "lease" });
    expect([h.rootPid, pids.pid, pids.grandchildPid!].filter(alive)).toEqual([]);
    // idempotent, as with a handle
    expect(await next.closeSession({ sessionKey: "agent:main:acp:by-key" })).toMatchObject({
      outcome: "noop",
      leaseState: "closed",
    });
    expect(await next.closeSession({ sessionKey: "never-seen" })).toMatchObject({ outcome: "noop", path: "none" });
  });

  it("a live session: the key closes it as its handle would, and a stale handle of the key still closes nothing", async () => {
    const ctl = await open(tempStateDir("close-by-key-live"));
    const old = await ctl.ensureSession({ sessionKey: "k-live", agentId: "main", command: agentArgv({}) });
    trackLease(old.leaseId);
    expect((await ctl.closeSession({ sessionKey: "k-live" })).outcome).toBe("closed");
    const now = await ctl.ensureSession({ sessionKey: "k-live", agentId: "main", command: agentArgv({}) });
    trackLease(now.leaseId);
    const stale = await ctl.closeSession({ handle: old });
    expect(stale.outcome).toBe("noop");
    expect(stale.detail).toContain("stale handle");
    expect(alive(now.rootPid)).toBe(true);
    expect(await ctl.closeSession({ sessionKey: "k-live" })).toMatchObject({ outcome: "closed", leaseId: now.leaseId });
  });

  it("malformed input is a TypeError naming the field, before anything runs", async () => {
    const ctl = await open(tempStateDir("close-by-key-input"));
    const call = ctl.closeSession.bind(ctl) as (input: unknown) => Promise<unknown>;
    await expect(call({ sessionKey: "" })).rejects.toThrow(
      new TypeError("input.sessionKey must be a non-empty string (or give input.handle from ensureSession)"),
    );
    await expect(call({ sessionKey: 42 })).rejects.toThrow(/^input\.sessionKey must be a non-empty string/);
    await expect(call({})).rejects.toThrow(/^input\.sessionKey must be a non-empty string/);
    await expect(call({ sessionKey: "a", handle: { sessionKey: "a" } })).rejects.toThrow(
      new TypeError("input takes handle or sessionKey, not both: the handle already names its key"),
    );
    await expect(call({ handle: { sessionKey: "" } })).rejects.toThrow(
      new TypeError("input.handle.sessionKey must be a non-empty string"),
    );
    await expect(call(null)).rejects.toThrow(TypeError);
    // both forms are one type; the checker refuses the two together
    // @ts-expect-error handle and sessionKey exclude each other
    void (() => ctl.closeSession({ sessionKey: "a", handle: { sessionKey: "a" } }));
  });
});
