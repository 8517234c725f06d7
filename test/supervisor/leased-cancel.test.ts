/**
 * Cancel of a LEASED background run reaps through the run's lease: the
 * verified tree includes the processes that carry the run's markers outside
 * the parent links (a double-forked `setsid` escapee that ignores SIGTERM),
 * so "cancel leaves nothing" holds, and the lease closes only when nothing
 * may still run; an escapee that cannot be killed keeps it closing and
 * reconcileOrphans retries it. And every tree kill of a run's root is bound
 * to the start time read at spawn: facts that report another start time for
 * that pid, or a start time that could not be read, get no tree kill at all.
 */
import { readFileSync } from "node:fs";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { createSignaller } from "../../src/facts/signal.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller } from "../../src/facts/types.js";
import { openLeaseStore } from "../../src/ownership/leases/lease-store.js";
import { LEASE_ENV_KEY } from "../../src/ownership/leases/types.js";
import { createProcessSupervisor } from "../../src/supervisor/core/supervisor.js";
import { fixture, isAlive, killQuietly, matcher, recordingSignaller, waitFor } from "./helpers.js";
import { inspectEach } from "../../src/facts/inspect-many.js";
import { removeStateDir } from "../helpers/state-dir-cleanup.js";

const FACTS = getProcessFacts();
const NO_ENV = FACTS.backend === "ps" || FACTS.backend === "none";
const NO_ENV_NOTE = NO_ENV
  ? ` [skipped: the ${FACTS.backend} backend cannot read environments, so marker escapees cannot be found]`
  : "";
if (NO_ENV) console.log(`leased-cancel.test:${NO_ENV_NOTE}`);

const pids = new Set<number>();
const dirs: string[] = [];
afterEach(() => {
  killQuietly(pids);
  pids.clear();
});
afterAll(async () => {
  for (const d of dirs) removeStateDir(d);
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "proclease-leased-cancel-"));
  dirs.push(d);
  return d;
}

/** pids whose environment carries `leaseId` (this test's own lease ids only) */
async function carriers(leaseId: string): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = await readFile(`/proc/${name}/environ`, "latin1");
      if (env.split("\0").includes(`${LEASE_ENV_KEY}=${leaseId}`) && isAlive(Number(name))) out.push(Number(name));
    } catch {
      // gone or unreadable
    }
  }
  return out;
}

/**
 * A node root that double-forks a `setsid` escapee ignoring SIGTERM (it
 * inherits the run's markers, but no parent link, group or session ties it
 * to the root any more), writes its pid to `pidFile`, and idles.
 */
function escapingRoot(pidFile: string): string[] {
  const inner = `echo $$ > ${pidFile}; trap "" TERM; exec sleep 30`;
  const script = `
    const { spawn } = require("node:child_process");
    spawn("sh", ["-c", ${JSON.stringify(`( setsid sh -c '${inner}' </dev/null >/dev/null 2>&1 & )`)}], { stdio: "ignore" });
    setInterval(() => {}, 1000);
  `;
  return [process.execPath, "-e", script];
}

async function readEscapee(pidFile: string): Promise<number> {
  let pid = 0;
  await waitFor(() => {
    try {
      pid = Number(readFileSync(pidFile, "utf8").trim());
    } catch {
      return false;
    }
    return pid > 0 && isAlive(pid);
  }, 10_000);
  pids.add(pid);
  return pid;
}

describe("cancel of a leased run reaps through its lease", () => {
  it.skipIf(NO_ENV)(
    `a double-forked setsid escapee carrying the markers is reaped too; nothing carrying them is left and the lease is closed${NO_ENV_NOTE}`,
    async () => {
      const dir = await tempDir();
      const pidFile = join(dir, "escapee.pid");
      const sup = createProcessSupervisor({ stateDir: dir, graceMs: 300 });
      const run = await sup.spawn({
        mode: "child",
        sessionId: "s",
        backendId: "t",
        background: true,
        argv: escapingRoot(pidFile),
      });
      pids.add(run.pid!);
      const escapee = await readEscapee(pidFile);
      const leaseId = sup.getRecord(run.runId)!.leaseId!;
      // the escapee really escaped: another session, not a child of the root, but it carries the lease
      const stat = readFileSync(`/proc/${escapee}/stat`, "utf8")
        .slice(readFileSync(`/proc/${escapee}/stat`, "utf8").lastIndexOf(")") + 2)
        .split(" ");
      expect(Number(stat[1])).not.toBe(run.pid); // ppid
      expect(Number(stat[4])).not.toBe(run.pid); // sid
      expect(await carriers(leaseId)).toEqual(expect.arrayContaining([run.pid!, escapee]));

      run.cancel();
      expect((await run.wait()).reason).toBe("manual-cancel");
      await waitFor(() => !isAlive(escapee), 5000);
      expect(isAlive(run.pid!)).toBe(false);
      expect(await carriers(leaseId)).toEqual([]);
      expect((await (await openLeaseStore(dir)).get(leaseId))?.state).toBe("closed");
    },
  );

  it.skipIf(NO_ENV)(
    `an escapee that cannot be killed keeps the lease closing; reconcileOrphans retries it until it is gone${NO_ENV_NOTE}`,
    async () => {
      const dir = await tempDir();
      const pidFile = join(dir, "escapee.pid");
      const real = createSignaller(FACTS);
      let denied = 0;
      // the escapee answers "denied" (as a process we may not signal would); everything else is signalled for real
      const picky: ProcessSignaller = {
        raceFree: real.raceFree,
        signal: (pid, st, sig) => (pid === denied ? Promise.resolve("denied") : real.signal(pid, st, sig)),
      };
      // containment off: the lease's cgroup would end the escapee without the signaller (containment.test.ts covers that)
      const sup = createProcessSupervisor({ stateDir: dir, graceMs: 200, signaller: picky, containment: "off" });
      const run = await sup.spawn({
        mode: "child",
        sessionId: "s",
        backendId: "t",
        background: true,
        argv: escapingRoot(pidFile),
      });
      pids.add(run.pid!);
      const escapee = await readEscapee(pidFile);
      denied = escapee;
      const leaseId = sup.getRecord(run.runId)!.leaseId!;

      run.cancel();
      expect((await run.wait()).reason).toBe("manual-cancel");
      expect(isAlive(run.pid!)).toBe(false);
      expect(isAlive(escapee)).toBe(true);
      const store = await openLeaseStore(dir);
      expect((await store.get(leaseId))?.state).toBe("closing");

      // the run is no longer live: reconcile retries it; still denied → still closing, escapee untouched
      const first = await sup.reconcileOrphans();
      expect(first.runs).toEqual([
        expect.objectContaining({ leaseId, verdict: "gone", action: "left", state: "closing" }),
      ]);
      expect(first.runs[0]!.kill!.results.find((r) => r.pid === escapee)?.outcome).toBe("permission-denied");
      expect(isAlive(escapee)).toBe(true);

      // once it can be signalled, the next reconcile reaps the remnant (TERM ignored → KILL) and closes the lease
      denied = 0;
      const second = await sup.reconcileOrphans();
      expect(second.runs).toEqual([
        expect.objectContaining({ leaseId, verdict: "gone", action: "killed", state: "closed" }),
      ]);
      await waitFor(() => !isAlive(escapee), 5000);
      expect(await carriers(leaseId)).toEqual([]);
      expect((await store.get(leaseId))?.state).toBe("closed");
    },
  );
});

/** Real facts; pids in `fakeStart` are reported with another start time (the pid reused, as the facts see it); `failInspect` makes inspect throw. */
function switchedFacts(): { facts: ProcessFacts; fakeStart: Map<number, string>; failInspect: boolean } {
  const t = { fakeStart: new Map<number, string>(), failInspect: false, facts: undefined as unknown as ProcessFacts };
  const patch = <T extends ProcessInfo>(p: T): T =>
    t.fakeStart.has(p.pid) ? { ...p, startTime: t.fakeStart.get(p.pid)! } : p;
  t.facts = {
    backend: FACTS.backend,
    identityStrength: FACTS.identityStrength,
    async snapshot() {
      const snap = await FACTS.snapshot();
      return buildSnapshot(snap.takenAt, [...snap.processes.values()].map(patch));
    },
    async inspect(pid, o) {
      if (t.failInspect) throw new Error("inspect failed (test)");
      const d = await FACTS.inspect(pid, o);
      return d === null ? null : patch(d);
    },
    inspectMany(pids, o) {
      return inspectEach((p, oo) => this.inspect(p, oo), pids, o, 8);
    },
  };
  return t;
}

async function stubborn(sup: ReturnType<typeof createProcessSupervisor>) {
  const out = matcher();
  const run = await sup.spawn({
    mode: "child",
    sessionId: "s",
    backendId: "t",
    argv: [process.execPath, fixture("stubborn-tree.mjs")],
    onStdout: (c) => out.push(c),
  });
  pids.add(run.pid!);
  const grandchild = Number((await out.waitFor(/tree (\d+) (\d+)/))[2]);
  pids.add(grandchild);
  return { run, grandchild };
}

describe("every tree kill of a run's root is bound to the start time read at spawn", () => {
  it.skipIf(FACTS.identityStrength === "none")(
    "facts that report another start time for the root: no tree kill (the root still goes through its unreaped handle)",
    async () => {
      const t = switchedFacts();
      const sig = recordingSignaller();
      // containment off: the run's own cgroup would end the grandchild whatever the facts say of the root (foreground-containment.test.ts)
      const sup = createProcessSupervisor({ facts: t.facts, signaller: sig, graceMs: 200, containment: "off" });
      const { run, grandchild } = await stubborn(sup);
      await waitFor(() => sup.getRecord(run.runId)?.rootStartTime !== undefined, 5000);
      const start = sup.getRecord(run.runId)!.rootStartTime!;
      expect(start).toMatch(/^\d+$/);
      // from now on the facts say the pid names a process that started later: another process
      t.fakeStart.set(run.pid!, String(BigInt(start) + 12345n));
      run.cancel();
      expect((await run.wait()).reason).toBe("manual-cancel");
      // nothing went through the identity-checked reaper: not the root, not its grandchild
      expect(sig.sent).toEqual([]);
      expect(isAlive(grandchild)).toBe(true);
    },
  );

  it("a root whose start time could not be read at spawn: the record says why, and cancel sends no tree kill", async () => {
    const t = switchedFacts();
    const sig = recordingSignaller();
    const sup = createProcessSupervisor({ facts: t.facts, signaller: sig, graceMs: 200 });
    t.failInspect = true;
    const { run, grandchild } = await stubborn(sup);
    await waitFor(() => sup.getRecord(run.runId)?.rootIdentityUnavailable !== undefined, 5000);
    expect(sup.getRecord(run.runId)?.rootIdentityUnavailable).toMatch(/could not be inspected/);
    expect(sup.getRecord(run.runId)?.rootStartTime).toBeUndefined();
    t.failInspect = false;
    run.cancel();
    expect((await run.wait()).reason).toBe("manual-cancel");
    expect(sig.sent).toEqual([]);
    expect(isAlive(grandchild)).toBe(true);
  });

  it("with a start time read at spawn, cancel kills the whole tree through the reaper", async () => {
    const sig = recordingSignaller();
    const sup = createProcessSupervisor({ signaller: sig, graceMs: 100 });
    const { run, grandchild } = await stubborn(sup);
    await waitFor(() => sup.getRecord(run.runId)?.rootStartTime !== undefined, 5000);
    run.cancel();
    await run.wait();
    // the recording signaller sends nothing, but it was asked for both: the tree kill ran, bound to the root
    expect(sig.sent.map(([pid]) => pid)).toEqual(expect.arrayContaining([run.pid!, grandchild]));
  });
});
