/**
 * The intake's pieces on their own (issue 46, findings 3, 4 and 6): the
 * byte scan that reads depth and value count before JSON.parse, the line
 * framer that skips an over-long line without buffering it, the envelope
 * read from a refused line's first bytes, the budget's accounting, the
 * session log's escaping and rate, the option's validation, and the walks
 * over agent values that must not recurse (a session/new answer's modes,
 * a config option's grouped values).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PassThrough } from "node:stream";
import { AnswerWriter, SLICE_CHARS } from "../../src/acpx/connection/answer-writer.js";
import { resolveIntakeLimits, type ResolvedIntakeLimits } from "../../src/acpx/connection/intake-limits.js";
import { peekEnvelope, scanJson } from "../../src/acpx/connection/json-scan.js";
import { LineFramer, PREFIX_BYTES, type Framed } from "../../src/acpx/connection/line-framer.js";
import { escapeForLog, SessionLog } from "../../src/acpx/report/logger.js";
import { SessionBudget, type HoldableStdout } from "../../src/acpx/connection/session-budget.js";
import { cloneJson, SessionState, setConfigOption } from "../../src/acpx/connection/session-controls.js";

const MiB = 1024 * 1024;
const nest = (d: number, inner = "1"): string => "[".repeat(d) + inner + "]".repeat(d);

describe("scanJson reads depth and values from the bytes", () => {
  it("counts containers, members and elements, and skips what is inside strings", () => {
    expect(scanJson(Buffer.from('{"a":[1,2,3],"b":"x"}'), 64, 1000)).toEqual({ ok: true, depth: 2, values: 7 });
    // brackets, commas and escaped quotes inside a string are not structure
    expect(scanJson(Buffer.from(JSON.stringify({ s: '[[[{,,,"\\"]]' })), 64, 1000)).toEqual({
      ok: true,
      depth: 1,
      values: 2,
    });
    const long = JSON.stringify({ s: `${'\\"'.repeat(5000)}${"x".repeat(100_000)}[[[` });
    expect(scanJson(Buffer.from(long), 8, 1000)).toMatchObject({ ok: true, depth: 1 });
  });

  it("agrees with JSON.parse on depth for any JSON text (strings with quotes, backslashes and brackets included)", () => {
    const depthOf = (v: unknown): number => {
      let max = 0;
      const stack: [unknown, number][] = [[v, 0]];
      while (stack.length > 0) {
        const [x, d] = stack.pop()!;
        if (typeof x !== "object" || x === null) continue;
        max = Math.max(max, d + 1);
        for (const y of Object.values(x)) stack.push([y, d + 1]);
      }
      return max;
    };
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), (v) => {
        const text = JSON.stringify(v);
        const r = scanJson(Buffer.from(text), 64, 1_000_000);
        return r.ok && r.depth === depthOf(JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });

  it("stops at the first bound passed", () => {
    expect(scanJson(Buffer.from(nest(100_000)), 64, 1_000_000)).toEqual({ ok: false, over: "depth" });
    expect(scanJson(Buffer.from(`[${"0,".repeat(200_000)}0]`), 64, 100_000)).toEqual({ ok: false, over: "values" });
    expect(scanJson(Buffer.from(nest(64)), 64, 1000)).toMatchObject({ ok: true, depth: 64 });
  });
});

describe("peekEnvelope reads id and method from a refused line's first bytes", () => {
  it("finds a request's id and method, a response's id, and nothing it cannot read whole", () => {
    const req = Buffer.from(
      `{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"content":"${"x".repeat(9000)}`,
    );
    expect(peekEnvelope(req.subarray(0, PREFIX_BYTES))).toEqual({
      id: 7,
      method: "fs/write_text_file",
      hasMethod: true,
    });
    expect(peekEnvelope(Buffer.from('{ "jsonrpc" : "2.0" , "result" : {"a":[1,{"b":2}]}, "id" : "s-1" }'))).toEqual({
      id: "s-1",
      hasMethod: false,
    });
    expect(
      peekEnvelope(Buffer.from(`{"jsonrpc":"2.0","params":{"x":"${"y".repeat(5000)}"},"id":3`).subarray(0, 4096)),
    ).toEqual({
      hasMethod: false,
    });
    expect(peekEnvelope(Buffer.from(`{"id":"${"z".repeat(300)}","method":"m"}`))).toEqual({
      method: "m",
      hasMethod: true,
    });
    expect(peekEnvelope(Buffer.from("[1,2]"))).toEqual({ hasMethod: false });
  });

  it("reads back the id and method of any request written as the SDK writes it", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer(), fc.string({ maxLength: 200 })),
        fc.string({ maxLength: 100 }),
        fc.jsonValue({ maxDepth: 4 }),
        (id, method, params) => {
          const line = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
          expect(peekEnvelope(line.subarray(0, PREFIX_BYTES))).toEqual({ id, method, hasMethod: true });
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("LineFramer bounds one line", () => {
  const lines = (f: LineFramer, chunks: Buffer[]): Framed[] => chunks.flatMap((c) => [...f.push(c)]);

  it("splits lines across chunks, drops a CR, and skips an over-long line without buffering it", () => {
    const f = new LineFramer(1000);
    const got = lines(f, [
      Buffer.from('{"a":1}\r\n{"b"'),
      Buffer.from(":2}\n"),
      Buffer.from(`{"big":"${"x".repeat(5000)}`),
    ]);
    expect(got.map((g) => (g.kind === "line" ? g.bytes.toString() : "oversize"))).toEqual(['{"a":1}', '{"b":2}']);
    // the long line's bytes are not held while it lasts: only its prefix
    const more = lines(f, [Buffer.alloc(10 * MiB, 0x78), Buffer.from('"}\n{"c":3}\n')]);
    expect(more[0]).toMatchObject({ kind: "oversize", bytes: 5008 + 10 * MiB + 2 });
    expect((more[0] as { prefix: Buffer }).prefix.length).toBe(PREFIX_BYTES);
    expect(more[1]).toMatchObject({ kind: "line" });
    expect((more[1] as { bytes: Buffer }).bytes.toString()).toBe('{"c":3}');
    expect(f.flush()).toBeUndefined();
  });

  it("a line of exactly the bound passes, one byte more does not", () => {
    const f = new LineFramer(10);
    expect(lines(f, [Buffer.from("0123456789\n01234567890\n")]).map((g) => g.kind)).toEqual(["line", "oversize"]);
  });
});

class FakeGate implements HoldableStdout {
  readonly holders = new Set<object>();
  hold(h: object): void {
    this.holders.add(h);
  }
  release(h: object): void {
    this.holders.delete(h);
  }
  holds(h: object): boolean {
    return this.holders.has(h);
  }
}

const limits = (over: Partial<ResolvedIntakeLimits> = {}): ResolvedIntakeLimits => ({
  ...resolveIntakeLimits(undefined),
  ...over,
});

describe("SessionBudget", () => {
  it("admits requests up to the bound, refuses a duplicate id, and frees a slot with the answer", () => {
    const b = new SessionBudget(limits({ maxRequestsInFlight: 2 }), {}, () => "k");
    expect([
      b.admitRequest("n1", 10),
      b.admitRequest("n1", 10),
      b.admitRequest("n2", 10),
      b.admitRequest("n3", 10),
    ]).toEqual(["ok", "duplicate", "ok", "full"]);
    b.answered("n1");
    expect(b.admitRequest("n3", 10)).toBe("ok");
    expect(b.status().requestsInFlight).toBe(2);
  });

  it("holds stdout while the bytes of unanswered requests pass their bound, lets go at half, and releases it at close", () => {
    const gate = new FakeGate();
    const b = new SessionBudget(limits({ maxRequestBytesInFlight: 1000 }), {}, () => "k");
    b.bindStdout(gate);
    const held = () => [...gate.holders].some((h) => h !== b);
    // one request larger than the bound is admitted (its line is already read); only the hold answers it
    expect(b.admitRequest("n1", 1500)).toBe("ok");
    expect(held()).toBe(true);
    expect(b.admitRequest("n2", 400)).toBe("ok");
    b.answered("n1");
    // 400 is under half of 1000: read again
    expect(held()).toBe(false);
    expect(b.admitRequest("n3", 700)).toBe("ok");
    expect(held()).toBe(true);
    expect(b.status()).toMatchObject({ requestsInFlight: 2, requestBytesInFlight: 1100, requestHolds: 2 });
    // the answer queue's hold is its own: passing that bound and draining it leaves the request hold on
    b.queue(5000);
    b.drained(5000);
    expect(held()).toBe(true);
    b.close(new Error("closed"));
    expect(gate.holders.size).toBe(0);
  });

  it("holds stdout past the answer bound, lets go below half; a reservation waits for room, one alone always fits", async () => {
    const gate = new FakeGate();
    const b = new SessionBudget(limits({ maxQueuedAnswerBytes: 1000 }), {}, () => "k");
    b.bindStdout(gate);
    b.admitRequest("n1", 10);
    b.admitRequest("n2", 10);
    // alone, a reservation larger than the bound goes through
    await b.answerBudget("n1").reserve(5000);
    expect(gate.holds(b)).toBe(true);
    let second = false;
    const p = b
      .answerBudget("n2")
      .reserve(100)
      .then(() => (second = true));
    b.answerBudget("n1").resize(300);
    await Promise.resolve();
    expect(second).toBe(true);
    await p;
    expect(gate.holds(b)).toBe(false);
    b.queue(2000);
    expect(gate.holds(b)).toBe(true);
    b.drained(1600);
    expect(gate.holds(b)).toBe(true);
    b.drained(400);
    expect(b.status()).toMatchObject({ answerHolds: 2, queuedAnswerBytes: 400 });
    expect(gate.holds(b)).toBe(false);
  });

  it("terminal slots are taken at acceptance and given back", () => {
    const b = new SessionBudget(limits(), {}, () => "k");
    expect([b.takeTerminal(2), b.takeTerminal(2), b.takeTerminal(2)]).toEqual([true, true, false]);
    b.returnTerminal();
    expect(b.takeTerminal(2)).toBe(true);
  });
});

describe("AnswerWriter", () => {
  it("writes a long string in slices that read back whole; a line written meanwhile comes after the message", async () => {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    const b = new SessionBudget(limits(), {}, () => "k");
    const w = new AnswerWriter(out, b);
    // quotes, newlines, controls and an emoji straddling every slice boundary
    const unit = 'a"\n\u0001😀';
    let content = "";
    while (content.length < 3 * SLICE_CHARS) content += unit;
    content = `x${content.slice(0, SLICE_CHARS - 2)}😀${content}`;
    const msg = { jsonrpc: "2.0", id: 1, result: { content, tail: "t" } };
    const sending = w.writeMessage(msg);
    w.writeLine('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}\n');
    await sending;
    const lines = Buffer.concat(chunks).toString("utf8").split("\n");
    expect(lines.length).toBe(3);
    expect(JSON.parse(lines[0]!)).toEqual(msg);
    expect(JSON.parse(lines[1]!)).toMatchObject({ id: null });
    // every byte written was charged, and the pipe took them all
    await expect.poll(() => b.status().queuedAnswerBytes).toBe(0);
  });
});

describe("the session log", () => {
  it("escapes control characters and cuts long values, so nothing the agent sent forges a line", () => {
    expect(escapeForLog("a\u001b[31m\nFORGED\u009b", 100)).toBe("a\\u001b[31m\\u000aFORGED\\u009b");
    expect(escapeForLog("x".repeat(300), 10)).toBe(`${"x".repeat(10)}…(+290 chars)`);
  });

  it("keeps to its rate, counts what it drops and says so once", async () => {
    const lines: string[] = [];
    const log = new SessionLog({ warn: (m) => lines.push(m) }, 1024, () => "k\u001b");
    for (let i = 0; i < 1000; i++) log.warn?.(`refused ${"y".repeat(100)} \u001b[2J`, { path: "p\n".repeat(500) });
    expect(lines.length).toBeLessThan(12);
    expect(lines.every((l) => !l.includes("\u001b") && !l.includes("\n"))).toBe(true);
    expect(log.dropped).toBeGreaterThan(980);
    await expect.poll(() => lines.filter((l) => l.includes("dropped")).length, { timeout: 3000 }).toBe(1);
    expect(lines.find((l) => l.includes("dropped"))).toContain("maxLogBytesPerSecond");
  });
});

describe("intakeLimits", () => {
  it("fills the defaults and refuses what is out of range with a TypeError naming the field", () => {
    expect(resolveIntakeLimits(undefined)).toEqual({
      maxMessageBytes: 12 * MiB,
      maxJsonDepth: 64,
      maxJsonValues: 100_000,
      maxRequestsInFlight: 64,
      maxRequestBytesInFlight: 16 * MiB,
      maxQueuedAnswerBytes: 16 * MiB,
      maxLogBytesPerSecond: 64 * 1024,
    });
    expect(() => resolveIntakeLimits({ maxMessageBytes: 33 * MiB })).toThrow(/opts\.intakeLimits\.maxMessageBytes/);
    expect(() => resolveIntakeLimits({ maxJsonDepth: 2 })).toThrow(TypeError);
    expect(() => resolveIntakeLimits({ maxRequestsInFlight: 1.5 })).toThrow(/maxRequestsInFlight/);
    expect(() => resolveIntakeLimits({ bogus: 1 })).toThrow(/opts\.intakeLimits\.bogus is not a limit/);
    expect(() => resolveIntakeLimits([])).toThrow(TypeError);
  });
});

describe("agent values are walked without recursion (finding 4)", () => {
  const deep = (d: number): unknown => {
    let v: unknown = "bottom";
    for (let i = 0; i < d; i++) v = { n: v };
    return v;
  };

  it("a session/new answer with modes nested 100,000 deep: the status snapshot is a copy, not a stack overflow", () => {
    const state = new SessionState();
    state.adopt({
      sessionId: "s",
      modes: { currentModeId: "a", availableModes: [{ id: "a", name: "A", _meta: { deep: deep(100_000) } }] },
    } as never);
    const snap = state.snapshot();
    expect(snap.modes?.currentModeId).toBe("a");
    // (never handed to expect itself: its formatter recurses)
    expect(snap.modes !== state.agent.modes).toBe(true);
  });

  it("a config option whose values nest 100,000 groups deep is checked without a stack overflow", async () => {
    const state = new SessionState();
    let options: unknown = [{ value: "v", name: "V" }];
    for (let i = 0; i < 100_000; i++) options = [{ group: `g${i}`, name: "G", options }];
    state.adopt({
      sessionId: "s",
      configOptions: [{ id: "o", name: "O", type: "select", currentValue: "v", options }],
    } as never);
    const target = { sessionKey: "k", acpSessionId: "s", client: {} as never, state, timeoutMs: 1000 };
    // an unknown value is refused before anything is sent, naming the values the agent offers
    await expect(setConfigOption(target, "o", "nope")).rejects.toMatchObject({ code: "invalid" });
    await expect(setConfigOption(target, "o", "nope")).rejects.toThrow(/\(v\)/);
  });

  it("cloneJson copies deep values and keeps a __proto__ key a plain key", () => {
    const v = JSON.parse('{"__proto__":{"polluted":true},"a":[1,{"b":[2]}]}') as Record<string, unknown>;
    const c = cloneJson(v);
    expect(c).toEqual(v);
    expect(Object.getPrototypeOf(c)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    let d = cloneJson(deep(50_000));
    let depth = 0;
    while (typeof d === "object" && d !== null) {
      d = (d as { n: unknown }).n;
      depth++;
    }
    expect([depth, d]).toEqual([50_000, "bottom"]);
  });
});
