/**
 * The pieces of the byte bounds on their own, without processes: the size
 * estimate, the option's validation, the unwatched backlog's drops and
 * their markers, the stdout gate over a real Node stream, and the OpenClaw
 * event queue's room for its producer.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { SessionNotification } from "@agentclientprotocol/sdk";
import { createAcpxLifecycleController } from "../../src/acpx/controller/controller.js";
import { MAX_BACKLOG, UpdateRouter, type DroppedUpdates } from "../../src/acpx/connection/session-updates.js";
import { StdoutGate } from "../../src/acpx/connection/stdout-backpressure.js";
import {
  DEFAULT_SESSION_BACKLOG_BYTES,
  DEFAULT_TURN_BACKLOG_BYTES,
  estimateJsonBytes,
  resolveUpdateLimits,
} from "../../src/acpx/connection/update-bytes.js";
import { EventQueue } from "../../src/openclaw/event-queue.js";

const note = (i: number, chars: number): SessionNotification => ({
  sessionId: "s",
  update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "x".repeat(chars) } },
  _meta: { i },
});

describe("estimateJsonBytes", () => {
  it("is close to the JSON text's length for an update, and survives hostile nesting", () => {
    for (const n of [note(1, 10), note(2, 400_000), { a: [1, true, null, "é", { b: [] }] }]) {
      const json = JSON.stringify(n).length;
      const est = estimateJsonBytes(n);
      expect(est).toBeGreaterThanOrEqual(json * 0.9);
      expect(est).toBeLessThanOrEqual(json * 1.5);
    }
    let deep: unknown = [];
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(estimateJsonBytes(deep)).toBeGreaterThan(200_000);
  });
});

describe("updateLimits", () => {
  it("defaults to 4 MiB each and refuses what is not a byte count", async () => {
    expect(resolveUpdateLimits(undefined)).toEqual({
      turnBacklogBytes: DEFAULT_TURN_BACKLOG_BYTES,
      sessionBacklogBytes: DEFAULT_SESSION_BACKLOG_BYTES,
    });
    expect(resolveUpdateLimits({ turnBacklogBytes: 65536 }).turnBacklogBytes).toBe(65536);
    expect(() => resolveUpdateLimits({ turnBacklogBytes: 12 })).toThrow(/turnBacklogBytes must be an integer/);
    expect(() => resolveUpdateLimits({ sessionBacklogBytes: 1.5e6 + 0.5 })).toThrow(TypeError);
    expect(() => resolveUpdateLimits({ backlog: 1 } as never)).toThrow(/updateLimits.backlog is not a limit/);
    await expect(
      createAcpxLifecycleController({ stateDir: "/nonexistent/never-made", updateLimits: { turnBacklogBytes: -1 } }),
    ).rejects.toThrow(/opts.updateLimits.turnBacklogBytes/);
  });
});

describe("the unwatched backlog", () => {
  it("keeps the newest within its byte bound; the first update a listener gets after a gap says how many went", () => {
    const full: number[] = [];
    const r = new UpdateRouter({ backlogBytes: 10_000, onBacklogFull: (b) => full.push(b) });
    for (let i = 0; i < 100; i++) r.deliver(note(i, 1000));
    expect(full).toEqual([10_000]);
    const got: { i: number; gap?: DroppedUpdates }[] = [];
    r.subscribe((_u, n, gap) => got.push({ i: (n._meta as { i: number }).i, ...(gap ? { gap } : {}) }));
    const kept = got.length;
    expect(kept).toBeGreaterThan(0);
    expect(got.map((g) => g.i)).toEqual([...Array(kept).keys()].map((k) => 100 - kept + k));
    expect(got[0]!.gap).toEqual({ count: 100 - kept, bytes: r.droppedBytes });
    expect(r.dropped).toBe(100 - kept);
    // with a listener attached nothing is held or dropped
    r.deliver(note(100, 1000));
    expect(got.at(-1)).toEqual({ i: 100 });
  });

  it("drops an update larger than the whole bound itself, and marks the next update delivered", () => {
    const r = new UpdateRouter({ backlogBytes: 10_000 });
    r.deliver(note(0, 100));
    r.deliver(note(1, 50_000));
    const got: { i: number; gap?: DroppedUpdates }[] = [];
    r.subscribe((_u, n, gap) => got.push({ i: (n._meta as { i: number }).i, ...(gap ? { gap } : {}) }));
    expect(got).toEqual([{ i: 0 }]);
    r.deliver(note(2, 100));
    expect(got[1]).toMatchObject({ i: 2, gap: { count: 1 } });
    expect(got[1]!.gap!.bytes).toBeGreaterThan(50_000);
  });

  it("still caps the count of tiny updates", () => {
    const r = new UpdateRouter({ backlogBytes: 1024 * 1024 * 1024 });
    for (let i = 0; i < MAX_BACKLOG + 5; i++) r.deliver(note(i, 0));
    expect(r.dropped).toBe(5);
  });
});

describe("StdoutGate", () => {
  it("a holder stops the reading (the bytes stay in the pipe's stream) until every holder let go", async () => {
    const input = new PassThrough();
    const gate = new StdoutGate(input);
    const reader = gate.readable.getReader();
    input.write("a");
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("a");
    const a = {};
    const b = {};
    gate.hold(a);
    gate.hold(b);
    expect(gate.held).toBe(true);
    const pending = reader.read();
    input.write("b");
    // the chunk waits in the Node stream: nothing reaches the reader while held
    await new Promise((r) => setImmediate(r));
    expect(input.readableLength).toBe(1);
    gate.release(a);
    await new Promise((r) => setImmediate(r));
    expect(input.readableLength).toBe(1);
    gate.release(b);
    expect(new TextDecoder().decode((await pending).value)).toBe("b");
    expect(gate.pauses).toBe(1);
    input.end();
    expect((await reader.read()).done).toBe(true);
  });

  it("a stream destroyed before its end errors the reader as Readable.toWeb does (AbortError)", async () => {
    const input = new PassThrough();
    const reader = new StdoutGate(input).readable.getReader();
    input.destroy();
    await expect(reader.read()).rejects.toMatchObject({ name: "AbortError" });
  });

  it("a read delivered after the transport cancelled (its connection closed) is dropped, never thrown from the data event (fuzz seed 9122026: the gateway crashed with ERR_INVALID_STATE)", async () => {
    const input = new PassThrough();
    const reader = new StdoutGate(input).readable.getReader();
    await reader.cancel(new Error("connection closed"));
    // a chunk libuv had already read when the stream was destroyed
    expect(() => input.emit("data", Buffer.from("late"))).not.toThrow();
  });
});

describe("the OpenClaw event queue", () => {
  it("gives its producer room only once the consumer has read it down to half its bound, or closed it", async () => {
    const q = new EventQueue<string>((s) => s.length, 10);
    for (let i = 0; i < 4; i++) q.push("xxxx");
    let roomy = false;
    const room = q.room().then(() => (roomy = true));
    await q.next();
    await q.next();
    await new Promise((r) => setImmediate(r));
    expect(roomy).toBe(false);
    await q.next();
    await room;
    expect(roomy).toBe(true);
    q.push("yyyyyyyyyyyy");
    const closed = q.room();
    q.close();
    await closed;
  });
});
