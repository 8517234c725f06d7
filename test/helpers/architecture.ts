// The architecture rules of src/, as a checker over source text: each rule
// has one home in src/, and this finds a second copy. It parses TypeScript
// with vite's parser (a devDependency already), so comments and prose never
// count, and it reads text it is handed: test/architecture.test.ts hands it
// the real tree, and planted copies to show each rule fails.
//
// Rules (a violation names the file, the line and what it found):
// - state-letter: a process-state letter compared by hand (`p.state === "Z"`,
//   a switch over `.state` with a one-letter case, `["Z","X"].includes(state)`,
//   a letter held in a constant first, a regex tested on a state) outside
//   src/facts/: liveness is facts/liveness.ts's.
// - cgroup-procs-write: cgroup.procs named as a file (path-like text, or a
//   shell redirection into it) in src/ outside src/containment/enter.ts,
//   except inside a read (readText, readFile, …): joining a cgroup is
//   enter.ts's. The name built from parts counts too (a "procs" literal
//   joined with "cgroup").
// - layer-import: an import (static, `export … from`, dynamic, or a type's `import("…").T`) that runs
//   up the layers, across a rank (the plugin importing the CLI), or out of
//   sessions/; inside a layer whose folders are ordered, one that runs up
//   its folders (both orders: layer-order.mjs, read by architecture-layers.ts).
// - kill-order: a function that names SIGTERM and then SIGKILL (a hand-written
//   TERM → grace → KILL) outside KILL_ORDER_HOME, the one escalate: the tree
//   kill, the wrapper's group and a run's handle all call it. It reads
//   TypeScript only: the native C wrapper (native/wrapper_*linux*.c), which
//   runs with no Node to call escalate, is exempt by language.
// - visibility-check: an owner field of a session row (ownerSessionKey,
//   spawnedBy, parentSessionKey) compared with anything but undefined/null
//   outside src/sessions/: who may see a row is canSeeSessionRow's.
// - prose-decision: a decision made by matching prose: a string method
//   (startsWith, endsWith, includes, indexOf, search, match, matchAll) called
//   on a field or variable named detail, why, message or reason, or a regex
//   tested against one (`re.test(x.why)`, `re.exec(detail)`), anywhere in
//   src/. Those fields are for people; a decision reads a code.
// - file-size: a src/, native/ or test/ file over MAX_FILE_LINES lines (in
//   test/, the only rule: tests may write what src/ may not).
// - errno-map: an errno's name outside its layer's one map (architecture-errno.ts).
// signal-call and lease-move are checked by symbol (architecture-homes.ts);
// state-letter and start-time also by the checker (architecture-fields.ts).
// - function-size: a function over MAX_FUNCTION_LINES lines.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, posix, relative } from "node:path";
import { parseAst } from "vite";
import { layerImportProblem } from "./architecture-layers.js";
import { errnoName } from "./architecture-errno.js";

export type RuleName =
  | "state-letter"
  | "start-time"
  | "errno-map"
  | "cgroup-procs-write"
  | "layer-import"
  | "prose-decision"
  | "kill-order"
  | "visibility-check"
  | "signal-call"
  | "lease-move"
  | "file-size"
  | "function-size";

export interface SourceFile {
  /** path from the package root, with "/" (e.g. "src/facts/procfs.ts") */
  path: string;
  text: string;
}

export interface Violation {
  rule: RuleName;
  file: string;
  line: number;
  detail: string;
}

export const MAX_FILE_LINES = 500;
export const MAX_FUNCTION_LINES = 80;

/** Exceptions a rule allows, each with why; `max` caps how many (state letters) or how long (a function, a file). */
export interface Allowance {
  rule: RuleName;
  file: string;
  /** the function's name (function-size only) */
  name?: string;
  /** file-size / function-size: at most this many lines; any other rule: at most this many findings in the file */
  max: number;
  why: string;
}

export type Node = { type: string; start: number; end: number; [k: string]: unknown };

/** The files the rules read: src/**\/*.ts, and native/'s C and C++ and test/'s TypeScript (the size rule only); a missing folder is skipped. */
export function readSourceTree(root: string, dirs: readonly string[] = ["src", "native", "test"]): SourceFile[] {
  const out: SourceFile[] = [];
  const walk = (d: string) => {
    if (!existsSync(join(root, d))) return;
    for (const e of readdirSync(join(root, d), { withFileTypes: true })) {
      const p = posix.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.([cm]?tsx?|cc|cpp|h|hpp|c)$/.test(e.name))
        out.push({
          path: relative(root, join(root, p)).split("\\").join("/"),
          text: readFileSync(join(root, p), "utf8"),
        });
    }
  };
  for (const d of dirs) walk(d);
  return out.sort((a, b) => (a.path < b.path ? -1 : 1));
}

/** Every violation in `files`, after the allowances. */
export function checkTree(files: readonly SourceFile[], allow: readonly Allowance[] = []): Violation[] {
  const found = files.flatMap((f) => checkFile(f));
  return applyAllowances(found, allow);
}

export function checkFile(f: SourceFile): Violation[] {
  const lineOf = lineIndex(f.text);
  const out: Violation[] = [];
  const add = (rule: RuleName, at: number, detail: string) =>
    out.push({ rule, file: f.path, line: lineOf(at), detail });
  const lines = f.text.split("\n").length - (f.text.endsWith("\n") ? 1 : 0);
  if (lines > MAX_FILE_LINES) add("file-size", 0, `${lines} lines (at most ${MAX_FILE_LINES})`);
  // outside src/ (native/, test/) only the size rule applies
  if (!isTypeScript(f.path) || !f.path.startsWith("src/")) return out;
  const ast = parseAst(f.text, { lang: "ts" }, f.path) as unknown as Node;
  const consts = letterConstants(ast);
  const terms: number[] = [];
  walk(ast, [], (node, ancestors) => {
    stateLetter(f, node, add, consts);
    cgroupProcs(f, node, ancestors, add);
    killOrder(f, node, ancestors, add, terms);
    visibilityCheck(f, node, add);
    layerImport(f, node, add);
    proseDecision(node, add);
    errnoName(f, node, ancestors, add);
    functionSize(node, ancestors, lineOf, add);
  });
  return out;
}

export type Add = (rule: RuleName, at: number, detail: string) => void;

/** TypeScript by any of its extensions: an .mts or .cts file is held to the same rules as a .ts. */
export const isTypeScript = (path: string): boolean => /\.[cm]?tsx?$/.test(path) && !/\.d\.[cm]?ts$/.test(path);

function walk(node: Node, ancestors: Node[], visit: (n: Node, ancestors: readonly Node[]) => void): void {
  visit(node, ancestors);
  ancestors.push(node);
  for (const v of Object.values(node)) {
    if (Array.isArray(v)) for (const c of v) if (isNode(c)) walk(c, ancestors, visit);
    if (isNode(v)) walk(v, ancestors, visit);
  }
  ancestors.pop();
}

const isNode = (v: unknown): v is Node =>
  typeof v === "object" && v !== null && typeof (v as Node).type === "string" && typeof (v as Node).start === "number";

function lineIndex(text: string): (offset: number) => number {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}

/** The string value of a literal or an expression-less template, else null. */
function stringOf(n: unknown): string | null {
  if (!isNode(n)) return null;
  if (n.type === "Literal" && typeof n.value === "string") return n.value;
  if (n.type === "TemplateLiteral" && (n.expressions as unknown[]).length === 0)
    return ((n.quasis as Node[])[0]?.value as { cooked: string }).cooked;
  return null;
}

/** `state`, `x.state`, `x?.state`, `x!.state` (any spelling that reads a field named state). */
function isStateRead(n: unknown): boolean {
  if (!isNode(n)) return false;
  if (n.type === "ChainExpression" || n.type === "TSNonNullExpression" || n.type === "ParenthesizedExpression")
    return isStateRead(n.expression);
  if (n.type === "Identifier") return n.name === "state";
  if (n.type === "MemberExpression" && !n.computed) return isNode(n.property) && n.property.name === "state";
  return false;
}

const isLetter = (s: string | null): boolean => s !== null && /^[A-Za-z]$/.test(s);

/** Names bound to a state letter in a file: `const Z = "Z"` → Z, `const S = { ZOMBIE: "Z" }` → S.ZOMBIE. */
function letterConstants(ast: Node): Map<string, string> {
  const out = new Map<string, string>();
  walk(ast, [], (n) => {
    if (n.type !== "VariableDeclarator" || !isNode(n.id) || n.id.type !== "Identifier") return;
    const name = n.id.name as string;
    const init =
      isNode(n.init) && (n.init.type === "TSAsExpression" || n.init.type === "TSSatisfiesExpression")
        ? n.init.expression
        : n.init;
    if (isLetter(stringOf(init))) out.set(name, stringOf(init)!);
    if (isNode(init) && init.type === "ObjectExpression") {
      for (const p of init.properties as Node[])
        if (p.type === "Property" && isNode(p.key) && isLetter(stringOf(p.value)))
          out.set(`${name}.${(p.key.name as string) ?? stringOf(p.key)}`, stringOf(p.value)!);
    }
  });
  return out;
}

/** The letter a node stands for: a literal, or a name bound to one (letterConstants). */
function letterOf(n: unknown, consts: ReadonlyMap<string, string>): string | null {
  if (!isNode(n)) return null;
  const lit = stringOf(n);
  if (isLetter(lit)) return lit;
  if (n.type === "Identifier") return consts.get(n.name as string) ?? null;
  if (
    n.type === "MemberExpression" &&
    !n.computed &&
    isNode(n.object) &&
    n.object.type === "Identifier" &&
    isNode(n.property)
  )
    return consts.get(`${n.object.name as string}.${n.property.name as string}`) ?? null;
  return null;
}

/** A regex that names state letters: a class of letters (`[ZX]`) or a one-letter alternative (`^Z`, `(Z|X)`). */
const LETTER_PATTERN = /\[\^?[A-Za-z]+\]|(?:^|[|(^])[A-Za-z](?:[|)$]|$)/;

function stateLetter(f: SourceFile, n: Node, add: Add, consts: ReadonlyMap<string, string>): void {
  if (f.path.startsWith("src/facts/")) return;
  const letter = (x: unknown) => letterOf(x, consts);
  if (n.type === "BinaryExpression" && ["===", "!==", "==", "!="].includes(n.operator as string)) {
    const [l, r] = [n.left, n.right];
    if ((isStateRead(l) && letter(r) !== null) || (isStateRead(r) && letter(l) !== null))
      add("state-letter", n.start, `a state letter compared by hand (${letter(r) ?? letter(l)})`);
  }
  if (n.type === "SwitchStatement" && isStateRead(n.discriminant)) {
    for (const c of n.cases as Node[])
      if (letter(c.test) !== null) add("state-letter", c.start, `a switch over a state letter (${letter(c.test)})`);
  }
  if (
    n.type !== "CallExpression" ||
    !isNode(n.callee) ||
    n.callee.type !== "MemberExpression" ||
    !isNode(n.callee.property)
  )
    return;
  const method = n.callee.property.name as string;
  const obj = n.callee.object as Node;
  const arg = (n.arguments as Node[])[0];
  if (method === "includes" && isStateRead(arg)) {
    if (obj.type === "ArrayExpression" && (obj.elements as Node[]).some((e) => letter(e) !== null))
      add("state-letter", n.start, "a list of state letters searched by hand");
    else if (/^[A-Za-z]{1,8}$/.test(stringOf(obj) ?? ""))
      add("state-letter", n.start, "a string of state letters searched by hand");
  }
  const regex = (x: Node) =>
    x.type === "Literal" && "regex" in x && LETTER_PATTERN.test((x.regex as { pattern: string }).pattern);
  if ((method === "test" || method === "exec") && regex(obj) && isStateRead(arg))
    add("state-letter", n.start, "a regex of state letters tested on a state");
  if (["match", "search", "matchAll"].includes(method) && isStateRead(obj) && isNode(arg) && regex(arg))
    add("state-letter", n.start, "a state matched against a regex of state letters");
  if (["startsWith", "endsWith", "includes"].includes(method) && isStateRead(obj) && letter(arg) !== null)
    add("state-letter", n.start, `a state searched for a letter (${letter(arg)})`);
}

/** The callee's last name: `readText(…)` → readText, `fsp.readFile(…)` → readFile. */
function calleeName(n: Node): string | null {
  const c = n.callee as Node;
  if (c.type === "Identifier") return c.name as string;
  if (c.type === "MemberExpression" && isNode(c.property)) return (c.property.name as string) ?? null;
  return null;
}

/**
 * A string that can name the file for a write: path-like text (no
 * whitespace: "cgroup.procs", `${dir}/cgroup.procs`) or a shell redirection
 * or tee into it. Prose (an error message naming the file) is neither.
 */
function namesProcsFile(text: string): boolean {
  // the name's last part on its own ("procs", ".procs"): the name built from parts
  if (/^\.?procs$/.test(text)) return true;
  if (!text.includes("cgroup.procs")) return false;
  return !/\s/.test(text) || /(>|\btee\b[^|;&]*|\bof=)\s*\S*cgroup\.procs/.test(text);
}

function cgroupProcs(f: SourceFile, n: Node, ancestors: readonly Node[], add: Add): void {
  if (f.path === "src/containment/enter.ts") return;
  let text: string | null = null;
  if (n.type === "Literal" && typeof n.value === "string") text = n.value;
  if (n.type === "TemplateLiteral")
    text = (n.quasis as Node[]).map((q) => (q.value as { cooked: string }).cooked).join("${}");
  if (text === null || !namesProcsFile(text)) return;
  // a read (readText, readFile, …) anywhere up the call chain of the string is not a write
  const calls: string[] = [];
  for (let i = ancestors.length - 1; i >= 0; i--) {
    const a = ancestors[i]!;
    if (a.type.includes("Function")) break;
    if (a.type === "CallExpression") calls.push(calleeName(a) ?? "?");
  }
  if (calls.some((c) => /^read/i.test(c))) return;
  add(
    "cgroup-procs-write",
    n.start,
    `cgroup.procs named for a write outside containment/enter.ts${calls.length ? ` (in ${calls.join(" < ")})` : ""}`,
  );
}

/** The one home of TERM → grace → KILL: escalate. */
export const KILL_ORDER_HOME = "src/ownership/terminate/escalate.ts";
const TERM_NAMES = new Set(["SIGTERM", "TERM"]);
const KILL_NAMES = new Set(["SIGKILL", "KILL"]);

/** A signal's name as a value (a literal, a constant, `os.constants.signals.SIGKILL`), not in a type. */
function signalNameOf(n: Node, ancestors: readonly Node[]): string | null {
  let name: string | null = null;
  if (n.type === "Literal" && typeof n.value === "string") name = n.value;
  else if (n.type === "Identifier") name = n.name as string;
  if (name === null || !(TERM_NAMES.has(name) || KILL_NAMES.has(name))) return null;
  if (n.type === "Identifier" && name.length < 5) return null; // a variable named TERM or KILL is not a signal's name
  const parent = ancestors[ancestors.length - 1];
  if (parent?.type === "Property" && parent.key === n && !parent.computed) return null; // { SIGKILL: … } names a key
  if (
    ancestors.some(
      (a) =>
        a.type.startsWith("TS") && !["TSAsExpression", "TSNonNullExpression", "TSSatisfiesExpression"].includes(a.type),
    )
  )
    return null;
  return name;
}

/**
 * A function that names SIGTERM and later SIGKILL (itself, or a function
 * nested in it) writes the kill order by hand; one finding per function, at
 * the KILL. A module-level mention is not a function's (an event name).
 */
function killOrder(f: SourceFile, n: Node, ancestors: readonly Node[], add: Add, terms: number[]): void {
  if (f.path === KILL_ORDER_HOME) return;
  const name = signalNameOf(n, ancestors);
  if (name === null) return;
  if (TERM_NAMES.has(name)) return void terms.push(n.start);
  const fn = ancestors.find((a) => a.type.includes("Function") && terms.some((t) => t >= a.start && t < n.start));
  if (fn === undefined || reported.has(fn)) return;
  reported.add(fn);
  add("kill-order", n.start, `TERM then KILL written by hand outside ${KILL_ORDER_HOME}: call the one kill order`);
}
const reported = new WeakSet<Node>();

/** The owner fields of a session row: who may see it is canSeeSessionRow's (src/sessions/). */
const OWNER_FIELDS = new Set(["ownerSessionKey", "spawnedBy", "parentSessionKey"]);
const isOwnerRead = (n: unknown): boolean =>
  isNode(n) &&
  (n.type === "ChainExpression" || n.type === "TSNonNullExpression"
    ? isOwnerRead(n.expression)
    : n.type === "MemberExpression" &&
      !n.computed &&
      isNode(n.property) &&
      OWNER_FIELDS.has(n.property.name as string));
const isNothing = (n: unknown): boolean =>
  isNode(n) && ((n.type === "Identifier" && n.name === "undefined") || (n.type === "Literal" && n.value === null));

function visibilityCheck(f: SourceFile, n: Node, add: Add): void {
  if (f.path.startsWith("src/sessions/")) return;
  if (n.type === "BinaryExpression" && ["===", "!==", "==", "!="].includes(n.operator as string)) {
    const [l, r] = [n.left, n.right];
    if ((isOwnerRead(l) && !isNothing(r)) || (isOwnerRead(r) && !isNothing(l)))
      add("visibility-check", n.start, "a session row's owner compared outside src/sessions/: ask canSeeSessionRow");
  }
  if (
    n.type === "CallExpression" &&
    isNode(n.callee) &&
    n.callee.type === "MemberExpression" &&
    isNode(n.callee.property) &&
    n.callee.property.name === "includes"
  ) {
    const obj = n.callee.object as Node;
    if (obj.type === "ArrayExpression" && (obj.elements as Node[]).some(isOwnerRead))
      add("visibility-check", n.start, "a session row's owners searched outside src/sessions/: ask canSeeSessionRow");
  }
}

/** The prose fields: what a person reads (OwnershipEvidence.detail, a settlement's why, an error's message, a guard's reason). */
const PROSE_NAMES = new Set(["detail", "why", "message", "reason"]);
const STRING_MATCHERS = new Set(["startsWith", "endsWith", "includes", "indexOf", "search", "match", "matchAll"]);
const REGEX_MATCHERS = new Set(["test", "exec"]);

/** `x.detail`, `x?.why`, `x!.message`, or a variable named so. */
function isProseRead(n: unknown): boolean {
  if (!isNode(n)) return false;
  if (n.type === "ChainExpression" || n.type === "TSNonNullExpression" || n.type === "ParenthesizedExpression")
    return isProseRead(n.expression);
  if (n.type === "Identifier") return PROSE_NAMES.has(n.name as string);
  if (n.type === "MemberExpression" && !n.computed)
    return isNode(n.property) && PROSE_NAMES.has(n.property.name as string);
  return false;
}

function proseDecision(n: Node, add: Add): void {
  if (
    n.type !== "CallExpression" ||
    !isNode(n.callee) ||
    n.callee.type !== "MemberExpression" ||
    !isNode(n.callee.property)
  )
    return;
  const method = n.callee.property.name as string;
  const receiver = n.callee.object;
  if (STRING_MATCHERS.has(method) && isProseRead(receiver))
    add("prose-decision", n.start, `a decision by matching prose (.${method} on a prose field): read a code`);
  const arg = (n.arguments as Node[])[0];
  if (
    REGEX_MATCHERS.has(method) &&
    isNode(receiver) &&
    receiver.type === "Literal" &&
    "regex" in receiver &&
    isProseRead(arg)
  ) {
    add("prose-decision", n.start, `a decision by matching prose (a regex .${method} of a prose field): read a code`);
  }
}

function layerImport(f: SourceFile, n: Node, add: Add): void {
  let source: string | null = null;
  if (
    (n.type === "ImportDeclaration" || n.type === "ExportNamedDeclaration" || n.type === "ExportAllDeclaration") &&
    isNode(n.source)
  )
    source = stringOf(n.source);
  if (n.type === "ImportExpression" || n.type === "TSImportType") source = stringOf(n.source);
  if (source === null) return;
  const problem = layerImportProblem(f.path, source);
  if (problem !== null) add("layer-import", n.start, problem);
}

function functionSize(n: Node, ancestors: readonly Node[], lineOf: (o: number) => number, add: Add): void {
  if (n.type !== "FunctionDeclaration" && n.type !== "FunctionExpression" && n.type !== "ArrowFunctionExpression")
    return;
  const lines = lineOf(n.end) - lineOf(n.start) + 1;
  if (lines <= MAX_FUNCTION_LINES) return;
  add(
    "function-size",
    n.start,
    `function ${functionName(n, ancestors)}: ${lines} lines (at most ${MAX_FUNCTION_LINES})`,
  );
}

/** A function's name: its own, or the variable, property or method it is assigned to; "<anonymous>" else. */
export function functionName(n: Node, ancestors: readonly Node[]): string {
  if (isNode(n.id) && typeof n.id.name === "string") return n.id.name;
  const parent = ancestors[ancestors.length - 1];
  if (
    parent &&
    (parent.type === "VariableDeclarator" || parent.type === "PropertyDefinition") &&
    isNode(parent.id ?? parent.key)
  ) {
    return ((parent.id ?? parent.key) as Node).name as string;
  }
  if (parent && (parent.type === "Property" || parent.type === "MethodDefinition") && isNode(parent.key))
    return (parent.key as Node).name as string;
  return "<anonymous>";
}

/** The name in a function-size detail ("function NAME: …"). */
const nameInDetail = (d: string): string | null => /^function (\S+):/.exec(d)?.[1] ?? null;
const linesInDetail = (d: string): number => Number(/(\d+) lines/.exec(d)?.[1] ?? "0");

/** The rules an allowance bounds by size (lines); the others by how many findings in the file. */
const SIZE_RULES = new Set<RuleName>(["file-size", "function-size"]);

export function applyAllowances(found: readonly Violation[], allow: readonly Allowance[]): Violation[] {
  const out: Violation[] = [];
  const used = new Map<Allowance, number>();
  for (const v of found) {
    const a = allow.find(
      (x) =>
        x.rule === v.rule && x.file === v.file && (v.rule !== "function-size" || x.name === nameInDetail(v.detail)),
    );
    if (a === undefined) {
      out.push(v);
      continue;
    }
    if (!SIZE_RULES.has(v.rule)) {
      const n = (used.get(a) ?? 0) + 1;
      used.set(a, n);
      if (n > a.max) out.push({ ...v, detail: `${v.detail}; more than the ${a.max} allowed here (${a.why})` });
    } else if (linesInDetail(v.detail) > a.max) {
      out.push({ ...v, detail: `${v.detail}; more than the ${a.max} allowed here (${a.why})` });
    }
  }
  return out;
}
