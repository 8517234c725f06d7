/**
 * Reaps zombies of adopted orphans. As a Linux child subreaper the wrapper
 * inherits every orphaned descendant; libuv only waits for the pids it
 * spawned (the adapter), so exited orphans would stay zombies until the
 * wrapper exits.
 *
 * Why on SIGCHLD and not waitpid(-1): a wildcard wait could steal the
 * adapter's exit status from libuv. Instead each SIGCHLD (coalesced: signals
 * merge, so one pass handles all) takes one snapshot and waits, with WNOHANG,
 * only on children that are zombies AND were not spawned through libuv. The
 * wrapper spawns nothing through libuv but the adapter, so "our child, not the
 * adapter, state Z" is exactly the adopted dead. The facts backend must not
 * spawn helpers either: this runs only with the native addon (the only way
 * to become a subreaper) and an in-process walker (native or procfs), never
 * with the ps backend.
 *
 * Why SIGCHLD is usable: Node 20 does deliver it to process.on listeners;
 * libuv allows several watchers per signal, so its own child watcher (which
 * reports the adapter's exit) keeps working beside ours. The wrapper test
 * "adopts a double-forked grandchild…" checks both at once. A missed or
 * merged SIGCHLD costs nothing lasting: the next one, and the cleanup
 * sweeps, look again; whatever is left goes to init when the wrapper exits.
 * No interval is needed: an adopted child can only become a zombie by
 * exiting, and that always raises SIGCHLD in its parent, the wrapper.
 */
import { isZombieState } from "../../facts/liveness.js";
import type { NativeBinding } from "../../facts/native-binding.js";
import type { ProcessSnapshot } from "../../facts/types.js";

/** Pure: the pids to wait on in this snapshot. */
export function adoptedZombies(
  snapshot: ProcessSnapshot,
  selfPid: number,
  libuvChildren: ReadonlySet<number>,
): number[] {
  return snapshot
    .childrenOf(selfPid)
    .filter((p) => isZombieState(p) && !libuvChildren.has(p.pid))
    .map((p) => p.pid);
}

export interface AdoptedReaper {
  /** one pass now with a fresh snapshot; resolves with the pids reaped */
  reapNow(): Promise<number[]>;
  /** one pass over a snapshot the caller already took (cleanup) */
  reapIn(snapshot: ProcessSnapshot): number[];
  stop(): void;
}

/**
 * @param snapshot a fresh snapshot, or null when no in-process walker is
 *   available (the pass is skipped then); asked for at the first SIGCHLD, so
 *   the wrapper creates its facts backend only once something has exited
 */
export function startAdoptedReaper(
  binding: Pick<NativeBinding, "reapChildren">,
  snapshot: () => Promise<ProcessSnapshot> | null,
  libuvChildren: ReadonlySet<number>,
): AdoptedReaper {
  let running: Promise<number[]> | null = null;
  let again = false;
  const pass = async (): Promise<number[]> => {
    const reaped: number[] = [];
    do {
      again = false;
      try {
        const pending = snapshot();
        if (pending === null) return reaped;
        const pids = adoptedZombies(await pending, process.pid, libuvChildren);
        if (pids.length > 0) reaped.push(...binding.reapChildren(pids));
      } catch {
        // a failed walk leaves zombies for the next SIGCHLD or for init
      }
    } while (again);
    return reaped;
  };
  const reapNow = (): Promise<number[]> => {
    if (running) {
      // a SIGCHLD during a pass may concern a child the pass already missed
      again = true;
      return running;
    }
    running = pass().finally(() => {
      running = null;
    });
    return running;
  };
  const onChild = (): void => {
    void reapNow();
  };
  process.on("SIGCHLD", onChild);
  const reapIn = (snap: ProcessSnapshot): number[] => {
    const pids = adoptedZombies(snap, process.pid, libuvChildren);
    return pids.length > 0 ? binding.reapChildren(pids) : [];
  };
  return {
    reapNow,
    reapIn,
    stop() {
      process.off("SIGCHLD", onChild);
    },
  };
}
