/**
 * A single-consumer async queue for a turn's OpenClaw events. `push` hands
 * an event straight to a waiting consumer, else buffers it in order; `end`
 * finishes the stream after what is buffered; `close` (OpenClaw's
 * closeStream, or a consumer that breaks) drops the buffer and every later
 * push, while the turn itself runs on.
 */
export class EventQueue<T> implements AsyncIterableIterator<T> {
  private items: T[] = [];
  private head = 0;
  private waiter: ((r: IteratorResult<T>) => void) | undefined;
  private ended = false;
  private closed = false;

  push(item: T): void {
    if (this.closed || this.ended) return;
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w({ value: item, done: false });
      return;
    }
    this.items.push(item);
  }

  end(): void {
    this.ended = true;
    this.release();
  }

  close(): void {
    this.closed = true;
    this.items = [];
    this.head = 0;
    this.release();
  }

  private release(): void {
    if (this.head < this.items.length) return;
    const w = this.waiter;
    this.waiter = undefined;
    w?.({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.head < this.items.length) {
      const value = this.items[this.head++] as T;
      // drop the consumed prefix now and then, so a long turn does not keep every event
      if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.ended || this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.close();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
