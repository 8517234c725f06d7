import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { getProcessFacts } from "../../src/facts/get.js";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import type { ProcessInfo } from "../../src/facts/types.js";
import { ownProcessGroupId } from "../../src/ownership/guards.js";
import { groupToSweep, killProcessTree } from "../../src/supervisor/kill-tree.js";
import { fixture, isAlive, killQuietly, matcher, pgidOf, recordingSignaller, reusedPidFacts, waitFor } from "./helpers.js";

const DIST = join(fixture(""), "..", "..", "..", "dist", "supervisor", "index.js");

const spawned = new Set<number>();
afterEach(() => {
  killQuietly(spawned);
  spawned.clear();
});

/** The stubborn tree, started directly (no supervisor): detached or in OUR process group. */
async function startTree(detached: boolean): Promise<{ child: ChildProcess; pid: number; grandchild: number }> {
  const child = spawn(process.execPath, [fixture("stubborn-tree.mjs")], { detached, stdio: ["ignore", "pipe", "inherit"] });
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
    expect(await killProcessTree(process.pid)).toMatchObject({ outcome: "refused" });
    expect(await killProcessTree(process.ppid)).toMatchObject({ outcome: "refused" });
    const done = spawn("true");
    await new Promise((r) => done.once("exit", r));
    expect(await killProcessTree(done.pid!)).toMatchObject({ outcome: "gone" });
  });

  it("TERMs, waits the grace period, and KILLs what ignored TERM: nothing of the tree survives", async () => {
    const { pid, grandchild } = await startTree(true);
    expect(pgidOf(pid)).toBe(pid);
    const r = await killProcessTree(pid, { graceMs: 300 });
    expect(r.outcome).toBe("reaped");
    if (r.outcome !== "reaped") return;
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
    expect(r.outcome).toBe("reaped");
    if (r.outcome === "reaped") {
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
    const leader = spawn(process.execPath, [fixture("own-group-caller.mjs"), "leader"], { detached: true, stdio: ["ignore", "pipe", "inherit"] });
    spawned.add(leader.pid!);
    const out = matcher();
    leader.stdout!.setEncoding("utf8").on("data", (c: string) => out.push(c));
    spawned.add(Number((await out.waitFor(/caller (\d+)/, 15_000))[1]));
    const r = JSON.parse((await out.waitFor(/\{.*\}\n/, 20_000))[0]) as {
      caller: number; callerPpid: number; callerPgid: number; bystander: number; bystanderPgid: number;
      leader: number; leaderPgid: number; outcome: string; targets: number[]; bystanderAlive: boolean;
    };
    spawned.add(r.bystander);
    // the scenario holds: one group G led by the root, the caller and its child in it, the root not the caller's parent
    expect(r.leader).toBe(leader.pid);
    expect(r.leaderPgid).toBe(r.leader);
    expect(r.callerPgid).toBe(r.leader);
    expect(r.bystanderPgid).toBe(r.leader);
    expect(r.callerPpid).not.toBe(r.leader);
    // sweeping G would have reached the bystander (the caller's own child); the guard kept it to the root
    expect(r.outcome).toBe("reaped");
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
    const facts = reusedPidFacts(sleeper.pid!, (st) => String(BigInt(st) + 7n), () => true);
    const signaller = recordingSignaller();
    const r = await killProcessTree(sleeper.pid!, { facts, signaller, graceMs: 50, expectedStartTime: real!.startTime });
    expect(r).toEqual({ outcome: "mismatch", pid: sleeper.pid, expectedStartTime: real!.startTime, actualStartTime: String(BigInt(real!.startTime) + 7n) });
    expect(signaller.sent).toEqual([]);
    expect(isAlive(sleeper.pid!)).toBe(true);
  });

  it("a start time that cannot be read: unknown, nothing sent; the matching one is reaped", async () => {
    const sleeper = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    spawned.add(sleeper.pid!);
    const st = (await getProcessFacts().inspect(sleeper.pid!))!.startTime;
    let hide = true;
    const facts = reusedPidFacts(sleeper.pid!, () => "", () => hide);
    const signaller = recordingSignaller();
    expect(await killProcessTree(sleeper.pid!, { facts, signaller, expectedStartTime: st })).toMatchObject({ outcome: "unknown" });
    expect(signaller.sent).toEqual([]);
    hide = false;
    const r = await killProcessTree(sleeper.pid!, { facts, graceMs: 300, expectedStartTime: st });
    expect(r.outcome).toBe("reaped");
    await waitFor(() => !isAlive(sleeper.pid!));
  });

  it("rejects an expectedStartTime that is not a decimal start time", async () => {
    await expect(killProcessTree(process.pid, { expectedStartTime: "abc" })).rejects.toThrow(/expectedStartTime/);
  });
});

describe("groupToSweep: the group proof is computed from the snapshot", () => {
  const info = (pid: number, pgid: number, startTime = "100", state = "S"): ProcessInfo => ({ pid, ppid: 1, pgid, sid: pgid, uid: 0, state, startTime });
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
