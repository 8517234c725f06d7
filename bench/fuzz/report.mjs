// What the fuzzer prints: the seed first, each failing sequence with its
// details and a command that replays it, each shrunk one, and a summary per
// invariant. --report FILE writes the same as JSON.
import { writeFileSync } from "node:fs";
import { INVARIANTS } from "./judge.mjs";
import { describeSequence, encodeSequence } from "./plan.mjs";

const uniq = (xs) => [...new Set(xs)];
const indent = (s, pad = "    ") => s.replace(/^/gm, pad);

export const replayBySeed = (seq) => `npm run fuzz -- --seed ${seq.seed} --only ${seq.index}`;
export const replayByCode = (seq) => `npm run fuzz -- --replay ${encodeSequence(seq)}`;

export function printFailure(log, rec) {
  const invs = uniq(rec.failures.map((f) => f.inv));
  log(`FAIL #${rec.seq.index} [${invs.join(", ")}] (${rec.how})`);
  log(indent(describeSequence(rec.seq)));
  for (const f of rec.failures.slice(0, 12)) log(`    ${f.inv}: ${f.detail.slice(0, 600)}`);
  if (rec.failures.length > 12) log(`    … ${rec.failures.length - 12} more`);
  log(`    replay: ${replayBySeed(rec.seq)}`);
}

export function printShrunk(log, inv, rec, shrunk) {
  if (shrunk.notAlone) {
    log(
      `SHRINK #${rec.seq.index} [${inv}]: it does not fail alone; not shrunk (replay it with its company: --concurrency)`,
    );
    return;
  }
  log(
    `SHRINK #${rec.seq.index} [${inv}]: ${rec.seq.actions.length} action(s) -> ${shrunk.seq.actions.length} in ${shrunk.runs} run(s)${shrunk.complete ? "" : " (budget ran out: not minimal)"}`,
  );
  log(indent(describeSequence(shrunk.seq)));
  log(`    replay: ${replayByCode(shrunk.seq)}`);
}

/** A breach of several sequences none of which repeated it alone (`passed`: the indices run alone that passed). */
export function printGroup(log, g, seed, passed) {
  const all = g.indices.every((i) => passed.has(i));
  const why = all ? "none of them fails it alone" : "not all of them were run again alone (budget)";
  log(
    `FAIL together #${g.indices.join(", #")} [${g.inv}]: ${g.detail} (${why}; replay: npm run fuzz -- --seed ${seed} --only ${g.indices.join(",")} --concurrency ${g.indices.length})`,
  );
}

/** The summary table; answers the number of distinct failing sequences. */
export function printSummary(log, { seed, ran, skipped, seconds, confirmed, groups }) {
  const byInv = new Map();
  for (const c of confirmed)
    for (const inv of uniq(c.failures.map((f) => f.inv))) byInv.set(inv, [...(byInv.get(inv) ?? []), c.seq.index]);
  for (const g of groups) byInv.set(g.inv, [...(byInv.get(g.inv) ?? []), `(${g.indices.join("+")})`]);
  log("");
  log(
    `fuzz: seed ${seed}: ${ran} sequences in ${seconds.toFixed(0)} s (${(ran / Math.max(1, seconds)).toFixed(2)}/s)${skipped ? `, ${skipped} skipped` : ""}; ${confirmed.length} failing, ${groups.length} failing only together`,
  );
  for (const [inv, idx] of [...byInv.entries()].sort((a, b) => b[1].length - a[1].length))
    log(
      `  ${inv.padEnd(24)} ${String(idx.length).padStart(4)}  ${INVARIANTS[inv] ?? ""}  #${idx.slice(0, 12).join(" #")}${idx.length > 12 ? " …" : ""}`,
    );
  return confirmed.length + groups.length;
}

export function writeReport(file, data) {
  const out = {
    ...data,
    confirmed: data.confirmed.map((c) => ({
      index: c.seq.index,
      how: c.how,
      invariants: uniq(c.failures.map((f) => f.inv)),
      failures: c.failures,
      sequence: c.seq,
      replay: replayBySeed(c.seq),
    })),
    shrunk: data.shrunk.map((s) => ({ ...s, replay: replayByCode(s.seq) })),
  };
  writeFileSync(file, `${JSON.stringify(out, null, 1)}\n`);
}
