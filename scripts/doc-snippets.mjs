#!/usr/bin/env node
// Every TypeScript and JavaScript block of the shipped docs (README.md and the
// docs/ pages package.json "files" ships: scripts/shipped-docs.mjs) is a
// test. Each block is written to a file of its own in a consumer folder set
// up as a user's: `"type": "module"`, proclease installed, a stock
// `tsc --init` tsconfig (strict), and type-checked there; `allowJs` and
// `checkJs` are the only additions, so a ```js block is checked too. A block
// marked runnable is also run with node, and must print exactly the ```text
// block that follows it and leave its temp dir empty.
//
// A block is marked by an HTML comment on the line before its fence (blank
// lines between are allowed):
//   <!-- snippet: run -->        run it too
//   <!-- snippet: fragment -->   not a whole file: skipped; rare (at most one per ten blocks)
//
//   node scripts/doc-snippets.mjs                    type-check against this checkout's build (npm run build first)
//   node scripts/doc-snippets.mjs --run              …and run the runnable blocks
//   node scripts/doc-snippets.mjs --tarball X.tgz    CI: a fresh consumer folder with the packed tarball, the
//                                                    project's TypeScript and @types/node; checks and runs the
//                                                    blocks of the pages that tarball ships
//   --keep                                           keep the consumer folder and say where it is
//
// A problem is printed as `doc:line: …` (the doc's line, not the generated
// file's) and the exit code is 1.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { shippedDocs } from "./shipped-docs.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const LANGS = new Map([
  ["ts", "ts"],
  ["typescript", "ts"],
  ["mts", "ts"],
  ["js", "js"],
  ["javascript", "js"],
  ["mjs", "js"],
]);
const MARKER = /^\s*<!--\s*snippet:\s*(\S+)\s*-->\s*$/;
const KINDS = new Set(["run", "fragment"]);
/** at most one fragment per this many checked blocks (rounded up): a fragment is the exception */
export const BLOCKS_PER_FRAGMENT = 10;

/**
 * The fenced blocks of one Markdown text: { lang, line (of the opening
 * fence, 1-based), code, marker (the comment before it, if any) }.
 */
export function fencedBlocks(text) {
  const lines = text.split("\n");
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/.exec(lines[i]);
    if (!open) continue;
    const fence = open[2];
    let j = i + 1;
    while (j < lines.length && !lines[j].trimStart().startsWith(fence)) j++;
    let k = i - 1;
    while (k >= 0 && lines[k].trim() === "") k--;
    const m = k >= 0 ? MARKER.exec(lines[k]) : null;
    out.push({
      lang: open[3].toLowerCase(),
      line: i + 1,
      code: lines.slice(i + 1, j).join("\n") + "\n",
      marker: m?.[1],
    });
    i = j;
  }
  return out;
}

/**
 * Every TS/JS block of the shipped docs under docsRoot, with what to do with
 * it, and the problems found reading them (an unknown marker, a runnable
 * block without its output, too many fragments).
 */
export function collectSnippets(docsRoot) {
  const snippets = [];
  const problems = [];
  for (const doc of shippedDocs(docsRoot)) {
    const blocks = fencedBlocks(readFileSync(join(docsRoot, doc), "utf8"));
    blocks.forEach((b, n) => {
      const ext = LANGS.get(b.lang);
      if (b.marker !== undefined && !KINDS.has(b.marker)) {
        problems.push(`${doc}:${b.line}: unknown marker "snippet: ${b.marker}" (run or fragment)`);
        return;
      }
      if (ext === undefined) {
        if (b.marker !== undefined) problems.push(`${doc}:${b.line}: a snippet marker on a ${b.lang || "plain"} block`);
        return;
      }
      const kind = b.marker ?? "check";
      const s = {
        doc,
        line: b.line,
        ext,
        kind,
        code: b.code,
        file: `${doc.replace(/\.md$/, "").replaceAll("/", "_")}-L${b.line}.${ext}`,
      };
      if (kind === "run") {
        const next = blocks.slice(n + 1).find((x) => x.lang !== "");
        if (ext !== "js") problems.push(`${doc}:${b.line}: a runnable block must be js (node runs it as it is)`);
        else if (next?.lang !== "text")
          problems.push(
            `${doc}:${b.line}: a runnable block needs the \`\`\`text block of what it prints right after it`,
          );
        else s.expected = next.code;
      }
      snippets.push(s);
    });
  }
  const fragments = snippets.filter((s) => s.kind === "fragment");
  const allowed = Math.ceil((snippets.length - fragments.length) / BLOCKS_PER_FRAGMENT);
  if (fragments.length > allowed)
    problems.push(
      `${fragments.length} fragment blocks (${fragments.map((s) => `${s.doc}:${s.line}`).join(", ")}), at most ${allowed} for ${snippets.length - fragments.length} checked ones: make them whole files`,
    );
  return { snippets, problems };
}

/** A consumer folder: "type": "module", proclease and @types/node resolvable, a stock `tsc --init` tsconfig. Returns its tsc. */
function consumer(dir, { packageRoot, tarball }) {
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name: "doc-snippets", private: true, type: "module" })}\n`,
  );
  let tsc;
  if (tarball) {
    const dev = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")).devDependencies;
    execFileSync(
      "npm",
      [
        "install",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        "--silent",
        resolve(tarball),
        `typescript@${dev.typescript}`,
        `@types/node@${dev["@types/node"]}`,
      ],
      { cwd: dir, stdio: ["ignore", "inherit", "inherit"] },
    );
    tsc = join(dir, "node_modules/.bin/tsc");
  } else {
    // this checkout as the installed package (its dist/: build first), its @types beside it
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(packageRoot, join(dir, "node_modules/proclease"), "dir");
    symlinkSync(join(packageRoot, "node_modules/@types"), join(dir, "node_modules/@types"), "dir");
    tsc = join(packageRoot, "node_modules/.bin/tsc");
  }
  execFileSync(tsc, ["--init"], { cwd: dir, stdio: "ignore" });
  // the stock tsconfig, untouched; only JavaScript is added, so ```js blocks are checked as well
  writeFileSync(
    join(dir, "tsconfig.snippets.json"),
    `${JSON.stringify({ extends: "./tsconfig.json", compilerOptions: { allowJs: true, checkJs: true, noEmit: true }, include: ["snippets"] }, null, 2)}\n`,
  );
  return tsc;
}

/** tsc's diagnostics, each moved to the doc line it came from. */
function typecheck(dir, tsc, snippets) {
  const r = spawnSync(tsc, ["-p", "tsconfig.snippets.json", "--pretty", "false"], { cwd: dir, encoding: "utf8" });
  const byFile = new Map(snippets.map((s) => [`snippets/${s.file}`, s]));
  const problems = [];
  for (const l of `${r.stdout}${r.stderr}`.split("\n")) {
    const m = /^(snippets\/[^(]+)\((\d+),(\d+)\): (.*)$/.exec(l);
    const s = m && byFile.get(m[1]);
    if (s) problems.push(`${s.doc}:${s.line + Number(m[2])}:${m[3]}: ${m[4]}`);
    else if (/^\s/.test(l) && problems.length > 0) problems[problems.length - 1] += `\n${l}`;
    else if (l.trim() !== "") problems.push(`tsc: ${l}`);
  }
  if (r.status !== 0 && problems.length === 0) problems.push(`tsc exited ${r.status} without a diagnostic`);
  return problems;
}

/** A runnable block, run with node in the consumer folder: its stdout must be the doc's, its temp dir left empty. */
function runBlock(dir, s) {
  const tmp = mkdtempSync(join(tmpdir(), "proclease-snippet-tmp-"));
  try {
    const r = spawnSync(process.execPath, [join("snippets", s.file)], {
      cwd: dir,
      encoding: "utf8",
      timeout: 120_000,
      // the gateways a block starts register in an instance index of their own (CI's, or one in the
      // consumer folder), never in the host's: the check leaves the host as it found it
      env: {
        ...process.env,
        TMPDIR: tmp,
        PROCLEASE_INSTANCE_INDEX: process.env.PROCLEASE_INSTANCE_INDEX ?? join(dir, "instance-index"),
      },
    });
    if (r.status !== 0) return [`${s.doc}:${s.line}: node exited ${r.status ?? r.signal}:\n${r.stderr.trim()}`];
    const problems = [];
    if (r.stdout !== s.expected)
      problems.push(`${s.doc}:${s.line}: printed\n${r.stdout}\nwhere the doc says\n${s.expected}`);
    const left = readdirSync(tmp);
    if (left.length > 0) problems.push(`${s.doc}:${s.line}: left ${left.join(", ")} in its temp dir`);
    return problems;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Checks the shipped docs' snippets under docsRoot (default: this checkout,
 * or with a tarball the pages installed from it) against the package at
 * packageRoot (its build), or against a packed tarball. Returns the blocks
 * and every problem, each naming its doc line.
 */
export function checkSnippets({ docsRoot, packageRoot = ROOT, tarball, run = false, keep = false, log = () => {} }) {
  const dir = mkdtempSync(join(tmpdir(), "proclease-doc-snippets-"));
  try {
    const tsc = consumer(dir, { packageRoot, tarball });
    // with a tarball, the pages it ships, as installed: what a user of that tarball reads
    const { snippets, problems } = collectSnippets(docsRoot ?? (tarball ? join(dir, "node_modules/proclease") : ROOT));
    mkdirSync(join(dir, "snippets"));
    const checked = snippets.filter((s) => s.kind !== "fragment");
    for (const s of checked) writeFileSync(join(dir, "snippets", s.file), s.code);
    problems.push(...typecheck(dir, tsc, checked));
    for (const s of snippets) {
      const ran = run && s.kind === "run" && s.expected !== undefined ? runBlock(dir, s) : null;
      if (ran) problems.push(...ran);
      log(
        `${s.doc}:${s.line} ${s.ext}: ${s.kind === "fragment" ? "fragment, not checked" : `type-checked${ran ? ", ran" : ""}`}`,
      );
    }
    return { snippets, problems, dir: keep ? dir : undefined };
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1]);
if (isMain) {
  const args = process.argv.slice(2);
  const at = args.indexOf("--tarball");
  const tarball = at >= 0 ? args[at + 1] : undefined;
  if (at >= 0 && !tarball) throw new Error("--tarball needs a path");
  const { snippets, problems, dir } = checkSnippets({
    tarball,
    run: tarball !== undefined || args.includes("--run"),
    keep: args.includes("--keep"),
    log: (l) => console.log(`  ${l}`),
  });
  const fragments = snippets.filter((s) => s.kind === "fragment").length;
  console.log(
    `doc snippets: ${snippets.length} TypeScript/JavaScript blocks in the shipped docs, ${snippets.filter((s) => s.kind === "run").length} runnable, ${fragments} fragment(s); against ${tarball ?? "this checkout's build"}`,
  );
  if (dir) console.log(`consumer folder kept: ${dir}`);
  for (const p of problems) console.error(p);
  if (problems.length > 0) {
    console.error(`doc snippets: ${problems.length} problem(s)`);
    process.exit(1);
  }
  console.log(
    "doc snippets: every block type-checks" +
      (tarball || args.includes("--run") ? " and every runnable block prints what its doc says" : ""),
  );
}
