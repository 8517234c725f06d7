import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { ownProcessGroupId } from "../../src/ownership/guards.js";
import { killProcessTree } from "../../src/supervisor/kill-tree.js";
import { fixture, isAlive, killQuietly, matcher, pgidOf } from "./helpers.js";

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
    // the group was not swept: the bystander and we are still here
    expect(isAlive(bystander.pid!)).toBe(true);
    expect(isAlive(process.pid)).toBe(true);
  });
});
