/**
 * Long synchronous passes (thousands of leases or records, every process of
 * a host) give the event loop a turn every SLICE_MS, so a verification or a
 * batch's decoding at scale never holds it for longer than that at a time.
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

  /** items.map(fn), in slices */
  async map<T, U>(items: readonly T[], fn: (item: T) => U): Promise<U[]> {
    const out: U[] = [];
    for (const item of items) {
      out.push(fn(item));
      if (this.due()) await this.yield();
    }
    return out;
  }
}
