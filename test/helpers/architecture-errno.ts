// errno-map: an errno's name (any key of os.constants.errno: "ESRCH",
// "ENOENT", …) as a string or an object key in src/ outside ERRNO_HOMES, the
// one map of each layer; the layers above ownership read ownership's, or
// facts' (the session wrapper's start, see facts/errno.ts). Each map answers
// with a word of a closed union (containment's Fault, facts' FactsFault,
// ownership's HostFault), so a caller's `fault === "ESRCH"` fails
// to type-check; this finds the name spelled anywhere else (a comparison, a
// switch, a Set of codes, a map of its own). A spelling rule, but over a
// closed set of names: no errno can be written without one of them.
import { constants } from "node:os";
import type { Add, Node, SourceFile } from "./architecture.js";

const isNode = (v: unknown): v is Node =>
  typeof v === "object" && v !== null && typeof (v as Node).type === "string" && typeof (v as Node).start === "number";

/** The string value of a literal or an expression-less template, else null. */
function stringOf(n: unknown): string | null {
  if (!isNode(n)) return null;
  if (n.type === "Literal" && typeof n.value === "string") return n.value;
  if (n.type === "TemplateLiteral" && (n.expressions as unknown[]).length === 0)
    return ((n.quasis as Node[])[0]?.value as { cooked: string }).cooked;
  return null;
}

/** The one errno map of each layer; the layers above ownership read ownership's, or facts'. */
export const ERRNO_HOMES: ReadonlySet<string> = new Set([
  "src/facts/errno.ts",
  "src/containment/errors.ts",
  "src/ownership/leases/host-faults.ts",
]);
const ERRNO_NAMES: ReadonlySet<string> = new Set(Object.keys(constants.errno));

export function errnoName(f: SourceFile, n: Node, ancestors: readonly Node[], add: Add): void {
  if (ERRNO_HOMES.has(f.path)) return;
  let name: string | null = null;
  if (n.type === "Literal" && typeof n.value === "string") name = n.value;
  else if (n.type === "TemplateLiteral") name = stringOf(n);
  else if (n.type === "Identifier") {
    // a key of an object of its own (`{ ENOENT: "missing" }`)
    const parent = ancestors[ancestors.length - 1];
    if (parent?.type === "Property" && parent.key === n && !parent.computed) name = n.name as string;
  }
  if (name === null || !ERRNO_NAMES.has(name)) return;
  add("errno-map", n.start, `the errno ${name} read outside its layer's map (${[...ERRNO_HOMES].join(", ")})`);
}
