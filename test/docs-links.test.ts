/**
 * The docs a user reads are the ones npm installs: README.md and the docs/
 * pages package.json "files" ships (docs/architecture.md and
 * docs/development.md are kept out: they are for contributors, in a
 * checkout). A relative link in them must land on a file the tarball holds,
 * and a link to a heading on a heading that exists; and they never name a
 * `src/`, `test/` or `.ci/` path, in a link, in text, in a code block or in a
 * comment: none of those is in the package, so such a name sends a user
 * looking for a file they do not have.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { isShipped, packageFiles, shippedDocs as shippedDocsOf } from "../scripts/shipped-docs.mjs";
import { ROOT } from "./acpx/controller-helpers.js";

interface Link {
  readonly target: string;
  readonly line: number;
}

/** Markdown text outside fenced code blocks, one entry per line (code lines blanked, so line numbers hold). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").map((l) => {
    if (/^\s*(```|~~~)/.test(l)) {
      fenced = !fenced;
      return "";
    }
    return fenced ? "" : l.replace(/`[^`]*`/g, (code) => (code.includes("](") ? "" : code));
  });
}

function linksIn(text: string): Link[] {
  const out: Link[] = [];
  prose(text).forEach((l, i) => {
    for (const m of l.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) out.push({ target: m[1]!, line: i + 1 });
    const ref = /^\s*\[[^\]]+\]:\s*(\S+)/.exec(l);
    if (ref) out.push({ target: ref[1]!, line: i + 1 });
  });
  return out;
}

/** The anchors GitHub and npm make for a file's headings. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of prose(text)) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l);
    if (!h) continue;
    const base = h[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const shipped = isShipped;

/** Every broken relative link of one doc, as "doc:line target: why". */
function brokenLinks(doc: string, text: string, files: readonly string[], root: string): string[] {
  const problems: string[] = [];
  for (const { target, line } of linksIn(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
    const [path, anchor] = target.split("#", 2) as [string, string | undefined];
    const file =
      path === ""
        ? doc
        : normalize(join(dirname(doc), path))
            .split(sep)
            .join("/");
    const where = `${doc}:${line} ${target}`;
    if (file.startsWith("../") || !shipped(file, files)) {
      problems.push(`${where}: ${file} is not in package.json "files" (not in the installed package)`);
    } else if (!existsSync(join(root, file))) {
      problems.push(`${where}: ${file} does not exist`);
    } else if (
      anchor !== undefined &&
      file.endsWith(".md") &&
      !anchorsOf(readFileSync(join(root, file), "utf8")).has(anchor)
    ) {
      problems.push(`${where}: ${file} has no heading #${anchor}`);
    }
  }
  return problems;
}

const shippedDocs = (files: readonly string[]) => shippedDocsOf(ROOT, files);
const FILES: readonly string[] = packageFiles(ROOT);

/** A path into a folder the package does not ship: src/, test/ or .ci/, however it is written (../src/x, `test/y`, .ci/run). */
const UNSHIPPED_PATH = /(?<![\w.@/-])(?:\.\.\/)*(?:src|test|\.ci)\/(?:[\w.*/-]*[\w*/-])?/g;

/** Every mention of an unshipped path in one doc, as "doc:line path", prose, code and comments alike. */
function unshippedPaths(doc: string, text: string): string[] {
  return text.split("\n").flatMap((l, i) => [...l.matchAll(UNSHIPPED_PATH)].map((m) => `${doc}:${i + 1} ${m[0]}`));
}

describe("links in the shipped docs", () => {
  it("README.md and docs/ are both shipped", () => {
    const docs = shippedDocs(FILES);
    expect(docs).toContain("README.md");
    expect(docs).toContain("docs/api.md");
  });

  it("every relative link lands on a shipped file that exists, and on a heading it has", () => {
    const problems = shippedDocs(FILES).flatMap((d) =>
      brokenLinks(d, readFileSync(join(ROOT, d), "utf8"), FILES, ROOT),
    );
    expect(problems).toEqual([]);
  });

  it("the check itself catches a link into src/, a missing file and a missing heading", () => {
    const doc = [
      "See [the verifier](../src/ownership/verify/verify.ts), [gone](missing.md),",
      "[no such heading](api.md#no-such-heading), [fine](api.md) and [web](https://example.org/x.ts).",
      "```",
      "[inside a code block](../src/index.ts) is not a link",
      "```",
    ].join("\n");
    const problems = brokenLinks("docs/example.md", doc, FILES, ROOT);
    expect(problems.map((p) => p.split(":")[1])).toEqual([
      "1 ../src/ownership/verify/verify.ts",
      "1 missing.md",
      "2 api.md#no-such-heading",
    ]);
  });
});

describe("user docs and contributor docs apart", () => {
  it("the contributors' pages are not shipped, and npm agrees with this test's reading of \"files\"", () => {
    const docs = shippedDocs(FILES);
    expect(docs).not.toContain("docs/architecture.md");
    expect(docs).not.toContain("docs/development.md");
    const packed = JSON.parse(
      execFileSync("npm", ["pack", "--dry-run", "--ignore-scripts", "--json"], { cwd: ROOT, encoding: "utf8" }),
    ) as { files: { path: string }[] }[];
    const npmDocs = packed[0]!.files
      .map((f) => f.path)
      .filter((p) => p === "README.md" || (p.startsWith("docs/") && p.endsWith(".md")))
      .sort();
    expect(npmDocs).toEqual([...docs].sort());
  }, 120_000);

  it("no shipped page names a src/, test/ or .ci/ path, in a link, in text, in code or in a comment", () => {
    const found = shippedDocs(FILES).flatMap((d) => unshippedPaths(d, readFileSync(join(ROOT, d), "utf8")));
    expect(found).toEqual([]);
  });

  it("the check itself finds each form, and leaves shipped paths and other words alone", () => {
    const doc = [
      "See `src/acpx/controller/controller.ts`, [the test](../test/acpx/x.test.ts) and .ci/run.",
      "```",
      "node .ci/openclaw-real/run.mjs   # test/fixtures/soak/gateway.mjs",
      "```",
      "<!-- checked by test/api-list.test.ts -->",
      "Fine: dist/index.d.ts, fixtures/acp-agent/agent.mjs, proclease/dist/…, docs/api.md, latest/, contest/x, my-src/y.",
    ].join("\n");
    expect(unshippedPaths("docs/example.md", doc)).toEqual([
      "docs/example.md:1 src/acpx/controller/controller.ts",
      "docs/example.md:1 ../test/acpx/x.test.ts",
      "docs/example.md:1 .ci/run",
      "docs/example.md:3 .ci/openclaw-real/run.mjs",
      "docs/example.md:3 test/fixtures/soak/gateway.mjs",
      "docs/example.md:5 test/api-list.test.ts",
    ]);
  });
});
