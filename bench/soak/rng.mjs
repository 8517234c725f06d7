// The soak's only source of randomness for its PLAN (which adapter, script and
// ending each session gets). mulberry32: tiny, fast, and the same sequence on
// every Node, so a printed seed replays the same plan. Timing on a busy host is
// not replayable; the plan is.

export function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A generator with the draws the plan needs. Each session gets its own (seed, index) stream. */
export function rng(seed) {
  const next = mulberry32(seed);
  return {
    next,
    /** integer in [lo, hi] */
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    /** one key of a { name: weight } table */
    weighted(table) {
      const entries = Object.entries(table);
      let r = next() * entries.reduce((s, [, w]) => s + w, 0);
      for (const [k, w] of entries) {
        if ((r -= w) < 0) return k;
      }
      return entries[entries.length - 1][0];
    },
    pick: (xs) => xs[Math.floor(next() * xs.length)],
  };
}

/** A stream per (seed, index): adding a draw to one session does not shift every later one. */
export function subSeed(seed, index) {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}
