/**
 * The one per-key lock. Per-key serialization: calls for the same key run one after another, in
 * call order; different keys run concurrently. A failed call does not block
 * the next one. Entries are dropped once a key's queue drains.
 */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.then(fn);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /** Resolves once nothing is queued or running for `key` (a call queued meanwhile is waited for too). */
  async idle(key: string): Promise<void> {
    for (let t = this.tails.get(key); t !== undefined; t = this.tails.get(key)) await t;
  }

  get size(): number {
    return this.tails.size;
  }
}

/**
 * At most `limit` calls in flight; the rest wait in call order. The lease
 * store passes its file I/O through one: a reconcile that settles 1,000
 * leases at once would otherwise have thousands of reads and writes
 * complete together, and the event loop would run all their continuations
 * in one turn (hundreds of milliseconds without a timer firing).
 */
export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}
