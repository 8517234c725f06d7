/**
 * The stdout probe's reading of an adapter's first bytes: which line, if
 * any, is not ACP (a JSON object per line). Table-driven; the real adapter
 * that prints a usage text is in conversation.test.ts.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { STDOUT_HEAD_BYTES, StdoutProbe } from "../../src/acpx/connection/stdout-probe.js";

async function probe(chunks: string[]): Promise<StdoutProbe> {
  const p = new StdoutProbe();
  const s = new PassThrough();
  p.watch(s);
  for (const c of chunks) s.write(c);
  s.end();
  await new Promise((r) => s.once("end", r));
  return p;
}

describe("StdoutProbe", () => {
  it.each([
    [['{"jsonrpc":"2.0","id":0,"result":{}}\n'], undefined],
    [["Usage: agent [--acp]\n"], "Usage: agent [--acp]"],
    [['{"jsonrpc":"2.0"}\n', "[1,2]\n"], "[1,2]"],
    [['\n\n  \n{"a":1}\n'], undefined],
    [['{"jsonrpc":"2.0","id":0,'], undefined], // a JSON object cut by the chunk: not judged yet
    [["Starting server on port 8080"], "Starting server on port 8080"],
  ])("%j → %j", async (chunks, expected) => {
    expect((await probe(chunks)).nonAcpLine()).toBe(expected);
  });

  it("keeps at most STDOUT_HEAD_BYTES, and nothing after stop()", async () => {
    const big = await probe(["x".repeat(STDOUT_HEAD_BYTES * 2)]);
    expect(Buffer.byteLength(big.head())).toBe(STDOUT_HEAD_BYTES);
    const p = new StdoutProbe();
    const s = new PassThrough();
    p.watch(s);
    s.write("first\n");
    await new Promise((r) => setImmediate(r));
    p.stop();
    s.write("second\n");
    s.end();
    await new Promise((r) => s.once("end", r));
    expect(p.head()).toBe("first\n");
  });
});
