/** Default cap per stream for captured output (characters). */
export const DEFAULT_MAX_OUTPUT_CHARS = 1_000_000;

/**
 * Where the kept tail of `text` starts when `over` leading UTF-16 units must
 * go: `over`, or one more when that index would start the tail on the low
 * half of a surrogate pair. The one cut rule for every capped buffer (run
 * capture, exec session logs): a tail never begins with a lone surrogate, so
 * it never holds more than the cap and never a broken character.
 */
export function tailStart(text: string, over: number): number {
  if (over <= 0) return 0;
  if (over >= text.length) return text.length;
  const c = text.charCodeAt(over);
  const prev = text.charCodeAt(over - 1);
  return c >= 0xdc00 && c <= 0xdfff && prev >= 0xd800 && prev <= 0xdbff ? over + 1 : over;
}

/**
 * The same rule for UTF-8 bytes: the first character start at or after
 * `from` in `bytes` (a kept tail of bytes never begins inside a character).
 * A continuation byte is 0b10xxxxxx, and a character has at most three, so
 * at most three are stepped over: bytes that are not UTF-8 are kept as they are.
 */
export function utf8TailStart(bytes: Uint8Array, from: number): number {
  let i = Math.max(0, from);
  for (let n = 0; n < 3 && i < bytes.length && (bytes[i]! & 0xc0) === 0x80; n++) i++;
  return i;
}

/** The last at most `cap` UTF-16 units of `text`, cut on a code-point boundary. */
export function capTail(text: string, cap: number): string {
  return text.length > cap ? text.slice(tailStart(text, text.length - cap)) : text;
}

/**
 * Keeps the most recent `cap` characters of a stream (the end of a log is
 * what explains how a run ended) and counts what was dropped, so the result
 * can say so instead of silently looking complete.
 */
export class CappedOutput {
  private text = "";
  private dropped = 0;
  constructor(private readonly cap: number) {}

  append(chunk: string): void {
    this.text += chunk;
    // Trim only when well past the cap: amortised O(1) per appended character.
    if (this.text.length > this.cap * 2 || (this.cap < 4096 && this.text.length > this.cap)) this.trim();
  }

  toString(): string {
    this.trim();
    if (this.dropped === 0) return this.text;
    return `${truncationMarker(this.dropped)}${this.text}`;
  }

  private trim(): void {
    const over = this.text.length - this.cap;
    if (over > 0) {
      const at = tailStart(this.text, over);
      this.text = this.text.slice(at);
      this.dropped += at;
    }
  }
}

export function truncationMarker(droppedChars: number): string {
  return `[proclease: output truncated, ${droppedChars} earlier characters dropped]\n`;
}

/** A cap option: undefined → the default; else an integer >= 1, or a RangeError naming it. */
export function maxOutputOption(v: number | undefined, dflt: number, name: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
    throw new RangeError(`${name} must be an integer >= 1, got ${String(v)}`);
  }
  return v;
}
