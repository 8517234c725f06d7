/**
 * A test's state dir removed with what it holds on the host: the lease
 * cgroups its leases recorded (a session a test never closed leaves an empty
 * one once its processes are killed) and this state dir's instance folder
 * under every root its containment record names. Only cgroups this state
 * dir's own leases and instance id name are touched (never another
 * gateway's), and only once they are empty: rmdir refuses anything else.
 */
import { existsSync, readdirSync, readFileSync, rmSync, rmdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function leaseCgroups(stateDir: string): string[] {
  const out: string[] = [];
  for (const sub of ["acpx/leases", "acpx/leases/archive"]) {
    const dir = join(stateDir, sub);
    if (!existsSync(dir)) continue;
    for (const n of readdirSync(dir)) {
      if (!n.endsWith(".json")) continue;
      try {
        const p = (JSON.parse(readFileSync(join(dir, n), "utf8")) as { cgroup?: { path?: unknown } }).cgroup?.path;
        if (typeof p === "string" && p.includes("/proclease/")) out.push(p);
      } catch {
        // not a lease file
      }
    }
  }
  return out;
}

function instanceFolders(stateDir: string): string[] {
  try {
    const id = readFileSync(join(stateDir, "gateway-instance-id"), "utf8").trim();
    const roots = (JSON.parse(readFileSync(join(stateDir, "acpx", "containment.json"), "utf8")) as { roots?: unknown })
      .roots;
    return Array.isArray(roots)
      ? roots.filter((r): r is string => typeof r === "string" && basename(r) === "proclease").map((r) => join(r, id))
      : [];
  } catch {
    return [];
  }
}

/** rmdir, retried for up to `ms` while the kernel still lists killed members (zombies until reaped). */
function rmdirWhenEmpty(path: string, ms: number): void {
  const end = Date.now() + ms;
  for (;;) {
    try {
      rmdirSync(path);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTEMPTY" || Date.now() > end) return;
      pause(20);
    }
  }
}

export function removeStateDirCgroups(stateDir: string): void {
  const cgroups = leaseCgroups(stateDir);
  for (const cg of cgroups) if (existsSync(cg)) rmdirWhenEmpty(cg, 1000);
  for (const folder of new Set([...cgroups.map((c) => dirname(c)), ...instanceFolders(stateDir)]))
    if (existsSync(folder)) rmdirWhenEmpty(folder, 0);
}

/** removeStateDirCgroups, then the folder itself. */
export function removeStateDir(stateDir: string): void {
  removeStateDirCgroups(stateDir);
  rmSync(stateDir, { recursive: true, force: true });
}
