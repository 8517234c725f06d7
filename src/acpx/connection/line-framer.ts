/**
 * Splits the agent's stdout into newline-delimited lines, with a bound on
 * one line: a line longer than `maxBytes` is never buffered whole. Its
 * first PREFIX_BYTES are kept (to read its id from), the rest is counted
 * and discarded as it arrives, and the line is reported as oversize when
 * its newline comes; the lines after it are read as usual. (The SDK's own
 * reader errors the whole connection on one long line, after buffering up
 * to 32 MiB of it.) A trailing CR is dropped, as the SDK does.
 */

/** bytes of an oversize line kept to read its JSON-RPC envelope from */
export const PREFIX_BYTES = 4096;

const LF = 0x0a;
const CR = 0x0d;

export type Framed = { kind: "line"; bytes: Buffer } | { kind: "oversize"; prefix: Buffer; bytes: number };

export class LineFramer {
  private parts: Buffer[] = [];
  private size = 0;
  /** set while skipping an oversize line: its first bytes */
  private prefix: Buffer | undefined;

  constructor(private readonly maxBytes: number) {}

  /** The complete lines (and oversize reports) in `chunk`, in order. */
  *push(chunk: Buffer): Generator<Framed> {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(LF, start);
      this.add(chunk.subarray(start, nl < 0 ? chunk.length : nl));
      if (nl < 0) return;
      yield this.take();
      start = nl + 1;
    }
  }

  /** The last line when the stream ended without a newline. */
  flush(): Framed | undefined {
    if (this.size === 0 && this.prefix === undefined) return undefined;
    return this.take();
  }

  private add(piece: Buffer): void {
    if (piece.length === 0) return;
    // one byte over is allowed for a CR before the newline
    if (this.prefix === undefined && this.size + piece.length <= this.maxBytes + 1) {
      this.parts.push(piece);
      this.size += piece.length;
      return;
    }
    if (this.prefix === undefined) {
      this.prefix = headOf([...this.parts, piece]);
      this.parts = [];
    }
    this.size += piece.length;
  }

  private take(): Framed {
    const size = this.size;
    const prefix = this.prefix;
    const parts = this.parts;
    this.parts = [];
    this.size = 0;
    this.prefix = undefined;
    if (prefix !== undefined) return { kind: "oversize", prefix, bytes: size };
    let line = parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
    if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
    if (line.length > this.maxBytes) return { kind: "oversize", prefix: headOf([line]), bytes: line.length };
    return { kind: "line", bytes: line };
  }
}

/** A copy of the first PREFIX_BYTES of the pieces (never a view that would keep a whole chunk alive). */
function headOf(pieces: readonly Buffer[]): Buffer {
  const take: Buffer[] = [];
  let n = 0;
  for (const p of pieces) {
    if (n >= PREFIX_BYTES) break;
    const part = p.subarray(0, PREFIX_BYTES - n);
    take.push(part);
    n += part.length;
  }
  return Buffer.concat(take, n);
}
