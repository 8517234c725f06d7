#!/usr/bin/env node
// The architecture's own test, end to end: for each second copy in
// test/helpers/architecture-plants.mjs, copy the repository to a scratch
// directory, plant that one copy, and run there both judges of a home: the
// architecture test (vitest on test/architecture.test.ts), which must fail
// naming the planted file and its rule, and the compiler (tsc --noEmit),
// which catches a plant when it names the planted file. A plant is caught
// when either does; each line says which. A run without a plant must pass
// the architecture test first (else a failure proves nothing).
//
//   node scripts/arch-plants.mjs            every plant
//   node scripts/arch-plants.mjs NAME ...   the plants named
//
// Exit 0 when the clean copy passes and every plant fails as it should.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const { PLANTS } = await import(new URL("../test/helpers/architecture-plants.mjs", import.meta.url).href);
/** What the architecture test and tsc read: the tree, the test itself, the docs whose diagram it compares. */
const COPIED = [
  "src",
  "native",
  "test/architecture.test.ts",
  "test/helpers",
  "scripts/import-graph.mjs",
  "docs/architecture.md",
  "package.json",
  "tsconfig.json",
  "vitest.config.ts",
];

const wanted = process.argv.slice(2);
const plants = wanted.length ? PLANTS.filter((p) => wanted.includes(p.name)) : PLANTS;
if (wanted.length && plants.length !== wanted.length) {
  console.error(
    `unknown plant: ${wanted.filter((w) => !PLANTS.some((p) => p.name === w)).join(", ")}; known: ${PLANTS.map((p) => p.name).join(", ")}`,
  );
  process.exit(2);
}

function scratchCopy() {
  const dir = mkdtempSync(join(tmpdir(), "proclease-arch-plant-"));
  for (const p of COPIED) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    cpSync(join(ROOT, p), join(dir, p), { recursive: true });
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

/** vitest on the copy's architecture test, only the whole-tree check: { ok, out }. */
function runTest(dir) {
  const vitest = join(ROOT, "node_modules/vitest/vitest.mjs");
  const r = spawnSync(process.execPath, [vitest, "run", "test/architecture.test.ts", "-t", "keeps every rule"], {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" },
    timeout: 600_000,
  });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}` };
}

/** tsc on the copy: the first error that names `file`, or null. */
function runTsc(dir, file) {
  const r = spawnSync(join(ROOT, "node_modules/.bin/tsc"), ["-p", "tsconfig.json", "--noEmit", "--pretty", "false"], {
    cwd: dir,
    encoding: "utf8",
    timeout: 600_000,
  });
  return `${r.stdout}${r.stderr}`.split("\n").find((l) => l.startsWith(`${file}(`)) ?? null;
}

let failures = 0;
const by = { arch: 0, tsc: 0 };
const t0 = Date.now();
{
  const dir = scratchCopy();
  try {
    const r = runTest(dir);
    console.log(`${r.ok ? "ok  " : "FAIL"} clean copy: the architecture test ${r.ok ? "passes" : "fails"}`);
    if (!r.ok) {
      console.log(r.out);
      process.exit(1);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
for (const p of plants) {
  const dir = scratchCopy();
  try {
    mkdirSync(dirname(join(dir, p.at)), { recursive: true });
    writeFileSync(join(dir, p.at), p.text);
    const r = runTest(dir);
    // the finding, as show() prints it: "<rule> <file>:<line> <detail>"
    const finding = r.out.split("\n").find((l) => l.trim().startsWith(`${p.rule} ${p.at}:`));
    const arch = !r.ok && finding !== undefined;
    const tsc = runTsc(dir, p.at);
    const good = arch || tsc !== null;
    if (!good) failures++;
    if (arch) by.arch++;
    if (tsc !== null) by.tsc++;
    const archSays = arch ? `test: ${finding.trim()}` : r.ok ? "test: passed" : "test: failed, not naming it";
    console.log(
      `${good ? "ok  " : "FAIL"} ${p.name.padEnd(28)} ${archSays}${tsc !== null ? ` | tsc: ${tsc.slice(p.at.length)}` : " | tsc: clean"}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log(
  `caught ${plants.length - failures} of ${plants.length} plants (the architecture test ${by.arch}, tsc ${by.tsc}; ${Math.round((Date.now() - t0) / 1000)} s)`,
);
process.exit(failures ? 1 : 0);
