// The process facts only src/facts/ interprets, found by what a value IS: a
// process's state letter and its start time, as declared in src/facts/ (a
// ProcessInfo, a ParsedStat, an IdentityLike), resolved by the TypeScript
// checker. So `p.state`, `const { state: s } = p`, `p["state"]`, `const s =
// p.state` and the same in an .mts file are one value, and any use that
// reads meaning into it outside src/facts/ is a finding, whatever it is
// called and however the test is spelled.
//
// Why the checker and not the compiler alone: the contract
// (shared/CONTRACT.md §1) fixes `ProcessInfo.state` and `.startTime` as
// `string` for users ("Z" = zombie), and the same records reach users
// (verifyOwnedTree's tree, getProcessFacts), so they cannot be opaque types
// without changing what a user can write. An intersection brand (`string &
// {…}`) would keep the contract but is still comparable with "Z" and still
// a regex's argument: it would stop nothing. The checker sees the
// declaration behind every spelling instead.
//
// - state-letter: a facts state compared (===, <, a switch over it, a case
//   of it), searched (a regex's test/exec, includes/indexOf/has on a list,
//   any method or index on the string itself) outside src/facts/: liveness
//   is isAlive/isZombieState's (facts/liveness.ts). Shown as text (a table
//   cell, a template) it is not interpreted.
// - start-time: a facts start time compared for equality (===, !==, a
//   switch, Object.is, includes/indexOf/has/get, a string method), also
//   through String() or a template, outside src/facts/: identity is
//   compareIdentity/sameProcess's (facts/identity.ts). An age
//   order (`Number(a.startTime) > Number(b)`) is not an identity question.
import { join } from "node:path";
import { createRequire } from "node:module";
import type TS from "typescript-api";
import type { Violation } from "./architecture.js";

const ts = createRequire(import.meta.url)("typescript-api") as typeof TS;

export const FIELD_HOME = "src/facts/";

type FieldRule = { rule: "state-letter" | "start-time"; field: string; what: string };
const FIELD_RULES: readonly FieldRule[] = [
  {
    rule: "state-letter",
    field: "state",
    what: "a process state read by hand outside src/facts/: ask isAlive/isZombieState (facts/liveness.ts)",
  },
  {
    rule: "start-time",
    field: "startTime",
    what: "a start time compared by hand outside src/facts/: ask sameProcess/compareIdentity (facts/identity.ts)",
  },
];

/** Calls that compare or search their argument. */
const SEARCHING_CALLS = new Set(["test", "exec", "includes", "indexOf", "lastIndexOf", "has", "get", "is", "match"]);
/** Calls and templates that hand the value on unchanged as text (seen through for start-time). */
const TEXT_OF = new Set(["String", "Number", "BigInt"]);
const EQUALITY = new Set([
  ts.SyntaxKind.EqualsEqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsEqualsToken,
  ts.SyntaxKind.EqualsEqualsToken,
  ts.SyntaxKind.ExclamationEqualsToken,
]);
const ORDER = new Set([
  ts.SyntaxKind.LessThanToken,
  ts.SyntaxKind.LessThanEqualsToken,
  ts.SyntaxKind.GreaterThanToken,
  ts.SyntaxKind.GreaterThanEqualsToken,
]);

/** Every field-rule violation in the program's src/ files (any TypeScript extension). */
export function checkFields(program: TS.Program, root: string): Violation[] {
  const checker = program.getTypeChecker();
  const prefix = join(root, "/");
  const out: Violation[] = [];
  for (const sf of program.getSourceFiles()) {
    if (!sf.fileName.startsWith(prefix + "src/") || sf.isDeclarationFile) continue;
    const path = sf.fileName.slice(prefix.length);
    if (path.startsWith(FIELD_HOME)) continue;
    for (const r of FIELD_RULES) {
      for (const at of readsOf(checker, sf, r.field, root)) {
        const how = interpretation(at, r.rule);
        if (how !== null)
          out.push({
            rule: r.rule,
            file: path,
            line: sf.getLineAndCharacterOfPosition(at.getStart(sf)).line + 1,
            detail: `${how}: ${r.what}`,
          });
      }
    }
  }
  return out;
}

/** Is `sym` the field `name` as src/facts/ declares it (directly, or through Pick/extends/an intersection)? */
function isFactsField(sym: TS.Symbol | undefined, name: string, root: string): boolean {
  if (sym === undefined || sym.getName() !== name) return false;
  return (sym.declarations ?? []).some((d) => d.getSourceFile().fileName.startsWith(join(root, FIELD_HOME)));
}

/**
 * The expressions in `sf` that hold the facts field `name`: a property or
 * element access that resolves to it, and every reference to a variable
 * bound from one (`const { state } = p`, `const s = p.state`).
 */
function readsOf(checker: TS.TypeChecker, sf: TS.SourceFile, name: string, root: string): TS.Expression[] {
  const direct: TS.Expression[] = [];
  const bound = new Set<TS.Symbol>();
  const visit = (n: TS.Node): void => {
    if (ts.isPropertyAccessExpression(n) && n.name.text === name) {
      if (isFactsField(checker.getSymbolAtLocation(n.name), name, root)) direct.push(n);
    } else if (ts.isElementAccessExpression(n) && ts.isStringLiteralLike(n.argumentExpression)) {
      const t = checker.getNonNullableType(checker.getTypeAtLocation(n.expression));
      if (n.argumentExpression.text === name && isFactsField(t.getProperty(name), name, root)) direct.push(n);
    } else if (ts.isBindingElement(n) && ts.isObjectBindingPattern(n.parent) && ts.isIdentifier(n.name)) {
      const key = n.propertyName ?? n.name;
      const keyText = ts.isIdentifier(key) || ts.isStringLiteralLike(key) ? key.text : null;
      const t = checker.getTypeAtLocation(n.parent);
      if (keyText === name && isFactsField(t.getProperty(name), name, root)) {
        const s = checker.getSymbolAtLocation(n.name);
        if (s) bound.add(s);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  // `const s = p.state`: s holds it too
  for (const e of direct) {
    const p = skipWrappers(e).parent;
    if (p && ts.isVariableDeclaration(p) && ts.isIdentifier(p.name)) {
      const s = checker.getSymbolAtLocation(p.name);
      if (s) bound.add(s);
    }
  }
  const refs: TS.Expression[] = [];
  if (bound.size > 0) {
    const find = (n: TS.Node): void => {
      if (ts.isIdentifier(n) && !isDeclarationName(n)) {
        const s = checker.getSymbolAtLocation(n);
        if (s && bound.has(s)) refs.push(n);
      }
      ts.forEachChild(n, find);
    };
    find(sf);
  }
  return [...direct, ...refs];
}

function isDeclarationName(n: TS.Identifier): boolean {
  const p = n.parent;
  return (
    (ts.isVariableDeclaration(p) && p.name === n) ||
    (ts.isBindingElement(p) && p.name === n) ||
    (ts.isParameter(p) && p.name === n)
  );
}

/** Up through what changes nothing: parentheses, `!`, `as`, `satisfies`. */
function skipWrappers(e: TS.Node): TS.Node {
  let n = e;
  while (
    n.parent &&
    (ts.isParenthesizedExpression(n.parent) ||
      ts.isNonNullExpression(n.parent) ||
      ts.isAsExpression(n.parent) ||
      ts.isSatisfiesExpression(n.parent))
  )
    n = n.parent;
  return n;
}

/** What `at` is used for, when that reads meaning into it; null when it is only carried or shown. */
function interpretation(at: TS.Expression, rule: FieldRule["rule"]): string | null {
  let n = skipWrappers(at);
  // a start time turned into text (String(x), `${x}`) is the same start time
  if (rule === "start-time") {
    for (;;) {
      const p = n.parent;
      if (
        p &&
        ts.isCallExpression(p) &&
        ts.isIdentifier(p.expression) &&
        TEXT_OF.has(p.expression.text) &&
        p.arguments[0] === n
      )
        n = skipWrappers(p);
      else if (p && ts.isTemplateSpan(p) && p.parent.head.text === "" && p.parent.templateSpans.length === 1)
        n = skipWrappers(p.parent);
      else break;
    }
  }
  const p = n.parent;
  if (p === undefined) return null;
  if (ts.isBinaryExpression(p)) {
    const op = p.operatorToken.kind;
    if (EQUALITY.has(op)) return "compared";
    if (ORDER.has(op) && rule === "state-letter") return "ordered";
    return null;
  }
  if (ts.isSwitchStatement(p) && p.expression === n) return "switched over";
  if (ts.isCaseClause(p) && p.expression === n) return "a case of a switch";
  if ((ts.isPropertyAccessExpression(p) || ts.isElementAccessExpression(p)) && p.expression === n)
    return "searched (a method or index on it)";
  if (ts.isCallExpression(p) && p.arguments.includes(n as TS.Expression)) {
    const callee = p.expression;
    const name = ts.isPropertyAccessExpression(callee) ? callee.name.text : null;
    if (name !== null && SEARCHING_CALLS.has(name)) return `searched (.${name})`;
  }
  return null;
}
