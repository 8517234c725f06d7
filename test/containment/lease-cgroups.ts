/**
 * The lease cgroups and processes a real-cgroup test file makes, and their
 * cleanup: useLeaseCgroups() registers the hooks that kill and remove them
 * after each test, and the file's instance folder after its last.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach } from "vitest";
import { createLeaseCgroup, killCgroup, removeCgroup, type LeaseCgroup } from "../../src/containment/index.js";
import { FIX, support } from "./cgroup-setup.js";
import { killQuietly, waitFor } from "../supervisor/helpers.js";

/** `file` names the test file in its instance folder. Call it at the top of the file. */
export function useLeaseCgroups(file: string) {
  const made: LeaseCgroup[] = [];
  const pids = new Set<number>();
  const children: ChildProcess[] = [];
  let seq = 0;
  /** the file's instance folder (createLeaseCgroup: <root>/<instance>/<name>), removed in afterAll */
  const INSTANCE = `test-instance-${file}-${process.pid}`;

  async function lease(tag: string): Promise<LeaseCgroup> {
    const r = await createLeaseCgroup(support, `test-${tag}-${process.pid}-${++seq}`, INSTANCE);
    if (!r.ok) throw new Error(r.why);
    made.push(r.cgroup);
    return r.cgroup;
  }

  /** Starts a fixture script; resolves with its "role pid" lines once `roles` were all printed. */
  async function startFixture(
    script: string,
    args: string[],
    roles: string[],
  ): Promise<{ child: ChildProcess; pid: Record<string, number> }> {
    const child = spawn("/bin/sh", [join(FIX, script), ...args], { stdio: ["ignore", "pipe", "inherit"] });
    children.push(child);
    if (child.pid) pids.add(child.pid);
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    const pid: Record<string, number> = {};
    await waitFor(() => {
      for (const m of out.matchAll(/^(\w+) (\d+)$/gm)) pid[m[1]!] = Number(m[2]);
      return roles.every((r) => pid[r] !== undefined) || child.exitCode !== null;
    }, 15_000);
    for (const r of roles) {
      if (pid[r] === undefined) throw new Error(`${script} exited (${child.exitCode}) before printing ${r}: ${out}`);
      pids.add(pid[r]!);
    }
    return { child, pid };
  }

  afterEach(async () => {
    for (const cg of made.splice(0)) {
      await killCgroup(cg.path, { waitMs: 5000 });
      await removeCgroup(cg.path);
    }
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    killQuietly(pids);
    pids.clear();
  });

  afterAll(() => {
    // every lease cgroup in it was removed after its test; the folder goes last
    if (support.available && existsSync(`${support.root}/${INSTANCE}`)) rmdirSync(`${support.root}/${INSTANCE}`);
  });

  return { made, pids, children, INSTANCE, nextSeq: () => ++seq, lease, startFixture };
}
