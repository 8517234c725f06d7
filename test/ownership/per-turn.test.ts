/**
 * ownership/verify/waiters.ts: the questions of one event-loop turn answered by one call, in
 * order, a failing call rejecting each of its questions (one call at a
 * time: the questions asked meanwhile go into the next); many waiters of
 * one event woken a chunk per turn, in order, with timers running between;
 * callers of a costly step let through one per turn, timers between two.
 */
import { performance } from "node:perf_hooks";
import { describe, expect, it, vi } from "vitest";
import {
  oneCallAtATime,
  OnePerTurn,
  perTurn,
  wakeInChunks,
  Waiters,
  WAKE_CHUNK,
} from "../../src/ownership/verify/waiters.js";

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

describe("oneCallAtATime", () => {
  it("questions asked while a call runs wait for it and go together into the next call; never answered by a call made before they were asked", async () => {
    const calls: number[][] = [];
    const release: Array<() => void> = [];
    const ask = oneCallAtATime(async (qs: readonly number[]) => {
      calls.push([...qs]);
      await new Promise<void>((r) => release.push(r));
      return qs.map((q) => q * 10);
    });
    const first = [ask(1), ask(2)];
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    // asked in three later turns while the first call runs
    const later: Promise<number>[] = [];
    for (const q of [3, 4, 5]) {
      later.push(ask(q));
      await new Promise((r) => setImmediate(r));
    }
    expect(calls).toEqual([[1, 2]]);
    release[0]!();
    expect(await Promise.all(first)).toEqual([10, 20]);
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(calls[1]).toEqual([3, 4, 5]);
    release[1]!();
    expect(await Promise.all(later)).toEqual([30, 40, 50]);
  });

  it("a failing call rejects its own questions only; the ones waiting behind it get the next call", async () => {
    let n = 0;
    let releaseFirst!: () => void;
    const ask = oneCallAtATime(async (qs: readonly string[]) => {
      if (n++ === 0) {
        await new Promise<void>((r) => (releaseFirst = r));
        throw new Error(`no answer for ${qs.join(",")}`);
      }
      return qs.map((q) => q.toUpperCase());
    });
    const a = ask("a");
    await vi.waitFor(() => expect(n).toBe(1));
    const b = ask("b");
    releaseFirst();
    await expect(a).rejects.toThrow("no answer for a");
    await expect(b).resolves.toBe("B");
  });
});

describe("wakeInChunks", () => {
  it("wakes the first WAKE_CHUNK at once and the rest a chunk per turn, in order; a timer due meanwhile fires before the last", async () => {
    const woken: number[] = [];
    let timerAt = -1;
    setTimeout(() => (timerAt = woken.length), 0);
    // the timer is due once a millisecond has passed: each chunk takes that long
    const busy = () => {
      const until = performance.now() + 1.2 / WAKE_CHUNK;
      while (performance.now() < until);
    };
    const n = WAKE_CHUNK * 20 + 7;
    const done = new Promise<void>((r) =>
      wakeInChunks([...Array.from({ length: n }, (_, i) => () => (busy(), woken.push(i))), r]),
    );
    expect(woken).toEqual(Array.from({ length: WAKE_CHUNK }, (_, i) => i));
    await done;
    expect(woken).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(timerAt).toBeGreaterThan(0);
    expect(timerAt).toBeLessThan(n);
  });
});

describe("Waiters", () => {
  it("hands one answer to every caller, a caller after it settled included; a rejection reaches every caller", async () => {
    let answer!: (v: string) => void;
    const w = new Waiters(new Promise<string>((r) => (answer = r)));
    const callers = Array.from({ length: WAKE_CHUNK * 3 }, () => w.wait());
    answer("walk");
    expect(await Promise.all(callers)).toEqual(callers.map(() => "walk"));
    expect(await w.wait()).toBe("walk");
    const failed = new Waiters(Promise.reject(new Error("no walk")));
    const both = await Promise.allSettled([failed.wait(), failed.wait()]);
    expect(both.map((r) => (r.status === "rejected" ? (r.reason as Error).message : "?"))).toEqual([
      "no walk",
      "no walk",
    ]);
    await expect(failed.wait()).rejects.toThrow("no walk");
  });
});

describe("OnePerTurn", () => {
  it("lets callers that came in one turn through one per turn, in order, with a timer firing between two", async () => {
    const gate = new OnePerTurn();
    const seen: string[] = [];
    // each caller, once through, sets a timer and then runs for 2 ms (a costly step): the timer is due by the
    // next turn and fires in its timers phase, before the next caller is let through
    const caller = async (i: number) => {
      await gate.turn();
      seen.push(`through ${i}`);
      setTimeout(() => seen.push(`timer after ${i}`), 1);
      for (const until = performance.now() + 2; performance.now() < until;);
    };
    await Promise.all([caller(1), caller(2), caller(3)]);
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toEqual(["through 1", "timer after 1", "through 2", "timer after 2", "through 3", "timer after 3"]);
    // idle again: a later caller is let through on its own
    await caller(4);
    expect(seen.at(-1)).toBe("through 4");
  });
});
