import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { killProcessTree } from "../../src/supervisor/kill-tree.js";
import { createProcessSupervisor } from "../../src/supervisor/supervisor.js";
import type { ManagedRun } from "../../src/supervisor/types.js";
import { fixture, isAlive, killQuietly, matcher, waitFor } from "./helpers.js";

const node = process.execPath;
const spawned = new Set<number>();
const runs: ManagedRun[] = [];

afterEach(async () => {
  for (const r of runs.splice(0)) r.cancel();
  killQuietly(spawned);
  spawned.clear();
});

/** Starts the stubborn tree under `sup` and resolves with the run and both pids once they exist. */
async function stubbornTree(sup: ReturnType<typeof createProcessSupervisor>, extra: Record<string, unknown> = {}) {
  const out = matcher();
  const run = await sup.spawn({
    mode: "child",
    sessionId: "s1",
    backendId: "test",
    argv: [node, fixture("stubborn-tree.mjs")],
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
    const { run, child, grandchild } = await stubbornTree(sup, { timeoutMs: 1200, noOutputTimeoutMs: 0 });
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "overall-timeout", timedOut: true, noOutputTimedOut: false });
    expect(exit.durationMs).toBeGreaterThanOrEqual(1100);
    expect(isAlive(child)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("no-output timeout yields its own reason and kills the tree", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    const { run, child, grandchild } = await stubbornTree(sup, { timeoutMs: 20_000, noOutputTimeoutMs: 700 });
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "no-output-timeout", timedOut: false, noOutputTimedOut: true });
    expect(isAlive(child)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("the no-output timer resets on every chunk, and 0 disables it", async () => {
    const sup = createProcessSupervisor({ graceMs: 300 });
    // prints every 50 ms: a 400 ms quiet deadline never fires, the overall one does
    const chatty = await sup.spawn({
      mode: "child",
      sessionId: "s",
      backendId: "t",
      argv: [node, fixture("chatty.mjs"), "50"],
      timeoutMs: 1500,
      noOutputTimeoutMs: 400,
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
    const { run } = await stubbornTree(sup, { timeoutMs: 1500 });
    await waitFor(() => sup.getRecord(run.runId)?.state === "exiting");
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
  });
});

describe("supervisor: exits, reasons and finalize", () => {
  it("reports exit codes and signals with their reasons", async () => {
    const sup = createProcessSupervisor();
    const ok = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "printf out; printf err >&2; exit 3"] });
    expect(await ok.wait()).toMatchObject({ reason: "exit", exitCode: 3, exitSignal: null, stdout: "out", stderr: "err" });
    const sig = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "kill -USR1 $$"] });
    expect(await sig.wait()).toMatchObject({ reason: "signal", exitCode: null, exitSignal: "SIGUSR1" });
  });

  it("a program that cannot start ends as spawn-error with the OS message", async () => {
    const sup = createProcessSupervisor();
    const run = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["/nonexistent/proclease-nope"] });
    const exit = await run.wait();
    expect(exit.reason).toBe("spawn-error");
    expect(exit.stderr).toMatch(/ENOENT/);
    expect(sup.getRecord(run.runId)).toMatchObject({ state: "exited", terminationReason: "spawn-error" });
  });

  it("finalize is idempotent under an exit/cancel race: one reason, everywhere", async () => {
    const sup = createProcessSupervisor({ graceMs: 200 });
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const run = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sh", "-c", "exit 0"] });
      // cancel lands before, during or after the exit depending on scheduling
      const delays = [0, 1, 2, 5];
      setTimeout(() => run.cancel(), delays[i % delays.length]);
      setTimeout(() => sup.cancel(run.runId, "overall-timeout"), delays[(i + 1) % delays.length]);
      const exit = await run.wait();
      const again = await run.wait();
      expect(again).toBe(exit);
      expect(["exit", "manual-cancel", "overall-timeout"]).toContain(exit.reason);
      expect(sup.getRecord(run.runId)?.terminationReason).toBe(exit.reason);
      seen.add(exit.reason);
      run.cancel(); // after the fact: no effect
      expect(sup.getRecord(run.runId)?.terminationReason).toBe(exit.reason);
    }
    expect(seen.size).toBeGreaterThanOrEqual(1);
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
    const cat = await sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["cat"], stdinMode: "pipe-open" });
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
      sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: ["sleep", "30"], scopeKey, replaceExistingScope: replace });
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

  it("rejects malformed input with a TypeError naming the field", async () => {
    const sup = createProcessSupervisor();
    await expect(sup.spawn({ mode: "child", sessionId: "s", backendId: "t", argv: [] })).rejects.toThrow(/argv/);
    await expect(
      sup.spawn({ mode: "nope", sessionId: "s", backendId: "t" } as unknown as Parameters<typeof sup.spawn>[0]),
    ).rejects.toThrow(TypeError);
  });
});

describe("supervisor: facts that cannot verify (backend none)", () => {
  it("the tree kill sends nothing; cancel falls back to the root through the supervisor's own handle", async () => {
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
});
