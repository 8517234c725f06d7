// One rule for joining a cgroup, in its two forms (src/containment/enter.ts):
// enterCgroup (Node: the wrapper, detection) and enterCgroupShell (the
// supervisor's shim). Every case runs through both forms and they must
// agree: a lease cgroup is joined; a missing cgroup, a directory that is not
// a cgroup, and a path that is not absolute and normalised are not, and
// nothing is ever created there (cgroup.procs is opened without O_CREAT).
// The shim built on the shell form runs nothing when the join fails.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  createLeaseCgroup,
  detectContainment,
  enterCgroup,
  enterCgroupAsync,
  enterCgroupShell,
  removeCgroup,
  removeInstanceFolder,
  type LeaseCgroup,
} from "../../src/containment/index.js";
import { containedChild, SHIM_REFUSED_EXIT } from "../../src/supervisor/adapters/cgroup-shim.js";
import { containmentSkipNote, probeCgroup2 } from "../helpers/cgroup-probe.mjs";

const probe = await probeCgroup2();
const SKIP = probe.writable ? null : probe.why;
const NOTE = containmentSkipNote(probe);
const LINUX = process.platform === "linux";
const support = await detectContainment();
const OWNER = `test-enter-${process.pid}`;
const scratch = mkdtempSync(join(tmpdir(), "proclease-enter-"));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  rmSync(scratch, { recursive: true, force: true });
  if (support.available) await removeInstanceFolder(support, OWNER);
});

/** A process's cgroup v2 as a filesystem path, read by hand (every test cgroup lies below our own cgroup). */
function cgroupPathOf(pid: number | "self"): string | null {
  const v2 = (p: number | "self") =>
    readFileSync(`/proc/${p}/cgroup`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3) ?? null;
  const theirs = v2(pid);
  const ours = v2("self");
  if (!probe.writable || theirs === null || ours === null) return null;
  if (ours !== "/" && theirs !== ours && !theirs.startsWith(`${ours}/`)) return null;
  return probe.own + (ours === "/" ? theirs : theirs.slice(ours.length));
}

/** The Node form on a fresh `sleep`: whether it joined (its cgroup then reads `path`). */
async function nodeJoins(path: string): Promise<boolean> {
  const c = spawn("sleep", ["30"], { stdio: "ignore" });
  children.push(c);
  await new Promise((r) => c.once("spawn", r));
  const moved = enterCgroup(path, c.pid!).outcome === "moved";
  if (moved) expect(cgroupPathOf(c.pid!)).toBe(path);
  return moved;
}

/** The shell form run by /bin/sh with `path` as $1 (cwd: the scratch dir): whether the shell joined (it then reads its own cgroup). */
function shellJoins(path: string): boolean {
  const r = spawnSync("/bin/sh", ["-c", `${enterCgroupShell('"$1"')} && grep '^0::' /proc/self/cgroup`, "sh", path], {
    encoding: "utf8",
    cwd: scratch,
  });
  return r.status === 0;
}

/** Both forms on one path: they must agree; returns the shared answer. */
async function bothJoin(path: string): Promise<boolean> {
  const node = await nodeJoins(path);
  expect(shellJoins(path), `the shell form disagrees with enterCgroup on ${path}`).toBe(node);
  return node;
}

let seq = 0;
async function leaseCgroup(): Promise<LeaseCgroup> {
  if (!support.available) throw new Error(support.why);
  const made = await createLeaseCgroup(support, `enter-${process.pid}-${++seq}`, OWNER);
  if (!made.ok) throw new Error(made.why);
  return made.cgroup;
}

describe("joining a cgroup: one rule, two forms", () => {
  it.skipIf(SKIP)(
    `a lease cgroup is joined by both; a missing one, and its path with a trailing "/" or a "/./", by neither${NOTE}`,
    async () => {
      const cg = await leaseCgroup();
      try {
        expect(await bothJoin(cg.path)).toBe(true);
        expect(await bothJoin(`${cg.path}-missing`)).toBe(false);
        expect(await bothJoin(`${cg.path}/`)).toBe(false);
        const cut = cg.path.lastIndexOf("/");
        expect(await bothJoin(`${cg.path.slice(0, cut)}/.${cg.path.slice(cut)}`)).toBe(false);
        expect(existsSync(`${cg.path}-missing`)).toBe(false);
      } finally {
        for (const c of children.splice(0)) c.kill("SIGKILL");
        await removeCgroup(cg, { waitMs: 5000 });
      }
    },
  );

  it.skipIf(!LINUX)(
    "a directory that is not a cgroup, absolute or relative, is joined by neither, and nothing is created in it",
    async () => {
      const plain = join(scratch, "plain");
      mkdirSync(plain);
      expect(await bothJoin(plain)).toBe(false);
      // relative to the shell's cwd (the scratch dir), and to ours: refused before any open
      expect(await bothJoin("plain")).toBe(false);
      expect(readdirSync(plain)).toEqual([]);
    },
  );

  it.skipIf(!LINUX)(
    `the shim on a directory that is not a cgroup runs nothing and creates nothing (exit ${SHIM_REFUSED_EXIT})`,
    () => {
      const plain = join(scratch, "shim-plain");
      mkdirSync(plain);
      const ran = join(scratch, "ran");
      const shim = containedChild(plain, ["/bin/sh", "-c", `touch ${ran}`], {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
      })!;
      const r = spawnSync(shim.file, shim.args, { encoding: "utf8", env: {} });
      expect(r.status).toBe(SHIM_REFUSED_EXIT);
      expect(r.stderr).toContain("could not enter its lease cgroup");
      expect(existsSync(ran)).toBe(false);
      expect(readdirSync(plain)).toEqual([]);
    },
  );

  it.skipIf(SKIP)(
    `the gateway's early move (enterCgroupAsync) joins another process by the same rule, and the joiner's own check (isInCgroup) knows its cgroup from a sibling${NOTE}`,
    async () => {
      const [a, b] = [await leaseCgroup(), await leaseCgroup()];
      try {
        const c = spawn("sleep", ["30"], { stdio: "ignore" });
        children.push(c);
        await new Promise((r) => c.once("spawn", r));
        expect(await enterCgroupAsync(a.path, c.pid!)).toEqual({ outcome: "moved" });
        expect(cgroupPathOf(c.pid!)).toBe(a.path);
        expect((await enterCgroupAsync(join(scratch, "plain-async"), c.pid!)).outcome).toBe("no-cgroup");
        // the check runs in the joiner itself: a Node child of the built package, in `a`
        const enterJs = join(import.meta.dirname, "../../dist/containment/enter.js");
        const code = `const m = await import(${JSON.stringify(enterJs)}); const before = m.isInCgroup(process.argv[1]); m.enterCgroup(process.argv[1]); console.log(JSON.stringify([before, m.isInCgroup(process.argv[1]), m.isInCgroup(process.argv[2])]));`;
        const r = spawnSync(process.execPath, ["--input-type=module", "-e", code, a.path, b.path], {
          encoding: "utf8",
        });
        expect(r.stderr).toBe("");
        expect(JSON.parse(r.stdout)).toEqual([false, true, false]);
      } finally {
        for (const c of children.splice(0)) c.kill("SIGKILL");
        await removeCgroup(a, { waitMs: 5000 });
        await removeCgroup(b, { waitMs: 5000 });
      }
    },
  );

  it("a pid that is not a positive integer is a programming error, thrown", () => {
    expect(() => enterCgroup("/sys/fs/cgroup/x", 0)).toThrow(TypeError);
    expect(() => enterCgroup("/sys/fs/cgroup/x", 1.5)).toThrow(TypeError);
  });
});
