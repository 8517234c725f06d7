import { describe, expect, it } from "vitest";
import { createRunRegistry } from "../../src/supervisor/run/registry.js";
import {
  FRESH_WATCHDOG_DEFAULTS,
  RESUME_WATCHDOG_DEFAULTS,
  WATCHDOG_MIN_TIMEOUT_MS,
  resolveNoOutputTimeoutMs,
  resolveRunNoOutputTimeoutMs,
} from "../../src/supervisor/shared/watchdog.js";
import { encodeKey, encodeKeySequence } from "../../src/supervisor/shared/keys.js";
import { CappedOutput } from "../../src/supervisor/shared/output.js";
import type { RunRecord } from "../../src/supervisor/shared/types.js";

const rec = (runId: string): RunRecord => ({
  runId,
  sessionId: "s",
  backendId: "b",
  mode: "child",
  state: "starting",
  createdAtMs: 0,
  startedAtMs: 0,
  updatedAtMs: 0,
  lastOutputAtMs: 0,
});

describe("run registry", () => {
  it("moves starting → running → exiting → exited and never backwards", () => {
    const r = createRunRegistry();
    r.add(rec("a"));
    r.setState("a", "running", { pid: 42 });
    expect(r.get("a")).toMatchObject({ state: "running", pid: 42 });
    r.setState("a", "exiting");
    r.setState("a", "running");
    expect(r.get("a")!.state).toBe("exiting");
    r.finalize("a", { reason: "manual-cancel", exitCode: null, exitSignal: "SIGTERM" });
    r.setState("a", "running");
    expect(r.get("a")).toMatchObject({ state: "exited", terminationReason: "manual-cancel" });
  });

  it("finalize is idempotent: the first reason wins and only the first call says so", () => {
    const r = createRunRegistry();
    r.add(rec("a"));
    const first = r.finalize("a", { reason: "exit", exitCode: 0, exitSignal: null });
    const second = r.finalize("a", { reason: "manual-cancel", exitCode: null, exitSignal: "SIGKILL" });
    expect(first?.firstFinalize).toBe(true);
    expect(second?.firstFinalize).toBe(false);
    expect(second?.record).toMatchObject({ terminationReason: "exit", exitCode: 0, exitSignal: null });
    expect(r.finalize("missing", { reason: "exit", exitCode: 0, exitSignal: null })).toBeNull();
  });

  it("first reason wins in the other order too: a cancel finalized first is not relabelled by the exit", () => {
    const r = createRunRegistry();
    r.add(rec("b"));
    const first = r.finalize("b", { reason: "manual-cancel", exitCode: null, exitSignal: "SIGTERM" });
    const second = r.finalize("b", { reason: "exit", exitCode: 0, exitSignal: null });
    expect(first?.firstFinalize).toBe(true);
    expect(second?.firstFinalize).toBe(false);
    expect(r.get("b")).toMatchObject({
      state: "exited",
      terminationReason: "manual-cancel",
      exitCode: null,
      exitSignal: "SIGTERM",
    });
  });

  it("prunes the oldest exited records beyond the cap and keeps live ones", () => {
    const r = createRunRegistry({ maxExitedRecords: 2 });
    for (const id of ["a", "b", "c", "live"]) r.add(rec(id));
    for (const id of ["a", "b", "c"]) r.finalize(id, { reason: "exit", exitCode: 0, exitSignal: null });
    expect(r.get("a")).toBeUndefined();
    expect(r.get("b")?.state).toBe("exited");
    expect(r.get("c")?.state).toBe("exited");
    expect(r.get("live")?.state).toBe("starting");
  });
});

describe("watchdog defaults (single source)", () => {
  it("has the seed's numbers", () => {
    expect(FRESH_WATCHDOG_DEFAULTS).toEqual({ noOutputTimeoutRatio: 0.8, minMs: 180_000, maxMs: 600_000 });
    expect(RESUME_WATCHDOG_DEFAULTS).toEqual({ noOutputTimeoutRatio: 0.3, minMs: 60_000, maxMs: 180_000 });
    expect(WATCHDOG_MIN_TIMEOUT_MS).toBe(1_000);
  });

  it("clamps ratio × timeout into [min, max] and below the overall timeout", () => {
    // 0.8 × 1 000 000 = 800 000 → max 600 000
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 1_000_000 })).toBe(600_000);
    // 0.8 × 300 000 = 240 000, inside [180 000, 600 000]
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 300_000 })).toBe(240_000);
    // the min (180 000) would exceed the overall timeout: kept 1 s below it
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 100_000 })).toBe(99_000);
    // resumed: 0.3 × 400 000 = 120 000
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 400_000, resumed: true })).toBe(120_000);
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 1_000_000, resumed: true })).toBe(180_000);
    // never under the 1 s floor
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 500 })).toBe(1_000);
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 300_000, override: { noOutputTimeoutMs: 5_000 } })).toBe(5_000);
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 10_000, override: { noOutputTimeoutMs: 50_000 } })).toBe(9_000);
    expect(() => resolveNoOutputTimeoutMs({ timeoutMs: 0 })).toThrow(RangeError);
  });

  it("a run's no-output deadline goes through the same resolver: clamped below its overall timeout", () => {
    expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: 60_000, timeoutMs: 2_500 })).toBe(1_500);
    expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: 5_000, timeoutMs: 300_000 })).toBe(5_000);
    expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: 400, timeoutMs: 300_000 })).toBe(1_000);
    // no overall timeout: the explicit value, never under the floor
    expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: 700 })).toBe(1_000);
    expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: 7_000.9 })).toBe(7_000);
    for (const off of [undefined, 0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: off, timeoutMs: 10_000 })).toBeUndefined();
    }
  });
});

describe("watchdog: the cron trigger lifts the resumed-session ceiling (OpenClaw's resolver)", () => {
  it("a resumed cron run without a configured resume watchdog is watched like a fresh run", () => {
    // OpenClaw's cases: 600 s runs, resumed
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 600_000, resumed: true, trigger: "cron" })).toBe(480_000);
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 600_000, resumed: true, trigger: "user" })).toBe(180_000);
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 600_000, resumed: true })).toBe(180_000);
    // the fresh profile's own bounds apply, ceiling included
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 3_600_000, resumed: true, trigger: "cron" })).toBe(
      FRESH_WATCHDOG_DEFAULTS.maxMs,
    );
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 100_000, resumed: true, trigger: "cron" })).toBe(99_000);
  });
  it("a configured resume watchdog wins over the trigger; a fresh run is unchanged by it", () => {
    const override = { noOutputTimeoutRatio: 0.2, minMs: 1_000, maxMs: 120_000 };
    expect(resolveNoOutputTimeoutMs({ timeoutMs: 600_000, resumed: true, trigger: "cron", override })).toBe(120_000);
    expect(
      resolveNoOutputTimeoutMs({ timeoutMs: 600_000, resumed: true, trigger: "cron", override: { maxMs: 200_000 } }),
    ).toBe(180_000);
    expect(
      resolveNoOutputTimeoutMs({
        timeoutMs: 600_000,
        resumed: true,
        trigger: "cron",
        override: { noOutputTimeoutMs: 42_000 },
      }),
    ).toBe(42_000);
    for (const timeoutMs of [5_000, 600_000, 3_600_000]) {
      expect(resolveNoOutputTimeoutMs({ timeoutMs, trigger: "cron" })).toBe(resolveNoOutputTimeoutMs({ timeoutMs }));
    }
  });
});

describe("registry.listByScope", () => {
  it("returns copies of one scope's records in every state, oldest first", () => {
    const r = createRunRegistry();
    r.add({ ...rec("a"), scopeKey: "S" });
    r.add({ ...rec("b"), scopeKey: "T" });
    r.add({ ...rec("c"), scopeKey: "S" });
    r.add(rec("d"));
    r.setState("c", "running", { pid: 7 });
    r.finalize("a", { reason: "manual-cancel", exitCode: null, exitSignal: null });
    const s = r.listByScope("S");
    expect(s.map((x) => [x.runId, x.state])).toEqual([
      ["a", "exited"],
      ["c", "running"],
    ]);
    s[0]!.state = "running";
    expect(r.get("a")!.state).toBe("exited");
    expect(r.listByScope("nope")).toEqual([]);
  });
});

describe("send-keys encoding", () => {
  it("maps named keys, control and meta chords to terminal bytes", () => {
    expect(encodeKey("Enter")).toBe("\r");
    expect(encodeKey("C-c")).toBe("\x03");
    expect(encodeKey("C-d")).toBe("\x04");
    expect(encodeKey("C-z")).toBe("\x1a");
    expect(encodeKey("Up")).toBe("\x1b[A");
    expect(encodeKey("left")).toBe("\x1b[D");
    expect(encodeKey("PageDown")).toBe("\x1b[6~");
    expect(encodeKey("M-x")).toBe("\x1bx");
    expect(encodeKey("q")).toBe("q");
    expect(encodeKeySequence({ keys: ["Escape", "Tab"], hex: ["1b5b41"], literal: "héllo" })).toBe("\x1b\t\x1b[Ahéllo");
  });

  it("refuses unknown key names instead of guessing", () => {
    expect(() => encodeKey("Entr")).toThrow(TypeError);
    expect(() => encodeKey("")).toThrow(TypeError);
    expect(() => encodeKeySequence({ hex: ["zz"] })).toThrow(TypeError);
  });
});

describe("capped output", () => {
  it("keeps the tail and says how much was dropped", () => {
    const out = new CappedOutput(10);
    for (let i = 0; i < 5; i++) out.append("abcdef");
    const s = out.toString();
    expect(s.endsWith("abcdef".repeat(5).slice(-10))).toBe(true);
    expect(s.length).toBeLessThan(10 + 80);
    expect(s).toMatch(/output truncated, 20 earlier characters dropped/);
    expect(new CappedOutput(10).toString()).toBe("");
  });
});
