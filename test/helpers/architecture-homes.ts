// Rules checked by what a name IS, not how it is spelled: the TypeScript
// checker resolves every reference to its declaration, so `process.kill`,
// `const { kill } = process`, `process["kill"]`, `const k = process; k.kill`
// and `import { kill } from "node:process"` are one symbol, and so are
// `store.transition(…)`, `const { transition } = store` and `store["advance"]`.
// TypeScript 7 is the native port without a compiler API: this uses 5.9's
// under the alias typescript-api (a devDependency).
//
// Rules (a violation names the file, the line and what it found):
// - signal-call: a reference to a call that sends a signal (Node's
//   process.kill, ChildProcess.kill, the addon's signalIfSame) outside the
//   signal module, src/facts/signal.ts. Everything else asks it.
// - lease-move: a reference to the store's transition/advance or to
//   applySettlement (an import, a re-export, a call, a destructuring, an
//   element access) outside src/ownership/lifecycle/lifecycle.ts, the lifecycle module.
import { createRequire } from "node:module";
import { join } from "node:path";
import type TS from "typescript-api";
import {
  applyAllowances,
  checkTree,
  isTypeScript,
  type Allowance,
  type SourceFile,
  type Violation,
} from "./architecture.js";
import { checkFields } from "./architecture-fields.js";

const ts = createRequire(import.meta.url)("typescript-api") as typeof TS;

export type HomeRuleName = "signal-call" | "lease-move";

/** A declaration that only its home may reference: the file it is declared in (a suffix), the container's name, its own name. */
interface Target {
  /** the declaring file (a suffix), or "*": any method of this name whose parameter is a signal */
  file: string;
  container: string;
  name: string;
}

interface HomeRule {
  rule: HomeRuleName;
  /** the files that may reference the targets */
  homes: ReadonlySet<string>;
  targets: readonly Target[];
  what: string;
}

export const SIGNAL_HOME = "src/facts/signal.ts";
export const LEASE_MOVE_HOME = "src/ownership/lifecycle/lifecycle.ts";

export const HOME_RULES: readonly HomeRule[] = [
  {
    rule: "signal-call",
    homes: new Set([SIGNAL_HOME]),
    targets: [
      { file: "/@types/node/process.d.ts", container: "Process", name: "kill" },
      { file: "/@types/node/child_process.d.ts", container: "ChildProcess", name: "kill" },
      { file: "src/facts/native-binding.ts", container: "NativeBinding", name: "signalIfSame" },
      // a child's or a pty's kill(signal) declared by hand (`{ kill(signal: NodeJS.Signals): boolean }`)
      { file: "*", container: "*", name: "kill" },
    ],
    what: `a signal sent outside the signal module (${SIGNAL_HOME}): ask it`,
  },
  {
    rule: "lease-move",
    // lease-store.ts implements the two moves; lifecycle.ts is the only caller
    homes: new Set([LEASE_MOVE_HOME, "src/ownership/leases/lease-store.ts"]),
    targets: [
      { file: "src/ownership/leases/lease-store-api.ts", container: "LeaseStore", name: "transition" },
      { file: "src/ownership/leases/lease-store-api.ts", container: "LeaseStore", name: "advance" },
      { file: "src/ownership/lifecycle/lifecycle.ts", container: "", name: "applySettlement" },
    ],
    what: `a lease moved outside the lifecycle module (${LEASE_MOVE_HOME})`,
  },
];

const NAMES = new Set(HOME_RULES.flatMap((r) => r.targets.map((t) => t.name)));

/**
 * Every rule over a tree: the text rules (architecture.ts) on every file, the
 * symbol rules on its TypeScript (here, and the facts fields in
 * architecture-fields.ts), then the allowances. Hand back `program` as
 * `old` to check a changed copy of the same tree quickly.
 */
export function checkAll(
  root: string,
  files: readonly SourceFile[],
  allow: readonly Allowance[] = [],
  old?: TS.Program,
): { violations: Violation[]; program: TS.Program } {
  const program = programOf(
    root,
    files.filter((f) => f.path.startsWith("src/") && isTypeScript(f.path)),
    old,
  );
  const found = [...checkTree(files), ...checkHomes(program, root), ...checkFields(program, root)];
  return { violations: applyAllowances(found, allow), program };
}

/** A program over `files` (paths from `root`), reusing `old`'s unchanged files. */
export function programOf(root: string, files: readonly SourceFile[], old?: TS.Program): TS.Program {
  const texts = new Map(files.map((f) => [join(root, f.path), f.text]));
  const options: TS.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"],
    typeRoots: [join(root, "node_modules/@types")],
  };
  const host = ts.createCompilerHost(options, true);
  const read = host.readFile.bind(host);
  host.readFile = (p) => texts.get(p) ?? read(p);
  const exists = host.fileExists.bind(host);
  host.fileExists = (p) => texts.has(p) || exists(p);
  return ts.createProgram({
    rootNames: [...texts.keys()],
    options,
    host,
    ...(old !== undefined ? { oldProgram: old } : {}),
  });
}

/** Every home-rule violation in the program's files under `root`/src. */
export function checkHomes(program: TS.Program, root: string): Violation[] {
  const checker = program.getTypeChecker();
  const out: Violation[] = [];
  const prefix = join(root, "/");
  for (const sf of program.getSourceFiles()) {
    if (!sf.fileName.startsWith(prefix + "src/") || sf.isDeclarationFile) continue;
    const path = sf.fileName.slice(prefix.length);
    const visit = (n: TS.Node): void => {
      const text = ts.isIdentifier(n) || ts.isStringLiteralLike(n) ? n.text : null;
      if (text !== null && NAMES.has(text) && !isDeclaredName(n)) {
        for (const r of HOME_RULES) {
          if (r.homes.has(path)) continue;
          const sym = referencedSymbol(checker, n, text);
          const t = sym && r.targets.find((t) => declares(sym, t, root));
          if (t)
            out.push({
              rule: r.rule,
              file: path,
              line: sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1,
              detail: `${t.container ? `${t.container}.` : ""}${t.name}: ${r.what}`,
            });
        }
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return out;
}

/** The name a declaration gives (the interface member, the function): not a reference. */
function isDeclaredName(n: TS.Node): boolean {
  const p = n.parent;
  return (
    p !== undefined &&
    ts.isIdentifier(n) &&
    (ts.isMethodSignature(p) ||
      ts.isPropertySignature(p) ||
      ts.isFunctionDeclaration(p) ||
      ts.isMethodDeclaration(p) ||
      ts.isPropertyDeclaration(p)) &&
    p.name === n
  );
}

/** The symbol a name refers to: through aliases (imports, re-exports), destructuring and element access. */
function referencedSymbol(checker: TS.TypeChecker, n: TS.Node, text: string): TS.Symbol | undefined {
  const p = n.parent;
  // `{ kill } = process`, `{ advance: a } = store`: the property of the destructured type
  if (p && ts.isBindingElement(p) && ts.isObjectBindingPattern(p.parent) && (p.propertyName ?? p.name) === n) {
    return checker.getTypeAtLocation(p.parent).getProperty(text);
  }
  // `store["advance"]`
  if (ts.isStringLiteralLike(n)) {
    if (!(p && ts.isElementAccessExpression(p) && p.argumentExpression === n)) return undefined;
    return checker.getNonNullableType(checker.getTypeAtLocation(p.expression)).getProperty(text);
  }
  let sym = checker.getSymbolAtLocation(n);
  if (sym && sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
  return sym;
}

function declares(sym: TS.Symbol, t: Target, root: string): boolean {
  if (t.file === "*") return sym.getName() === t.name && (sym.declarations ?? []).some(takesSignal);
  return (sym.declarations ?? []).some((d) => {
    const file = d.getSourceFile().fileName;
    if (!(file.endsWith(t.file) || file === join(root, t.file))) return false;
    if (sym.getName() !== t.name) return false;
    if (t.container === "") return true;
    const c = d.parent;
    return (
      c !== undefined && (ts.isInterfaceDeclaration(c) || ts.isClassDeclaration(c)) && c.name?.text === t.container
    );
  });
}

/** A method (or a function-typed property) with a parameter that is a signal: named signal/sig, or typed as one. */
function takesSignal(d: TS.Declaration): boolean {
  const fn = ts.isPropertySignature(d) || ts.isPropertyDeclaration(d) ? d.type : d;
  if (fn === undefined || !("parameters" in fn)) return false;
  const params = (fn as TS.SignatureDeclarationBase).parameters;
  return params.some(
    (p) =>
      (ts.isIdentifier(p.name) && /^sig(nal)?$/.test(p.name.text)) ||
      (p.type !== undefined && /Signals?\b|signal/.test(p.type.getText())),
  );
}
