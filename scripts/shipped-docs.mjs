// The pages a user of the package reads: README.md and the docs/ pages that
// package.json "files" puts in the tarball (an entry that starts with "!"
// keeps a path out, as npm reads it; docs/architecture.md and
// docs/development.md are for contributors, in a checkout). The link test
// (test/docs-links.test.ts) and the snippet check (scripts/doc-snippets.mjs)
// both read the pages from here, so they judge the same set.
import { readdirSync, readFileSync } from "node:fs";
import { join, sep } from "node:path";

/** package.json "files" of the checkout at root. */
export function packageFiles(root) {
  return JSON.parse(readFileSync(join(root, "package.json"), "utf8")).files;
}

const covers = (entry, path) => path === entry || path.startsWith(`${entry}/`);

/** Whether "files" puts this repository-relative path in the tarball. */
export function isShipped(path, files) {
  const out = files.filter((f) => f.startsWith("!")).map((f) => f.slice(1));
  const inc = files.filter((f) => !f.startsWith("!"));
  return inc.some((f) => covers(f, path)) && !out.some((f) => covers(f, path));
}

/** README.md and every shipped docs/ page, repository-relative, in a stable order. */
export function shippedDocs(root, files = packageFiles(root)) {
  const docs = readdirSync(join(root, "docs"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f.split(sep).join("/")}`)
    .sort();
  return ["README.md", ...docs].filter((d) => isShipped(d, files));
}
