/**
 * What a batch reconcile (reconcile.ts reconcileLeases) shares between the
 * settlements it runs at once: facts that count snapshot() calls, facts
 * that let concurrent kills share walks and reads, and a runner that keeps
 * their synchronous signal sends in short slices.
 */
import type { InspectOptions, ProcessDetails, ProcessFacts, ProcessSnapshot } from "../../facts/types.js";
import { assertPid } from "../../facts/validate.js";
import { perTurn, Waiters } from "./waiters.js";

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
      // the walk's callers are handed it in chunks (waiters.ts wakeInChunks): each resumes into its tree's new children
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
