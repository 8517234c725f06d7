/**
 * The docs a user reads are the ones npm installs: README.md and docs/
 * (package.json "files"). A relative link in them must land on a file the
 * tarball holds, and a link to a heading on a heading that exists; `src/`,
 * `test/`, `bench/` and `.ci/` are not shipped, so the docs name such files
 * as code text instead of linking them.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, sep } from "node:path";
import { describe, expect, it } from "vitest";
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

/** Whether package.json "files" puts this repository-relative path in the tarball. */
function shipped(path: string, files: readonly string[]): boolean {
  return files.some((f) => path === f || path.startsWith(`${f}/`));
}

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

function shippedDocs(files: readonly string[]): string[] {
  const docs = readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f.split(sep).join("/")}`);
  return ["README.md", ...docs].filter((d) => shipped(d, files));
}

const FILES: readonly string[] = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { files: string[] })
  .files;

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
