/**
 * A run is cancellable from the moment spawn() is called: while it awaits its
 * lease write or the PTY loader it is live in state "starting", so cancel,
 * cancelScope, cancelAll and replaceExistingScope reach it, and a stop request
 * shows on its record at once (state "exiting", its terminationReason).
 * Cancelled before its process exists, it never gets one (and its lease
 * settles as never started); a startup that fails rejects spawn with its
 * error and records spawn-error, cancelled first or not; cancelled once it
 * exists, it is killed like any other run. Of many same-scope replacements,
 * exactly the newest survives, also when startups fail in between.
 */
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessFacts } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { SUPERVISOR_SESSION_PREFIX } from "../../src/supervisor/hold/durability.js";
import { loadNodePty, PtyUnavailableError, type PtyLoader, type PtyModule } from "../../src/supervisor/adapters/pty.js";
import { createProcessSupervisor, type ProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import type { ManagedRun, RunExit } from "../../src/supervisor/shared/types.js";
import { gate, instanceCarriers, isAlive, killQuietly, pgidOf, waitFor } from "./helpers.js";
import { inspectEach } from "../../src/facts/inspect-many.js";
import { removeStateDir } from "../helpers/state-dir-cleanup.js";

const FACTS = getProcessFacts();
const PTY = await loadNodePty().then(
  () => true,
  () => false,
);
const PTY_NOTE = PTY ? "" : " [skipped: node-pty cannot be loaded here]";
if (!PTY) console.log(`startup.test:${PTY_NOTE}`);

const dirs: string[] = [];
const pids = new Set<number>();
const sups: ProcessSupervisor[] = [];
afterEach(async () => {
  // the test's own supervisors end whatever they still run, then the last-resort kill of pids it saw
  await Promise.all(sups.splice(0).map((s) => s.shutdown()));
  killQuietly(pids);
  pids.clear();
});
afterAll(async () => {
  for (const d of dirs) removeStateDir(d);
});

async function stateDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "proclease-startup-"));
  dirs.push(d);
  return d;
}

let instances = 0;
function supervisor(opts: Parameters<typeof createProcessSupervisor>[0] = {}) {
  const gatewayInstanceId = `startup-test-${process.pid}-${++instances}`;
  const sup = createProcessSupervisor({ graceMs: 300, gatewayInstanceId, ...opts });
  sups.push(sup);
  return { sup, gatewayInstanceId };
}

/** a small real tree: sh with a sleeping child */
const TREE = ["sh", "-c", "sleep 30 & wait"];
const base = { sessionId: "s", backendId: "t" } as const;

async function leaseStates(dir: string, instanceId: string): Promise<Map<string, string>> {
  const store = await openLeaseStore(dir);
  const { leases } = await store.list({ gatewayInstanceId: instanceId });
  return new Map(leases.map((l) => [l.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length), l.state]));
}

describe("cancel while a run is starting", () => {
  it("a leased run cancelled while its lease write is in flight never gets a process; it ends as manual-cancel and its lease settles as never started", async () => {
    const dir = await stateDir();
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir });
    const pending = sup.spawn({ ...base, mode: "child", runId: "early", background: true, argv: TREE });
    // spawn() has not resolved, and the lease write has not even started to finish: the run is starting
    expect(sup.getRecord("early")).toMatchObject({ state: "starting" });
    expect(sup.cancel("early")).toBe(true);
    expect(sup.getRecord("early")?.state).toBe("exiting");
    const run = await pending;
    expect(run.pid).toBeUndefined();
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "manual-cancel", exitCode: null, exitSignal: null, timedOut: false });
    expect(sup.getRecord("early")).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });
    expect(sup.cancel("early")).toBe(false);
    // the lease was written, then settled by the existing never-started path
    expect((await leaseStates(dir, gatewayInstanceId)).get("early")).toBe("lost");
    expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);
  });

  it("cancelScope and cancelAll reach starting runs too, and a deadline reason given to cancel is kept", async () => {
    const dir = await stateDir();
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir });
    const a = sup.spawn({ ...base, mode: "child", runId: "a", scopeKey: "S", background: true, argv: TREE });
    const b = sup.spawn({ ...base, mode: "child", runId: "b", scopeKey: "T", background: true, argv: TREE });
    const c = sup.spawn({ ...base, mode: "child", runId: "c", background: true, argv: TREE });
    expect(sup.listByScope("S").map((r) => [r.runId, r.state])).toEqual([["a", "starting"]]);
    expect(sup.cancelScope("S")).toBe(1);
    expect(sup.cancel("c", "overall-timeout")).toBe(true);
    // every live run, starting ones included: a (already cancelled), b, and c (a stronger reason relabels it)
    expect(sup.cancelAll()).toBe(3);
    const [ea, eb, ec] = await Promise.all([a, b, c].map(async (p) => (await p).wait()));
    expect(ea!.reason).toBe("manual-cancel");
    expect(eb!.reason).toBe("manual-cancel");
    expect(ec!.reason).toBe("manual-cancel");
    const states = await leaseStates(dir, gatewayInstanceId);
    expect([states.get("a"), states.get("b"), states.get("c")]).toEqual(["lost", "lost", "lost"]);
    expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);

    const d = sup.spawn({ ...base, mode: "child", runId: "d", background: true, argv: TREE });
    sup.cancel("d", "overall-timeout");
    expect(await (await d).wait()).toMatchObject({
      reason: "overall-timeout",
      timedOut: true,
      noOutputTimedOut: false,
    });
  });

  it.skipIf(!PTY)(
    `a PTY run cancelled while the PTY loader is in flight never reaches node-pty's spawn${PTY_NOTE}`,
    async () => {
      const real = await loadNodePty();
      const spawned: number[] = [];
      const counting: PtyModule = {
        spawn(file, args, o) {
          const p = real.spawn(file, args, o);
          spawned.push(p.pid);
          pids.add(p.pid);
          return p;
        },
      };
      const g = gate();
      const loadPty: PtyLoader = async () => {
        await g.gate;
        return counting;
      };
      const { sup } = supervisor({ loadPty });
      const pending = sup.spawn({ ...base, mode: "pty", runId: "p", ptyCommand: "sleep 30" });
      await waitFor(() => sup.getRecord("p")?.state === "starting");
      expect(sup.cancel("p")).toBe(true);
      g.open();
      const run = await pending;
      expect(run.pid).toBeUndefined();
      expect((await run.wait()).reason).toBe("manual-cancel");
      expect(spawned).toEqual([]);
      // the same loader, not cancelled: the real PTY starts (the seam is live), and a cancel then kills it
      const live = await sup.spawn({ ...base, mode: "pty", runId: "p2", ptyCommand: "sleep 30" });
      expect(spawned).toEqual([live.pid]);
      expect(isAlive(live.pid!)).toBe(true);
      live.cancel();
      expect((await live.wait()).reason).toBe("manual-cancel");
      expect(isAlive(live.pid!)).toBe(false);
    },
  );

  it.skipIf(FACTS.identityStrength === "none")(
    "a cancel that lands once the process exists but before spawn() returned kills it as soon as its lease names it",
    async () => {
      const dir = await stateDir();
      // real facts; inspect of one pid is held until the test opens the gate (the lease attach reads it)
      const g = gate();
      let holdPid = 0;
      const held: ProcessFacts = {
        backend: FACTS.backend,
        identityStrength: FACTS.identityStrength,
        snapshot: () => FACTS.snapshot(),
        async inspect(pid, o) {
          if (holdPid === 0 || pid === holdPid) {
            holdPid = pid;
            await g.gate;
          }
          return FACTS.inspect(pid, o);
        },
        inspectMany(pids, o) {
          return inspectEach((p, oo) => this.inspect(p, oo), pids, o, 8);
        },
      };
      const { sup, gatewayInstanceId } = supervisor({ stateDir: dir, facts: held });
      let resolved = false;
      const pending = sup.spawn({ ...base, mode: "child", runId: "mid", background: true, argv: TREE }).then((r) => {
        resolved = true;
        return r;
      });
      await waitFor(() => sup.getRecord("mid")?.state === "running");
      const pid = sup.getRecord("mid")!.pid!;
      pids.add(pid);
      expect(isAlive(pid)).toBe(true);
      expect(resolved).toBe(false);
      expect(sup.cancel("mid")).toBe(true);
      g.open();
      const run = await pending;
      expect(run.pid).toBe(pid);
      expect((await run.wait()).reason).toBe("manual-cancel");
      expect(isAlive(pid)).toBe(false);
      expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);
      expect((await leaseStates(dir, gatewayInstanceId)).get("mid")).toBe("closed");
    },
  );

  it("a startup failure that no cancel preceded still rejects (spawn-error) and its lease settles as never started", async () => {
    const dir = await stateDir();
    const { sup, gatewayInstanceId } = supervisor({
      stateDir: dir,
      loadPty: () => Promise.reject(new Error("no pty in this test")),
    });
    const err = await sup
      .spawn({ ...base, mode: "pty", runId: "nopty", background: true, ptyCommand: "sleep 30" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PtyUnavailableError);
    expect(sup.getRecord("nopty")).toMatchObject({ state: "exited", terminationReason: "spawn-error" });
    expect((await leaseStates(dir, gatewayInstanceId)).get("nopty")).toBe("lost");
  });
});

describe("the starting window, as OpenClaw's own tests check it", () => {
  it("a run asked to stop while starting shows the reason on its record at once, state exiting; a stronger reason relabels it, a weaker one does not; a running run's record says it too", async () => {
    const dir = await stateDir();
    const { sup } = supervisor({ stateDir: dir });
    const pending = sup.spawn({ ...base, mode: "child", runId: "w", background: true, argv: TREE });
    expect(sup.getRecord("w")).toMatchObject({ state: "starting" });
    expect(sup.getRecord("w")?.terminationReason).toBeUndefined();
    expect(sup.cancel("w", "overall-timeout")).toBe(true);
    expect(sup.getRecord("w")).toMatchObject({ state: "exiting", terminationReason: "overall-timeout" });
    sup.cancel("w");
    expect(sup.getRecord("w")).toMatchObject({ state: "exiting", terminationReason: "manual-cancel" });
    sup.cancel("w", "no-output-timeout");
    expect(sup.getRecord("w")).toMatchObject({ state: "exiting", terminationReason: "manual-cancel" });
    const run = await pending;
    expect(run.pid).toBeUndefined();
    expect(await run.wait()).toMatchObject({ reason: "manual-cancel", timedOut: false });
    expect(sup.getRecord("w")).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });

    const running = await sup.spawn({ ...base, mode: "child", runId: "w2", argv: TREE });
    pids.add(running.pid!);
    expect(sup.getRecord("w2")?.terminationReason).toBeUndefined();
    running.cancel("overall-timeout");
    expect(sup.getRecord("w2")).toMatchObject({ state: "exiting", terminationReason: "overall-timeout" });
    sup.cancel("w2");
    expect(sup.getRecord("w2")).toMatchObject({ state: "exiting", terminationReason: "manual-cancel" });
    expect((await running.wait()).reason).toBe("manual-cancel");
    expect(sup.getRecord("w2")).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });
  });

  it.skipIf(!PTY)(
    `a stop request that lands in the turn of the spawn itself (a microtask the spawn queued) kills the run${PTY_NOTE}`,
    async () => {
      const real = await loadNodePty();
      let sup: ProcessSupervisor | undefined;
      const cancelling: PtyModule = {
        spawn(file, args, o) {
          const p = real.spawn(file, args, o);
          pids.add(p.pid);
          queueMicrotask(() => sup?.cancel("same-turn"));
          return p;
        },
      };
      sup = supervisor({ loadPty: async () => cancelling }).sup;
      const run = await sup.spawn({ ...base, mode: "pty", runId: "same-turn", ptyCommand: "sleep 30" });
      expect(run.pid).toBeDefined();
      await waitFor(() => !isAlive(run.pid!), 10_000);
      expect((await run.wait()).reason).toBe("manual-cancel");
    },
  );

  it("a startup that fails (the PTY module cannot load) rejects spawn with that error and records spawn-error, though a same-scope replacement had already asked it to stop", async () => {
    const dir = await stateDir();
    const g = gate();
    const cause = new Error("no pty in this test");
    let loading = false;
    const loadPty: PtyLoader = async () => {
      loading = true;
      await g.gate;
      throw cause;
    };
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir, loadPty });
    const failing = sup.spawn({
      ...base,
      mode: "pty",
      runId: "old",
      scopeKey: "S",
      background: true,
      ptyCommand: "sleep 30",
    });
    failing.catch(() => {}); // inspected below
    await waitFor(() => loading);
    const next = sup.spawn({
      ...base,
      mode: "child",
      runId: "new",
      scopeKey: "S",
      replaceExistingScope: true,
      background: true,
      argv: TREE,
    });
    try {
      expect(sup.getRecord("old")).toMatchObject({ state: "exiting", terminationReason: "manual-cancel" });
    } finally {
      g.open();
    }
    const err = await failing.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PtyUnavailableError);
    expect((err as PtyUnavailableError).cause).toBe(cause);
    expect(sup.getRecord("old")).toMatchObject({ state: "exited", terminationReason: "spawn-error" });
    expect((await leaseStates(dir, gatewayInstanceId)).get("old")).toBe("lost");
    // the replacement is untouched by the failure
    const run = await next;
    pids.add(run.pid!);
    expect(sup.getRecord("new")?.state).toBe("running");
    expect(isAlive(run.pid!)).toBe(true);
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
  });
});

interface Replacement {
  runId: string;
  promise: Promise<ManagedRun>;
}

/**
 * Fires `n` same-scope replacements of leased background runs, staggered so
 * that earlier ones are replaced at every stage: most within the same tick
 * (their lease write in flight), some once their process exists, some after
 * spawn() returned. `kindOf(i)` picks each run's program.
 */
async function replaceMany(
  sup: ProcessSupervisor,
  n: number,
  kindOf: (i: number) => "tree" | "no-program" | "pty",
): Promise<Replacement[]> {
  const out: Replacement[] = [];
  for (let i = 0; i < n; i++) {
    const runId = `r${i}`;
    const kind = kindOf(i);
    const common = { ...base, runId, scopeKey: "S", replaceExistingScope: true, background: true } as const;
    const promise =
      kind === "pty"
        ? sup.spawn({ ...common, mode: "pty", ptyCommand: "sleep 30" })
        : sup.spawn({
            ...common,
            mode: "child",
            argv: kind === "tree" ? TREE : ["/nonexistent/proclease-startup-test"],
          });
    promise.catch(() => {}); // inspected below
    out.push({ runId, promise });
    if (i === 20 || i === 40) {
      // let this one's process exist (replaced while attaching or running), then continue
      await waitFor(() => sup.getRecord(runId)?.pid !== undefined || sup.getRecord(runId)?.state === "exited", 20_000);
    } else if (i === 30 || i === 50) {
      await promise.catch(() => {}); // replaced after spawn() returned
    } else if (i % 7 === 0) {
      await new Promise((r) => setImmediate(r));
    }
  }
  return out;
}

type Settled = { runId: string; run?: ManagedRun; error?: unknown; exit?: RunExit };

async function settle(reps: Replacement[], skip: string): Promise<Settled[]> {
  return Promise.all(
    reps.map(async ({ runId, promise }) => {
      try {
        const run = await promise;
        if (run.pid) pids.add(run.pid);
        return runId === skip ? { runId, run } : { runId, run, exit: await run.wait() };
      } catch (error) {
        return { runId, error };
      }
    }),
  );
}

describe("replaceExistingScope: exactly the newest survives", () => {
  it("64 concurrent same-scope replacements of leased background runs: the newest runs, the 63 others end manual-cancel, nothing else is alive, every lease settles", async () => {
    const dir = await stateDir();
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir });
    const reps = await replaceMany(sup, 64, () => "tree");
    const results = await settle(reps, "r63");
    const newest = results.find((r) => r.runId === "r63")!;
    expect(newest.error).toBeUndefined();
    expect(sup.getRecord("r63")?.state).toBe("running");
    expect(isAlive(newest.run!.pid!)).toBe(true);

    const others = results.filter((r) => r.runId !== "r63");
    expect(others.map((r) => r.exit?.reason)).toEqual(Array(63).fill("manual-cancel"));
    // both paths were exercised: runs that never got a process, and runs killed after it existed
    const started = others.filter((r) => r.run?.pid !== undefined);
    expect(started.length).toBeGreaterThan(0);
    expect(others.length - started.length).toBeGreaterThan(0);
    for (const r of started) expect(isAlive(r.run!.pid!)).toBe(false);

    // only the newest run's tree (its root leads the group) carries this supervisor's instance id
    const carriers = await instanceCarriers(gatewayInstanceId);
    expect(carriers).toContain(newest.run!.pid!);
    for (const pid of carriers) expect(pgidOf(pid)).toBe(newest.run!.pid!);

    const states = await leaseStates(dir, gatewayInstanceId);
    for (const r of others) expect(["closed", "lost"]).toContain(states.get(r.runId));
    for (const r of started) expect(states.get(r.runId)).toBe("closed");
    expect(states.get("r63")).toBe("open");
    expect(
      sup
        .listByScope("S")
        .filter((r) => r.state !== "exited")
        .map((r) => r.runId),
    ).toEqual(["r63"]);

    newest.run!.cancel();
    expect((await newest.run!.wait()).reason).toBe("manual-cancel");
    expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);
    expect((await leaseStates(dir, gatewayInstanceId)).get("r63")).toBe("closed");
  }, 180_000);

  it("interleaved startup failures (PTY loader errors, a program that does not exist) neither revive an earlier run nor stop the newest", async () => {
    const dir = await stateDir();
    const failingLoader: PtyLoader = () =>
      new Promise((_, reject) => setTimeout(() => reject(new Error("no pty here")), 2));
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir, loadPty: failingLoader });
    // r20 (no such program) and r30 (PTY loader error) are each the newest when they fail: replaceMany
    // waits for both, so those failures surely land between replacements; other PTY runs fail or are cancelled first
    const kind = (i: number) =>
      i === 63 ? "tree" : i % 4 === 1 || i === 30 ? "pty" : i % 9 === 2 ? "no-program" : "tree";
    const reps = await replaceMany(sup, 64, kind);
    const results = await settle(reps, "r63");
    const newest = results.find((r) => r.runId === "r63")!;
    expect(sup.getRecord("r63")?.state).toBe("running");
    expect(isAlive(newest.run!.pid!)).toBe(true);
    expect(results.find((r) => r.runId === "r20")!.exit?.reason).toBe("spawn-error");
    expect(results.find((r) => r.runId === "r30")!.error).toBeInstanceOf(PtyUnavailableError);

    for (const r of results.filter((x) => x.runId !== "r63")) {
      if (r.error !== undefined) {
        // a startup that failed, whether or not a replacement had asked it to stop first: rejected, never live
        expect(r.error).toBeInstanceOf(PtyUnavailableError);
        expect(kind(Number(r.runId.slice(1)))).toBe("pty");
      } else {
        expect(["manual-cancel", "spawn-error"]).toContain(r.exit!.reason);
        if (r.run!.pid !== undefined) expect(isAlive(r.run!.pid)).toBe(false);
      }
      expect(sup.getRecord(r.runId)?.state).toBe("exited");
    }
    const states = await leaseStates(dir, gatewayInstanceId);
    for (const r of results) if (r.runId !== "r63") expect(["closed", "lost"]).toContain(states.get(r.runId));

    for (const pid of await instanceCarriers(gatewayInstanceId)) expect(pgidOf(pid)).toBe(newest.run!.pid!);
    newest.run!.cancel();
    await newest.run!.wait();
    expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);
  }, 180_000);

  it("when the newest replacement's own startup fails, none of the earlier runs comes back: the scope is empty", async () => {
    const dir = await stateDir();
    const failingLoader: PtyLoader = () =>
      new Promise((_, reject) => setTimeout(() => reject(new Error("no pty here")), 2));
    const { sup, gatewayInstanceId } = supervisor({ stateDir: dir, loadPty: failingLoader });
    const reps = await replaceMany(sup, 12, (i) => (i === 11 ? "pty" : "tree"));
    const results = await settle(reps, "");
    expect(results.find((r) => r.runId === "r11")!.error).toBeInstanceOf(PtyUnavailableError);
    for (const r of results.filter((x) => x.runId !== "r11")) expect(r.exit?.reason).toBe("manual-cancel");
    expect(sup.listByScope("S").every((r) => r.state === "exited")).toBe(true);
    expect(await instanceCarriers(gatewayInstanceId)).toEqual([]);
  }, 60_000);
});
