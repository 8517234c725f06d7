/**
 * perTurn (turns.ts): the questions of one event-loop turn answered by one
 * call, in order; a failing call rejects each of its questions.
 */
import { describe, expect, it } from "vitest";
import { perTurn } from "../../src/ownership/turns.js";

describe("perTurn", () => {
  it("answers the questions of one turn with one call, each caller its own answer", async () => {
    const calls: number[][] = [];
    const ask = perTurn(async (qs: readonly number[]) => {
      calls.push([...qs]);
      return qs.map((q) => q * 10);
    });
    const first = await Promise.all([ask(1), ask(2), ask(3)]);
    expect(first).toEqual([10, 20, 30]);
    // asked in a later turn: a call of its own
    expect(await ask(4)).toBe(40);
    expect(calls).toEqual([[1, 2, 3], [4]]);
  });

  it("rejects every question of a batch whose call failed, and answers the next batch", async () => {
    let fail = true;
    const ask = perTurn(async (qs: readonly string[]) => {
      if (fail) throw new Error(`no answer for ${qs.join(",")}`);
      return qs.map((q) => q.toUpperCase());
    });
    const both = await Promise.allSettled([ask("a"), ask("b")]);
    expect(both.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    expect((both[0] as PromiseRejectedResult).reason.message).toBe("no answer for a,b");
    fail = false;
    expect(await ask("c")).toBe("C");
  });
});
