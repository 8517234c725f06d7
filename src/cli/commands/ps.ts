/**
 * `proclease ps [--tree] [--json] [--backend NAME]`: the live process table as
 * the facts layer sees it, with the command name and a human age. Raw start
 * times (whose unit depends on the backend) appear only in `--json`.
 */
import type { ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { backendLine, factsFromFlag } from "../shared/backend.js";
import { flag, formatAge, jsonLine, printableDeep, type CliIo, type ParsedArgs, factsHead } from "../shared/io.js";
import { labelProcesses, type ProcessLabels } from "../shared/labels.js";

const HEADER = ["PID", "PPID", "PGID", "SID", "UID", "S", "AGE", "COMM"] as const;

function row(p: ProcessInfo, labels: ProcessLabels, now: number, indent = ""): string[] {
  const started = labels.startedAt(p);
  // comm is whatever name the process gave its binary or itself (prctl): escaped for the terminal
  return printableDeep([
    String(p.pid),
    String(p.ppid),
    String(p.pgid),
    String(p.sid),
    String(p.uid),
    p.state,
    formatAge(started === null ? null : now - started),
    indent + (labels.comm(p.pid) ?? "?"),
  ]);
}

/** Numbers right-aligned; the command name last and left-aligned (its indent is the tree). */
function render(rows: string[][]): string {
  const widths = HEADER.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const last = HEADER.length - 1;
  const fmt = (r: readonly string[]) =>
    r
      .map((c, i) => (i === last ? c : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
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

export async function run(parsed: ParsedArgs, io: CliIo): Promise<number> {
  const facts = factsFromFlag(parsed);
  const snap = await facts.snapshot();
  const procs = [...snap.processes.values()].sort((a, b) => a.pid - b.pid);
  const labels = await labelProcesses(facts, procs);
  if (flag(parsed, "json")) {
    io.out(
      jsonLine({
        ...factsHead(facts),
        takenAt: snap.takenAt,
        processes: procs.map((p) => ({ ...p, comm: labels.comm(p.pid), startedAt: labels.startedAt(p) })),
      }),
    );
    return 0;
  }
  io.out(backendLine(facts));
  const now = Date.now();
  if (flag(parsed, "tree")) {
    io.out(render(treeOrder(snap).map(({ p, depth }) => row(p, labels, now, "  ".repeat(depth)))));
  } else {
    io.out(render(procs.map((p) => row(p, labels, now))));
  }
  return 0;
}
