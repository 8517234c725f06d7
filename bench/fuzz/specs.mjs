// Parameter specs of the fuzzer's catalog: how a value is drawn from the seed
// and which simpler values the shrinker tries instead. One spec per parameter:
//   { int: [lo, hi], log?: true, simple?: n }   an integer (log-uniform when log)
//   { pick: [a, b, …] }                          one of the values; the first is the simplest
//   { bool: p, simple?: bool }                   true with probability p
// A spec's "simple" value is what the shrinker tries first (default: lo, the
// first pick, false): a failure that still shows with it did not need more.

/** Draws one value of `spec` from `r` (bench/soak/rng.mjs's generator). */
export function drawValue(r, spec) {
  if (spec.int) {
    const [lo, hi] = spec.int;
    if (!spec.log || lo < 1) return r.int(lo, hi);
    return Math.min(hi, Math.max(lo, Math.round(Math.exp(Math.log(lo) + r.next() * (Math.log(hi) - Math.log(lo))))));
  }
  if (spec.pick) return r.pick(spec.pick);
  if (spec.bool !== undefined) return r.chance(spec.bool);
  throw new Error(`fuzz: a parameter spec without int, pick or bool: ${JSON.stringify(spec)}`);
}

/** The spec's simplest value. */
export function simpleValue(spec) {
  if (spec.simple !== undefined) return spec.simple;
  if (spec.int) return spec.int[0];
  if (spec.pick) return spec.pick[0];
  return false;
}

/**
 * Simpler values to try in place of `value`, simplest first, never `value`
 * itself: the simple value, then for an integer the points 1/2, 3/4, 7/8 …
 * of the way back to `value` (geometrically for a log spec). The shrinker
 * keeps the first that still fails and asks again from there, so a bound
 * that fails at 1400 and not below 1000 is narrowed to near 1000 in a few
 * runs; for a pick, every earlier entry.
 */
export function simplerValues(spec, value) {
  const out = [];
  const add = (v) => {
    if (v !== value && !out.includes(v)) out.push(v);
  };
  const s = simpleValue(spec);
  add(s);
  if (spec.int && typeof value === "number") {
    for (let k = 1; k <= 6; k++) {
      const f = 1 / 2 ** k;
      const v = spec.log && s > 0 ? Math.round(value * (s / value) ** f) : Math.round(value - (value - s) * f);
      if (v === value) break;
      add(v);
    }
  } else if (spec.pick) {
    const at = spec.pick.indexOf(value);
    for (let i = 0; i < at; i++) add(spec.pick[i]);
  }
  return out;
}

/** Whether `value` is one `spec` can draw (a replayed sequence is checked before it runs). */
export function validValue(spec, value) {
  if (spec.int) return Number.isInteger(value) && value >= spec.int[0] && value <= spec.int[1];
  if (spec.pick) return spec.pick.some((p) => p === value);
  return typeof value === "boolean";
}
