/**
 * What a batch reconcile (lifecycle.ts reconcileLeases) shares between the
 * settlements it runs at once: facts that count snapshot() calls, facts
 * that let concurrent kills share walks and reads, a runner that keeps
 * their synchronous signal sends in short slices, and a barrier that starts
 * their kills together.
 */
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessSnapshot } from "../facts/types.js";
import { assertPid } from "../facts/validate.js";
import { Limiter } from "./keyed-queue.js";
import { perTurn, wakeInChunks, Waiters } from "./turns.js";

/** Counts snapshot() calls (the one-snapshot promise is checked, not assumed). */
export function countingFacts(facts: ProcessFacts, onSnapshot: () => void): ProcessFacts {
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    snapshot: () => {
      onSnapshot();
      return facts.snapshot();
    },
    inspect: (pid, o) => facts.inspect(pid, o),
    inspectMany: (pids, o) => facts.inspectMany(pids, o),
  };
}

/**
 * Many trees killed at once each ask for a fresh snapshot (to catch children
 * forked mid-teardown) and poll their members' exits at nearly the same
 * moments. Concurrent snapshot callers share the next walk instead of each
 * walking /proc, and the plain inspectMany calls (no environ keys: the
 * exit polls) asked within one turn of the event loop are made as one
 * native call, each caller getting its own pids' answers.
 */
export function coalescingFacts(facts: ProcessFacts, sends?: SlicedRunner): ProcessFacts {
  let last: Promise<unknown> = Promise.resolve();
  let next: Waiters<ProcessSnapshot> | undefined;
  let lastStart = -Infinity;
  // the plain reads of one turn, as one call: each caller gets its own pids' answers
  const merged = perTurn(async (asks: ReadonlyArray<readonly number[]>) => {
    const ds = await facts.inspectMany(asks.flat());
    let at = 0;
    return asks.map((pids) => ds.slice(at, (at += pids.length)));
  });
  const inspectMany = (pids: readonly number[], o?: InspectOptions): Promise<Array<ProcessDetails | null>> => {
    if (o?.envKeys !== undefined && o.envKeys.length > 0) return facts.inspectMany(pids, o);
    try {
      // a bad pid fails its own caller, never the merged call
      for (const p of pids) assertPid(p);
    } catch (e) {
      return Promise.reject(e);
    }
    return merged([...pids]);
  };
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    // A caller asks after its own signals: it may only share a walk that has
    // not started yet, so each walk begins after the one in flight ends, at
    // least WALK_GAP_MS after it began (a batch walks at a bounded rate
    // however large the host) and, with `sends`, once the batch's queued
    // signal sends have gone out.
    snapshot: () => {
      if (next) return next.wait();
      const walk: Promise<ProcessSnapshot> = last
        .catch(() => undefined)
        .then(() => delay(lastStart + WALK_GAP_MS - performance.now()))
        .then(() => sends?.idle())
        .then(() => {
          if (next === mine) next = undefined;
          lastStart = performance.now();
          return facts.snapshot();
        });
      // the walk's callers are handed it in chunks (turns.ts wakeInChunks): each resumes into its tree's new children
      const mine = new Waiters(walk);
      next = mine;
      last = walk;
      return mine.wait();
    },
    inspect: (pid, o) => facts.inspect(pid, o),
    inspectMany,
  };
}

/** The least time between the starts of two walks a batch's kills share. */
const WALK_GAP_MS = 100;

function delay(ms: number): Promise<void> {
  return ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve();
}

/** Runs `fn` (a signal send, synchronous up to its promise) when a slice has room; see slicedRunner. */
export type Pacer = <T>(fn: () => Promise<T>) => Promise<T>;

export interface SlicedRunner {
  run: Pacer;
  /** resolves once nothing is queued */
  idle(): Promise<void>;
}

/**
 * A signal send through the addon is synchronous (pidfd_open, a start-time
 * read, pidfd_send_signal: tens of microseconds). Hundreds of trees torn
 * down at once would send thousands back to back in one turn of the event
 * loop; this runs the queued sends in call order, at most `sliceMs` of them
 * per turn, and lets timers and I/O run in between.
 */
export function slicedRunner(sliceMs = 1): SlicedRunner {
  let queue: Array<() => void> = [];
  let next = 0;
  let idlers: Array<() => void> = [];
  const drain = () => {
    const until = performance.now() + sliceMs;
    while (next < queue.length && performance.now() < until) queue[next++]!();
    if (next < queue.length) return void setImmediate(drain);
    queue = [];
    next = 0;
    const wake = idlers;
    idlers = [];
    for (const w of wake) w();
  };
  const idle = () => (queue.length === next ? Promise.resolve() : new Promise<void>((r) => idlers.push(r)));
  const run = <T>(fn: () => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      if (queue.length === next) setImmediate(drain);
      queue.push(() => {
        try {
          fn().then(resolve, reject);
        } catch (e) {
          reject(e);
        }
      });
    });
  return { run, idle };
}

/**
 * Starts a batch's kills together: each party (a lease id) enters, arrives
 * once it has marked its lease closing, and waits until every party has
 * arrived or left (a settlement that ends before its kill leaves, whatever
 * the reason). Kills that start together share their walks
 * (coalescingFacts) instead of each taking its own as its write completes.
 *
 * At most ADMIT_AT_ONCE parties are between entering and arriving: the
 * rest wait to enter. A thousand settlements begun in one turn make their
 * frames, promises and records at once, all young and all alive when the
 * collector next runs, and that one scavenge held the loop for 35 ms
 * (docs/benchmarks.md); admitted as the writes before them complete, they
 * are made across several. The waiting parties resume in chunks
 * (turns.ts wakeInChunks): each runs its kill's setup up to its first send,
 * and a thousand of them at once would hold the loop for tens of
 * milliseconds.
 */
export function startTogether(parties: readonly string[]): { enter: (id: string) => Promise<void>; arrive: (id: string) => Promise<void>; leave: (id: string) => void } {
  const admission = admitting(ADMIT_AT_ONCE);
  const outstanding = new Set(parties);
  const waiting: Array<() => void> = [];
  let released = outstanding.size === 0;
  const done = (id: string) => {
    if (!outstanding.delete(id) || outstanding.size > 0 || released) return;
    released = true;
    wakeInChunks(waiting);
  };
  return {
    enter: admission.enter,
    arrive: (id) => {
      admission.exit(id);
      const mine = released ? Promise.resolve() : new Promise<void>((r) => waiting.push(r));
      done(id);
      return mine;
    },
    leave: (id) => {
      admission.exit(id);
      done(id);
    },
  };
}

/** At most `limit` ids between enter(id) and exit(id), through the store's Limiter (an id exits only once it has entered; a second exit is nothing). */
function admitting(limit: number): { enter: (id: string) => Promise<void>; exit: (id: string) => void } {
  const gate = new Limiter(limit);
  const exits = new Map<string, () => void>();
  return {
    enter: (id) =>
      new Promise<void>((entered) => {
        void gate.run(
          () =>
            new Promise<void>((exit) => {
              exits.set(id, exit);
              entered();
            }),
        );
      }),
    exit: (id) => {
      exits.get(id)?.();
      exits.delete(id);
    },
  };
}

/** settlements between entering and marking their lease closing at once: enough to keep the store's IO_SLOTS busy many times over */
export const ADMIT_AT_ONCE = 64;
