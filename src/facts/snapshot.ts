import type { ProcessInfo, ProcessSnapshot } from "./types.js";

const EMPTY: readonly ProcessInfo[] = Object.freeze([]);

/**
 * Builds the snapshot indexes once (children by ppid, members by pgid) so
 * `childrenOf` and `groupMembers` are O(1) per call. Every backend goes
 * through here, so the indexes can never disagree between backends.
 */
export function buildSnapshot(takenAt: number, infos: Iterable<ProcessInfo>): ProcessSnapshot {
  const processes = new Map<number, ProcessInfo>();
  const children = new Map<number, ProcessInfo[]>();
  const groups = new Map<number, ProcessInfo[]>();
  for (const p of infos) {
    processes.set(p.pid, p);
    push(children, p.ppid, p);
    push(groups, p.pgid, p);
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
