/**
 * settleOnDispose's own rules, on a turn made by hand (the real turns, with
 * real adapters, are in controller-dispose.test.ts): a turn that ended is let
 * go of (the controller's end no longer reaches it), and a turn running at
 * the end hands out what it had buffered before it throws.
 */
import { describe, expect, it } from "vitest";
import type { SessionUpdate } from "@agentclientprotocol/sdk";
import { ControllerEnd, settleOnDispose } from "../../src/acpx/controller/controller-guard.js";
import type { TurnResult, TurnStream } from "../../src/acpx/connection/turn-stream.js";

const chunk = (text: string): SessionUpdate => ({
  sessionUpdate: "agent_message_chunk",
  content: { type: "text", text },
});

/** A turn whose updates and end the test drives: push() buffers (or hands to a waiting next()), finish() ends it. */
function handTurn(): { turn: TurnStream; push(u: SessionUpdate): void; finish(r: TurnResult): void } {
  const items: SessionUpdate[] = [];
  let waiter: ((r: IteratorResult<SessionUpdate>) => void) | undefined;
  let done = false;
  let finish: (r: TurnResult) => void = () => undefined;
  const result = new Promise<TurnResult>((r) => (finish = r));
  const iterator: AsyncIterator<SessionUpdate> = {
    next: () => {
      if (items.length > 0) return Promise.resolve({ value: items.shift()!, done: false });
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise((r) => (waiter = r));
    },
  };
  return {
    turn: {
      events: { [Symbol.asyncIterator]: () => iterator },
      result,
      cancel: async () => ({ cancelSent: false, turnEnded: true }),
    },
    push: (u) => {
      const w = waiter;
      waiter = undefined;
      if (w) w({ value: u, done: false });
      else items.push(u);
    },
    finish: (r) => {
      done = true;
      waiter?.({ value: undefined, done: true });
      finish(r);
    },
  };
}

describe("settleOnDispose", () => {
  it("a turn that ended before the controller did keeps its result and its events", async () => {
    const end = new ControllerEnd();
    const t = handTurn();
    const turn = settleOnDispose(t.turn, end);
    t.push(chunk("a"));
    t.finish({ stopReason: "end_turn", cancelRequested: false });
    await turn.result;
    end.endedAs = "disposed";
    end.failRunningTurns();
    await expect(turn.result).resolves.toEqual({ stopReason: "end_turn", cancelRequested: false });
    const got: SessionUpdate[] = [];
    for await (const u of turn.events) got.push(u);
    expect(got).toEqual([chunk("a")]);
  });

  it("a running turn: a waiting next() and the result reject at the end", async () => {
    const end = new ControllerEnd();
    const turn = settleOnDispose(handTurn().turn, end);
    const pending = turn.events[Symbol.asyncIterator]().next();
    end.endedAs = "shut down";
    end.failRunningTurns();
    await expect(pending).rejects.toMatchObject({ name: "AcpxControllerDisposedError", how: "shut down" });
    await expect(turn.result).rejects.toMatchObject({ name: "AcpxControllerDisposedError", how: "shut down" });
  });

  it("a running turn: the updates buffered before the end are read first, then the error", async () => {
    const end = new ControllerEnd();
    const t = handTurn();
    const turn = settleOnDispose(t.turn, end);
    t.push(chunk("one"));
    t.push(chunk("two"));
    end.endedAs = "disposed";
    end.failRunningTurns();
    const got: SessionUpdate[] = [];
    const err = await (async () => {
      for await (const u of turn.events) got.push(u);
    })().catch((e: unknown) => e);
    expect(got).toEqual([chunk("one"), chunk("two")]);
    expect(err).toMatchObject({ name: "AcpxControllerDisposedError", how: "disposed" });
  });
});
