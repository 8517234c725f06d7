/**
 * The first bytes an adapter writes on stdout, kept while the handshake
 * runs. ACP's stdout carries JSON-RPC only; an adapter that prints a banner,
 * a usage text or a crash report there makes the SDK skip each line (it
 * answers a parse error), so the handshake would otherwise end as a bare
 * timeout. With these bytes the ensure error says what the adapter printed.
 * After `stop()` (the handshake is over) the stream passes through untouched.
 */

/** bytes of stdout kept for the handshake error */
export const STDOUT_HEAD_BYTES = 4096;
/** characters of a non-ACP line quoted in an error message */
const QUOTED_CHARS = 300;

export class StdoutProbe {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private watching = true;

  transform(): TransformStream<Uint8Array, Uint8Array> {
    return new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, controller) => {
        if (this.watching && this.bytes < STDOUT_HEAD_BYTES) {
          const take = chunk.subarray(0, STDOUT_HEAD_BYTES - this.bytes);
          this.chunks.push(take.slice());
          this.bytes += take.length;
        }
        controller.enqueue(chunk);
      },
    });
  }

  /** The handshake is over: nothing more is kept. */
  stop(): void {
    this.watching = false;
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
