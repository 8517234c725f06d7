import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import type { ProcessFacts, ProcessInfo } from "../../src/facts/types.js";
import { ownProcessGroupId } from "../../src/facts/guards.js";
import { groupToSweep, killProcessTree, signalProcessTree } from "../../src/supervisor/shared/kill-tree.js";
import { readStat, type StatFields } from "../helpers/liveness.js";
import {
  fixture,
  isAlive,
  killQuietly,
  matcher,
  pgidOf,
  recordingSignaller,
  reusedPidFacts,
  waitFor,
} from "./helpers.js";

const DIST = join(fixture(""), "..", "..", "..", "dist", "supervisor", "index.js");

const spawned = new Set<number>();
afterEach(() => {
  killQuietly(spawned);
  spawned.clear();
});

/** The stubborn tree, started directly (no supervisor): detached or in OUR process group. */
async function startTree(detached: boolean): Promise<{ child: ChildProcess; pid: number; grandchild: number }> {
  const child = spawn(process.execPath, [fixture("stubborn-tree.mjs")], {
    detached,
    stdio: ["ignore", "pipe", "inherit"],
  });
  spawned.add(child.pid!);
  const out = matcher();
  child.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
  const m = await out.waitFor(/tree (\d+) (\d+)/);
  const grandchild = Number(m[2]);
  spawned.add(grandchild);
  return { child, pid: child.pid!, grandchild };
}

describe("killProcessTree", () => {
  it("validates the pid, naming the argument", async () => {
    await expect(killProcessTree(0)).rejects.toThrow(RangeError);
    await expect(killProcessTree(-1)).rejects.toThrow(/pid/);
    await expect(killProcessTree(Number.NaN)).rejects.toThrow(TypeError);
    await expect(killProcessTree(2 ** 22 + 1)).rejects.toThrow(RangeError);
    await expect(killProcessTree(1.5)).rejects.toThrow(TypeError);
  });

  it("refuses this process and its parent, and reports a vanished pid as gone", async () => {
    expect(await killProcessTree(process.pid)).toMatchObject({ outcome: "refused", code: "this-process" });
    expect(await killProcessTree(process.ppid)).toMatchObject({ outcome: "refused", code: "parent" });
    const done = spawn("true");
    await new Promise((r) => done.once("exit", r));
    expect(await killProcessTree(done.pid!)).toMatchObject({ outcome: "gone" });
  });

  it("TERMs, waits the grace period, and KILLs what ignored TERM: nothing of the tree survives", async () => {
    const { pid, grandchild } = await startTree(true);
    expect(pgidOf(pid)).toBe(pid);
    const r = await killProcessTree(pid, { graceMs: 300 });
    expect(r.outcome).toBe("killed");
    if (r.outcome !== "killed") return;
    expect(r.members).toBe(2);
    const byPid = new Map(r.report.results.map((x) => [x.pid, x.outcome]));
    expect(byPid.get(grandchild)).toBe("killed"); // ignored TERM
    expect(["exited-after-term", "killed"]).toContain(byPid.get(pid));
    expect(isAlive(pid)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
  });

  it("guard: a run in the caller's own process group is never group-killed", async () => {
    const own = ownProcessGroupId();
    expect(own).not.toBeNull();
    // a bystander in OUR group that is not a descendant of the root
    const bystander = spawn("sleep", ["30"], { stdio: "ignore" });
    spawned.add(bystander.pid!);
    const { pid, grandchild } = await startTree(false);
    expect(pgidOf(pid)).toBe(own);
    expect(pgidOf(bystander.pid!)).toBe(own);

    const r = await killProcessTree(pid, { graceMs: 300 });
    expect(r.outcome).toBe("killed");
    if (r.outcome === "killed") {
      const targets = r.report.results.map((x) => x.pid);
      expect(targets.sort()).toEqual([pid, grandchild].sort());
      expect(targets).not.toContain(bystander.pid);
      expect(targets).not.toContain(process.pid);
    }
    expect(isAlive(pid)).toBe(false);
    expect(isAlive(grandchild)).toBe(false);
    // the group was not swept: the bystander in it is still running
    expect(isAlive(bystander.pid!)).toBe(true);
  });

  it("guard: a root that LEADS the caller's own group (not its ancestor) is killed alone; the caller's own child in that group survives", async () => {
    // separate processes: the caller must sit in a group led by a non-ancestor (fixture roles)
    if (!existsSync(DIST)) throw new Error(`${DIST} is missing: run \`npm run build\` before this test file`);
    const leader = spawn(process.execPath, [fixture("own-group-caller.mjs"), "leader"], {
      detached: true,
      stdio: ["ignore", "pipe", "inherit"],
    });
    spawned.add(leader.pid!);
    const out = matcher();
    leader.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
    spawned.add(Number((await out.waitFor(/caller (\d+)/, 15_000))[1]));
    const r = JSON.parse((await out.waitFor(/\{.*\}\n/, 20_000))[0]) as {
      caller: number;
      callerPpid: number;
      callerPgid: number;
      bystander: number;
      bystanderPgid: number;
      leader: number;
      leaderPgid: number;
      outcome: string;
      targets: number[];
      bystanderAlive: boolean;
    };
    spawned.add(r.bystander);
    // the scenario holds: one group G led by the root, the caller and its child in it, the root not the caller's parent
    expect(r.leader).toBe(leader.pid);
    expect(r.leaderPgid).toBe(r.leader);
    expect(r.callerPgid).toBe(r.leader);
    expect(r.bystanderPgid).toBe(r.leader);
    expect(r.callerPpid).not.toBe(r.leader);
    // sweeping G would have reached the bystander (the caller's own child); the guard kept it to the root
    expect(r.outcome).toBe("killed");
    expect(r.targets).toEqual([r.leader]);
    expect(r.bystanderAlive).toBe(true);
    await waitFor(() => !isAlive(r.leader));
  });
});

describe("killProcessTree: expectedStartTime pins the root", () => {
  it("a pid now held by a process with another start time: typed mismatch, nothing sent", async () => {
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    spawned.add(sleeper.pid!);
    const real = await getProcessFacts().inspect(sleeper.pid!);
    expect(real?.startTime).toMatch(/^\d+$/);
    const facts = reusedPidFacts(
      sleeper.pid!,
      (st) => String(BigInt(st) + 7n),
      () => true,
    );
    const signaller = recordingSignaller();
    const r = await killProcessTree(sleeper.pid!, {
      facts,
      signaller,
      graceMs: 50,
      expectedStartTime: real!.startTime,
    });
    expect(r).toEqual({
      outcome: "mismatch",
      pid: sleeper.pid,
      expectedStartTime: real!.startTime,
      actualStartTime: String(BigInt(real!.startTime) + 7n),
    });
    expect(signaller.sent).toEqual([]);
    expect(isAlive(sleeper.pid!)).toBe(true);
  });

  it("a start time that cannot be read: unknown, nothing sent; the matching one is reaped", async () => {
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    spawned.add(sleeper.pid!);
    const st = (await getProcessFacts().inspect(sleeper.pid!))!.startTime;
    let hide = true;
    const facts = reusedPidFacts(
      sleeper.pid!,
      () => "",
      () => hide,
    );
    const signaller = recordingSignaller();
    expect(await killProcessTree(sleeper.pid!, { facts, signaller, expectedStartTime: st })).toMatchObject({
      outcome: "unknown",
    });
    expect(signaller.sent).toEqual([]);
    hide = false;
    const r = await killProcessTree(sleeper.pid!, { facts, graceMs: 300, expectedStartTime: st });
    expect(r.outcome).toBe("killed");
    await waitFor(() => !isAlive(sleeper.pid!));
  });

  it("rejects an expectedStartTime that is not a decimal start time", async () => {
    await expect(killProcessTree(process.pid, { expectedStartTime: "abc" })).rejects.toThrow(/expectedStartTime/);
  });
});

describe("groupToSweep: the group proof is computed from the snapshot", () => {
  const info = (pid: number, pgid: number, startTime = "100", state = "S"): ProcessInfo => ({
    pid,
    ppid: 1,
    pgid,
    sid: pgid,
    uid: 0,
    state,
    startTime,
  });
  // pids far above anything live here, below the 2^22 limit: never ours, never our parent
  const P = 4_100_001;

  it("a root leading its own group, identical in the snapshot: that group", () => {
    const root = info(P, P);
    expect(groupToSweep(buildSnapshot(0, [root, info(P + 1, P)]), root)).toBe(P);
  });

  it("no group when the root does not lead it, when the snapshot's leader is another process, or a zombie", () => {
    const follower = info(P + 1, P);
    expect(groupToSweep(buildSnapshot(0, [info(P, P), follower]), follower)).toBeUndefined();
    const root = info(P, P, "100");
    expect(groupToSweep(buildSnapshot(0, [info(P, P, "999")]), root)).toBeUndefined();
    expect(groupToSweep(buildSnapshot(0, [info(P, P, "100", "Z")]), root)).toBeUndefined();
  });

  it("never the caller's own group, even when the root leads it", () => {
    const own = ownProcessGroupId();
    expect(own).not.toBeNull();
    const root = info(own!, own!);
    expect(groupToSweep(buildSnapshot(0, [root]), root)).toBeUndefined();
  });
});

/** The process state letter from /proc (T = stopped), or null once gone. */
function stateOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]!;
  } catch {
    return null;
  }
}

describe("signalProcessTree: one signal, the same guards and the same tree as killProcessTree", () => {
  const FACTS = getProcessFacts();
  const NONE = FACTS.identityStrength === "none";
  const NOTE = NONE ? " [skipped: the facts backend cannot verify identity]" : "";

  it("validates the pid and the signal name", async () => {
    await expect(signalProcessTree(0, "SIGTERM")).rejects.toThrow(RangeError);
    await expect(signalProcessTree(1.5, "SIGTERM")).rejects.toThrow(TypeError);
    await expect(signalProcessTree(process.pid, "SIGNOPE" as NodeJS.Signals)).rejects.toThrow(/signal/);
    await expect(signalProcessTree(12345, "SIGTERM", { expectedStartTime: "x" })).rejects.toThrow(/expectedStartTime/);
  });

  it("refuses this process and its parent, and reports a vanished pid as gone", async () => {
    expect(await signalProcessTree(process.pid, "SIGCONT")).toMatchObject({ outcome: "refused" });
    expect(await signalProcessTree(process.ppid, "SIGCONT")).toMatchObject({ outcome: "refused" });
    const done = spawn("true");
    await new Promise((r) => done.once("exit", r));
    expect(await signalProcessTree(done.pid!, "SIGTERM")).toMatchObject({ outcome: "gone" });
  });

  it.skipIf(NONE)(
    `SIGSTOP then SIGCONT reach every member, leaves first; SIGTERM is sent once and never escalated${NOTE}`,
    async () => {
      const { pid, grandchild } = await startTree(true);
      const stop = await signalProcessTree(pid, "SIGSTOP");
      expect(stop.outcome).toBe("signalled");
      if (stop.outcome !== "signalled") return;
      expect(stop.results.map((r) => r.pid)).toEqual([grandchild, pid]);
      expect(stop.results.every((r) => r.outcome === "signalled")).toBe(true);
      await waitFor(() => stateOf(pid) === "T" && stateOf(grandchild) === "T");
      const cont = await signalProcessTree(pid, "SIGCONT");
      expect(cont).toMatchObject({ outcome: "signalled", members: 2 });
      await waitFor(() => stateOf(pid) !== "T" && stateOf(grandchild) !== "T");
      // one SIGTERM: the child dies of it, the grandchild ignores it and nothing follows up
      const term = await signalProcessTree(pid, "SIGTERM");
      expect(term).toMatchObject({ outcome: "signalled", signal: "SIGTERM" });
      await waitFor(() => !isAlive(pid));
      expect(isAlive(grandchild)).toBe(true);
    },
  );

  it.skipIf(NONE)(
    `a root pinned to another start time gets nothing (mismatch); facts "none" give unknown${NOTE}`,
    async () => {
      const { pid } = await startTree(true);
      const real = await FACTS.inspect(pid);
      const sig = recordingSignaller();
      const wrong = String(BigInt(String(real!.startTime)) + 7n);
      expect(await signalProcessTree(pid, "SIGKILL", { expectedStartTime: wrong, signaller: sig })).toMatchObject({
        outcome: "mismatch",
      });
      expect(
        await signalProcessTree(pid, "SIGKILL", { facts: getProcessFacts({ backend: "none" }), signaller: sig }),
      ).toMatchObject({ outcome: "unknown" });
      expect(sig.sent).toEqual([]);
      expect(isAlive(pid)).toBe(true);
    },
  );

  it.skipIf(NONE)(
    `it addresses exactly the pids killProcessTree would (descendants and the root's own group, setsid escapees excluded)${NOTE}`,
    async () => {
      // root leads its group; a group member that is not its descendant (re-parented), and a setsid escapee
      // (sleep &): re-parented away, still in the root's group; (setsid sleep & echo $!): re-parented AND in its own session
      const root = spawn("sh", ["-c", `(sleep 30 &) ; (setsid sleep 30 & echo "esc $!") ; sleep 30 & wait`], {
        detached: true,
        stdio: ["ignore", "pipe", "ignore"],
      });
      spawned.add(root.pid!);
      const out = matcher();
      root.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
      const escapee = Number((await out.waitFor(/esc (\d+)/))[1]);
      spawned.add(escapee);
      // Wait, by the test's own /proc reads, until the fixture's tree has settled: the escapee has called
      // setsid (`$!` is printed before it has, and until then it is rightly in the root's group), and the
      // root's group is exactly the root sh and its two sleeps, the forking subshells gone. Compared while
      // the fixture still forks, two reads of the tree differ by its transient subshells.
      // Each member's group and name come from one read of its stat, and the escapee's session is read
      // before the group: separate reads of one pid can straddle its setsid+exec, and once it has called
      // setsid it never rejoins the root's group, so a group read made after it cannot hold it. The
      // expected group is the read that met the condition: a later read can come back short.
      const groupByHand = () =>
        readdirSync("/proc")
          .filter((d) => /^\d+$/.test(d))
          .map((d) => readStat(Number(d)))
          .filter((st): st is StatFields => st !== null && st.pgrp === root.pid! && isAlive(st.pid));
      let settled: number[] = [];
      await waitFor(() => {
        if (readStat(escapee)?.session !== escapee) return false;
        const g = groupByHand();
        const done = g.length === 3 && g.every((st) => st.pid === root.pid || st.comm === "sleep");
        if (done) settled = g.map((st) => st.pid);
        return done;
      });
      const expected = new Set(settled);
      for (const p of expected) spawned.add(p);
      // and both functions read one snapshot, so even a tree that moved would be compared with itself
      const snap = await FACTS.snapshot();
      const oneSnapshot: ProcessFacts = {
        backend: FACTS.backend,
        identityStrength: FACTS.identityStrength,
        snapshot: async () => snap,
        inspect: (pid, o) => FACTS.inspect(pid, o),
        inspectMany: (pids, o) => FACTS.inspectMany(pids, o),
      };
      const asked = recordingSignaller();
      const one = await signalProcessTree(root.pid!, "SIGTERM", { facts: oneSnapshot, signaller: asked });
      const reaper = recordingSignaller();
      await killProcessTree(root.pid!, { facts: oneSnapshot, signaller: reaper, graceMs: 0 });
      const viaSignal = new Set(asked.sent.map(([p]) => p));
      const viaKill = new Set(reaper.sent.map(([p]) => p));
      expect(one.outcome).toBe("signalled");
      // each against the independent reading: the root's group, the escapee in its own session left out
      expect(viaSignal, `group by hand ${JSON.stringify([...expected])}, escapee ${escapee}`).toEqual(expected);
      expect(viaKill).toEqual(expected);
      expect(viaSignal.has(escapee)).toBe(false);
      expect(asked.sent.every(([, s]) => s === "SIGTERM")).toBe(true);
    },
  );
});
