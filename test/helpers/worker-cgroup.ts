/**
 * A cgroup v2 of its own for one test worker, so that whatever the worker's
 * tests start (wrappers, agents, terminals, `setsid` + `env -i` escapees,
 * the lease cgroups of every controller and supervisor it makes, which live
 * under the worker's own cgroup) can be ended at once with `cgroup.kill`
 * when the run is interrupted, and nothing is left on the host.
 *
 * `<the worker's cgroup at start>/pl-vitest-<runner pid>-<worker pid>`; the
 * worker moves itself in at start, and out (back where it came from) before
 * the kill, so the kill never ends the worker before it has cleaned up.
 * Where cgroup v2 is not writable (not root, no delegation, macOS) there is
 * none, and only the registered cleanups run (interrupt-cleanup.ts).
 *
 * Synchronous on purpose: it runs in a signal handler and at `exit`, where
 * no test code may run between the steps. Reads /proc by hand (nothing from
 * src/, as test/helpers/liveness.ts: the harness does not lean on the
 * library it judges).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const pause = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** The name every worker cgroup of a run starts with (the check script looks for these). */
export const WORKER_CGROUP_PREFIX = "pl-vitest-";

export interface WorkerCgroup {
  readonly path: string;
  /**
   * Moves this process back to where it came from, kills what is left in
   * the worker cgroup (its lease cgroups included) and removes it, deepest
   * first. Returns the pids that were still in it. Idempotent.
   */
  end(): number[];
}

/** The cgroup2 mount point and this process's cgroup under it, or null. */
function ownCgroup2(): { mount: string; own: string } | null {
  try {
    const own = readFileSync("/proc/self/cgroup", "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3);
    if (own === undefined) return null;
    for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
      const [left, right] = line.split(" - ");
      if (right?.split(" ")[0] !== "cgroup2") continue;
      const fields = left!.split(" ");
      // a cgroup2 mount whose root is "/" shows every cgroup by its own path
      if (fields[3] !== "/") continue;
      return { mount: fields[4]!, own };
    }
  } catch {
    // no /proc: not Linux
  }
  return null;
}

/** Every cgroup below `dir`, deepest first. */
function below(dir: string): string[] {
  let out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
  for (const n of names) out = out.concat(below(join(dir, n)), [join(dir, n)]);
  return out;
}

function pidsIn(dir: string): number[] {
  const pids: number[] = [];
  for (const cg of [...below(dir), dir]) {
    try {
      for (const p of readFileSync(join(cg, "cgroup.procs"), "utf8").split("\n")) if (p !== "") pids.push(Number(p));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

function populated(dir: string): boolean {
  try {
    return /^populated 1$/m.test(readFileSync(join(dir, "cgroup.events"), "utf8"));
  } catch {
    return false;
  }
}

/** Kills everything in `dir`'s subtree (cgroup.kill, else SIGKILL per pid) and removes it, deepest first; waits up to `ms` for it to empty. */
export function killAndRemoveCgroupSync(dir: string, ms = 400): number[] {
  if (!existsSync(dir)) return [];
  const left = pidsIn(dir).filter((p) => p !== process.pid);
  try {
    writeFileSync(join(dir, "cgroup.kill"), "1");
  } catch {
    // no cgroup.kill before Linux 5.14: one pid at a time
    for (const p of left) {
      try {
        process.kill(p, "SIGKILL");
      } catch {
        // gone
      }
    }
  }
  const end = Date.now() + ms;
  while (populated(dir) && Date.now() < end) pause(10);
  for (const cg of [...below(dir), dir]) {
    try {
      rmdirSync(cg);
    } catch {
      // still populated (a kill the kernel has not finished): left, and said by the caller's check
    }
  }
  return left;
}

/** Moves this process into a fresh worker cgroup; null where that is not possible here. */
export function enterWorkerCgroup(runnerPid: number): WorkerCgroup | null {
  const at = ownCgroup2();
  if (at === null) return null;
  const home = join(at.mount, at.own);
  const path = join(home, `${WORKER_CGROUP_PREFIX}${runnerPid}-${process.pid}`);
  try {
    mkdirSync(path);
  } catch {
    return null;
  }
  try {
    writeFileSync(join(path, "cgroup.procs"), String(process.pid));
  } catch {
    rmdirSync(path);
    return null;
  }
  let ended = false;
  return {
    path,
    end() {
      if (ended) return [];
      ended = true;
      try {
        writeFileSync(join(home, "cgroup.procs"), String(process.pid));
      } catch {
        // cannot leave: the kill below would end this process too, so nothing is killed
        return [];
      }
      return killAndRemoveCgroupSync(path);
    },
  };
}
