/**
 * The first bytes an adapter writes on stdout, kept while the handshake
 * runs. ACP's stdout carries JSON-RPC only; an adapter that prints a banner,
 * a usage text or a crash report there makes the SDK skip each line (it
 * answers a parse error), so the handshake would otherwise end as a bare
 * timeout. With these bytes the ensure error says what the adapter printed.
 * The probe listens beside the ACP reader (a second 'data' listener on the
 * same stream) and is detached by `stop()` when the handshake is over, so a
 * session's turns pay nothing for it.
 */
import type { Readable } from "node:stream";

/** bytes of stdout kept for the handshake error */
export const STDOUT_HEAD_BYTES = 4096;
/** characters of a non-ACP line quoted in an error message */
const QUOTED_CHARS = 300;

export class StdoutProbe {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private watching = true;

  private detach: (() => void) | undefined;

  /** Starts watching `input` (call before the ACP reader starts reading). */
  watch(input: Readable): void {
    const onData = (chunk: Buffer | string): void => {
      if (!this.watching || this.bytes >= STDOUT_HEAD_BYTES) return this.stop();
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      const take = b.subarray(0, STDOUT_HEAD_BYTES - this.bytes);
      this.chunks.push(Buffer.from(take));
      this.bytes += take.length;
    };
    input.on("data", onData);
    this.detach = () => input.off("data", onData);
  }

  /** The handshake is over: nothing more is kept, the listener is gone. */
  stop(): void {
    this.watching = false;
    this.detach?.();
    this.detach = undefined;
  }

  /** The head of stdout as text (at most STDOUT_HEAD_BYTES). */
  head(): string {
    return Buffer.concat(this.chunks).toString("utf8");
  }

  /**
   * The first line of the head that is not a JSON object (what ACP allows on
   * stdout), or undefined when every complete line was one. A trailing line
   * cut by the byte limit counts only when it is not the start of a JSON object.
   */
  nonAcpLine(): string | undefined {
    const text = this.head();
    const lines = text.split("\n");
    const complete = text.endsWith("\n") ? lines : lines.slice(0, -1);
    const tail = text.endsWith("\n") ? undefined : lines[lines.length - 1];
    for (const raw of complete) {
      const line = raw.trim();
      if (line === "") continue;
      if (!isJsonObject(line)) return quote(line);
    }
    if (tail !== undefined && tail.trim() !== "" && !tail.trimStart().startsWith("{")) return quote(tail.trim());
    return undefined;
  }
}

function isJsonObject(line: string): boolean {
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === "object" && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

function quote(line: string): string {
  return line.length > QUOTED_CHARS ? `${line.slice(0, QUOTED_CHARS)}…` : line;
}
