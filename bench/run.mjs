// Runs every bench/*.bench.mjs in one process, in order, printing ratio
// tables. `--quick` shrinks iteration counts (CI budget: under 60 s total).
// `--only NAME` runs one file. Exit 1 only when a ratio misses its target.
import { readdir } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { dirname, join } from "node:path";
import { printChecks } from "./lib.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const onlyIdx = args.indexOf("--only");
const only = onlyIdx === -1 ? null : args[onlyIdx + 1];

// The containment bench runs real gateway sessions (agents, wrappers, cgroup
// moves) and leaves the host busy for a while after it ends; run before the
// facts bench it cost that bench's snapshot ratio its margin (1.97× against
// 2.5× in one CI run, 3.1–5.2× otherwise). Its own ratio is interleaved pair
// by pair, so it can take the residual load of the others: it runs last.
const LAST = new Set(["containment.bench.mjs"]);
const files = (await readdir(here))
  .filter((f) => f.endsWith(".bench.mjs"))
  .sort((a, b) => Number(LAST.has(a)) - Number(LAST.has(b)) || (a < b ? -1 : a > b ? 1 : 0));
const failures = [];
const t0 = Date.now();
for (const f of files) {
  if (only && !f.startsWith(only)) continue;
  const mod = await import(pathToFileURL(join(here, f)).href);
  if (quick && mod.quick === false) {
    console.log(`\n# ${f}: skipped in --quick (full run only: ${mod.quickSkipReason ?? "long-running"})`);
    continue;
  }
  console.log(`\n# ${f}${quick ? " (quick)" : ""}`);
  const checks = await mod.run({ quick });
  printChecks(checks);
  for (const c of checks) if (!c.ok) failures.push(`${f}: ${c.name}`);
}
console.log(`\nbench finished in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${failures.length} check(s) below target`);
for (const f of failures) console.log(`  FAIL ${f}`);
process.exit(failures.length ? 1 : 0);
