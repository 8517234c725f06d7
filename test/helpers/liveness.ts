// The package's one liveness rule (src/facts/liveness.ts), read synchronously
// from /proc for tests: alive = exists, is not a zombie or dead record, and is
// not inside exit(2) (PF_EXITING); except that a leader in Z or exiting is
// alive while another of its threads is not. That exception matters right
// after a SIGKILL to a multithreaded process: the leader can turn Z before a
// sibling thread has even begun to exit, and the reaper then still sees a
// live process (one CI run reaped such a root that a simpler test check had
// already called dead).
import { readdirSync } from "node:fs";
import { isAlive as liveness } from "../../src/facts/liveness.js";
import { PF_EXITING, readStatSync } from "../../src/facts/procfs.js";

export function isAliveSync(pid: number): boolean {
  const stat = readStatSync(pid);
  if (stat === null) return false;
  const exiting = (stat.flags & PF_EXITING) !== 0;
  if (stat.state !== "Z" && !exiting) return liveness({ state: stat.state, exiting });
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  for (const tid of tids) {
    if (tid === String(pid)) continue;
    const t = readStatSync(Number(tid), `/proc/${pid}/task`);
    if (t !== null && liveness({ state: t.state, exiting: (t.flags & PF_EXITING) !== 0 })) return true;
  }
  return false;
}
