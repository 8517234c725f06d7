/**
 * The adapter's stdout as the web stream the ACP transport reads
 * (intake-stream.ts), with a gate the conversation can close. The
 * transport pulls chunks as fast as they come and hands every parsed
 * message to the SDK, whatever its consumer does; so backpressure has to
 * act before it, on the pipe. Two kinds of holder close the gate: a
 * streamed turn whose consumer lags, and the session's budget while the
 * answers queued for the agent pass their bound (session-budget.ts). While
 * any holder holds the gate, the Node stream is paused: nothing more is
 * read, the pipe's buffer fills and the adapter blocks on its write. What
 * was already read when the gate closed (at most one chunk, or one message
 * of up to intakeLimits.maxMessageBytes) is still delivered.
 *
 * End, error and cancel behave as Readable.toWeb's: the stream closes at
 * EOF, errors with the Node stream's error (a premature close is an
 * AbortError), and a cancel from the SDK (its connection closed) destroys
 * the Node stream.
 */
import { finished, type Readable } from "node:stream";

export class StdoutGate {
  /** the stream for the ACP transport */
  readonly readable: ReadableStream<Uint8Array>;
  private readonly holders = new Set<object>();
  private controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** closed, errored or cancelled: nothing more is enqueued */
  private done = false;
  /** how many times the gate closed (it was open and a holder took it) */
  pauses = 0;

  constructor(private readonly input: Readable) {
    this.readable = new ReadableStream<Uint8Array>(
      {
        start: (c) => this.start(c),
        pull: () => {
          if (this.holders.size === 0) input.resume();
        },
        cancel: (reason: unknown) => {
          this.done = true;
          input.destroy(reason instanceof Error ? reason : undefined);
        },
      },
      new CountQueuingStrategy({ highWaterMark: 1 }),
    );
  }

  /** true while some holder keeps stdout unread */
  get held(): boolean {
    return this.holders.size > 0;
  }

  /** whether `holder` holds the gate now (a releaseAll lets go of every holder) */
  holds(holder: object): boolean {
    return this.holders.has(holder);
  }

  /** Stops reading stdout until every holder has released (idempotent per holder). */
  hold(holder: object): void {
    if (this.holders.has(holder)) return;
    if (this.holders.size === 0) this.pauses++;
    this.holders.add(holder);
    this.input.pause();
  }

  /** This holder no longer needs stdout unread; reading resumes when the SDK wants more. */
  release(holder: object): void {
    if (!this.holders.delete(holder) || this.holders.size > 0) return;
    const c = this.controller;
    if (c !== undefined && (c.desiredSize ?? 0) > 0) this.input.resume();
  }

  /** Every holder let go at once (the session is closing: its answers must get through). */
  releaseAll(): void {
    for (const h of [...this.holders]) this.release(h);
  }

  private start(c: ReadableStreamDefaultController<Uint8Array>): void {
    this.controller = c;
    const input = this.input;
    const onData = (chunk: Buffer | string): void => {
      // a read already on its way when the transport cancelled: enqueue would throw in an event handler (the gateway's crash)
      if (this.done) return void input.off("data", onData);
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      c.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      if ((c.desiredSize ?? 0) <= 0 || this.holders.size > 0) input.pause();
    };
    const cleanup = finished(input, (error) => {
      cleanup();
      this.done = true;
      input.off("data", onData);
      // a late error after the end must not become an uncaught exception
      input.on("error", () => undefined);
      try {
        if (error === undefined || error === null) c.close();
        else if ((error as { code?: string }).code === "ERR_STREAM_PREMATURE_CLOSE") c.error(abortError(error));
        else c.error(error);
      } catch {
        // already closed or errored (a cancel came first)
      }
    });
    input.on("data", onData);
  }
}

/** What Readable.toWeb reports for a stream closed before its end. */
function abortError(cause: unknown): Error {
  return Object.assign(new Error("The operation was aborted", { cause }), { name: "AbortError", code: "ABORT_ERR" });
}
