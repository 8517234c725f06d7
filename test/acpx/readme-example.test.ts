/**
 * The README's conversation example, run as a user would run it: the first
 * ```js block of README.md is written to a file in the package root (where
 * `import "proclease"` resolves to this package by its own name, from
 * dist/: build first) and run with node; its stdout must be exactly the
 * ```text block that follows it in the README.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ROOT } from "./controller-helpers.js";

const run = promisify(execFile);

function blocks(): { code: string; output: string } {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const code = /```js\n([\s\S]*?)```/.exec(readme);
  if (!code) throw new Error("README.md has no ```js block");
  const rest = readme.slice(code.index + code[0].length);
  const output = /```text\n([\s\S]*?)```/.exec(rest);
  if (!output) throw new Error("README.md has no ```text block after its example");
  return { code: code[1]!, output: output[1]! };
}

describe("README conversation example", () => {
  it("runs and prints what the README says it prints", async () => {
    const { code, output } = blocks();
    const file = join(ROOT, `.readme-example-${process.pid}.mjs`);
    writeFileSync(file, code);
    // the example makes its state dir under the temp dir: this test's own, removed after
    const tmp = mkdtempSync(join(tmpdir(), "proclease-readme-"));
    try {
      const r = await run(process.execPath, [file], { cwd: ROOT, timeout: 60_000, env: { ...process.env, TMPDIR: tmp } });
      expect(r.stdout).toBe(output);
    } finally {
      rmSync(file, { force: true });
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 90_000);
});
