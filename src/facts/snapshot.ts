import type { ProcessInfo, ProcessSnapshot } from "./types.js";

const EMPTY: readonly ProcessInfo[] = Object.freeze([]);

/**
 * Builds the snapshot indexes once (children by ppid, members by pgid) so
 * `childrenOf` and `groupMembers` are O(1) per call, for the procfs and ps
 * backends; the native backend's worker builds the same tables
 * (native-snapshot.ts), held to this one by test/facts/equivalence.test.ts.
 */
export function buildSnapshot(takenAt: number, infos: Iterable<ProcessInfo>): ProcessSnapshot {
  const processes = new Map<number, ProcessInfo>();
  const children = new Map<number, ProcessInfo[]>();
  const groups = new Map<number, ProcessInfo[]>();
  for (const p of infos) {
    // a dead ("X") record is gone, whatever a backend let through
    if (p.state === "X" || p.state === "x") continue;
    processes.set(p.pid, p);
    // -1 means "unknown" (a dying task, macOS ps's sid): it is nobody's
    // parent or group, so it must never be a key someone can look up
    if (p.ppid >= 0) push(children, p.ppid, p);
    if (p.pgid >= 0) push(groups, p.pgid, p);
  }
  return {
    takenAt,
    processes,
    childrenOf: (pid) => children.get(pid) ?? EMPTY,
    groupMembers: (pgid) => groups.get(pgid) ?? EMPTY,
  };
}

function push(index: Map<number, ProcessInfo[]>, key: number, p: ProcessInfo): void {
  const list = index.get(key);
  if (list) list.push(p);
  else index.set(key, [p]);
}
