/**
 * Containment for runs without a lease (docs/containment.md): a foreground
 * run, or any run of a supervisor without a stateDir, gets a cgroup of its
 * own where containment is available, exactly as a leased run does, so a
 * `setsid` escapee that cleared its environment still ends with the run's
 * cancel or deadline.
 *
 * - Where: `<proclease root>/fg-<pid>-<start time>/<random>`: one folder per
 *   supervisor process, named by that process's identity (no state dir, so no
 *   instance id), which lets any later start tell a dead supervisor's folder
 *   from a live one (sweepDeadRunFolders).
 * - Cancel / deadline: after the identity-checked tree kill, the cgroup is
 *   drained through ownership's one sequence (cgroup-drain.ts: each member
 *   judged on a frozen cgroup, SIGTERM to what is the run's, the grace,
 *   SIGKILL; populated 0, removed).
 * - A run that ends on its own: nothing is signalled (what it left running
 *   is not killed by its exit, as in OpenClaw). An empty cgroup is removed
 *   at once; a populated one is watched (inotify on cgroup.events, unref'd)
 *   and removed once it empties; shutdown() removes what is empty by then.
 * - The folder goes with its last cgroup (containment's removeEmptyInstanceFolder).
 */
import { randomUUID } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { readdir, rmdir } from "node:fs/promises";
import { join } from "node:path";
import {
  createLeaseCgroup,
  detectContainment,
  isPopulated,
  type ContainmentSupport,
  type LeaseCgroup,
} from "../../containment/index.js";
import { probeRunNamespace, shimUnavailable } from "../adapters/cgroup-shim.js";
import { sameProcess } from "../../facts/identity.js";
import { isAlive } from "../../facts/liveness.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { drainLeaseCgroup, lookIntoLeaseCgroup } from "../../ownership/terminate/cgroup-drain.js";

/** What containment a supervisor's runs get: detected once (the probe makes and removes a cgroup), off when asked, and never without the shim's programs. */
export async function detectRunContainment(mode: "auto" | "off" | undefined): Promise<ContainmentSupport> {
  if (mode === "off") return { available: false, code: "refused", why: 'turned off (containment: "off")' };
  const support = await detectContainment();
  const noShim = support.available ? shimUnavailable() : null;
  if (support.available && noShim === null) await probeRunNamespace();
  return noShim === null ? support : { available: false, code: "probe-failed", why: noShim };
}

export interface RunCgroups {
  /** A fresh cgroup for one run, or null when containment is off here (the run is then uncontained, as before). */
  open(): Promise<LeaseCgroup | null>;
  /** The run was cancelled or timed out: whatever its cgroup still holds is ended, and the cgroup removed. */
  drain(cg: LeaseCgroup): Promise<void>;
  /** The run ended on its own: its cgroup is removed when empty, else once it empties. */
  settle(cg: LeaseCgroup): Promise<void>;
  /** Shutdown: stops the watches and removes the cgroups that are empty by now. */
  release(): Promise<void>;
}

export function createRunCgroups(opts: {
  detect: () => Promise<ContainmentSupport>;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  graceMs: number;
}): RunCgroups {
  let folderName: Promise<string | null> | undefined;
  const watched = new Map<string, { cg: LeaseCgroup; watcher: FSWatcher | null }>();
  const instanceFolderName = () =>
    (folderName ??= (async () => {
      const me = await opts.facts.inspect(process.pid).catch(() => null);
      return me ? `fg-${process.pid}-${me.startTime}` : null;
    })());

  const unwatch = (path: string) => {
    watched.get(path)?.watcher?.close();
    watched.delete(path);
  };
  const removeIfEmpty = async (cg: LeaseCgroup): Promise<boolean> => {
    const r = await lookIntoLeaseCgroup({ cgroup: cg });
    if (r?.state === "survivors") return false;
    unwatch(cg.path);
    return true;
  };

  return {
    async open() {
      const support = await opts.detect();
      if (!support.available) return null;
      const name = await instanceFolderName();
      if (name === null) return null;
      const r = await createLeaseCgroup(support, randomUUID(), name);
      return r.ok ? r.cgroup : null;
    },
    async drain(cg) {
      unwatch(cg.path);
      await drainLeaseCgroup({ cgroup: cg }, { graceMs: opts.graceMs, signaller: opts.signaller, facts: opts.facts });
    },
    async settle(cg) {
      if (await removeIfEmpty(cg)) return;
      let watcher: FSWatcher | null = null;
      try {
        watcher = watch(join(cg.path, "cgroup.events"), { persistent: false }, () => void removeIfEmpty(cg));
        watcher.on("error", () => unwatch(cg.path));
      } catch {
        // no inotify here: shutdown, or the next start's sweep, removes it
      }
      watched.set(cg.path, { cg, watcher });
      // it may have emptied between the look and the watch
      if ((await isPopulated(cg.path)) !== "populated") await removeIfEmpty(cg);
    },
    async release() {
      for (const { cg } of [...watched.values()]) {
        unwatch(cg.path);
        await lookIntoLeaseCgroup({ cgroup: cg });
      }
    },
  };
}

/**
 * Removes the empty run folders (`fg-<pid>-<start>`) of supervisor processes
 * that are dead: their empty cgroups first, then the folder. A folder whose
 * supervisor lives, or that still holds a populated cgroup, is left alone.
 */
export async function sweepDeadRunFolders(support: ContainmentSupport, facts: ProcessFacts): Promise<void> {
  if (!support.available) return;
  let names: string[];
  try {
    names = await readdir(support.root);
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^fg-(\d+)-(\d+)$/.exec(n);
    if (!m) continue;
    const pid = Number(m[1]);
    const d = await facts.inspect(pid).catch(() => undefined);
    // unknown (undefined) is alive: fail closed
    if (d === undefined || (d !== null && sameProcess(d, { pid, startTime: m[2]! }) && isAlive(d))) continue;
    const folder = join(support.root, n);
    for (const c of await readdir(folder, { withFileTypes: true }).catch(() => [])) {
      if (c.isDirectory() && (await isPopulated(join(folder, c.name))) === "empty")
        await rmdir(join(folder, c.name)).catch(() => undefined);
    }
    await rmdir(folder).catch(() => undefined);
  }
}
