/**
 * proclease's supervisor in OpenClaw's supervisor shape, driven the way
 * OpenClaw 2026.9.6's exec tool drives it (runExecProcess: runId, scopeKey,
 * cwd, env, timeoutMs, captureOutput false, onStdout/onStderr, stdinMode,
 * assertCurrent/beforeSpawn, onCancel; a PTY as argv; activity, stdin,
 * wait, cancel), on real processes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createProcessSupervisor, type ProcessSupervisor } from "../../src/supervisor/index.js";
import {
  createOpenClawProcessSupervisor,
  execCommandLine,
  installOpenClawProcessSupervisor,
  SupervisorAdapterError,
} from "../../src/openclaw/supervisor-adapter.js";
import { isAliveSync } from "../helpers/liveness.js";

const supervisors: ProcessSupervisor[] = [];
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.shutdown();
});

function adapter() {
  const sup = createProcessSupervisor({ graceMs: 300 });
  supervisors.push(sup);
  return { sup, oc: createOpenClawProcessSupervisor(sup) };
}

async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("the supervisor in OpenClaw's shape", () => {
  it("runs an exec-tool child: output streamed, not captured, activity and exit as OpenClaw reads them", async () => {
    const { oc } = adapter();
    let out = "";
    let err = "";
    const checks: string[] = [];
    const run = await oc.spawn({
      mode: "child",
      runId: "exec-1",
      scopeKey: "agent:main:exec",
      argv: ["/bin/sh", "-c", 'printf out; printf err >&2; read line; printf "got:$line"'],
      env: { ...process.env, OPENCLAW_SHELL: "exec" },
      timeoutMs: 10_000,
      captureOutput: false,
      stdinMode: "pipe-open",
      onStdout: (c) => (out += c),
      onStderr: (c) => (err += c),
      assertCurrent: () => checks.push("assertCurrent"),
      beforeSpawn: () => checks.push("beforeSpawn"),
    });
    expect(checks).toEqual(["assertCurrent", "beforeSpawn"]);
    expect(run.runId).toBe("exec-1");
    expect(run.pid).toBeGreaterThan(1);
    expect(run.activity.resultSettled).toBe(false);
    expect(run.activity.deadlineAtMs).toBe(run.startedAtMs + 10_000);
    await until(() => out === "out");
    expect(run.activity.lastOutputAtMs).toBeGreaterThanOrEqual(run.startedAtMs);
    const written = await new Promise<Error | null | undefined>((resolve) => run.stdin!.write("hello\n", resolve));
    expect(written).toBeNull();
    run.stdin!.end();
    const exit = await run.wait();
    expect(exit).toMatchObject({
      reason: "exit",
      exitCode: 0,
      exitSignal: null,
      timedOut: false,
      noOutputTimedOut: false,
      oomScoreWrapperSelected: false,
      stdout: "",
    });
    expect(out).toBe("outgot:hello");
    expect(err).toBe("err");
    expect(run.activity.resultSettled).toBe(true);
  });

  it("cancelScope ends the scope's runs as trees; onCancel is called once with the reason; acquireScopeCleanup waits for their end", async () => {
    const { oc } = adapter();
    const cancels: string[] = [];
    const runs = await Promise.all(
      [1, 2].map((i) =>
        oc.spawn({
          mode: "child",
          runId: `scoped-${i}`,
          scopeKey: "scope:a",
          argv: ["/bin/sh", "-c", "sleep 60 & wait"],
          stdinMode: "pipe-closed",
          onCancel: (r) => cancels.push(`${i}:${r}`),
        }),
      ),
    );
    const other = await oc.spawn({
      mode: "child",
      runId: "other",
      scopeKey: "scope:b",
      argv: ["/bin/sh", "-c", "sleep 60"],
      stdinMode: "pipe-closed",
    });
    const close = oc.acquireScopeCleanup("scope:a", { processTree: "required-all" });
    await close();
    for (const r of runs) expect(isAliveSync(r.pid!)).toBe(false);
    expect(await Promise.all(runs.map((r) => r.wait().then((e) => e.reason)))).toEqual([
      "manual-cancel",
      "manual-cancel",
    ]);
    expect(cancels.sort()).toEqual(["1:manual-cancel", "2:manual-cancel"]);
    expect(isAliveSync(other.pid!)).toBe(true);
    oc.cancel("other");
    expect((await other.wait()).reason).toBe("manual-cancel");
  });

  it("a deadline ends the run (timedOut) and calls onCancel with the deadline's reason", async () => {
    const { oc } = adapter();
    const cancels: string[] = [];
    const run = await oc.spawn({
      mode: "child",
      argv: ["/bin/sh", "-c", "sleep 60"],
      timeoutMs: 200,
      stdinMode: "pipe-closed",
      onCancel: (r) => cancels.push(r),
    });
    const exit = await run.wait();
    expect(exit).toMatchObject({ reason: "overall-timeout", timedOut: true });
    expect(cancels).toEqual(["overall-timeout"]);
  });

  it("a PTY run takes OpenClaw's argv and runs exactly it (each entry single-quoted after exec)", async () => {
    const { oc } = adapter();
    let out = "";
    const tricky = `it's "quoted" $HOME \\ ${"`"}x${"`"}`;
    const run = await oc.spawn({
      mode: "pty",
      argv: ["/bin/sh", "-c", 'printf "[%s]" "$1"', "sh", tricky],
      onStdout: (c) => (out += c),
    });
    expect((await run.wait()).reason).toBe("exit");
    expect(out).toContain(`[${tricky}]`);
    expect(execCommandLine(["a b", "it's"])).toBe(`exec 'a b' 'it'\\''s'`);
  });

  it("refuses, typed, what it cannot carry, and a failing assertCurrent starts nothing", async () => {
    const { sup, oc } = adapter();
    await expect(oc.spawn({ mode: "anchored-shell", command: "echo hi" })).rejects.toBeInstanceOf(
      SupervisorAdapterError,
    );
    await expect(oc.spawn({ mode: "child", argv: ["/bin/true"], secretInput: { fd: 3 } })).rejects.toThrow(
      /secretInput is not supported/,
    );
    await expect(
      oc.spawn({
        mode: "child",
        runId: "denied",
        argv: ["/bin/true"],
        assertCurrent: () => {
          throw new Error("policy changed");
        },
      }),
    ).rejects.toThrow("policy changed");
    expect(sup.getRecord("denied")).toBeUndefined();
  });

  it("installs into OpenClaw's process-wide supervisor holder, and the undo restores what was there", () => {
    const { oc } = adapter();
    const key = Symbol.for("openclaw.processSupervisorHolder");
    const g = globalThis as unknown as Record<symbol, { current: unknown } | undefined>;
    const had = g[key];
    const undo = installOpenClawProcessSupervisor(oc);
    expect(g[key]?.current).toBe(oc);
    undo();
    expect(g[key]?.current ?? null).toBe(had?.current ?? null);
    if (had === undefined) delete g[key];
  });
});
