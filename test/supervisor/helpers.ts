import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { afterAll, afterEach, beforeAll } from "vitest";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { buildSnapshot } from "../../src/facts/snapshot.js";
import { getProcessFacts } from "../../src/facts/get.js";
import type { ProcessFacts, ProcessInfo, ProcessSignaller } from "../../src/facts/types.js";
import { INSTANCE_ENV_KEY } from "../../src/ownership/leases/types.js";
import { isAliveSync, readStat } from "../helpers/liveness.js";
import { onInterrupt } from "../helpers/interrupt-cleanup.js";
import { removeStateDir } from "../helpers/state-dir-cleanup.js";
import { inspectEach } from "../../src/facts/inspect-many.js";

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "supervisor");
export const fixture = (name: string) => join(FIXTURES, name);

/** Alive by the tests' own /proc oracle (test/helpers/liveness.ts), not the library's rule. */
export const isAlive = isAliveSync;

export function pgidOf(pid: number): number | null {
  return readStat(pid)?.pgrp ?? null;
}

export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, stepMs = 20): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/**
 * Resolves once every timer of at most `ms` that the code under test armed
 * before this call has fired (Node runs timers in order of their expiry, and
 * one armed later with a delay at least as long expires later), plus `turns`
 * event-loop turns for what those timers started. For "nothing happened": an
 * ordering of events, not a guess at how long a pause a loaded host needs.
 */
export async function afterTimersArmedBefore(ms: number, turns = 20): Promise<void> {
  await new Promise((r) => setTimeout(r, ms + 1));
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

/** Last-resort cleanup of pids this test spawned (never anything else). */
export function killQuietly(pids: Iterable<number | undefined>): void {
  for (const pid of pids) {
    if (pid === undefined || pid <= 1 || pid === process.pid) continue;
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Resolves with the first regex match in the accumulated text. */
export function matcher() {
  let text = "";
  const waiters: Array<{ re: RegExp; resolve: (m: RegExpMatchArray) => void }> = [];
  return {
    push(chunk: string) {
      text += chunk;
      for (const w of [...waiters]) {
        const m = text.match(w.re);
        if (m) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(m);
        }
      }
    },
    get text() {
      return text;
    },
    waitFor(re: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
      const m = text.match(re);
      if (m) return Promise.resolve(m);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`no ${re} within ${timeoutMs} ms; got ${JSON.stringify(text.slice(-500))}`)),
          timeoutMs,
        );
        waiters.push({
          re,
          resolve: (mm) => {
            clearTimeout(t);
            resolve(mm);
          },
        });
      });
    },
  };
}

/** Real facts, except that `pid` is reported with the start time `fake(real)` while `on()` holds (a pid reused, as the facts see it). */
export function reusedPidFacts(pid: number, fake: (real: string) => string, on: () => boolean): ProcessFacts {
  const real = getProcessFacts();
  const patch = <T extends ProcessInfo>(p: T): T =>
    p.pid === pid && on() ? { ...p, startTime: fake(p.startTime) } : p;
  return {
    backend: real.backend,
    identityStrength: real.identityStrength,
    async snapshot() {
      const snap = await real.snapshot();
      return buildSnapshot(snap.takenAt, [...snap.processes.values()].map(patch));
    },
    async inspect(p, o) {
      const d = await real.inspect(p, o);
      return d === null ? null : patch(d);
    },
    inspectMany(pids, o) {
      return inspectEach((p, oo) => this.inspect(p, oo), pids, o, 8);
    },
  };
}

/** A signaller that records what it was asked to send and sends nothing. */
export function recordingSignaller(): ProcessSignaller & { sent: Array<[number, string]> } {
  const sent: Array<[number, string]> = [];
  return { raceFree: true, sent, signal: async (pid, _st, sig) => (sent.push([pid, sig]), "signalled") };
}

/**
 * Live pids whose environment carries OPENCLAW_GATEWAY_INSTANCE_ID=`instanceId`
 * (a test's own instance id: only processes of that test's leased runs, and
 * their descendants, carry it).
 */
export async function instanceCarriers(instanceId: string): Promise<number[]> {
  const { readdir, readFile } = await import("node:fs/promises");
  const want = `${INSTANCE_ENV_KEY}=${instanceId}`;
  const out: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = await readFile(`/proc/${name}/environ`, "latin1");
      if (env.split("\0").includes(want) && isAlive(Number(name))) out.push(Number(name));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** A promise the test resolves by hand: `open()` lets whatever awaits `gate` continue. */
export function gate(): { gate: Promise<void>; open: () => void } {
  let open!: () => void;
  const g = new Promise<void>((r) => (open = r));
  return { gate: g, open };
}

/** The temp dirs and pids a test file makes: pids killed after each test, dirs removed at the end. */
export function trackedCleanup(): { dirs: string[]; pids: Set<number> } {
  const dirs: string[] = [];
  const pids = new Set<number>();
  afterEach(() => {
    killQuietly(pids);
    pids.clear();
  });
  afterAll(() => {
    // with the cgroups its leases left on the host (state-dir-cleanup.ts)
    for (const d of dirs) removeStateDir(d);
  });
  // an interrupted run does the same (test/helpers/interrupt-setup.ts)
  onInterrupt(() => {
    killQuietly(pids);
    for (const d of dirs.splice(0)) removeStateDir(d);
  });
  return { dirs, pids };
}

/**
 * For a test file whose gateway is a separate Node process running the built
 * package (so it can be SIGKILLed): dist's supervisor entry, the gateways,
 * pids and dirs to clean up (gateways killed after each test), and a fresh
 * state dir per call.
 */
export function gatewayProcessHarness(prefix: string): {
  DIST: string;
  pids: Set<number>;
  gateways: ChildProcess[];
  stateDir: () => Promise<string>;
} {
  const { dirs, pids } = trackedCleanup();
  const gateways: ChildProcess[] = [];
  const DIST = join(FIXTURES, "..", "..", "..", "dist", "supervisor", "index.js");
  beforeAll(() => {
    if (!existsSync(DIST)) throw new Error(`${DIST} is missing: run \`npm run build\` before this test file`);
  });
  afterEach(() => {
    for (const g of gateways.splice(0)) killQuietly([g.pid]);
  });
  const stateDir = async () => {
    const d = await mkdtemp(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
  return { DIST, pids, gateways, stateDir };
}
