import { existsSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { spawnChild } from "../../src/supervisor/adapters/child.js";
import { loadNodePty } from "../../src/supervisor/adapters/pty.js";
import { killProcessTree } from "../../src/supervisor/shared/kill-tree.js";
import type { FinalizeInput } from "../../src/supervisor/run/registry.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import type { ManagedRun } from "../../src/supervisor/shared/types.js";
import { afterTimersArmedBefore, fixture, isAlive, killQuietly, matcher, waitFor } from "./helpers.js";

/** the PTY exit fallback's period where a test waits past it */
const FALLBACK_MS = 200;

// Every registry.finalize call the supervisor makes, in call order: the race
// test compares the recorded reason with the FIRST call's.
const finalizeCalls = vi.hoisted(() => [] as Array<{ runId: string; reason: string }>);
vi.mock("../../src/supervisor/run/registry.js", async (importOriginal) => {
  const mod = await importOriginal<typeof import("../../src/supervisor/run/registry.js")>();
  return {
    ...mod,
    createRunRegistry: (...args: Parameters<typeof mod.createRunRegistry>) => {
      const reg = mod.createRunRegistry(...args);
      const finalize = reg.finalize.bind(reg);
      reg.finalize = (runId: string, input: FinalizeInput) => {
        finalizeCalls.push({ runId, reason: input.reason });
        return finalize(runId, input);
      };
      return reg;
    },
  };
});

const PTY = await loadNodePty().then(
  () => true,
  () => false,
);
if (!PTY) console.log("supervisor.test: node-pty cannot be loaded here, so the PTY facts-none test is skipped");

const node = process.execPath;
const spawned = new Set<number>();
const runs: ManagedRun[] = [];

afterEach(async () => {
  for (const r of runs.splice(0)) r.cancel();
  killQuietly(spawned);
  spawned.clear();
});

/**
 * The stubborn tree in sh: the root forks a grandchild that ignores SIGTERM
 * and prints "tree <root> <grandchild>" at once. sh starts in a fraction of
 * node's time, so a deadline armed at spawn cannot fire before the tree
 * exists even on a loaded machine (the node fixture could take seconds).
 */
const SH_STUBBORN_TREE = ["sh", "-c", `sh -c 'trap "" TERM; while :; do sleep 1; done' & echo "tree $$ $!"; wait`];

/** Starts the stubborn tree under `sup` and resolves with the run and both pids once they exist. */
async function stubbornTree(
  sup: ReturnType<typeof createProcessSupervisor>,
  extra: Record<string, unknown> = {},
  argv: string[] = [node, fixture("stubborn-tree.mjs")],
) {
  const out = matcher();
  const run = await sup.spawn({
    mode: "child",
    sessionId: "s1",
    backendId: "test",
    argv,
    onStdout: (c) => out.push(c),
    ...extra,
  });
  runs.push(run);
  if (run.pid) spawned.add(run.pid);
  const m = await out.waitFor(/tree (\d+) (\d+)/);
  const child = Number(m[1]);
  const grandchild = Number(m[2]);
  spawned.add(grandchild);
  expect(child).toBe(run.pid);
  expect(isAlive(grandchild)).toBe(true);
  return { run, child, grandchild };
}

describe("supervisor: cancellation and deadlines kill the whole tree", () => {
  it("cancel of a child whose grandchild ignores SIGTERM leaves nothing behind", async () => {
    const sup = createProcessSupervisor({ graceMs: 400 });
    const { run, child, grandchild } = await stubbornTree(sup);
    expect(sup.getRecord(run.runId)).toMatchObject({ state: "running", pid: child, processGroupId: child });
    run.cancel();
    expect(sup.getRecord(run.runId)?.state).toBe("exiting");
    const exit = await run.wait();
    expect(exit.reason).toBe("manual-cancel");
    expect(exit.timedOut).toBe(false);
    expect(isAlive(child)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
    expect(sup.getRecord(run.runId)).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });
    expect(sup.cancel(run.runId)).toBe(false);
  });

  it("overall timeout yields its own reason and kills the tree", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const { run, child, grandchild } = await stubbornTree(
      sup,
      { timeoutMs: 1200, noOutputTimeoutMs: 0 },
      SH_STUBBORN_TREE,
    );
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "overall-timeout", timedOut: true, noOutputTimedOut: false });
    // a lower bound only: a timer never fires early, and load can only add time
    expect(exit.durationMs).toBeGreaterThanOrEqual(1100);
    expect(isAlive(child)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("no-output timeout yields its own reason, sets timedOut as OpenClaw does, and kills the tree", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const { run, child, grandchild } = await stubbornTree(
      sup,
      { timeoutMs: 20_000, noOutputTimeoutMs: 700 },
      SH_STUBBORN_TREE,
    );
    const exit = await run.wait();
    // timedOut is true for both deadlines (callers branch on it); reason and noOutputTimedOut tell which
    expect(exit).toMatchObject({ reason: "no-output-timeout", timedOut: true, noOutputTimedOut: true });
    expect(isAlive(child)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("the no-output timer resets on every chunk, and 0 disables it", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    // prints every 50 ms (sh: no startup cost worth a deadline): a 2 s quiet deadline never fires, the overall one does
    const chatty = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sh", "-c", "i=0; while :; do echo line $i; i=$((i+1)); sleep 0.05; done"],
      timeoutMs: 4000,
      noOutputTimeoutMs: 2000,
    });
    runs.push(chatty);
    const silent = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sleep", "0.6"],
      noOutputTimeoutMs: 0,
    });
    runs.push(silent);
    const [a, b] = await Promise.all([chatty.wait(), silent.wait()]);
    expect(a.reason).toBe("overall-timeout");
    expect(a.stdout).toMatch(/line 10\n/);
    expect(b).toMatchObject({ reason: "exit", exitCode: 0 });
  });

  it("a forced cancel outranks a deadline that already started the kill", async () => {
    const sup = createProcessSupervisor({ graceMs: 400 });
    const { run } = await stubbornTree(sup, { timeoutMs: 1500 }, SH_STUBBORN_TREE);
    await waitFor(() => sup.getRecord(run.runId)?.state === "exiting");
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
  });
});

describe("supervisor: exits, reasons and finalize", () => {
  it("reports exit codes and signals with their reasons", async () => {
    const sup = createProcessSupervisor();
    const ok = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sh", "-c", "printf out; printf err >&2; exit 3"],
    });
    expect(await ok.wait()).toMatchObject({
      reason: "exit",
      exitCode: 3,
      exitSignal: null,
      stdout: "out",
      stderr: "err",
    });
    const sig = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "kill -USR1 $$"] });
    expect(await sig.wait()).toMatchObject({ reason: "signal", exitCode: null, exitSignal: "SIGUSR1" });
  });

  it("a program that cannot start ends as spawn-error with the OS message", async () => {
    const sup = createProcessSupervisor();
    const run = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["/nonexistent/proclease-nope"],
    });
    const exit = await run.wait();
    expect(exit.reason).toBe("spawn-error");
    expect(exit.stderr).toMatch(/ENOENT/);
    expect(sup.getRecord(run.runId)).toMatchObject({ state: "exited", terminationReason: "spawn-error" });
  });

  it("exit/cancel race, both orders shown: a cancel before the exit wins, one after the exit is observed changes nothing", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    // cancel first: the run is still running when the kill is requested
    const first = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sleep", "30"] });
    runs.push(first);
    first.cancel();
    sup.cancel(first.runId, "overall-timeout"); // weaker, during the kill: no relabel
    expect(await first.wait()).toMatchObject({ reason: "manual-cancel", exitSignal: "SIGTERM" });
    // exit first: the root is reaped (its /proc entry gone, so Node has seen the
    // exit) while a background holder keeps the output open, so wait() is still pending
    const late = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sh", "-c", "sleep 0.4 & exit 0"],
    });
    runs.push(late);
    await waitFor(() => !existsSync(`/proc/${late.pid}`));
    expect(sup.getRecord(late.runId)?.state).not.toBe("exited");
    late.cancel();
    expect(await late.wait()).toMatchObject({ reason: "exit", exitCode: 0 });
    for (const run of [first, late]) {
      const calls = finalizeCalls.filter((c) => c.runId === run.runId);
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(sup.getRecord(run.runId)?.terminationReason).toBe(calls[0]!.reason);
    }
  });

  it("under a real exit/cancel race the recorded reason is the first finalize call's, everywhere", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    for (let i = 0; i < 12; i++) {
      const run = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "exit 0"] });
      // cancel lands before, during or after the exit depending on scheduling
      const delays = [0, 1, 2, 5];
      setTimeout(() => run.cancel(), delays[i % delays.length]);
      setTimeout(() => sup.cancel(run.runId, "overall-timeout"), delays[(i + 1) % delays.length]);
      const exit = await run.wait();
      expect(await run.wait()).toBe(exit);
      const calls = finalizeCalls.filter((c) => c.runId === run.runId);
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(exit.reason).toBe(calls[0]!.reason);
      expect(sup.getRecord(run.runId)?.terminationReason).toBe(calls[0]!.reason);
      run.cancel(); // after the fact: no effect
      expect(sup.getRecord(run.runId)?.terminationReason).toBe(exit.reason);
    }
  });

  it("a no-output timeout larger than the overall one is clamped below it, so its own reason fires first", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    const run = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["sleep", "30"],
      timeoutMs: 2500,
      noOutputTimeoutMs: 60_000,
    });
    runs.push(run);
    const exit = await run.wait();
    // resolveNoOutputTimeoutMs: min(60 000, 2500 - 1000) = 1500 ms
    expect(exit).toMatchObject({ reason: "no-output-timeout", noOutputTimedOut: true, timedOut: true });
    // clamped, not dropped: not before 1500 ms (a lower bound: timers never fire early); that it
    // fired before the 2500 ms deadline is what its reason says, whatever the load
    expect(exit.durationMs).toBeGreaterThanOrEqual(1400);
  });

  it("caps captured output with a truncation marker, and can skip capture", async () => {
    const sup = createProcessSupervisor({ maxOutputChars: 1000 });
    const run = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "seq 1 5000"] });
    const exit = await run.wait();
    expect(exit.stdout).toMatch(/^\[proclease: output truncated, \d+ earlier characters dropped\]\n/);
    expect(exit.stdout.endsWith("4999\n5000\n")).toBe(true);
    const chunks: string[] = [];
    const quiet = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["echo", "hi"],
      captureOutput: false,
      onStdout: (c) => chunks.push(c),
    });
    expect((await quiet.wait()).stdout).toBe("");
    expect(chunks.join("")).toBe("hi\n");
  });

  it("pipe-open stdin stays writable; input is written before close", async () => {
    const sup = createProcessSupervisor();
    const cat = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: ["cat"],
      stdinMode: "pipe-open",
    });
    cat.stdin!.write("one\n");
    cat.stdin!.write("two\n");
    cat.stdin!.end();
    expect((await cat.wait()).stdout).toBe("one\ntwo\n");
    const fed = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["cat"], input: "fed\n" });
    expect((await fed.wait()).stdout).toBe("fed\n");
  });

  it("cancelScope and replaceExistingScope stop the scope's live runs only", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const spawnSleep = (scopeKey: string, replace = false) =>
      sup.spawn({
        mode: "child",
        sessionId: "s",
        backendId: "t",
        argv: ["sleep", "30"],
        scopeKey,
        replaceExistingScope: replace,
      });
    const a1 = await spawnSleep("A");
    const b1 = await spawnSleep("B");
    runs.push(a1, b1);
    const a2 = await spawnSleep("A", true);
    runs.push(a2);
    expect((await a1.wait()).reason).toBe("manual-cancel");
    expect(sup.getRecord(b1.runId)?.state).toBe("running");
    expect(sup.cancelScope("A")).toBe(1);
    expect((await a2.wait()).reason).toBe("manual-cancel");
    expect(sup.getRecord(b1.runId)?.state).toBe("running");
  });

  it("a run's own cancel reaches that run only: once it has ended, a new run with its runId is not touched", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    const first = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", runId: "reused", argv: ["true"] });
    expect((await first.wait()).reason).toBe("exit");
    const second = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      runId: "reused",
      argv: ["sleep", "30"],
    });
    runs.push(second);
    spawned.add(second.pid!);
    first.cancel();
    expect(sup.getRecord("reused")).toMatchObject({ state: "running" });
    expect(sup.getRecord("reused")?.terminationReason).toBeUndefined();
    expect(isAlive(second.pid!)).toBe(true);
    second.cancel();
    expect((await second.wait()).reason).toBe("manual-cancel");
  });

  it("rejects malformed input with a TypeError naming the field", async () => {
    const sup = createProcessSupervisor();
    await expect(sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: [] })).rejects.toThrow(/argv/);
    await expect(
      sup.spawn({ mode: "nope", sessionId: "s", backendId: "t" } as unknown as Parameters<typeof sup.spawn>[0]),
    ).rejects.toThrow(TypeError);
  });
});

describe("supervisor: facts that cannot verify (backend none)", () => {
  it("the tree kill sends nothing; the one signal not derived from facts goes to the unreaped child through the supervisor's own handle (the handle is the identity)", async () => {
    const facts = getProcessFacts({ backend: "none" });
    const sup = createProcessSupervisor({ facts, graceMs: 300 });
    const run = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sleep", "30"] });
    runs.push(run);
    spawned.add(run.pid!);
    expect(await killProcessTree(run.pid!, { facts })).toMatchObject({ outcome: "unknown" });
    expect(isAlive(run.pid!)).toBe(true);
    run.cancel();
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "manual-cancel", exitSignal: "SIGTERM" });
    expect(isAlive(run.pid!)).toBe(false);
  });

  it("the child handle sends nothing once Node has reported the exit (reaped: the pid may be reused)", async () => {
    const proc = spawnChild({ mode: "child", sessionId: "s", backendId: "t", argv: ["true"] }, process.env);
    await proc.wait();
    expect(proc.signalRoot("SIGTERM")).toBe("exited");
    proc.dispose();
  });

  it.skipIf(!PTY)(
    `a PTY handle cannot prove its pid unreaped (node-pty reaps on its own thread): with facts none, cancel sends nothing${PTY ? "" : " [skipped: node-pty not loadable]"}`,
    async () => {
      const facts = getProcessFacts({ backend: "none" });
      const sup = createProcessSupervisor({ facts, graceMs: 100, ptyExitFallbackMs: FALLBACK_MS });
      const run = await sup.spawn({ mode: "pty", sessionId: "s", backendId: "t", ptyCommand: "exec sleep 30" });
      runs.push(run);
      spawned.add(run.pid!);
      run.cancel();
      expect(sup.getRecord(run.runId)?.state).toBe("exiting");
      // past the grace and the exit fallback's first look by the order of timers, not a guess at a
      // pause: any timer the supervisor armed for them fires before ones armed later with as long a delay
      await afterTimersArmedBefore(100 + FALLBACK_MS);
      expect(isAlive(run.pid!)).toBe(true);
      expect(sup.getRecord(run.runId)?.state).toBe("exiting");
      killQuietly([run.pid]); // the test's own cleanup of the process it started
      expect((await run.wait()).reason).toBe("manual-cancel");
    },
  );
});
