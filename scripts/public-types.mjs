#!/usr/bin/env node
// The public types a caller needs, read from the compiler: a type exported by
// a package entry is needed when it appears in the signature of something the
// entry exports as a value (a function's parameters and result, a class's
// constructor and public members, a constant's declared type), directly or
// through another type that does. An exported error class is a value, so an
// error a documented call throws is needed by itself. This lists the others:
// each should be made internal (test/public-types.test.ts expects none).
//
//   node scripts/public-types.mjs     print the unneeded types, exit 1 if any
//
// Signatures are walked as written (the type names in them, resolved by the
// checker), so an alias survives an optional property (`x?: Alias` is not
// widened away); a declaration written without a type is walked by the type
// the checker infers for it. Types of the TypeScript library and of Node are
// never walked into (they name no type of ours); a dependency's are.
// TypeScript 7 has no compiler API: this uses 5.9's (typescript-api).
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { entriesProgram, ENTRIES } from "./api-list.mjs";

const ts = createRequire(import.meta.url)("typescript-api");
const ROOT = join(fileURLToPath(import.meta.url), "../..");

/** [{ specifier, unneeded: [name] }] for every entry. */
export function unneededTypes(root = ROOT, entries = ENTRIES) {
  const { files, program, checker } = entriesProgram(root, entries);
  return entries.map((entry, i) => {
    const mod = checker.getSymbolAtLocation(program.getSourceFile(files[i]));
    if (mod === undefined) throw new Error(`public-types: ${entry.source} is not a module`);
    const exported = checker
      .getExportsOfModule(mod)
      .map((sym) => ({ name: sym.getName(), target: resolve(checker, sym) }));
    const values = exported.filter((e) => e.target.flags & ts.SymbolFlags.Value && !isTypeOnly(e));
    const reached = reachable(
      checker,
      values.map((v) => v.target),
    );
    const unneeded = exported
      .filter((e) => !values.includes(e) && !reached.has(e.target))
      .map((e) => e.name)
      .sort();
    return { specifier: entry.specifier, unneeded };
  });
}

const resolve = (checker, sym) => (sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym);

/** `export type { X }`: a type for the caller whatever X is. */
function isTypeOnly(e) {
  return (e.target.declarations ?? []).every(
    (d) => ts.isInterfaceDeclaration(d) || ts.isTypeAliasDeclaration(d) || ts.isTypeParameterDeclaration(d),
  );
}

/** Declarations of the TypeScript library and of @types/node: never walked into. */
const isLib = (d) => /\/typescript(-api)?\/lib\/|\/@types\/node\//.test(d.getSourceFile().fileName);

/** Every symbol whose name the signatures of `roots` use, transitively. */
function reachable(checker, roots) {
  const seen = new Set();
  const queue = [];
  const reach = (sym) => {
    if (sym === undefined) return;
    const s = resolve(checker, sym);
    if (seen.has(s)) return;
    seen.add(s);
    for (const d of s.declarations ?? []) if (!isLib(d)) queue.push(d);
  };
  const seenTypes = new Set();
  const byType = (t) => {
    if (t === undefined || seenTypes.has(t)) return;
    seenTypes.add(t);
    reach(t.aliasSymbol);
    for (const a of t.aliasTypeArguments ?? []) byType(a);
    if (t.isUnionOrIntersection()) for (const c of t.types) byType(c);
    if (t.flags & ts.TypeFlags.Object) {
      if (t.objectFlags & ts.ObjectFlags.Reference) for (const a of checker.getTypeArguments(t)) byType(a);
      const named = t.symbol && !/^__/.test(t.symbol.getName());
      if (named) return reach(t.symbol);
      for (const p of t.getProperties()) byType(checker.getTypeOfSymbol(p));
      for (const sig of [...t.getCallSignatures(), ...t.getConstructSignatures()]) {
        for (const p of sig.getParameters()) byType(checker.getTypeOfSymbol(p));
        byType(sig.getReturnType());
      }
    }
  };
  const walkTypeNodes = (n) => {
    if (ts.isTypeReferenceNode(n)) reach(checker.getSymbolAtLocation(n.typeName));
    else if (ts.isExpressionWithTypeArguments(n)) reach(checker.getSymbolAtLocation(n.expression));
    else if (ts.isTypeQueryNode(n)) reach(checker.getSymbolAtLocation(n.exprName));
    else if (ts.isImportTypeNode(n) && n.qualifier) reach(checker.getSymbolAtLocation(n.qualifier));
    ts.forEachChild(n, walkTypeNodes);
  };
  const walkSignature = (d) => {
    for (const p of d.typeParameters ?? []) walkTypeNodes(p);
    for (const p of d.parameters ?? []) {
      if (p.type) walkTypeNodes(p.type);
      else byType(checker.getTypeAtLocation(p));
    }
    if (d.type) walkTypeNodes(d.type);
    else if (!ts.isConstructorDeclaration(d)) {
      const sig = checker.getSignatureFromDeclaration(d);
      if (sig) byType(sig.getReturnType());
    }
  };
  const isPublic = (m) =>
    !(ts.getCombinedModifierFlags(m) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) &&
    !(m.name && ts.isPrivateIdentifier(m.name));
  const walk = (d) => {
    if (ts.isFunctionLike(d) && !ts.isFunctionTypeNode(d)) return walkSignature(d);
    if (ts.isClassLike(d)) {
      for (const h of d.heritageClauses ?? []) walkTypeNodes(h);
      for (const m of d.members) {
        if (!isPublic(m)) continue;
        if (ts.isConstructorDeclaration(m)) {
          for (const p of m.parameters) if (p.type) walkTypeNodes(p.type);
        } else if (ts.isFunctionLike(m)) walkSignature(m);
        else if (ts.isPropertyDeclaration(m)) {
          if (m.type) walkTypeNodes(m.type);
          else byType(checker.getTypeAtLocation(m));
        }
      }
      return;
    }
    if (ts.isVariableDeclaration(d)) {
      if (d.type) walkTypeNodes(d.type);
      else byType(checker.getTypeAtLocation(d));
      return;
    }
    // an interface, a type alias, an enum, a dependency's declaration: all of it is signature
    walkTypeNodes(d);
  };
  for (const r of roots) reach(r);
  while (queue.length > 0) walk(queue.shift());
  return seen;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = unneededTypes();
  let n = 0;
  for (const e of found) {
    for (const name of e.unneeded) console.log(`${e.specifier}: ${name}`);
    n += e.unneeded.length;
  }
  console.log(`${n} exported types appear in no exported signature`);
  process.exitCode = n > 0 ? 1 : 0;
}
