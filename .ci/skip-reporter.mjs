// A vitest reporter for CI: counts tests by state and writes every skipped
// test (file, full name, the note of a ctx.skip) as JSON to the file named by
// $PROCLEASE_TEST_REPORT, which .ci/check-skips.mjs compares with the
// committed list for this kind of host. Prints the skipped tests with their
// reasons at the end of the run.
import { writeFileSync } from "node:fs";

export default class SkipReporter {
  onTestRunEnd(testModules) {
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    const skipped = [];
    const files = {};
    for (const m of testModules) {
      const own = (files[m.relativeModuleId] = { passed: 0, failed: 0, skipped: 0, pending: 0 });
      for (const t of m.children.allTests()) {
        const r = t.result();
        counts[r.state] = (counts[r.state] ?? 0) + 1;
        own[r.state] = (own[r.state] ?? 0) + 1;
        if (r.state === "skipped") skipped.push({ file: m.relativeModuleId, name: t.fullName, note: r.note ?? null });
      }
    }
    const out = process.env.PROCLEASE_TEST_REPORT;
    if (out) writeFileSync(out, `${JSON.stringify({ counts, skipped, files }, null, 1)}\n`);
    console.log(`\n${skipped.length} skipped test(s), each with its reason:`);
    for (const s of skipped) console.log(`  SKIP ${s.file} > ${s.name}${s.note ? ` (${s.note})` : ""}`);
    console.log(`tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  }
}
