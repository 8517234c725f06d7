/**
 * A doc page's worked example, run as a user would run it: the first ```js
 * block of the page is written to a file in the package root (where
 * `import "proclease"` resolves to this package by its own name, from
 * dist/: build first) and run with node, with the temp dir its own (the
 * examples make their state dirs there): what is left in it is reported,
 * then removed.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { ROOT } from "../acpx/controller-helpers.js";

const run = promisify(execFile);

/** The page's first ```js block and the ```text block after it (what it prints). */
export function exampleOf(page: string): { code: string; output: string } {
  const text = readFileSync(join(ROOT, page), "utf8");
  const code = /```js\n([\s\S]*?)```/.exec(text);
  if (!code) throw new Error(`${page} has no \`\`\`js block`);
  const rest = text.slice(code.index + code[0].length);
  const output = /```text\n([\s\S]*?)```/.exec(rest);
  if (!output) throw new Error(`${page} has no \`\`\`text block after its example`);
  return { code: code[1]!, output: output[1]! };
}

/** Runs `code` as an .mjs file in the package root; resolves with its stdout and what it left in its temp dir. */
export async function runExample(page: string, code: string): Promise<{ stdout: string; leftInTmp: string[] }> {
  const file = join(ROOT, `.${basename(page, ".md").toLowerCase()}-example-${process.pid}.mjs`);
  writeFileSync(file, code);
  const tmp = mkdtempSync(join(tmpdir(), "proclease-doc-example-"));
  try {
    const r = await run(process.execPath, [file], { cwd: ROOT, timeout: 60_000, env: { ...process.env, TMPDIR: tmp } });
    return { stdout: r.stdout, leftInTmp: readdirSync(tmp) };
  } finally {
    rmSync(file, { force: true });
    rmSync(tmp, { recursive: true, force: true });
  }
}
