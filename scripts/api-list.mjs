#!/usr/bin/env node
// The package's public names, read from the compiler (not from the text of
// the index files): every export of each package entry, with whether it is a
// value (exists at run time) or a type only, and the shipped page that
// documents it (DOC_PAGES, chosen by the module that defines it).
//
//   node scripts/api-list.mjs           print docs/api.md's text
//   node scripts/api-list.mjs --write   write docs/api.md
//   node scripts/api-list.mjs --check   exit 1 when docs/api.md differs
//
// test/api-list.test.ts runs the check, so the list in docs cannot drift from
// the code. TypeScript 7 is the native port without a compiler API, so this
// uses 5.9's under the alias typescript-api (a devDependency).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ts = createRequire(import.meta.url)("typescript-api");
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const DOC = join(ROOT, "docs/api.md");

/** The package entries (package.json "exports") and the source behind each. */
export const ENTRIES = [
  { specifier: "proclease", source: "src/index.ts" },
  { specifier: "proclease/openclaw", source: "src/openclaw/index.ts" },
];

/** One program over the entries' sources (under `root`) with the package's compiler options: their files, the program and its checker. */
export function entriesProgram(root = ROOT, entries = ENTRIES) {
  const files = entries.map((e) => join(root, e.source));
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"],
  });
  return { files, program, checker: program.getTypeChecker() };
}

/** [{ specifier, names: [{ name, kind: "value" | "type", from }] }] for every entry. */
export function listExports(root = ROOT) {
  const { files, program, checker } = entriesProgram(root);
  return ENTRIES.map((entry, i) => {
    const sf = program.getSourceFile(files[i]);
    if (sf === undefined) throw new Error(`api-list: ${entry.source} is missing`);
    const mod = checker.getSymbolAtLocation(sf);
    if (mod === undefined) throw new Error(`api-list: ${entry.source} is not a module`);
    const names = checker.getExportsOfModule(mod).map((sym) => {
      const target = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
      const typeOnly = sym.flags & ts.SymbolFlags.Alias && isTypeOnlyAlias(sym);
      const kind = !typeOnly && target.flags & ts.SymbolFlags.Value ? "value" : "type";
      const decl = target.declarations?.[0];
      const from = decl ? definedIn(relative(root, decl.getSourceFile().fileName).split("\\").join("/")) : "?";
      return { name: sym.getName(), kind, from };
    });
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { specifier: entry.specifier, names };
  });
}

/**
 * Where a user reads about a name: the shipped page for the part of the
 * package its module belongs to, first match wins. The module's path only
 * decides; it is never printed (src/ is not in the package). A module that
 * matches no row fails the listing, so a new one is given its page.
 */
export const DOC_PAGES = [
  ["src/acpx/connection/turn-stream.ts", "conversation.md"],
  ["src/acpx/connection/turn.ts", "conversation.md"],
  ["src/acpx/connection/session-updates.ts", "conversation.md"],
  ["src/acpx/connection/update-bytes.ts", "conversation.md"],
  ["src/acpx/connection/permissions.ts", "conversation.md"],
  ["src/acpx/connection/client-fs.ts", "conversation.md"],
  ["src/acpx/connection/fs-beneath.ts", "conversation.md"],
  ["src/acpx/connection/client-terminal.ts", "conversation.md"],
  ["src/acpx/sessions/raw-adapter.ts", "conversation.md"],
  ["src/acpx/sessions/raw-session-error.ts", "conversation.md"],
  ["src/acpx/connection/session-controls.ts", "conversation.md"],
  ["src/acpx/launch/fixture-agent.ts", "conversation.md"],
  ["src/acpx/", "lifecycle-controller.md"],
  ["src/ownership/leases/host-faults.ts", "host-faults.md"],
  ["src/ownership/leases/lease-reader.ts", "ownership.md#reading-leases"],
  ["src/ownership/leases/lease-store-api.ts", "ownership.md#reading-leases"],
  ["src/ownership/", "ownership.md"],
  ["src/supervisor/", "supervisor.md"],
  ["src/facts/", "process-facts.md"],
  ["src/sessions/", "session-visibility.md"],
  ["src/containment/", "containment.md"],
  ["src/openclaw/", "openclaw.md"],
  ["@agentclientprotocol/sdk", "conversation.md"],
];

export function docPageOf(from) {
  const row = DOC_PAGES.find(([prefix]) => from === prefix || from.startsWith(prefix));
  if (row === undefined) throw new Error(`api-list: ${from} has no page in DOC_PAGES (scripts/api-list.mjs)`);
  return row[1];
}

/** A module of ours by its path; a dependency's by its package name (re-exported as is). */
function definedIn(path) {
  const m = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  return m ? m[1] : path;
}

/** `export type { X }` / `export { type X }` / `export type * from`: a type for the caller, whatever X is. */
function isTypeOnlyAlias(sym) {
  return (sym.declarations ?? []).some(
    (d) =>
      ts.isTypeOnlyImportOrExportDeclaration?.(d) || (d.parent && ts.isTypeOnlyImportOrExportDeclaration?.(d.parent)),
  );
}

export function renderApiDoc(entries) {
  const out = [
    "# Public API",
    "",
    "<!-- Generated by `node scripts/api-list.mjs --write` from the compiler's view of the package entries;",
    "     the repository's tests fail when this file and the code differ. Do not edit by hand. -->",
    "",
    "Every name a caller can import, per package entry. A *value* exists at run time (a function, a",
    "class, a constant); a *type* is for TypeScript only. Anything not listed here is internal: its",
    "module may change without notice, and deep imports (`proclease/dist/…`) are blocked by the",
    "package's `exports`. The last column is the page that documents the name; a type's fields are",
    "also described where they are declared, in the package's `.d.ts` files, which an editor shows.",
    "",
    "The root is curated: the lifecycle controller with its handles, updates and errors, the process",
    "supervisor, session visibility, the live process facts, and read-only views of leases",
    "(`openLeaseReader`, `explainLease`, `verifyOwnedTree`). Nothing exported moves a lease: the",
    "lifecycle inside the controller and the supervisor is the only mover.",
    "",
  ];
  for (const e of entries) {
    const values = e.names.filter((n) => n.kind === "value").length;
    out.push(
      `## \`${e.specifier}\``,
      "",
      `${e.names.length} names: ${values} values, ${e.names.length - values} types.`,
      "",
      "| name | kind | documented in |",
      "|---|---|---|",
    );
    for (const n of e.names) {
      const page = docPageOf(n.from);
      out.push(`| \`${n.name}\` | ${n.kind} | [${page.replace(/#.*/, "")}](${page}) |`);
    }
    out.push("");
  }
  return out.join("\n");
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const text = renderApiDoc(listExports());
  const mode = process.argv[2];
  if (mode === "--write") writeFileSync(DOC, text);
  else if (mode === "--check") {
    let current = "";
    try {
      current = readFileSync(DOC, "utf8");
    } catch {}
    if (current !== text) {
      console.error("docs/api.md is out of date: run `node scripts/api-list.mjs --write`");
      process.exit(1);
    }
    for (const e of listExports()) console.log(`${e.specifier}: ${e.names.length} names`);
  } else process.stdout.write(text);
}
