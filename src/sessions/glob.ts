/**
 * `*`-only glob matching in linear time, for agent-to-agent allow lists.
 *
 * Why not a RegExp: the patterns come from user config, and a backtracking
 * regex (or the textbook recursive matcher) built from `*a*a*a*…*b` runs in
 * time exponential in the number of stars against a long "aaaa…". Even the
 * classic two-pointer matcher with a star backtrack point is O(n·m).
 *
 * Algorithm: split the pattern on `*` into literal segments. Without a star
 * the pattern must equal the text. Otherwise the first segment is anchored
 * at the start, the last at the end, and every middle segment is found
 * left-to-right, greedily, each search starting where the previous match
 * ended. Taking the leftmost occurrence is always safe for `*`-only globs:
 * it leaves the most text for the segments that follow, so if any placement
 * works, the greedy one does. There is never a reason to go back.
 *
 * Complexity: each middle segment is searched with Knuth–Morris–Pratt, which
 * moves forward through the text once per search with amortized O(1) work
 * per character, and each search starts where the previous match ended, so
 * the searches cover disjoint stretches of the text. One match therefore
 * costs O(n + m) for text length n and pattern length m, plus O(m) to build
 * the failure tables (once per `compileStarGlob`). No input can make it
 * superlinear; bench/glob.bench.mjs measures the 4n/n time ratio.
 *
 * Only `*` is special; `?`, `[`, `\` are literal characters. Matching is
 * case-sensitive (agent ids are compared exactly everywhere in this module).
 */

/**
 * Middle segments live as [start, end) offsets into the pattern, and all
 * their KMP failure tables share one Int32Array indexed by pattern offset,
 * so compiling allocates O(1) objects however many stars there are (one
 * typed array per segment made GC, not the algorithm, dominate at 30k stars).
 */
interface CompiledGlob {
  readonly pattern: string;
  readonly hasStar: boolean;
  readonly prefix: string;
  readonly suffix: string;
  /** pairs: segBounds[2i] = start, segBounds[2i+1] = end (exclusive), non-empty segments only */
  readonly segBounds: Int32Array;
  readonly segCount: number;
  /** fail[start + i] = length of the longest proper border of pattern[start..start+i] */
  readonly fail: Int32Array;
}

/** A compiled matcher; reuse it when the same pattern is tested many times. */
export type StarGlobMatcher = (text: string) => boolean;

/** Compiles a `*` glob; O(m) time and space. Throws TypeError for a non-string pattern. */
export function compileStarGlob(pattern: string): StarGlobMatcher {
  if (typeof pattern !== "string") {
    throw new TypeError(`pattern must be a string, got ${pattern === null ? "null" : typeof pattern}`);
  }
  const compiled = compile(pattern);
  return (text: string) => {
    if (typeof text !== "string") return false;
    return run(compiled, text);
  };
}

/** One-shot match: compile + run, O(n + m). */
export function matchStarGlob(pattern: string, text: string): boolean {
  return compileStarGlob(pattern)(text);
}

const STAR = 42; // "*"

function compile(pattern: string): CompiledGlob {
  const m = pattern.length;
  const first = pattern.indexOf("*");
  if (first < 0) {
    return {
      pattern,
      hasStar: false,
      prefix: pattern,
      suffix: "",
      segBounds: new Int32Array(0),
      segCount: 0,
      fail: new Int32Array(0),
    };
  }
  const last = pattern.lastIndexOf("*");
  const fail = new Int32Array(m);
  // at most one non-empty segment per two pattern characters
  const bounds = new Int32Array(m + 2);
  let count = 0;
  let start = first + 1;
  for (let i = first + 1; i <= last; i++) {
    if (pattern.charCodeAt(i) !== STAR) continue;
    // consecutive stars leave empty segments: "**" means the same as "*"
    if (i > start) {
      bounds[2 * count] = start;
      bounds[2 * count + 1] = i;
      count++;
      fillFailure(pattern, start, i, fail);
    }
    start = i + 1;
  }
  return {
    pattern,
    hasStar: true,
    prefix: pattern.slice(0, first),
    suffix: pattern.slice(last + 1),
    segBounds: bounds,
    segCount: count,
    fail,
  };
}

function run(g: CompiledGlob, text: string): boolean {
  if (!g.hasStar) return text === g.pattern;
  const n = text.length;
  // prefix and suffix may not overlap: "a*a" must not match "a"
  if (g.prefix.length + g.suffix.length > n) return false;
  if (!text.startsWith(g.prefix)) return false;
  if (!text.endsWith(g.suffix)) return false;
  let pos = g.prefix.length;
  const end = n - g.suffix.length;
  for (let s = 0; s < g.segCount; s++) {
    const segStart = g.segBounds[2 * s] ?? 0;
    const segEnd = g.segBounds[2 * s + 1] ?? 0;
    const at = kmpFind(g, segStart, segEnd, text, pos, end);
    if (at < 0) return false;
    pos = at + (segEnd - segStart);
  }
  return true;
}

/** KMP failure function of pattern[start, end), written into fail[start..end). */
function fillFailure(p: string, start: number, end: number, fail: Int32Array): void {
  fail[start] = 0;
  let k = 0;
  for (let i = 1; i < end - start; i++) {
    const c = p.charCodeAt(start + i);
    while (k > 0 && c !== p.charCodeAt(start + k)) k = fail[start + k - 1] ?? 0;
    if (c === p.charCodeAt(start + k)) k++;
    fail[start + i] = k;
  }
}

/** Leftmost i in [from, end - len] with text[i, i+len) equal to pattern[segStart, segEnd), else -1. */
function kmpFind(g: CompiledGlob, segStart: number, segEnd: number, text: string, from: number, end: number): number {
  const p = g.pattern;
  const fail = g.fail;
  const len = segEnd - segStart;
  if (end - from < len) return -1;
  let k = 0;
  for (let i = from; i < end; i++) {
    const c = text.charCodeAt(i);
    while (k > 0 && c !== p.charCodeAt(segStart + k)) k = fail[segStart + k - 1] ?? 0;
    if (c === p.charCodeAt(segStart + k)) k++;
    if (k === len) return i - len + 1;
  }
  return -1;
}
