/**
 * A disposed controller refuses every call at once with
 * AcpxControllerDisposedError, settles the turns that were running, and
 * changes no lease file after it gave the state dir's lock back: a close
 * already under way finishes first. Real sessions (the bundled wrapper
 * around the fixture agent). Build first (`npm run build`).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import type { AcpRuntimeHandle } from "../../src/acpx/connection/types.js";
import type { AcpxLifecycleController } from "../../src/acpx/controller/types.js";
import { agentArgv, alive, disposeAfterEach, GRACE_MS, tempStateDir, trackLease } from "./controller-helpers.js";

const controllers = disposeAfterEach();
const DISPOSED = { name: "AcpxControllerDisposedError", code: "controller-disposed" };

async function newController(stateDir: string): Promise<AcpxLifecycleController> {
  const ctl = await createAcpxLifecycleController({ stateDir, graceMs: GRACE_MS, maintenanceIntervalMs: 0 });
  controllers.push(ctl);
  return ctl;
}

async function ensure(ctl: AcpxLifecycleController, key: string, extra: string[] = []): Promise<AcpRuntimeHandle> {
  const h = await ctl.ensureSession({ sessionKey: key, agentId: "main", command: agentArgv({ extra }) });
  trackLease(h.leaseId);
  return h;
}

/** "pending" unless `p` settles within the microtasks before the next macrotask: what "at once" means here. */
async function settledAtOnce(p: Promise<unknown>): Promise<unknown> {
  const pending = new Promise((r) => setImmediate(() => r("pending")));
  return Promise.race([
    p.then(
      (v) => ({ resolved: v }),
      (e: unknown) => e,
    ),
    pending,
  ]);
}

/** Every file under the state dir's lease folders, with its bytes: what "no lease file changed" compares. */
function leaseFiles(stateDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[p] = readFileSync(p, "utf8");
    }
  };
  walk(join(stateDir, "acpx", "leases"));
  return out;
}

describe("a disposed controller", () => {
  it("refuses every method at once, settles running turns with the same error, and changes no lease", async () => {
    const stateDir = tempStateDir("dispose-all");
    const ctl = await newController(stateDir);
    const streamed = await ensure(ctl, "k-streamed", ["--turn=until-cancel"]);
    const prompted = await ensure(ctl, "k-prompted", ["--turn=until-cancel"]);
    const idle = await ensure(ctl, "k-idle");
    const turn = ctl.startTurn(streamed, "long");
    const prompt = ctl.prompt(prompted, "long");
    // it rejects during dispose, before the expectation below reads it
    prompt.catch(() => undefined);
    const events = turn.events[Symbol.asyncIterator]();
    // the fixture's first update of an until-cancel turn: the turn has started
    expect((await events.next()).done).toBe(false);
    const lease = (await ctl.listLeases())[0]!;
    const before = leaseFiles(stateDir);

    await ctl.dispose();
    // the running turns settle with the disposal's error (the stream too, once its buffer is read)
    await expect(turn.result).rejects.toMatchObject(DISPOSED);
    await expect(prompt).rejects.toMatchObject(DISPOSED);
    await expect(
      (async () => {
        for (;;) if ((await events.next()).done) return;
      })(),
    ).rejects.toMatchObject(DISPOSED);

    const calls: Record<string, () => Promise<unknown>> = {
      prompt: () => ctl.prompt(idle, "hello"),
      cancelTurn: () => ctl.cancelTurn(streamed),
      closeSession: () => ctl.closeSession({ handle: idle }),
      closeByKey: () => ctl.closeSession({ handle: { sessionKey: "k-idle" } }),
      setMode: () => ctl.setMode(idle, "plan"),
      setConfigOption: () => ctl.setConfigOption(idle, "model", "x"),
      ensureSession: () => ctl.ensureSession({ sessionKey: "k-new", agentId: "main", command: agentArgv({}) }),
      spawnRawAdapter: () => ctl.spawnRawAdapter({ sessionKey: "k-raw", agentId: "main", command: agentArgv({}) }),
      sessionStatus: () => ctl.sessionStatus(idle),
      listSessions: () => ctl.listSessions(),
      listLeases: () => ctl.listLeases(),
      verifyOwnedTree: () => ctl.verifyOwnedTree(lease),
      reapStartupOrphans: () => ctl.reapStartupOrphans(),
      shutdown: () => ctl.shutdown(),
    };
    for (const [name, call] of Object.entries(calls)) {
      expect([name, await settledAtOnce(call())]).toEqual([name, expect.objectContaining(DISPOSED)]);
    }
    expect(() => ctl.startTurn(idle, "hello")).toThrow(expect.objectContaining(DISPOSED));
    expect(() => ctl.onUpdate(idle, () => undefined)).toThrow(expect.objectContaining(DISPOSED));
    // dispose is idempotent
    await expect(ctl.dispose()).resolves.toBeUndefined();

    // nothing was closed or killed, and not one lease file changed
    for (const h of [streamed, prompted, idle]) expect(alive(h.rootPid)).toBe(true);
    expect(leaseFiles(stateDir)).toEqual(before);
    // the state dir is free for the next controller, which finds the three leases open
    const next = await newController(stateDir);
    expect((await next.listLeases()).map((l) => l.state).sort()).toEqual(["open", "open", "open"]);
  });

  it("a close under way when dispose is called finishes before the lock is given back; nothing changes after", async () => {
    const stateDir = tempStateDir("dispose-close");
    const ctl = await newController(stateDir);
    // a stubborn adapter: its close waits out the SIGTERM grace before the SIGKILL
    const h = await ensure(ctl, "k-close", ["--ignore-sigterm"]);
    const close = ctl.closeSession({ handle: h, reason: "test" });
    await ctl.dispose();
    const after = leaseFiles(stateDir);
    expect(await settledAtOnce(close)).toMatchObject({ resolved: { outcome: "closed" } });
    expect(leaseFiles(stateDir)).toEqual(after);
    const next = await newController(stateDir);
    expect((await next.listLeases()).find((l) => l.leaseId === h.leaseId)?.state).toBe("closed");
  });

  it("shutdown refuses new calls from its start, and a dispose during it waits for it", async () => {
    const ctl = await newController(tempStateDir("dispose-shutdown"));
    const h = await ensure(ctl, "k-shut", ["--ignore-sigterm"]);
    const shutdown = ctl.shutdown();
    expect(await settledAtOnce(ctl.prompt(h, "hello"))).toMatchObject({ ...DISPOSED, how: "shut down" });
    expect(await settledAtOnce(ctl.shutdown())).toMatchObject({ ...DISPOSED, how: "shut down" });
    await ctl.dispose();
    expect(await settledAtOnce(shutdown)).toMatchObject({ resolved: [{ sessionKey: "k-shut", outcome: "closed" }] });
    expect((await shutdown).map((r) => [r.sessionKey, r.outcome])).toEqual([["k-shut", "closed"]]);
    expect(alive(h.rootPid)).toBe(false);
  });
});
