/**
 * A single-consumer async queue for a turn's OpenClaw events. `push` hands
 * an event straight to a waiting consumer, else buffers it in order; `end`
 * finishes the stream after what is buffered; `close` (OpenClaw's
 * closeStream, or a consumer that breaks) drops the buffer and every later
 * push, while the turn itself runs on.
 *
 * The buffer is bounded in estimated bytes (`sizeOf`, `boundBytes`): the
 * producer awaits `room()` after a push, which waits while the unread
 * events are over the bound until the consumer has read them down to half
 * of it (or closed the stream, or the queue ended). The producer is the
 * turn's reader of the controller's events, so a lagging OpenClaw consumer
 * backpressures the controller's turn, and through it the adapter's stdout.
 */
export class EventQueue<T> implements AsyncIterableIterator<T> {
  private items: { item: T; bytes: number }[] = [];
  private head = 0;
  private unreadBytes = 0;
  private waiter: ((r: IteratorResult<T>) => void) | undefined;
  private roomWaiters: (() => void)[] = [];
  private ended = false;
  private closed = false;

  constructor(
    private readonly sizeOf: (item: T) => number = () => 0,
    private readonly boundBytes = Number.POSITIVE_INFINITY,
  ) {}

  push(item: T): void {
    if (this.closed || this.ended) return;
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w({ value: item, done: false });
      return;
    }
    const bytes = this.sizeOf(item);
    this.items.push({ item, bytes });
    this.unreadBytes += bytes;
  }

  /** Resolves when the producer may push on: the unread events are within the bound, or nobody will read them. */
  room(): Promise<void> {
    if (this.unreadBytes <= this.boundBytes || this.closed || this.ended) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  end(): void {
    this.ended = true;
    this.wakeProducer();
    this.release();
  }

  close(): void {
    this.closed = true;
    this.items = [];
    this.head = 0;
    this.unreadBytes = 0;
    this.wakeProducer();
    this.release();
  }

  private release(): void {
    if (this.head < this.items.length) return;
    const w = this.waiter;
    this.waiter = undefined;
    w?.({ value: undefined, done: true });
  }

  private wakeProducer(): void {
    const ws = this.roomWaiters;
    this.roomWaiters = [];
    for (const w of ws) w();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.head < this.items.length) {
      const e = this.items[this.head]!;
      this.items[this.head++] = undefined as unknown as { item: T; bytes: number };
      this.unreadBytes -= e.bytes;
      if (this.roomWaiters.length > 0 && this.unreadBytes <= this.boundBytes / 2) this.wakeProducer();
      // drop the consumed prefix now and then, so a long turn does not keep every event
      if (this.head > 1024 && this.head * 2 > this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return Promise.resolve({ value: e.item, done: false });
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
