/** Default cap per stream for captured output (characters). */
export const DEFAULT_MAX_OUTPUT_CHARS = 1_000_000;

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
      this.text = this.text.slice(over);
      this.dropped += over;
    }
  }
}

export function truncationMarker(droppedChars: number): string {
  return `[proclease: output truncated, ${droppedChars} earlier characters dropped]\n`;
}
