/**
 * The adversarial fuzzer (bench/fuzz/, `npm run fuzz`) in the suite: first a
 * check of its checks (a sequence with no attack passes every invariant, and
 * faults planted at its end are each named: a process of the sequence left
 * running, a signalled sentinel, a blocked event loop, a gateway's RSS), then
 * a tiny seeded budget that must hold every invariant. Real gateway
 * processes, real hostile agents, as root (some sequences as uid 65534).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeSequence, drawSequence, type Sequence } from "../../bench/fuzz/plan.mjs";
import { Runner, type ExecutionResult, type Failure } from "../../bench/fuzz/runner.mjs";
import { classify } from "../../bench/fuzz/triage.mjs";

const WHY_NOT =
  process.platform !== "linux"
    ? "Linux only (the fuzzer reads /proc)"
    : process.getuid?.() !== 0
      ? "not root (the fuzzer runs gateways as root and as uid 65534)"
      : null;
if (WHY_NOT) console.log(`[fuzz-budget.test] skipping: ${WHY_NOT}`);
const note = WHY_NOT ? ` [skipped: ${WHY_NOT}]` : "";

const SEED = 46;
const invs = (fs: readonly Failure[]) => [...new Set(fs.map((f) => f.inv))].sort();
const lines: string[] = [];

function quiet(seq: Sequence): Sequence {
  return {
    ...seq,
    opts: { ...seq.opts, profile: "root", keeper: "off", innocent: false, hook: "none" },
    actions: [],
  };
}

describe.skipIf(WHY_NOT !== null)(`the adversarial fuzzer${note}`, () => {
  let runner: Runner;
  beforeAll(async () => {
    runner = new Runner({ seed: SEED, concurrency: 2, log: (l) => lines.push(l) });
    await runner.setup();
  }, 60_000);
  afterAll(async () => {
    await runner?.teardown();
  }, 60_000);

  it("a sequence with no attack holds every invariant; faults planted at its end are each named", async () => {
    const seq = quiet(drawSequence(SEED, 0));
    const clean = await runner.runAlone(seq);
    expect(clean.failures, JSON.stringify(clean.failures)).toEqual([]);
    const planted = await runner.runAlone(seq, ["leftover", "signal", "block"]);
    expect(invs(planted.failures)).toEqual(["foreign-harmed", "loop-block", "shutdown-left-processes"]);
    const fat = await runner.runAlone(seq, ["rss"]);
    expect(invs(fat.failures)).toEqual(["rss"]);
  }, 180_000);

  it(`a tiny budget (seed ${SEED}: 3 sequences, 2 at once) holds every invariant`, async () => {
    const seqs = [0, 1, 2].map((i) => drawSequence(SEED, i));
    const results: ExecutionResult[] = await runner.runMany(seqs, 2);
    expect(results.map((r) => r.seq.index)).toEqual([0, 1, 2]);
    const cls = classify(results, runner.incidents);
    const alone = [];
    for (const s of cls.isolate) alone.push({ seq: s, failures: (await runner.runAlone(s)).failures });
    const failing = [...cls.confirmed, ...alone.filter((a) => a.failures.length)];
    const text = failing
      .map(
        (f) =>
          `${describeSequence(f.seq)}\n${f.failures.map((x) => `    ${x.inv}: ${x.detail.slice(0, 300)}`).join("\n")}`,
      )
      .join("\n");
    expect(
      failing.length,
      `failing sequences of seed ${SEED} (replay: npm run fuzz -- --seed ${SEED} --only N):\n${text}`,
    ).toBe(0);
    expect(cls.groups.filter((g) => !failing.some((f) => g.indices.includes(f.seq.index)))).toEqual([]);
  }, 400_000);
});
