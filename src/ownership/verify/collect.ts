/**
 * Collects the process tree of a root from one snapshot: descendants by
 * parent links, members of a recorded process group, and marker pids (env
 * escapees) with THEIR descendants. Pure: no I/O, one walk.
 */
import type { ProcessInfo, ProcessSnapshot } from "../../facts/types.js";
import { signalTargetGuard } from "../../facts/guards.js";

export interface CollectOptions {
  /** members of this group (and their descendants) are included; pass only a group already tied to the root */
  pgid?: number;
  /** extra seeds, e.g. processes carrying the lease id in their environment */
  markerPids?: Iterable<number>;
  /** what every tree of this snapshot shares (treeContext): pass one when collecting many */
  context?: TreeContext;
}

/** Our ancestors in a snapshot and the signal-target guard, read once for many trees of it. */
export interface TreeContext {
  readonly ancestors: ReadonlySet<number>;
  readonly allowed: (pid: number) => boolean;
}

export function treeContext(snapshot: ProcessSnapshot): TreeContext {
  const guard = signalTargetGuard();
  return { ancestors: selfAndAncestorsIn(snapshot), allowed: (pid) => guard(pid).allowed };
}

/**
 * Returns the collected processes leaves first and `root` last, without
 * duplicates. Never includes pid <= 1, this process, its parent or any
 * ancestor of ours; their descendants are not walked either (our own children
 * are not the lease's).
 * A root that the guards refuse yields []. Each entry is the snapshot's own
 * ProcessInfo, so every member keeps its own start time for the re-check
 * before it is signalled.
 */
export function collectTree(snapshot: ProcessSnapshot, root: ProcessInfo, opts?: CollectOptions): ProcessInfo[] {
  const ctx = opts?.context ?? treeContext(snapshot);
  if (!ctx.allowed(root.pid)) return [];
  // our own ancestors are never part of anyone's tree: marking them visited
  // keeps them (and the path down to us) out even if a lease's root sits above us
  const visited = new Set(ctx.ancestors);
  if (visited.has(root.pid)) return [];
  const out: ProcessInfo[] = [];
  // the root is marked visited up front so it can only be emitted last
  visited.add(root.pid);

  const seeds: ProcessInfo[] = [];
  for (const pid of opts?.markerPids ?? []) {
    const p = snapshot.processes.get(pid);
    if (p) seeds.push(p);
  }
  const pgid = opts?.pgid;
  if (pgid !== undefined && Number.isInteger(pgid) && pgid > 1) {
    for (const p of snapshot.groupMembers(pgid)) seeds.push(p);
  }
  for (const s of seeds) postOrder(snapshot, s, visited, out, ctx.allowed);
  // children of the root last, then the root itself
  walkChildren(snapshot, root, visited, out, ctx.allowed);
  out.push(root);
  return out;
}

/** This process and every ancestor of it in `snapshot` (never part of anyone's tree). */
export function selfAndAncestorsIn(snapshot: ProcessSnapshot): Set<number> {
  const seen = new Set<number>([process.pid]);
  // the snapshot's view of our parent counts too (it differs only if we were re-parented mid-walk)
  const starts = [process.ppid, snapshot.processes.get(process.pid)?.ppid ?? process.ppid];
  for (const first of starts) {
    let pid = first;
    while (pid > 0 && !seen.has(pid)) {
      seen.add(pid);
      pid = snapshot.processes.get(pid)?.ppid ?? 0;
    }
  }
  return seen;
}

/** Iterative post-order from `start` (deep chains must not blow the stack). */
function postOrder(
  snapshot: ProcessSnapshot,
  start: ProcessInfo,
  visited: Set<number>,
  out: ProcessInfo[],
  allowed: (pid: number) => boolean,
): void {
  if (visited.has(start.pid) || !allowed(start.pid)) return;
  visited.add(start.pid);
  const stack: { p: ProcessInfo; kids: readonly ProcessInfo[]; i: number }[] = [
    { p: start, kids: snapshot.childrenOf(start.pid), i: 0 },
  ];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.i < top.kids.length) {
      const c = top.kids[top.i++]!;
      if (visited.has(c.pid) || !allowed(c.pid)) continue;
      visited.add(c.pid);
      stack.push({ p: c, kids: snapshot.childrenOf(c.pid), i: 0 });
    } else {
      stack.pop();
      out.push(top.p);
    }
  }
}

function walkChildren(
  snapshot: ProcessSnapshot,
  parent: ProcessInfo,
  visited: Set<number>,
  out: ProcessInfo[],
  allowed: (pid: number) => boolean,
): void {
  for (const c of snapshot.childrenOf(parent.pid)) postOrder(snapshot, c, visited, out, allowed);
}
