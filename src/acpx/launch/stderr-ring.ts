/**
 * The adapter's (and the wrapper's) most recent stderr, kept for error
 * messages: a bounded ring of bytes, and when the stream has gone quiet.
 */
import type { Readable } from "node:stream";
import { utf8TailStart } from "../../supervisor/shared/output.js";

/** How much of the adapter's recent stderr is kept for diagnostics. */
export const STDERR_RING_BYTES = 16 * 1024;

/**
 * A bounded ring of the most recent bytes written to a stream: chunks are
 * kept as they arrive and dropped from the front once the total passes the
 * cap, so a chatty adapter costs at most `cap` bytes (plus one chunk) and no
 * copying per write. text() cuts at the cap and skips a UTF-8 sequence the
 * cut split.
 */
export class ByteRing {
  private chunks: Buffer[] = [];
  private size = 0;
  /** bytes dropped from the front so far */
  dropped = 0;

  constructor(readonly cap: number = STDERR_RING_BYTES) {
    if (!Number.isInteger(cap) || cap <= 0) throw new RangeError(`cap must be a positive integer, got ${String(cap)}`);
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.chunks.length > 1 && this.size - this.chunks[0]!.length >= this.cap) {
      const first = this.chunks.shift()!;
      this.size -= first.length;
      this.dropped += first.length;
    }
  }

  get length(): number {
    return Math.min(this.size, this.cap);
  }

  text(): string {
    let buf = Buffer.concat(this.chunks, this.size);
    if (buf.length > this.cap) buf = buf.subarray(buf.length - this.cap);
    // a cut in the middle of a UTF-8 sequence leaves continuation bytes in front
    const cut = this.dropped > 0 || this.size > this.cap;
    return buf.subarray(cut ? utf8TailStart(buf, 0) : 0).toString("utf8");
  }
}

/** A child's stderr as read so far: its tail, and a wait for it to go quiet (LaunchedWrapper.stderrSettled). */
export interface KeptStderr {
  tail(): string;
  settled(quietMs?: number, maxMs?: number): Promise<void>;
}

/** `from`: a child process, or anything else with a stderr stream (a re-adopted wrapper's, durable/attached.ts). */
export function keepStderr(from: { readonly stderr: Readable | null }): KeptStderr {
  const child = from;
  const ring = new ByteRing(STDERR_RING_BYTES);
  let lastStderrAt = 0;
  let stderrEnded = child.stderr === null;
  child.stderr?.on("data", (chunk: Buffer) => {
    ring.push(chunk);
    lastStderrAt = Date.now();
  });
  child.stderr?.once("close", () => (stderrEnded = true));
  child.stderr?.on("error", () => undefined);
  const settled = async (quietMs = 30, maxMs = 250): Promise<void> => {
    const deadline = Date.now() + maxMs;
    // at least one quiet period from now: data already in the pipe is read before it ends
    const since = Date.now();
    for (;;) {
      if (stderrEnded) return;
      const quietFor = Date.now() - Math.max(lastStderrAt, since);
      if (quietFor >= quietMs || Date.now() >= deadline) return;
      await new Promise((r) => setTimeout(r, Math.min(quietMs - quietFor, Math.max(1, deadline - Date.now()))).unref());
    }
  };
  return { tail: () => ring.text().trim(), settled };
}
