/**
 * `proclease ps [--tree] [--json] [--backend NAME]`: the live process table as
 * the facts layer sees it. The first line names the backend that answered,
 * because what a row means (start-time unit, what could be seen) depends on it.
 */
import { getProcessFacts, isFactsBackend } from "../../facts/get.js";
import type { FactsBackend, ProcessFacts, ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { UsageError, parseArgs, type CliIo } from "../io.js";

/** `--backend NAME` → facts; shared by ps, inspect and doctor. */
export function factsFromFlag(value: string | boolean | string[] | undefined): ProcessFacts {
  if (value === undefined) return getProcessFacts();
  if (typeof value !== "string" || (value !== "auto" && !isFactsBackend(value))) {
    throw new UsageError(`--backend must be one of auto, native, procfs, ps, none; got ${JSON.stringify(value)}`);
  }
  return getProcessFacts({ backend: value as "auto" | FactsBackend });
}

export function backendLine(facts: ProcessFacts): string {
  return `backend: ${facts.backend} (identity: ${facts.identityStrength})\n`;
}

const HEADER = ["PID", "PPID", "PGID", "SID", "UID", "S", "START"] as const;

function row(p: ProcessInfo, indent = ""): string[] {
  return [indent + String(p.pid), String(p.ppid), String(p.pgid), String(p.sid), String(p.uid), p.state, p.startTime];
}

/** Right-aligns numeric columns, except the first in tree mode (its indent is the point). */
function table(rows: string[][], leftFirst: boolean): string {
  const widths = HEADER.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (r: readonly string[]) =>
    r.map((c, i) => (i === 0 && leftFirst ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ").trimEnd();
  return [fmt(HEADER), ...rows.map(fmt)].join("\n") + "\n";
}

/**
 * Depth-first order with each child under its parent. Roots are processes
 * whose parent is not in the table (pid 1, kernel threads' parent 0, or a
 * parent we cannot see). A visited set guards against a table that, through
 * pid reuse mid-walk, links a process to itself.
 */
export function treeOrder(snap: ProcessSnapshot): Array<{ p: ProcessInfo; depth: number }> {
  const out: Array<{ p: ProcessInfo; depth: number }> = [];
  const seen = new Set<number>();
  const byPid = (a: ProcessInfo, b: ProcessInfo) => a.pid - b.pid;
  const visit = (p: ProcessInfo, depth: number) => {
    const stack: Array<{ p: ProcessInfo; depth: number }> = [{ p, depth }];
    while (stack.length > 0) {
      const cur = stack.pop()!;
      if (seen.has(cur.p.pid)) continue;
      seen.add(cur.p.pid);
      out.push(cur);
      const kids = [...snap.childrenOf(cur.p.pid)].filter((k) => k.pid !== cur.p.pid).sort(byPid);
      for (let i = kids.length - 1; i >= 0; i--) stack.push({ p: kids[i]!, depth: cur.depth + 1 });
    }
  };
  const all = [...snap.processes.values()].sort(byPid);
  for (const p of all) if (p.ppid === p.pid || !snap.processes.has(p.ppid)) visit(p, 0);
  // anything left is part of a parent cycle: show it rather than drop it
  for (const p of all) if (!seen.has(p.pid)) visit(p, 0);
  return out;
}

export async function run(args: readonly string[], io: CliIo): Promise<number> {
  const { flags, positionals } = parseArgs(args, { booleans: ["tree", "json"], strings: ["backend"] });
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const facts = factsFromFlag(flags.backend);
  const snap = await facts.snapshot();
  const procs = [...snap.processes.values()].sort((a, b) => a.pid - b.pid);
  if (flags.json === true) {
    io.out(
      JSON.stringify({ backend: facts.backend, identityStrength: facts.identityStrength, takenAt: snap.takenAt, processes: procs }) +
        "\n",
    );
    return 0;
  }
  io.out(backendLine(facts));
  if (flags.tree === true) {
    io.out(table(treeOrder(snap).map(({ p, depth }) => row(p, "  ".repeat(depth))), true));
  } else {
    io.out(table(procs.map((p) => row(p)), false));
  }
  return 0;
}
