/**
 * Gateway shutdown: cancelAll() reaches every live run (starting ones
 * included), shutdown() also refuses new spawns and resolves once every run
 * has ended and its lease settled.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { SUPERVISOR_SESSION_PREFIX } from "../../src/supervisor/hold/durability.js";
import type { PtyLoader } from "../../src/supervisor/adapters/pty.js";
import { createProcessSupervisor, SupervisorShutdownError } from "../../src/supervisor/core/supervisor.js";
import { gate, instanceCarriers, isAlive, matcher, waitFor, trackedCleanup } from "./helpers.js";

const { dirs, pids } = trackedCleanup();

const base = { sessionId: "s", backendId: "t" } as const;
const TREE = ["sh", "-c", `sh -c 'trap "" TERM; while :; do sleep 1; done' & echo "tree $$ $!"; wait`];

describe("cancelAll and shutdown", () => {
  it("shutdown cancels running and starting runs, waits for each to end and its lease to settle, and refuses new spawns", async () => {
    const dir = await mkdtemp(join(tmpdir(), "proclease-shutdown-"));
    dirs.push(dir);
    const instance = `shutdown-test-${process.pid}`;
    const g = gate();
    // the PTY loader never finishes before the shutdown: that run is still starting when it comes
    const loadPty: PtyLoader = async () => {
      await g.gate;
      throw new Error("not reached: the run is cancelled first");
    };
    const sup = createProcessSupervisor({ stateDir: dir, gatewayInstanceId: instance, graceMs: 200, loadPty });
    const started = [];
    for (const [runId, background] of [
      ["bg1", true],
      ["bg2", true],
      ["fg", false],
    ] as const) {
      const out = matcher();
      const run = await sup.spawn({
        ...base,
        mode: "child",
        runId,
        background,
        argv: TREE,
        onStdout: (c) => out.push(c),
      });
      const m = await out.waitFor(/tree (\d+) (\d+)/);
      pids.add(Number(m[1]));
      pids.add(Number(m[2]));
      started.push({ run, grandchild: Number(m[2]) });
    }
    const startingLeased = sup.spawn({ ...base, mode: "child", runId: "starting", background: true, argv: TREE });
    const startingPty = sup.spawn({ ...base, mode: "pty", runId: "pty", background: true, ptyCommand: "sleep 30" });
    await waitFor(() => sup.getRecord("pty")?.state === "starting");

    const report = sup.shutdown();
    await expect(sup.spawn({ ...base, mode: "child", argv: ["true"] })).rejects.toBeInstanceOf(SupervisorShutdownError);
    g.open();
    const done = await report;
    expect(done.cancelled).toBe(5);
    expect(new Map(done.runs.map((r) => [r.runId, r.exit?.reason]))).toEqual(
      new Map([
        ["bg1", "manual-cancel"],
        ["bg2", "manual-cancel"],
        ["fg", "manual-cancel"],
        ["starting", "manual-cancel"],
        ["pty", "manual-cancel"],
      ]),
    );
    // the two that were starting never got a process
    expect((await startingLeased).pid).toBeUndefined();
    expect((await startingPty).pid).toBeUndefined();
    for (const { run, grandchild } of started) {
      expect(isAlive(run.pid!)).toBe(false);
      expect(isAlive(grandchild)).toBe(false);
    }
    expect(await instanceCarriers(instance)).toEqual([]);
    const { leases } = await (await openLeaseStore(dir)).list({ gatewayInstanceId: instance });
    const states = new Map(leases.map((l) => [l.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length), l.state]));
    expect(states).toEqual(
      new Map([
        ["bg1", "closed"],
        ["bg2", "closed"],
        ["starting", "lost"],
        ["pty", "lost"],
      ]),
    );
    expect(sup.listRecords().every((r) => r.state === "exited")).toBe(true);
    // idempotent: the same report, nothing new to wait for
    expect(await sup.shutdown()).toBe(done);
  });

  it("cancelAll(reason) stops every live run with that reason and leaves the supervisor usable", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    const runs = await Promise.all(
      ["A", "A", "B"].map((scopeKey) => sup.spawn({ ...base, mode: "child", scopeKey, argv: ["sleep", "30"] })),
    );
    for (const r of runs) pids.add(r.pid!);
    expect(sup.listByScope("A").map((r) => r.state)).toEqual(["running", "running"]);
    expect(sup.cancelAll("overall-timeout")).toBe(3);
    for (const r of runs) expect(await r.wait()).toMatchObject({ reason: "overall-timeout", timedOut: true });
    for (const r of runs) expect(isAlive(r.pid!)).toBe(false);
    expect(sup.cancelAll()).toBe(0);
    const after = await sup.spawn({ ...base, mode: "child", argv: ["sh", "-c", "echo still"] });
    expect((await after.wait()).stdout).toBe("still\n");
    expect(sup.listByScope("A").map((r) => r.terminationReason)).toEqual(["overall-timeout", "overall-timeout"]);
  });
});
