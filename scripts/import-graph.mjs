#!/usr/bin/env node
// The import graph of src/ (every relative import: static, type-only,
// `export … from`, dynamic, a type's `import("…")`) and the include graph of
// native/ (`#include "…"`), and what a reader checks on them: the circles
// (expect none, in src/ or native/), the depth of each folder's graph (the
// longest chain of imports among its own files), the arrows that run back up
// the checked folder order (test/helpers/layer-order.mjs; expect none), and
// how many files each folder holds. The architecture test reads the same
// graph (importGraph, circles) so the numbers here are the ones it checks.
//
//   node scripts/import-graph.mjs            the report
//   node scripts/import-graph.mjs --json     the same, as JSON
//
// Exit 1 when there is a circle or a back-up arrow.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAst } from "vite";
import { orderProblem } from "../test/helpers/layer-order.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Every file under `dir` (a path from `root`) whose name matches `re`, as paths from `root`, sorted. */
function filesUnder(root, dir, re) {
  const out = [];
  const walk = (d) => {
    if (!existsSync(join(root, d))) return;
    for (const e of readdirSync(join(root, d), { withFileTypes: true })) {
      const p = posix.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (re.test(e.name)) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

/** The relative specifiers a TypeScript text imports, of every kind. */
function specifiersOf(text, path) {
  const ast = parseAst(text, { lang: "ts" }, path);
  const out = [];
  const visit = (n) => {
    if (n === null || typeof n !== "object") return;
    if (Array.isArray(n)) return n.forEach(visit);
    if (typeof n.type === "string") {
      const s = n.source;
      if (
        s &&
        typeof s.value === "string" &&
        /^(ImportDeclaration|ExportNamedDeclaration|ExportAllDeclaration|ImportExpression|TSImportType)$/.test(n.type)
      )
        out.push(s.value);
    }
    for (const k of Object.keys(n)) if (k !== "parent") visit(n[k]);
  };
  visit(ast);
  return out.filter((s) => s.startsWith("."));
}

/** The file a relative specifier names (`x.js` is `x.ts`), or null when none exists. */
function resolveTs(root, from, spec) {
  const target = posix.normalize(posix.join(posix.dirname(from), spec));
  for (const c of [target.replace(/\.js$/, ".ts"), target.replace(/\.mjs$/, ".mts"), target, `${target}.ts`]) {
    if (/\.m?ts$/.test(c) && existsSync(join(root, c))) return c;
  }
  return null;
}

/**
 * The import graph: Map<file, Set<file>> over src/ (TypeScript) and native/
 * (C and C++ by `#include "…"`), every file a node, paths from the package root.
 */
export function importGraph(root = ROOT) {
  const graph = new Map();
  for (const f of filesUnder(root, "src", /\.m?ts$/)) {
    const to = new Set();
    for (const s of specifiersOf(readFileSync(join(root, f), "utf8"), f)) {
      const t = resolveTs(root, f, s);
      if (t !== null) to.add(t);
    }
    graph.set(f, to);
  }
  for (const f of filesUnder(root, "native", /\.(c|cc|cpp|h|hpp)$/)) {
    const to = new Set();
    for (const m of readFileSync(join(root, f), "utf8").matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)) {
      const t = posix.normalize(posix.join(posix.dirname(f), m[1]));
      if (existsSync(join(root, t))) to.add(t);
    }
    graph.set(f, to);
  }
  return graph;
}

/** The circles of a graph: each strongly connected part of more than one file (or a file importing itself), sorted. */
export function circles(graph) {
  let index = 0;
  const idx = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  const strong = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const part = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1 || graph.get(v)?.has(v)) out.push(part.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!idx.has(v)) strong(v);
  return out.sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/** The folder graph: one node per folder, an arrow where a file of one imports a file of another. */
export function folderGraph(graph) {
  const out = new Map();
  for (const [f, to] of graph) {
    const from = posix.dirname(f);
    if (!out.has(from)) out.set(from, new Set());
    for (const t of to) if (posix.dirname(t) !== from) out.get(from).add(posix.dirname(t));
  }
  return out;
}

/** Per folder: its files, and the longest chain of imports among them (1 = no file imports another of the folder). */
export function folderDepths(graph) {
  const byFolder = new Map();
  for (const f of graph.keys()) {
    const d = posix.dirname(f);
    if (!byFolder.has(d)) byFolder.set(d, []);
    byFolder.get(d).push(f);
  }
  const rows = [];
  for (const [folder, files] of [...byFolder].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const memo = new Map();
    const depth = (f, seen) => {
      if (memo.has(f)) return memo.get(f);
      if (seen.has(f)) return 0; // a circle: counted by circles(), not here
      seen.add(f);
      let best = 0;
      for (const t of graph.get(f) ?? []) if (posix.dirname(t) === folder) best = Math.max(best, depth(t, seen));
      seen.delete(f);
      memo.set(f, best + 1);
      return best + 1;
    };
    rows.push({ folder, files: files.length, depth: Math.max(...files.map((f) => depth(f, new Set()))) });
  }
  return rows;
}

/** The arrows that run back up the checked order (layer-order.mjs): [from, to, why]. */
export function backUpArrows(graph) {
  const out = [];
  for (const [f, to] of graph) {
    if (!f.startsWith("src/")) continue;
    for (const t of to) {
      const why = orderProblem(f, t);
      if (why !== null) out.push([f, t, why]);
    }
  }
  return out.sort((a, b) => (a[0] + a[1] < b[0] + b[1] ? -1 : 1));
}

function report(root) {
  const graph = importGraph(root);
  const src = new Map([...graph].filter(([f]) => f.startsWith("src/")));
  const native = new Map([...graph].filter(([f]) => f.startsWith("native/")));
  const arrows = [...graph.values()].reduce((n, s) => n + s.size, 0);
  return {
    files: graph.size,
    arrows,
    circlesSrc: circles(src),
    circlesNative: circles(native),
    circlesBetweenFolders: circles(folderGraph(src)),
    backUp: backUpArrows(src),
    folders: folderDepths(graph),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const r = report(ROOT);
  if (process.argv.includes("--json")) console.log(JSON.stringify(r, null, 2));
  else {
    const list = (parts) => (parts.length ? parts.map((p) => `\n  ${p.join(" ↔ ")}`).join("") : "");
    console.log(`${r.files} files, ${r.arrows} import arrows (src/ imports, native/ includes)`);
    console.log(`import circles in src/: ${r.circlesSrc.length}${list(r.circlesSrc)}`);
    console.log(`include circles in native/: ${r.circlesNative.length}${list(r.circlesNative)}`);
    console.log(`circles between folders of src/: ${r.circlesBetweenFolders.length}${list(r.circlesBetweenFolders)}`);
    console.log(
      `back-up arrows (against test/helpers/layer-order.mjs): ${r.backUp.length}${r.backUp.map(([f, t, why]) => `\n  ${f} → ${t}: ${why}`).join("")}`,
    );
    console.log("folder                          files  depth");
    for (const row of r.folders)
      console.log(`${row.folder.padEnd(32)}${String(row.files).padStart(5)}  ${String(row.depth).padStart(5)}`);
  }
  const bad = r.circlesSrc.length + r.circlesNative.length + r.circlesBetweenFolders.length + r.backUp.length;
  process.exit(bad === 0 ? 0 : 1);
}
