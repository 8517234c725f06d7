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

const files = (await readdir(here)).filter((f) => f.endsWith(".bench.mjs")).sort();
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
