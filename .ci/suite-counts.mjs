// Prints one line of test counts for the files of a .ci/skip-reporter.mjs
// report under the given folders, labelled; exits non-zero when nothing ran
// there (a suite that ran no test proves nothing) or a test failed.
// usage: node .ci/suite-counts.mjs <label> <report.json> <folder>...
import { readFileSync } from "node:fs";

const [label, reportPath, ...folders] = process.argv.slice(2);
const { files } = JSON.parse(readFileSync(reportPath, "utf8"));
const sum = { files: 0, passed: 0, failed: 0, skipped: 0 };
for (const [file, c] of Object.entries(files)) {
  if (!folders.some((f) => file.startsWith(`${f.replace(/\/$/, "")}/`))) continue;
  sum.files++;
  for (const k of ["passed", "failed", "skipped"]) sum[k] += c[k] ?? 0;
}
console.log(
  `suite counts, ${label} (${folders.join(" ")}): ${sum.files} files, ${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped`,
);
if (sum.passed === 0 || sum.failed > 0) process.exit(1);
