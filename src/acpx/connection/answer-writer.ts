/**
 * The gateway's side of the adapter's stdin: every line is encoded once,
 * charged to the session's budget until the pipe took it (session-budget.ts
 * holds the agent's stdout past its bound), and written in order.
 *
 * A message carrying a long string (an fs read's content: up to 10 MiB by
 * default) is not serialised in one go: JSON.stringify of 10 MiB of source
 * code, with its newlines and quotes to escape, took 120–380 ms on the dev
 * box, all of it one block of the event loop. Such strings are escaped in
 * slices of SLICE_CHARS, the loop turning between slices; lines the intake
 * writes meanwhile (its refusals) wait until the sliced message is whole.
 */
import { randomUUID } from "node:crypto";
import type { Writable } from "node:stream";
import type { SessionBudget } from "./session-budget.js";

/** strings longer than this are escaped in slices of this many UTF-16 units */
export const SLICE_CHARS = 256 * 1024;
/**
 * What one queued write costs the gateway besides its bytes, charged with
 * them. Holding it: the stream's entry, its callback and the Buffer object
 * (100,000 answers of about 100 bytes queued on a pipe nobody read held 213
 * bytes of heap and 565 of RSS each, node 20). Making it: the request's
 * parse, the SDK's handling and the answer, garbage V8 collects only later.
 * A fuzzed permission flood that never read its stdin peaked at +111 MB of
 * RSS charged by bytes alone (160,000 answers made before the hold), +84 MB
 * at 512 bytes a write, +40 MB at 2 KiB, +27 MB at 8 KiB.
 */
export const QUEUED_WRITE_OVERHEAD = 2048;

export class AnswerWriter {
  /** a placeholder no string of the message can spell: the nonce is this process's secret */
  private readonly mark = `\u0000${randomUUID()}:`;
  private readonly markPattern: RegExp;
  private slicing = false;
  private deferred: Buffer[] = [];

  constructor(
    private readonly out: Writable,
    private readonly budget: SessionBudget,
  ) {
    // the placeholder as JSON.stringify writes it: "\u0000<uuid>:<n>"
    this.markPattern = new RegExp(`"\\\\u0000${this.mark.slice(1)}(\\d+)"`, "g");
  }

  /** false once the stream cannot take more (closed, destroyed, errored) */
  get open(): boolean {
    return !this.out.destroyed && !this.out.writableEnded;
  }

  /** One line (newline included), charged now, written now or right after the sliced message being written. */
  writeLine(line: string): void {
    if (!this.open) return;
    const bytes = Buffer.from(line, "utf8");
    const cost = this.charge(bytes);
    if (this.slicing) this.deferred.push(bytes);
    else this.put(bytes, cost);
  }

  /** A message as one line; long strings in it are escaped slice by slice. Rejects when it cannot be serialised. */
  async writeMessage(msg: unknown): Promise<void> {
    const long: string[] = [];
    const text = JSON.stringify(msg, (_k, v: unknown) =>
      typeof v === "string" && v.length > SLICE_CHARS ? `${this.mark}${long.push(v) - 1}` : v,
    );
    if (long.length === 0) return this.writeLine(`${text}\n`);
    // the previous sliced message (if any) is whole: the SDK awaits each write before the next
    this.slicing = true;
    try {
      let at = 0;
      for (const m of text.matchAll(this.markPattern)) {
        this.writeNow(text.slice(at, m.index));
        await this.writeEscaped(long[Number(m[1])]!);
        at = m.index + m[0].length;
      }
      this.writeNow(`${text.slice(at)}\n`);
    } finally {
      this.slicing = false;
      const later = this.deferred;
      this.deferred = [];
      for (const b of later) this.put(b, b.length + QUEUED_WRITE_OVERHEAD);
    }
  }

  /** `s` as a JSON string, in slices, the loop turning between them. */
  private async writeEscaped(s: string): Promise<void> {
    this.writeNow('"');
    for (let from = 0; from < s.length;) {
      let to = Math.min(s.length, from + SLICE_CHARS);
      // never between the halves of a surrogate pair
      const last = s.charCodeAt(to - 1);
      if (to < s.length && last >= 0xd800 && last <= 0xdbff) to--;
      const escaped = JSON.stringify(s.slice(from, to));
      this.writeNow(escaped.slice(1, -1));
      from = to;
      await new Promise<void>((r) => setImmediate(r));
      if (!this.open) throw Object.assign(new Error("the adapter's stdin is closed"), { code: "ERR_STREAM_DESTROYED" });
    }
    this.writeNow('"');
  }

  private writeNow(text: string): void {
    if (text.length === 0 || !this.open) return;
    const bytes = Buffer.from(text, "utf8");
    this.put(bytes, this.charge(bytes));
  }

  /** Charges a write from now until its pipe took it; answers its cost. */
  private charge(bytes: Buffer): number {
    const cost = bytes.length + QUEUED_WRITE_OVERHEAD;
    this.budget.queue(cost);
    return cost;
  }

  private put(bytes: Buffer, cost: number): void {
    this.out.write(bytes, () => this.budget.drained(cost));
  }
}
