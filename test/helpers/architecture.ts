// The architecture rules of src/, as a checker over source text: each rule
// has one home in src/, and this finds a second copy. It parses TypeScript
// with vite's parser (a devDependency already), so comments and prose never
// count, and it reads text it is handed: test/architecture.test.ts hands it
// the real tree, and planted copies to show each rule fails.
//
// Rules (a violation names the file, the line and what it found):
// - state-letter: a process-state letter compared by hand (`p.state === "Z"`,
//   a switch over `.state` with a one-letter case, `["Z","X"].includes(state)`)
//   outside src/facts/: liveness is facts/liveness.ts's.
// - cgroup-procs-write: cgroup.procs named as a file (path-like text, or a
//   shell redirection into it) in src/ outside src/containment/enter.ts,
//   except inside a read (readText, readFile, …): joining a cgroup is
//   enter.ts's.
// - lease-transition: a `.transition(` or `.advance(` call outside src/ownership/lifecycle.ts
//   and the store that implements it (src/ownership/lease-store.ts).
// - layer-import: an import (static, `export … from`, or dynamic) that runs
//   up the layers (LAYERS below) or out of sessions/.
// - prose-decision: a decision made by matching prose: a string method
//   (startsWith, endsWith, includes, indexOf, search, match, matchAll) called
//   on a field or variable named detail, why, message or reason, or a regex
//   tested against one (`re.test(x.why)`, `re.exec(detail)`), anywhere in
//   src/. Those fields are for people; a decision reads a code.
// - file-size: a src/ file over MAX_FILE_LINES lines.
// - function-size: a function over MAX_FUNCTION_LINES lines.
import { readdirSync, readFileSync } from "node:fs";
import { join, posix, relative } from "node:path";
import { parseAst } from "vite";

export type RuleName = "state-letter" | "cgroup-procs-write" | "lease-transition" | "layer-import" | "prose-decision" | "file-size" | "function-size";

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

/**
 * The layers, lowest first, read from the imports of src/ (a module may
 * import from its own directory and from any lower rank):
 * - facts: what the OS says about a process; imports nothing of ours
 * - sessions: the visibility rule; independent, imports nothing of ours
 * - containment: cgroups; beside facts (uses its guards, identity, signaller), below ownership
 * - ownership: leases, verification, reaping, settlement
 * - supervisor: background runs (leased through ownership)
 * - acpx: the lifecycle controller (its client terminals run through the supervisor)
 * - cli: reads everything below it
 * - openclaw: the OpenClaw plugin (its branch), above the cli it reuses
 * - the package root (src/index.ts) re-exports the public surfaces
 */
export const LAYERS: Readonly<Record<string, number>> = Object.freeze({
  facts: 0,
  sessions: 0,
  containment: 1,
  ownership: 2,
  supervisor: 3,
  acpx: 4,
  cli: 5,
  openclaw: 6,
  "": 7,
});

/** Exceptions a rule allows, each with why; `max` caps how many (state letters) or how long (a function, a file). */
export interface Allowance {
  rule: RuleName;
  file: string;
  /** the function's name (function-size only) */
  name?: string;
  /** state-letter: at most this many comparisons in the file; file-size / function-size: at most this many lines */
  max: number;
  why: string;
}

type Node = { type: string; start: number; end: number; [k: string]: unknown };

export function readSourceTree(root: string, dir = "src"): SourceFile[] {
  const out: SourceFile[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(join(root, d), { withFileTypes: true })) {
      const p = posix.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) out.push({ path: relative(root, join(root, p)).split("\\").join("/"), text: readFileSync(join(root, p), "utf8") });
    }
  };
  walk(dir);
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
  const add = (rule: RuleName, at: number, detail: string) => out.push({ rule, file: f.path, line: lineOf(at), detail });
  const lines = f.text.split("\n").length - (f.text.endsWith("\n") ? 1 : 0);
  if (lines > MAX_FILE_LINES) add("file-size", 0, `${lines} lines (at most ${MAX_FILE_LINES})`);
  const ast = parseAst(f.text, { lang: "ts" }, f.path) as unknown as Node;
  walk(ast, [], (node, ancestors) => {
    stateLetter(f, node, add);
    cgroupProcs(f, node, ancestors, add);
    transition(f, node, add);
    layerImport(f, node, add);
    proseDecision(node, add);
    functionSize(node, ancestors, lineOf, add);
  });
  return out;
}

type Add = (rule: RuleName, at: number, detail: string) => void;

function walk(node: Node, ancestors: Node[], visit: (n: Node, ancestors: readonly Node[]) => void): void {
  visit(node, ancestors);
  ancestors.push(node);
  for (const v of Object.values(node)) {
    if (Array.isArray(v)) for (const c of v) if (isNode(c)) walk(c, ancestors, visit);
    if (isNode(v)) walk(v, ancestors, visit);
  }
  ancestors.pop();
}

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && typeof (v as Node).type === "string" && typeof (v as Node).start === "number";

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
  if (n.type === "TemplateLiteral" && (n.expressions as unknown[]).length === 0) return ((n.quasis as Node[])[0]?.value as { cooked: string }).cooked;
  return null;
}

/** `state`, `x.state`, `x?.state`, `x!.state` (any spelling that reads a field named state). */
function isStateRead(n: unknown): boolean {
  if (!isNode(n)) return false;
  if (n.type === "ChainExpression" || n.type === "TSNonNullExpression" || n.type === "ParenthesizedExpression") return isStateRead(n.expression);
  if (n.type === "Identifier") return n.name === "state";
  if (n.type === "MemberExpression" && !n.computed) return isNode(n.property) && n.property.name === "state";
  return false;
}

const isLetter = (s: string | null): boolean => s !== null && /^[A-Za-z]$/.test(s);

function stateLetter(f: SourceFile, n: Node, add: Add): void {
  if (f.path.startsWith("src/facts/")) return;
  if (n.type === "BinaryExpression" && ["===", "!==", "==", "!="].includes(n.operator as string)) {
    const [l, r] = [n.left, n.right];
    if ((isStateRead(l) && isLetter(stringOf(r))) || (isStateRead(r) && isLetter(stringOf(l)))) add("state-letter", n.start, `a state letter compared by hand (${stringOf(r) ?? stringOf(l)})`);
  }
  if (n.type === "SwitchStatement" && isStateRead(n.discriminant)) {
    for (const c of n.cases as Node[]) if (isLetter(stringOf(c.test))) add("state-letter", c.start, `a switch over a state letter (${stringOf(c.test)})`);
  }
  if (n.type === "CallExpression" && isNode(n.callee) && n.callee.type === "MemberExpression" && isNode(n.callee.property) && n.callee.property.name === "includes") {
    const obj = n.callee.object as Node;
    const arg = (n.arguments as Node[])[0];
    if (obj.type === "ArrayExpression" && (obj.elements as Node[]).some((e) => isLetter(stringOf(e))) && isStateRead(arg)) add("state-letter", n.start, "a list of state letters searched by hand");
  }
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
  if (!text.includes("cgroup.procs")) return false;
  return !/\s/.test(text) || /(>|\btee\b[^|;&]*|\bof=)\s*\S*cgroup\.procs/.test(text);
}

function cgroupProcs(f: SourceFile, n: Node, ancestors: readonly Node[], add: Add): void {
  if (f.path === "src/containment/enter.ts") return;
  let text: string | null = null;
  if (n.type === "Literal" && typeof n.value === "string") text = n.value;
  if (n.type === "TemplateLiteral") text = (n.quasis as Node[]).map((q) => (q.value as { cooked: string }).cooked).join("${}");
  if (text === null || !namesProcsFile(text)) return;
  // a read (readText, readFile, …) anywhere up the call chain of the string is not a write
  const calls: string[] = [];
  for (let i = ancestors.length - 1; i >= 0; i--) {
    const a = ancestors[i]!;
    if (a.type.includes("Function")) break;
    if (a.type === "CallExpression") calls.push(calleeName(a) ?? "?");
  }
  if (calls.some((c) => /^read/i.test(c))) return;
  add("cgroup-procs-write", n.start, `cgroup.procs named for a write outside containment/enter.ts${calls.length ? ` (in ${calls.join(" < ")})` : ""}`);
}

const TRANSITION_HOMES = new Set(["src/ownership/lifecycle.ts", "src/ownership/lease-store.ts"]);
/** The store's two ways to change a lease's state (lease-store-api.ts). */
const TRANSITION_CALLS = new Set(["transition", "advance"]);

function transition(f: SourceFile, n: Node, add: Add): void {
  if (TRANSITION_HOMES.has(f.path) || n.type !== "CallExpression") return;
  const c = n.callee as Node;
  if (c.type === "MemberExpression" && isNode(c.property) && TRANSITION_CALLS.has(c.property.name as string)) add("lease-transition", n.start, "a lease transition outside ownership/lifecycle.ts");
}

/** The prose fields: what a person reads (OwnershipEvidence.detail, a settlement's why, an error's message, a guard's reason). */
const PROSE_NAMES = new Set(["detail", "why", "message", "reason"]);
const STRING_MATCHERS = new Set(["startsWith", "endsWith", "includes", "indexOf", "search", "match", "matchAll"]);
const REGEX_MATCHERS = new Set(["test", "exec"]);

/** `x.detail`, `x?.why`, `x!.message`, or a variable named so. */
function isProseRead(n: unknown): boolean {
  if (!isNode(n)) return false;
  if (n.type === "ChainExpression" || n.type === "TSNonNullExpression" || n.type === "ParenthesizedExpression") return isProseRead(n.expression);
  if (n.type === "Identifier") return PROSE_NAMES.has(n.name as string);
  if (n.type === "MemberExpression" && !n.computed) return isNode(n.property) && PROSE_NAMES.has(n.property.name as string);
  return false;
}

function proseDecision(n: Node, add: Add): void {
  if (n.type !== "CallExpression" || !isNode(n.callee) || n.callee.type !== "MemberExpression" || !isNode(n.callee.property)) return;
  const method = n.callee.property.name as string;
  const receiver = n.callee.object;
  if (STRING_MATCHERS.has(method) && isProseRead(receiver)) add("prose-decision", n.start, `a decision by matching prose (.${method} on a prose field): read a code`);
  const arg = (n.arguments as Node[])[0];
  if (REGEX_MATCHERS.has(method) && isNode(receiver) && receiver.type === "Literal" && "regex" in receiver && isProseRead(arg)) {
    add("prose-decision", n.start, `a decision by matching prose (a regex .${method} of a prose field): read a code`);
  }
}

/** The layer of a src/ path: its first directory ("" for a file directly in src/), or null outside src/. */
function layerOf(path: string): string | null {
  const m = /^src\/(?:([^/]+)\/)?[^/]+$/.exec(path) ?? /^src\/([^/]+)\//.exec(path);
  if (!m) return null;
  return path.split("/").length === 2 ? "" : m[1]!;
}

function layerImport(f: SourceFile, n: Node, add: Add): void {
  let source: string | null = null;
  if ((n.type === "ImportDeclaration" || n.type === "ExportNamedDeclaration" || n.type === "ExportAllDeclaration") && isNode(n.source)) source = stringOf(n.source);
  if (n.type === "ImportExpression") source = stringOf(n.source);
  if (source === null || !source.startsWith(".")) return;
  const from = layerOf(f.path);
  const to = layerOf(posix.normalize(posix.join(posix.dirname(f.path), source)));
  if (from === null || to === null || from === to) return;
  const rf = LAYERS[from];
  const rt = LAYERS[to];
  if (rf === undefined) return add("layer-import", n.start, `src/${from}/ is not in the layer order (LAYERS): place it`);
  if (rt === undefined) return add("layer-import", n.start, `imports src/${to}/, which is not in the layer order (LAYERS)`);
  if (from === "sessions" || rt >= rf) add("layer-import", n.start, `${from || "src"} (rank ${rf}) imports ${to || "src"} (rank ${rt}): only lower layers may be imported${from === "sessions" ? " (sessions imports nothing of ours)" : ""}`);
}

function functionSize(n: Node, ancestors: readonly Node[], lineOf: (o: number) => number, add: Add): void {
  if (n.type !== "FunctionDeclaration" && n.type !== "FunctionExpression" && n.type !== "ArrowFunctionExpression") return;
  const lines = lineOf(n.end) - lineOf(n.start) + 1;
  if (lines <= MAX_FUNCTION_LINES) return;
  add("function-size", n.start, `function ${functionName(n, ancestors)}: ${lines} lines (at most ${MAX_FUNCTION_LINES})`);
}

/** A function's name: its own, or the variable, property or method it is assigned to; "<anonymous>" else. */
export function functionName(n: Node, ancestors: readonly Node[]): string {
  if (isNode(n.id) && typeof n.id.name === "string") return n.id.name;
  const parent = ancestors[ancestors.length - 1];
  if (parent && (parent.type === "VariableDeclarator" || parent.type === "PropertyDefinition") && isNode(parent.id ?? parent.key)) {
    return ((parent.id ?? parent.key) as Node).name as string;
  }
  if (parent && (parent.type === "Property" || parent.type === "MethodDefinition") && isNode(parent.key)) return (parent.key as Node).name as string;
  return "<anonymous>";
}

/** The name in a function-size detail ("function NAME: …"). */
const nameInDetail = (d: string): string | null => /^function (\S+):/.exec(d)?.[1] ?? null;
const linesInDetail = (d: string): number => Number(/(\d+) lines/.exec(d)?.[1] ?? "0");

function applyAllowances(found: readonly Violation[], allow: readonly Allowance[]): Violation[] {
  const out: Violation[] = [];
  const used = new Map<Allowance, number>();
  for (const v of found) {
    const a = allow.find((x) => x.rule === v.rule && x.file === v.file && (v.rule !== "function-size" || x.name === nameInDetail(v.detail)));
    if (a === undefined) {
      out.push(v);
      continue;
    }
    if (v.rule === "state-letter") {
      const n = (used.get(a) ?? 0) + 1;
      used.set(a, n);
      if (n > a.max) out.push({ ...v, detail: `${v.detail}; more than the ${a.max} allowed here (${a.why})` });
    } else if (linesInDetail(v.detail) > a.max) {
      out.push({ ...v, detail: `${v.detail}; more than the ${a.max} allowed here (${a.why})` });
    }
  }
  return out;
}
