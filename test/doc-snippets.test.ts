/**
 * Every TypeScript and JavaScript block of the shipped docs type-checks as a
 * user's file against this checkout's build, in a consumer folder with a
 * stock `tsc --init` tsconfig (scripts/doc-snippets.mjs; CI runs the same
 * check, and the runnable blocks, against the packed tarball). A wrong call
 * shape planted in a doc fails it at that doc's line; a fragment is skipped
 * only when marked, and marks stay rare.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkSnippets, collectSnippets } from "../scripts/doc-snippets.mjs";
import { ROOT } from "./acpx/controller-helpers.js";

const copies: string[] = [];
afterAll(() => {
  for (const c of copies) rmSync(c, { recursive: true, force: true });
});

/** README.md, docs/ and package.json copied, then `edit` applied to README.md; returns the copy's root. */
function docsWith(edit: (readme: string) => string): string {
  const dir = mkdtempSync(join(tmpdir(), "proclease-docs-copy-"));
  copies.push(dir);
  cpSync(join(ROOT, "docs"), join(dir, "docs"), { recursive: true });
  cpSync(join(ROOT, "package.json"), join(dir, "package.json"));
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const planted = edit(readme);
  expect(planted, "the plant changed nothing").not.toBe(readme);
  writeFileSync(join(dir, "README.md"), planted);
  return dir;
}

const lineOf = (text: string, needle: string) => text.slice(0, text.indexOf(needle)).split("\n").length;

describe("the shipped docs' code blocks", () => {
  it("every TypeScript and JavaScript block type-checks against this checkout's build", () => {
    const { snippets, problems } = checkSnippets({});
    expect(problems).toEqual([]);
    expect(snippets.length).toBeGreaterThanOrEqual(10);
    expect(snippets.map((s) => s.doc)).toContain("README.md");
  }, 120_000);

  it("a wrong call shape planted in the README fails, at the README's line", () => {
    const wrong = "await acpx.closeSession({ handel: handle });";
    const docsRoot = docsWith((t) => t.replace("await acpx.closeSession({ handle });", wrong));
    const { problems } = checkSnippets({ docsRoot });
    const line = lineOf(readFileSync(join(docsRoot, "README.md"), "utf8"), wrong);
    expect(
      problems.some((p) => p.startsWith(`README.md:${line}:`) && /error TS\d+/.test(p)),
      problems.join("\n"),
    ).toBe(true);
  }, 120_000);

  it("a block marked as a fragment is not checked, and fragments beyond one per ten blocks are refused", () => {
    const marked = docsWith((t) =>
      t
        .replace("await acpx.closeSession({ handle });", "await acpx.closeSession({ handel: handle });")
        .replace(
          "\n```ts\nimport { createAcpxLifecycleController }",
          "\n<!-- snippet: fragment -->\n```ts\nimport { createAcpxLifecycleController }",
        ),
    );
    expect(checkSnippets({ docsRoot: marked }).problems).toEqual([]);
    const everywhere = docsWith((t) =>
      t
        .replaceAll("\n```js\n", "\n<!-- snippet: fragment -->\n```js\n")
        .replaceAll("\n```ts\n", "\n<!-- snippet: fragment -->\n```ts\n"),
    );
    expect(collectSnippets(everywhere).problems.join("\n")).toMatch(
      /fragment blocks .* at most \d+ for \d+ checked ones/,
    );
  }, 120_000);

  it("a runnable block must be js and be followed by what it prints", () => {
    const docsRoot = docsWith((t) =>
      t.replace(
        "\n```ts\nimport { createAcpxLifecycleController }",
        "\n<!-- snippet: run -->\n```ts\nimport { createAcpxLifecycleController }",
      ),
    );
    expect(collectSnippets(docsRoot).problems.join("\n")).toMatch(/README\.md:\d+: a runnable block must be js/);
  });
});
