#!/usr/bin/env node
// Splits src/acpx/ by job into the folders test/helpers/layer-order.mjs
// orders (ACPX_LAYERS): `git mv` each file of MOVES, then rewrite every
// relative import in src/, test/, bench/, scripts/ and .ci/ that names a
// moved file, and every path to one (`acpx/launch.ts`, `dist/acpx/…js`) in
// those files, the docs and the README. Re-runnable: a file already at its
// new path is left there, and a second run changes nothing. Loud: a file
// directly in src/acpx/ that is neither moved nor meant to stay there stops
// the run before anything moves (place it in MOVES or STAYS).
//
//   node scripts/rooms-move.mjs          move and rewrite
//   node scripts/rooms-move.mjs --check  exit 1 when anything is left to move or rewrite
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const A = "src/acpx";

/** Each job's files, by their names in src/acpx/ before the split. */
const JOBS = {
  launch: [
    "launch.ts",
    "lifeline.ts",
    "wrapper-start.ts",
    "wrapper-end.ts",
    "wrapper-env.ts",
    "stderr-ring.ts",
    "install-wrapper.ts",
    "early-exit.ts",
    "fixture-agent.ts",
  ],
  report: ["errors.ts", "logger.ts"],
  connection: [
    "acp-client.ts",
    "handshake.ts",
    "prompt-turn.ts",
    "resume.ts",
    "turn-stream.ts",
    "session-controls.ts",
    "conversation.ts",
    "permissions.ts",
    "client-fs.ts",
    "fs-beneath.ts",
    "client-terminal.ts",
    "session-updates.ts",
    "update-bytes.ts",
    "intake-limits.ts",
    "intake-stream.ts",
    "answer-writer.ts",
    "json-scan.ts",
    "line-framer.ts",
    "session-budget.ts",
    "stdout-backpressure.ts",
    "stdout-probe.ts",
    "sdk-guard.ts",
    "session-id.ts",
  ],
  sessions: [
    "ensure-input.ts",
    "session-limits.ts",
    "session-reuse.ts",
    "spawn-session.ts",
    "ensure-attempt.ts",
    "live-sessions.ts",
    "session-store.ts",
    "close-session.ts",
    "session-status.ts",
    "raw-adapter.ts",
    "conversation-options.ts",
    // re-adoption reads the live table and the store: a session's job, above the durable wire
    ["durable/adopt.ts", "adopt.ts"],
    ["durable/adopt-record.ts", "adopt-record.ts"],
  ],
  controller: [
    "controller.ts",
    "controller-guard.ts",
    "controller-hooks.ts",
    "controller-open.ts",
    "controller-reconcile.ts",
    // split by hand afterwards: each type to the job that owns it
    "types.ts",
  ],
};

/** Files directly in src/acpx/ that stay there. */
const STAYS = new Set(["index.ts"]);
/** Folders of src/acpx/ that keep their files (each in ACPX_LAYERS). */
const KEPT_FOLDERS = new Set(["wrapper", "durable", "keeper", ...Object.keys(JOBS)]);

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
  console.error(`rooms-move: ${msg}`);
  process.exit(2);
};

/** Every file and folder directly in src/acpx/ must be known before anything moves. */
function assertKnown() {
  const unknown = [];
  for (const e of readdirSync(join(ROOT, A), { withFileTypes: true })) {
    const p = `${A}/${e.name}`;
    if (e.isDirectory() ? KEPT_FOLDERS.has(e.name) : STAYS.has(e.name) || MOVES.has(p)) continue;
    unknown.push(p);
  }
  for (const d of ["durable"]) {
    for (const e of readdirSync(join(ROOT, A, d))) {
      const p = `${A}/${d}/${e}`;
      if (!["protocol.ts", "options.ts", "attached.ts", "waiting.ts"].includes(e) && !MOVES.has(p)) unknown.push(p);
    }
  }
  if (unknown.length)
    fail(
      `not in the split's mapping (add each to JOBS or STAYS in scripts/rooms-move.mjs):\n  ${unknown.join("\n  ")}`,
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

/** Rewrites paths that name a moved file (`src/acpx/launch.ts`, `dist/acpx/launch.js`, `acpx/launch.ts`). */
function rewritePaths(text) {
  return text.replace(/\bacpx\/([\w./-]+?)\.(ts|js|d\.ts)\b/g, (whole, rest, ext) => {
    const moved = MOVES.get(`${A}/${rest}.ts`);
    if (moved === undefined) return whole;
    return `acpx/${moved.slice(A.length + 1).replace(/\.ts$/, "")}.${ext}`;
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
  if (p === "scripts/rooms-move.mjs") continue;
  const text = readFileSync(join(ROOT, p), "utf8");
  let next = CODE.test(p) ? rewriteImports(p, movedNow.get(p), text) : text;
  next = rewritePaths(next);
  if (next !== text) {
    changes++;
    if (check) console.log(`would rewrite ${p}`);
    else writeFileSync(join(ROOT, p), next);
  }
}
console.log(`rooms-move: ${check ? "left to do" : "done"}: ${changes} change(s), ${movedNow.size} file(s) moved now`);
if (check && changes > 0) process.exit(1);
