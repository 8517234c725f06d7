// Compares the tests a run skipped (the JSON .ci/skip-reporter.mjs wrote) with
// the committed list for this kind of host, .ci/expected-skips/<kind>.txt,
// where the kind comes from an independent probe (test/helpers/cgroup-probe.mjs:
// who runs, and whether a child could be moved into a cgroup2 cgroup of our
// own on a hybrid or a unified host). Fails on any skip the list does not name:
// on a root host with a writable cgroup2 a containment test that skipped is a
// failure, whatever the code under test decided. A listed test that ran is
// printed (the list may shrink) but does not fail.
//
// usage: node .ci/check-skips.mjs <report.json> [--write]
//   --write  rewrite this host kind's list from the report (review the diff)
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { hostKind } from "../test/helpers/cgroup-probe.mjs";

const [reportPath, flag] = process.argv.slice(2);
if (!reportPath) {
  console.error("usage: node .ci/check-skips.mjs <report.json> [--write]");
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, "utf8"));
const kind = await hostKind();
const listPath = join(dirname(fileURLToPath(import.meta.url)), "expected-skips", `${kind}.txt`);
// pids, uids, sizes and temp names vary between runs: digits do not count
const key = (s) => `${s.file} > ${s.name}${s.note ? ` (${s.note})` : ""}`.replace(/\d+/g, "#");
const seen = [...new Set(report.skipped.map(key))].sort();

if (flag === "--write") {
  writeFileSync(
    listPath,
    `# tests a ${kind} host skips (node .ci/check-skips.mjs <report> --write; digits read as #)\n${seen.join("\n")}\n`,
  );
  console.log(`wrote ${seen.length} expected skip(s) to ${listPath}`);
  process.exit(0);
}
if (!existsSync(listPath)) {
  console.error(`no committed skip list for this host kind (${kind}): ${listPath}; ${seen.length} test(s) skipped:`);
  for (const s of seen) console.error(`  ${s}`);
  process.exit(1);
}
const expected = new Set(
  readFileSync(listPath, "utf8")
    .split("\n")
    .filter((l) => l !== "" && !l.startsWith("#")),
);
const unexpected = seen.filter((s) => !expected.has(s));
const ranAnyway = [...expected].filter((s) => !seen.includes(s));
console.log(`host kind ${kind}: ${seen.length} skip(s), ${expected.size} expected (${listPath})`);
for (const s of ranAnyway) console.log(`  listed but not skipped this run (the list may shrink): ${s}`);
if (unexpected.length) {
  console.error(`${unexpected.length} unexpected skip(s) on a ${kind} host:`);
  for (const s of unexpected) console.error(`  UNEXPECTED SKIP ${s}`);
  process.exit(1);
}
console.log("skips: every skipped test is one this kind of host is expected to skip");
