/**
 * node-pty may never report a PTY run's exit after a forced kill. The
 * supervisor then settles wait() on a fallback timer, but only once the root
 * is verified gone (OpenClaw settles about 4 s after SIGKILL, unconditionally).
 * Simulated through the adapter seam (`loadPty`): a PTY module whose process
 * is real (a detached child of this process, as node-pty's is) and whose
 * onExit never fires.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessFacts, ProcessSignaller } from "../../src/facts/types.js";
import type { PtyModule } from "../../src/supervisor/adapters/pty.js";
import { createProcessSupervisor, PTY_EXIT_FALLBACK_MS } from "../../src/supervisor/core/supervisor.js";
import { isAlive, killQuietly, matcher, waitFor } from "./helpers.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

const FACTS = getProcessFacts();
const NONE = FACTS.identityStrength === "none";
const NONE_NOTE = NONE ? " [skipped: the facts backend cannot verify a process is gone]" : "";

const children: ChildProcess[] = [];
afterEach(() => {
  killQuietly(children.splice(0).map((c) => c.pid));
});

/** A PTY module that starts the real command and never reports its exit. */
function exitlessPty(): PtyModule {
  return {
    spawn(file, args, o) {
      const child = spawn(file, args, { cwd: o.cwd, env: o.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
      children.push(child);
      child.stdin!.on("error", () => {});
      return {
        pid: child.pid!,
        write: (d) => void child.stdin!.write(d),
        kill: () => {
          throw new Error("the supervisor never signals through the PTY handle");
        },
        onData(listener) {
          const on = (c: Buffer) => listener(c.toString("utf8"));
          child.stdout!.on("data", on);
          return { dispose: () => void child.stdout!.off("data", on) };
        },
        onExit: () => ({ dispose: () => {} }),
      };
    },
  };
}

/** Real facts that count inspect calls per pid (the fallback's look-ups). */
function countingFacts(): { facts: ProcessFacts; looks: Map<number, number> } {
  const looks = new Map<number, number>();
  return {
    looks,
    facts: {
      backend: FACTS.backend,
      identityStrength: FACTS.identityStrength,
      snapshot: () => FACTS.snapshot(),
      inspect(pid, o) {
        looks.set(pid, (looks.get(pid) ?? 0) + 1);
        return FACTS.inspect(pid, o);
      },
      inspectMany(pids, o) {
        return inspectEach((p, oo) => this.inspect(p, oo), pids, o, 8);
      },
    },
  };
}

const base = { sessionId: "s", backendId: "t", mode: "pty" } as const;

describe("PTY wait() when node-pty never reports the exit", () => {
  it("the default fallback is OpenClaw's 4 s", () => {
    expect(PTY_EXIT_FALLBACK_MS).toBe(4000);
  });

  it.skipIf(NONE)(
    `after a forced kill, wait() settles on the fallback once the root is verified gone; a deadline keeps its reason and timedOut${NONE_NOTE}`,
    async () => {
      const fallbackMs = 400;
      const sup = createProcessSupervisor({
        graceMs: 300,
        loadPty: async () => exitlessPty(),
        ptyExitFallbackMs: fallbackMs,
      });
      const out = matcher();
      const run = await sup.spawn({ ...base, ptyCommand: "echo ready; exec sleep 30", onStdout: (c) => out.push(c) });
      await out.waitFor(/ready/);
      expect(isAlive(run.pid!)).toBe(true);
      const cancelledAt = Date.now();
      run.cancel();
      const exit = await run.wait();
      const settledAfter = Date.now() - cancelledAt;
      // the real process is gone, its exit was never reported, and the fallback waited its period
      expect(isAlive(run.pid!)).toBe(false);
      expect(exit).toMatchObject({ reason: "manual-cancel", exitCode: null, exitSignal: "SIGTERM", timedOut: false });
      expect(exit.stdout).toContain("ready");
      expect(settledAfter).toBeGreaterThanOrEqual(fallbackMs);
      expect(sup.getRecord(run.runId)).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });

      const timed = await sup.spawn({ ...base, ptyCommand: "exec sleep 30", timeoutMs: 1000 });
      expect(await timed.wait()).toMatchObject({ reason: "overall-timeout", timedOut: true });
      expect(isAlive(timed.pid!)).toBe(false);
    },
  );

  it.skipIf(NONE)(
    `a root the kill could not stop keeps wait() pending through every look-up; it settles once the root is gone${NONE_NOTE}`,
    async () => {
      const fallbackMs = 100;
      const { facts, looks } = countingFacts();
      // every identity-checked signal is denied: the tree kill stops nothing (and a PTY handle sends nothing)
      const denying: ProcessSignaller = { raceFree: true, signal: async () => "denied" };
      // containment off: cgroup.kill on the run's own cgroup would stop it without the signaller
      const sup = createProcessSupervisor({
        facts,
        signaller: denying,
        graceMs: 50,
        loadPty: async () => exitlessPty(),
        ptyExitFallbackMs: fallbackMs,
        containment: "off",
      });
      const out = matcher();
      const run = await sup.spawn({ ...base, ptyCommand: "echo ready; exec sleep 30", onStdout: (c) => out.push(c) });
      await out.waitFor(/ready/);
      let settled = false;
      void run.wait().then(() => (settled = true));
      run.cancel();
      const before = looks.get(run.pid!) ?? 0;
      // three fallback look-ups found the root alive: still pending
      await waitFor(() => (looks.get(run.pid!) ?? 0) >= before + 3, 15_000);
      expect(isAlive(run.pid!)).toBe(true);
      expect(settled).toBe(false);
      expect(sup.getRecord(run.runId)?.state).toBe("exiting");
      // the test's own cleanup of the process it started: gone now, the next look-up settles the run
      killQuietly([run.pid]);
      const exit = await run.wait();
      expect(exit).toMatchObject({ reason: "manual-cancel", exitCode: null, exitSignal: null });
    },
  );
});
