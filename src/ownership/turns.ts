/**
 * Long synchronous passes (thousands of leases, every process of a host)
 * give the event loop a turn every SLICE_MS, so a verification at scale
 * never holds it for longer than that at a time.
 *
 *   const turns = new Turns();
 *   for (const x of many) { work(x); if (turns.due()) await turns.yield(); }
 */
import { performance } from "node:perf_hooks";

const SLICE_MS = 1;

export class Turns {
  private since = performance.now();

  /** true once this slice has run for SLICE_MS */
  due(): boolean {
    return performance.now() - this.since >= SLICE_MS;
  }

  /** lets everything queued run (timers, I/O callbacks), then starts a new slice */
  async yield(): Promise<void> {
    await new Promise<void>((r) => setImmediate(r));
    this.since = performance.now();
  }
}

/**
 * Questions asked within one turn of the event loop, answered together: the
 * first one schedules `answer` for the end of the turn (setImmediate), and
 * every question asked until then goes into that one call. `answer` returns
 * one answer per question, in order; if it throws, every question of the
 * batch rejects with that error.
 */
export function perTurn<Q, A>(answer: (asked: readonly Q[]) => Promise<readonly A[]>): (q: Q) => Promise<A> {
  let asked: Array<{ q: Q; resolve: (a: A) => void; reject: (e: unknown) => void }> = [];
  const flush = async () => {
    const batch = asked;
    asked = [];
    try {
      const out = await answer(batch.map((b) => b.q));
      batch.forEach((b, i) => b.resolve(out[i]!));
    } catch (e) {
      for (const b of batch) b.reject(e);
    }
  };
  return (q) =>
    new Promise<A>((resolve, reject) => {
      if (asked.length === 0) setImmediate(() => void flush());
      asked.push({ q, resolve, reject });
    });
}
