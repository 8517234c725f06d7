#!/usr/bin/env node
// Splits src/supervisor/ into the folders test/helpers/layer-order.mjs
// orders (SUPERVISOR_LAYERS), the same way scripts/rooms-move.mjs split
// src/acpx/: `git mv` each file of MOVES, then rewrite every relative import
// in src/, test/, bench/, scripts/ and .ci/ that names a moved file, and
// every path to one (`src/supervisor/kill-tree.ts`, `dist/supervisor/…js`)
// in those files, the docs and the README. Only paths that start at src/ or
// dist/ are rewritten: `supervisor/supervisor.ts` alone may name OpenClaw's
// file. Re-runnable and loud as rooms-move.mjs is.
//
//   node scripts/supervisor-rooms-move.mjs          move and rewrite
//   node scripts/supervisor-rooms-move.mjs --check  exit 1 when anything is left to move or rewrite
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const A = "src/supervisor";

/** Each folder's files, by their names in src/supervisor/ before the split. */
const JOBS = {
  // what every folder reads: the public shapes, output caps, keys, watchdog defaults, the tree kill
  shared: ["types.ts", "output.ts", "keys.ts", "watchdog.ts", "kill-tree.ts"],
  // what holds a run beyond its process: a lease that survives a restart, or a cgroup of its own
  hold: ["durability.ts", "run-cgroups.ts"],
  // the record table a run finalizes into
  run: ["registry.ts"],
  core: ["supervisor.ts"],
  exec: ["actions.ts"],
};

/** Files directly in src/supervisor/ that stay there. */
const STAYS = new Set(["index.ts"]);
/** Folders of src/supervisor/ that keep their files (each in SUPERVISOR_LAYERS). */
const KEPT_FOLDERS = new Set(["adapters", "run", "exec", ...Object.keys(JOBS)]);

/** old path → new path, both from the package root. */
const MOVES = new Map(
  Object.entries(JOBS).flatMap(([job, files]) =>
    files.map((f) => {
      const [from, to] = Array.isArray(f) ? f : [f, f];
      return [`${A}/${from}`, `${A}/${job}/${to}`];
    }),
  ),
);

const check = process.argv.includes("--check");
const fail = (msg) => {
  console.error(`supervisor-rooms-move: ${msg}`);
  process.exit(2);
};

/** Every file and folder directly in src/supervisor/ must be known before anything moves. */
function assertKnown() {
  const unknown = [];
  for (const e of readdirSync(join(ROOT, A), { withFileTypes: true })) {
    const p = `${A}/${e.name}`;
    if (e.isDirectory() ? KEPT_FOLDERS.has(e.name) : STAYS.has(e.name) || MOVES.has(p)) continue;
    unknown.push(p);
  }
  if (unknown.length)
    fail(
      `not in the split's mapping (add each to JOBS or STAYS in scripts/supervisor-rooms-move.mjs):\n  ${unknown.join("\n  ")}`,
    );
  for (const [from, to] of MOVES) {
    if (existsSync(join(ROOT, from)) && existsSync(join(ROOT, to))) fail(`both ${from} and ${to} exist`);
    if (!existsSync(join(ROOT, from)) && !existsSync(join(ROOT, to))) fail(`neither ${from} nor ${to} exists`);
  }
}

/** Every tracked file under the given roots whose name matches `re`. */
function tracked(roots, re) {
  const out = execFileSync("git", ["ls-files", "-z", "--", ...roots], { cwd: ROOT, encoding: "utf8" });
  return out.split("\0").filter((p) => p && re.test(p) && existsSync(join(ROOT, p)));
}

/** The path a relative specifier names from `from`, and the same with `.js` read as `.ts`. */
function targetsOf(from, spec) {
  const raw = posix.normalize(posix.join(posix.dirname(from), spec));
  return { raw, ts: raw.replace(/\.js$/, ".ts") };
}

/** The specifier for `to` from `from`, written as `like` was (`.js` for a `.ts` file unless `like` said `.ts`). */
function relativeSpec(from, to, like) {
  let s = posix.relative(posix.dirname(from), to);
  if (!s.startsWith(".")) s = `./${s}`;
  return like.endsWith(".ts") ? s : s.replace(/\.ts$/, ".js");
}

/** Rewrites the relative specifiers of one code file; `was`: its path before this run's move, if it moved now. */
function rewriteImports(path, was, text) {
  const base = was ?? path;
  return text.replace(/(["'])(\.\.?\/[^"'\n]*?)\1/g, (whole, q, spec) => {
    const { raw, ts } = targetsOf(base, spec);
    let now = MOVES.get(ts) ?? MOVES.get(raw);
    if (now === undefined) {
      if (was === undefined) return whole;
      if (existsSync(join(ROOT, ts)) && ts.endsWith(".ts")) now = ts;
      else if (existsSync(join(ROOT, raw))) now = raw;
      else return whole;
    }
    const next = relativeSpec(path, now, spec);
    return next === spec ? whole : `${q}${next}${q}`;
  });
}

/** Rewrites paths that name a moved file (`src/supervisor/kill-tree.ts`, `dist/supervisor/supervisor.js`). */
function rewritePaths(text) {
  return text.replace(/\b(src|dist)\/supervisor\/([\w./-]+?)\.(ts|js|d\.ts)\b/g, (whole, top, rest, ext) => {
    const moved = MOVES.get(`${A}/${rest}.ts`);
    if (moved === undefined) return whole;
    return `${top}/supervisor/${moved.slice(A.length + 1).replace(/\.ts$/, "")}.${ext}`;
  });
}

assertKnown();
const movedNow = new Map();
let changes = 0;
for (const [from, to] of MOVES) {
  if (!existsSync(join(ROOT, from))) continue;
  changes++;
  if (check) continue;
  mkdirSync(dirname(join(ROOT, to)), { recursive: true });
  execFileSync("git", ["mv", from, to], { cwd: ROOT });
  movedNow.set(to, from);
}

const CODE = /\.(ts|mts|cts|mjs|cjs|js|tsx)$/;
const code = tracked(["src", "test", "bench", "scripts", ".ci"], CODE);
for (const p of movedNow.keys()) if (!code.includes(p)) code.push(p);
const prose = tracked(["docs", "README.md", "test", "bench", "scripts", ".ci"], /\.md$/);
for (const p of [...new Set([...code, ...prose])]) {
  if (p === "scripts/supervisor-rooms-move.mjs") continue;
  const text = readFileSync(join(ROOT, p), "utf8");
  let next = CODE.test(p) ? rewriteImports(p, movedNow.get(p), text) : text;
  next = rewritePaths(next);
  if (next !== text) {
    changes++;
    if (check) console.log(`would rewrite ${p}`);
    else writeFileSync(join(ROOT, p), next);
  }
}
console.log(
  `supervisor-rooms-move: ${check ? "left to do" : "done"}: ${changes} change(s), ${movedNow.size} file(s) moved now`,
);
if (check && changes > 0) process.exit(1);
