// Shrinking a failing sequence to the shortest one that still fails: delta
// debugging (Zeller's ddmin) over its actions, then each action's parameters
// and the sequence's options moved toward their simplest values (specs.mjs).
// `fails(candidate)` runs a candidate and answers whether it still fails the
// SAME way (the caller compares the invariant); it is asked at most once per
// distinct candidate. A budget (runs, deadline) bounds the work: the best
// sequence so far is returned with `complete: false` when it runs out.
import { BY_NAME, SEQUENCE_OPTIONS } from "./catalog.mjs";
import { invalidReason } from "./plan.mjs";
import { simpleValue, simplerValues } from "./specs.mjs";

class Budget {
  constructor({ maxRuns = Infinity, deadline = Infinity, fails, valid }) {
    Object.assign(this, { maxRuns, deadline, fails, valid, runs: 0, cache: new Map(), out: false });
  }
  get exhausted() {
    return this.runs >= this.maxRuns || Date.now() >= this.deadline;
  }
  /** Does `candidate` fail? An invalid candidate, or one asked past the budget, counts as passing. */
  async test(candidate) {
    const key = JSON.stringify(candidate);
    if (this.cache.has(key)) return this.cache.get(key);
    if (this.valid && !this.valid(candidate)) return false;
    if (this.exhausted) {
      this.out = true;
      return false;
    }
    this.runs++;
    const r = (await this.fails(candidate)) === true;
    this.cache.set(key, r);
    return r;
  }
}

const split = (xs, n) => {
  const out = [];
  const size = Math.ceil(xs.length / n);
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
};

/**
 * ddmin: a smallest sublist of `items` (order kept) for which `failsWith`
 * still holds, trying subsets then complements at growing granularity, and
 * last the empty list.
 */
export async function ddmin(items, failsWith, budget) {
  let list = items;
  let n = 2;
  while (list.length >= 2 && !budget.exhausted) {
    const chunks = split(list, n);
    let next = null;
    for (const c of chunks) if (next === null && (await failsWith(c))) next = { list: c, n: 2 };
    for (let i = 0; next === null && i < chunks.length && chunks.length > 2; i++) {
      const rest = chunks.filter((_, j) => j !== i).flat();
      if (await failsWith(rest)) next = { list: rest, n: Math.max(n - 1, 2) };
    }
    if (next) ({ list, n } = next);
    else if (n >= list.length) break;
    else n = Math.min(n * 2, list.length);
  }
  if (list.length === 1 && (await failsWith([]))) list = [];
  return list;
}

/**
 * One value after another toward the simplest, keeping each that still
 * fails: at most three tries a round (the simplest, then halfway, then three
 * quarters back), three rounds: each try is a run of the sequence.
 */
async function simplifyValue(spec, value, failsWith) {
  let cur = value;
  for (let moved = true, round = 0; moved && round < 3; round++) {
    moved = false;
    for (const v of simplerValues(spec, cur).slice(0, 3)) {
      if (await failsWith(v)) {
        cur = v;
        moved = true;
        break;
      }
    }
  }
  return cur;
}

/**
 * Shrinks `seq` (plan.mjs) against `fails`. Options: maxRuns, deadline
 * (Date.now() ms), valid (default: plan.mjs's invalidReason is null), log.
 * Answers { seq, runs, complete }.
 */
export async function shrinkSequence(seq, fails, opts = {}) {
  const valid = opts.valid ?? ((s) => invalidReason(s) === null);
  const budget = new Budget({ ...opts, fails, valid });
  const log = opts.log ?? (() => {});
  let best = seq;
  const withActions = (actions) => ({ ...best, actions });
  best = withActions(await ddmin(best.actions, (acts) => budget.test(withActions(acts)), budget));
  log(`actions: ${seq.actions.length} -> ${best.actions.length} (${budget.runs} runs)`);
  for (let i = 0; i < best.actions.length && !budget.exhausted; i++) {
    const def = BY_NAME.get(best.actions[i].a);
    // every parameter at its simplest at once first: one run when none of them matters
    const simplest = Object.fromEntries(Object.entries(def?.params ?? {}).map(([k, spec]) => [k, simpleValue(spec)]));
    const allSimple = withActions(best.actions.map((x, j) => (j === i ? { ...x, p: simplest } : x)));
    if (await budget.test(allSimple)) {
      best = allSimple;
      continue;
    }
    for (const [k, spec] of Object.entries(def?.params ?? {})) {
      const at = (v) => {
        const actions = best.actions.map((x, j) => (j === i ? { ...x, p: { ...x.p, [k]: v } } : x));
        return withActions(actions);
      };
      const v = await simplifyValue(spec, best.actions[i].p[k], (cand) => budget.test(at(cand)));
      best = at(v);
    }
  }
  // the options likewise: all at their simplest, else all but those the actions need
  const simpleOpts = Object.fromEntries(Object.entries(SEQUENCE_OPTIONS).map(([k, spec]) => [k, simpleValue(spec)]));
  const needed = ["profile", "fs", "terminal", "keeper"];
  const keepNeeded = { ...simpleOpts, ...Object.fromEntries(needed.map((k) => [k, best.opts[k]])) };
  for (const o of [simpleOpts, keepNeeded]) {
    if (await budget.test({ ...best, opts: o })) {
      best = { ...best, opts: o };
      break;
    }
  }
  for (const [k, spec] of Object.entries(SEQUENCE_OPTIONS)) {
    if (budget.exhausted) break;
    const at = (v) => ({ ...best, opts: { ...best.opts, [k]: v } });
    best = at(await simplifyValue(spec, best.opts[k], (cand) => budget.test(at(cand))));
  }
  log(`parameters and options simplified (${budget.runs} runs in all)`);
  return { seq: best, runs: budget.runs, complete: !budget.out && !budget.exhausted };
}
