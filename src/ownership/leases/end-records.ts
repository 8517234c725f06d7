/**
 * A wrapper's word on how it ended its tree when nobody asked it to: its
 * gateway went away (the lifeline's EOF with no "end" before it), or a
 * durable session's window ran out. The wrapper writes
 * `<stateDir>/acpx/ends/<lease id>.json` when its sweep starts ("sweeping")
 * and again when it is done ("done", with the pids it ended), so the
 * reconcile that settles the lease names who ended the tree (settle.ts,
 * `ended-by-wrapper`) instead of guessing from what is left, and waits for
 * a sweep under way rather than killing beside it.
 *
 * A record counts only for the root the lease recorded (its pid and start
 * time). It is a file of the gateway's uid, so a process of that uid could
 * write one: it decides a label and a bounded wait, never a signal (what is
 * left of the tree is still verified and killed as before).
 */
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import { sameProcess } from "../../facts/identity.js";
import { readOwnedFile } from "./fs-safe.js";
import type { ProcessLease } from "./types.js";

/** the folder beside the lease store */
export const END_RECORDS_DIR = "ends";

export interface EndRecord {
  reason: "parent-gone" | "window-expired";
  phase: "sweeping" | "done";
  /** when the wrapper wrote it (epoch ms, its clock) */
  at: number;
  /** the pids its sweep ended ("done") */
  ended: number[];
}

/** `<stateDir>/acpx/ends`, from the lease store's folder (`<stateDir>/acpx/leases`). */
export function endRecordsDir(storeDir: string): string {
  return join(storeDir, "..", END_RECORDS_DIR);
}

/** The lease's end record, when its wrapper (the lease's recorded root) wrote one; else null. */
export async function readEndRecord(
  storeDir: string,
  lease: Pick<ProcessLease, "leaseId" | "rootPid" | "rootStartTime">,
): Promise<EndRecord | null> {
  const r = await readOwnedFile(join(endRecordsDir(storeDir), `${lease.leaseId}.json`), 64 * 1024).catch(() => null);
  if (r?.kind !== "ok") return null;
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(r.text) as Record<string, unknown>;
  } catch {
    return null;
  }
  if (typeof v !== "object" || v === null || v.leaseId !== lease.leaseId) return null;
  const wrapper = { pid: v.wrapperPid as number, startTime: v.wrapperStart as string };
  if (!sameProcess(wrapper, { pid: lease.rootPid, startTime: lease.rootStartTime })) return null;
  const reason = v.reason === "parent-gone" || v.reason === "window-expired" ? v.reason : null;
  const phase = v.phase === "sweeping" || v.phase === "done" ? v.phase : null;
  if (reason === null || phase === null || typeof v.at !== "number") return null;
  const ended = Array.isArray(v.ended)
    ? v.ended.filter((p): p is number => Number.isInteger(p) && (p as number) > 0)
    : [];
  return { reason, phase, at: v.at, ended };
}

/** Removes a settled lease's end record (nothing to say once the lease says it). */
export async function removeEndRecord(storeDir: string, leaseId: string): Promise<void> {
  await unlink(join(endRecordsDir(storeDir), `${leaseId}.json`)).catch(() => undefined);
}
