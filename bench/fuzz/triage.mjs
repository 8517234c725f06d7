// From results to failures someone can act on. A sequence's own failures
// stand when no gateway-level breach touched it while it ran; a breach with
// one sequence running is that sequence's. The sequences running together
// when a breach names several (or when their gateway died under them) are run
// again, each alone on a gateway of its own: what fails alone is theirs;
// a breach none of them repeats alone is reported for the group. Then each
// distinct invariant's shortest failing sequence is shrunk (shrink.mjs),
// every candidate run alone.
import { shrinkSequence } from "./shrink.mjs";

const uniq = (xs) => [...new Set(xs)];
const incidentFailure = (i) => ({ inv: i.inv, detail: `${i.detail} [gateway ${i.gateway}]` });

/** Splits the main phase's results: { confirmed: [{seq, failures, how}], isolate: [seq], incidents } */
export function classify(results, incidents) {
  const byId = new Map(results.map((r) => [r.id, r]));
  const confirmed = [];
  const isolate = [];
  for (const r of results) {
    const mine = incidents.filter((i) => i.active.includes(r.id));
    const shared = mine.some((i) => i.active.filter((id) => byId.has(id)).length > 1);
    if (shared || (r.gatewayGone && mine.length === 0)) isolate.push(r.seq);
    else if (r.failures.length || mine.length || r.harness)
      confirmed.push({
        seq: r.seq,
        failures: [
          ...r.failures,
          ...mine.map(incidentFailure),
          ...(r.harness ? [{ inv: "harness", detail: r.harness.slice(0, 500) }] : []),
        ],
        how: mine.length ? "alone on its gateway when the breach came" : "its own checks",
      });
  }
  const groups = incidents
    .map((i) => ({ ...i, indices: uniq(i.active.map((id) => byId.get(id)?.seq.index).filter((x) => x !== undefined)) }))
    .filter((i) => i.indices.length > 1);
  return { confirmed, isolate, groups };
}

/**
 * Runs each of `seqs` alone (at most `max` of them; the rest stay in their
 * group's report); answers the confirmed failures and the indices that
 * passed alone.
 */
export async function isolateAll(runner, seqs, log, max = Infinity) {
  const confirmed = [];
  const passed = new Set();
  if (seqs.length > max)
    log(`  only the first ${max} run again alone (budget); the rest are reported with their group`);
  for (const seq of seqs.slice(0, max)) {
    const r = await runner.runAlone(seq);
    log(`  #${seq.index} alone: ${r.failures.length ? uniq(r.failures.map((f) => f.inv)).join(", ") : "passes"}`);
    if (r.failures.length) confirmed.push({ seq, failures: r.failures, how: "run again alone" });
    else passed.add(seq.index);
  }
  return { confirmed, passed };
}

/** Group breaches none of whose sequences repeated that invariant alone. */
export function togetherOnly(groups, confirmed) {
  const out = [];
  for (const g of groups) {
    const repeated = confirmed.some((c) => g.indices.includes(c.seq.index) && c.failures.some((f) => f.inv === g.inv));
    if (!repeated && !out.some((o) => o.inv === g.inv && o.indices.join() === g.indices.join())) out.push(g);
  }
  return out;
}

/** The shrink targets: per distinct first invariant, the confirmed sequence with the fewest actions. */
export function shrinkTargets(confirmed, max) {
  const best = new Map();
  for (const c of confirmed) {
    const inv = c.failures[0].inv;
    if (inv === "harness") continue;
    const cur = best.get(inv);
    if (!cur || c.seq.actions.length < cur.seq.actions.length) best.set(inv, c);
  }
  return [...best.entries()].slice(0, max).map(([inv, c]) => ({ inv, rec: c }));
}

/** Shrinks `rec` against `inv`: every candidate run alone; `retries` more tries before a candidate counts as passing. */
export async function shrinkOne(runner, rec, inv, { maxRuns, budgetMs, retries = 0, log }) {
  const fails = async (cand) => {
    for (let i = 0; i <= retries; i++) {
      const r = await runner.runAlone(cand);
      if (r.failures.some((f) => f.inv === inv)) return true;
    }
    return false;
  };
  if (!rec.how.includes("alone") && !(await fails(rec.seq)))
    return { seq: rec.seq, runs: 1, complete: false, notAlone: true };
  return shrinkSequence(rec.seq, fails, { maxRuns, deadline: Date.now() + budgetMs, log });
}
