/**
 * Settlements a lease record could not take (lifecycle.ts: ending a verified
 * tree never waits on the disk). Kept per store, in this process, until a
 * reconcile can write them; with what that attempt must know: whether the
 * tree was ended under our eyes (then a root found gone settles closed, not
 * lost), and the kill that ended it.
 */
import type { LeaseStore } from "../leases/lease-store.js";
import type { SettlementCode } from "./settle.js";
import type { TreeKillReport } from "../terminate/tree-kill.js";
import type { LeaseState } from "../leases/types.js";
import { isRecordWriteBlocked, type LeaseRecordWriteError } from "../leases/host-faults.js";

export interface PendingSettlement {
  to: LeaseState;
  /** the settlement table's row that could not be written */
  settlement: SettlementCode;
  why: string;
  /** the errno that refused the write (ENOSPC, EROFS, EIO, EDQUOT, EACCES, ENOENT, …) */
  errno: string;
  /** the write error's message, naming the record and the state dir */
  blockedBy: string;
}

/** Settlements that could not be written, per store, with what the next attempt needs to know. */
const PENDING = new WeakMap<LeaseStore, Map<string, { ended: boolean; prior: TreeKillReport | null }>>();
export function pendingOf(store: LeaseStore): Map<string, { ended: boolean; prior: TreeKillReport | null }> {
  let m = PENDING.get(store);
  if (!m) PENDING.set(store, (m = new Map()));
  return m;
}

/** Lease ids whose settlement is waiting for a writable record (this process). */
export function pendingSettlements(store: LeaseStore): string[] {
  return [...pendingOf(store).keys()];
}

/** Runs a store write; a write the host refused is kept (the first one) and answered with null, anything else is thrown. */
export function writeGuard(): {
  run<T>(fn: () => Promise<T>): Promise<T | null>;
  readonly error: LeaseRecordWriteError | null;
} {
  let error: LeaseRecordWriteError | null = null;
  return {
    async run(fn) {
      try {
        return await fn();
      } catch (e) {
        if (!isRecordWriteBlocked(e)) throw e;
        error ??= e;
        return null;
      }
    },
    get error() {
      return error;
    },
  };
}
