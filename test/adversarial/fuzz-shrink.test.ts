/**
 * The fuzzer's shrinker (bench/fuzz/shrink.mjs), as a matrix: synthetic
 * failing predicates over real catalog sequences, and what the shortest
 * sequence that still fails must be. No process runs: the predicate stands
 * in for a run of the candidate. Every candidate the shrinker asks about
 * must be a sequence the fuzzer could run (invalidReason null), and never
 * asked twice.
 */
import { describe, expect, it } from "vitest";
import { SEQUENCE_OPTIONS } from "../../bench/fuzz/catalog.mjs";
import { drawSequence, invalidReason, type Sequence, type SequenceAction } from "../../bench/fuzz/plan.mjs";
import { ddmin, shrinkSequence } from "../../bench/fuzz/shrink.mjs";

const act = (a: string, p: SequenceAction["p"] = {}): SequenceAction => ({ a, p });
const ESCAPEE = act("escapee", {
  setsid: true,
  envClear: true,
  rootCgroup: true,
  nonDumpable: true,
  killWrapper: true,
});
const KEEPER = act("kill-keeper", { signal: "SIGSTOP" });
const FLOOD = act("terminal-flood", { count: 400, escapee: true });
const STORM = act("fork-storm", { count: 1500, ignoreTerm: true });
const GARBAGE = act("garbage", { bytes: 4096, binary: true });
const WRAPPER = act("kill-wrapper", { signal: "SIGSTOP" });
const MOVE = act("move-into-cgroup", { target: "gateway" });

function seqWith(actions: SequenceAction[]): Sequence {
  const base = drawSequence(46, 0);
  const seq: Sequence = {
    ...base,
    opts: {
      ...base.opts,
      profile: "root",
      keeper: "on",
      hook: "human",
      hookDelayMs: 2500,
      fs: true,
      terminal: true,
      maxTerminals: 4,
      graceMs: 1400,
      handshakeTimeoutMs: 7000,
      turnMs: 3500,
      consume: "slow",
      advertiseClose: true,
      innocent: true,
    },
    actions,
  };
  expect(invalidReason(seq)).toBeNull();
  return seq;
}
const names = (s: Sequence) => s.actions.map((x) => x.a);
const has = (s: Sequence, name: string) => s.actions.some((x) => x.a === name);

interface Row {
  name: string;
  actions: SequenceAction[];
  fails: (s: Sequence) => boolean;
  maxRuns?: number;
  expectShrunk: (s: Sequence, out: { runs: number; complete: boolean }) => void;
}

const ROWS: Row[] = [
  {
    name: "two actions needed together, among six: exactly those two remain, in their order",
    actions: [GARBAGE, ESCAPEE, STORM, FLOOD, KEEPER, WRAPPER],
    fails: (s) => has(s, "escapee") && has(s, "kill-keeper"),
    expectShrunk: (s, out) => {
      expect(names(s)).toEqual(["escapee", "kill-keeper"]);
      expect(out.complete).toBe(true);
    },
  },
  {
    name: "a threshold in one parameter: one action left, its count still over the bound and below where it began, the rest simplest",
    actions: [STORM, FLOOD, GARBAGE],
    fails: (s) => s.actions.some((x) => x.a === "terminal-flood" && Number(x.p.count) > 16),
    expectShrunk: (s) => {
      expect(names(s)).toEqual(["terminal-flood"]);
      const count = Number(s.actions[0]!.p.count);
      expect(count).toBeGreaterThan(16);
      expect(count).toBeLessThan(400);
      expect(s.actions[0]!.p.escapee).toBe(false);
    },
  },
  {
    name: "a pick parameter: it moves to the earliest value that still fails",
    actions: [GARBAGE, WRAPPER],
    fails: (s) => s.actions.some((x) => x.a === "kill-wrapper" && x.p.signal !== "SIGKILL"),
    expectShrunk: (s) => {
      expect(s.actions).toEqual([act("kill-wrapper", { signal: "SIGTERM" })]);
    },
  },
  {
    name: "an option the failure needs is kept; the others go to their simplest",
    actions: [MOVE, GARBAGE],
    fails: (s) => s.opts.profile === "root" && has(s, "move-into-cgroup") && s.opts.graceMs >= 1000,
    expectShrunk: (s) => {
      expect(names(s)).toEqual(["move-into-cgroup"]);
      expect(s.actions[0]!.p.target).toBe("sentinel");
      expect(s.opts.profile).toBe("root");
      expect(s.opts.graceMs).toBeGreaterThanOrEqual(1000);
      expect(s.opts.graceMs).toBeLessThan(1400);
      expect(s.opts).toMatchObject({ keeper: "off", hook: "none", fs: false, terminal: false, innocent: false });
    },
  },
  {
    name: "a failure with no action at all: the agent did nothing, every action goes",
    actions: [ESCAPEE, GARBAGE, STORM],
    fails: () => true,
    expectShrunk: (s) => {
      expect(s.actions).toEqual([]);
      for (const [k, spec] of Object.entries(SEQUENCE_OPTIONS)) {
        const simple =
          "simple" in spec && spec.simple !== undefined
            ? spec.simple
            : "int" in spec
              ? spec.int[0]
              : "pick" in spec
                ? spec.pick[0]
                : false;
        expect(s.opts[k as keyof Sequence["opts"]], k).toBe(simple);
      }
    },
  },
  {
    name: "a failure that does not come back: nothing is removed",
    actions: [ESCAPEE, GARBAGE],
    fails: () => false,
    expectShrunk: (s) => {
      expect(names(s)).toEqual(["escapee", "garbage"]);
      expect(s.actions[0]).toEqual(ESCAPEE);
    },
  },
  {
    name: "a budget of two runs: the sequence so far, said not to be minimal",
    actions: [GARBAGE, ESCAPEE, STORM, FLOOD, KEEPER, WRAPPER],
    fails: (s) => has(s, "kill-keeper"),
    maxRuns: 2,
    expectShrunk: (s, out) => {
      expect(has(s, "kill-keeper")).toBe(true);
      expect(out.runs).toBe(2);
      expect(out.complete).toBe(false);
    },
  },
];

describe("the fuzzer's shrinker (ddmin over actions, then parameters and options)", () => {
  for (const row of ROWS) {
    it(row.name, async () => {
      const seq = seqWith(row.actions);
      expect(row.fails(seq)).toBe(row.name.includes("does not come back") ? false : true);
      const asked = new Set<string>();
      const out = await shrinkSequence(
        seq,
        async (cand) => {
          expect(invalidReason(cand), JSON.stringify(cand)).toBeNull();
          const key = JSON.stringify(cand);
          expect(asked.has(key), "asked twice").toBe(false);
          asked.add(key);
          return row.fails(cand);
        },
        { maxRuns: row.maxRuns ?? 500 },
      );
      expect(out.runs).toBe(asked.size);
      if (!row.name.includes("does not come back")) expect(row.fails(out.seq)).toBe(true);
      row.expectShrunk(out.seq, out);
    });
  }

  it("ddmin on a plain list: the two items a predicate needs, from eight", async () => {
    const items = [1, 2, 3, 4, 5, 6, 7, 8];
    const out = await ddmin(items, async (xs) => xs.includes(3) && xs.includes(6), { exhausted: false });
    expect(out).toEqual([3, 6]);
  });
});
