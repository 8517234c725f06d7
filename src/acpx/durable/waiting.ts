/**
 * Whether a durable session waits for a re-adoption, for operators
 * (`proclease status`, `explain`): its wrapper writes `<lease id>.waiting`
 * in the attach folder when its window starts (`{since, deadline}`, wall
 * clock) and removes it when a gateway re-adopts it. The file is the
 * gateway's uid's, so a process of that uid could write it: it is shown,
 * never acted on. What ends the tree is the wrapper's own clock, and what a
 * reap spares is a tree that verifies (ownership's awaitingReason).
 */
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import { readOwnedFile } from "../../ownership/leases/fs-safe.js";
import type { ProcessLease } from "../../ownership/leases/types.js";
import { ATTACH_DIR } from "./protocol.js";

export interface WaitingSession {
  /** when the window began (the gateway went away), epoch ms */
  since: number;
  /** when the wrapper ends the tree unless a gateway re-adopts it, epoch ms */
  deadline: number;
  /** why it waits, and what ends it, in one sentence */
  why: string;
}

/** The lease's waiting state as its wrapper wrote it, bounded by the lease's window; null when it does not wait (or says nothing). */
export async function readWaiting(
  stateDir: string,
  lease: Pick<ProcessLease, "leaseId" | "durable" | "state">,
  now = Date.now(),
): Promise<WaitingSession | null> {
  if (lease.durable === undefined || lease.state !== "open") return null;
  const r = await readOwnedFile(join(stateDir, "acpx", ATTACH_DIR, `${lease.leaseId}.waiting`), 256).catch(() => null);
  if (r?.kind !== "ok") return null;
  let v: unknown;
  try {
    v = JSON.parse(r.text);
  } catch {
    return null;
  }
  const { since, deadline } = (v ?? {}) as { since?: unknown; deadline?: unknown };
  if (typeof since !== "number" || typeof deadline !== "number" || since > now + 1000) return null;
  // never later than the lease's own window allows
  const end = Math.min(deadline, since + lease.durable.reattachWithinMs);
  return {
    since,
    deadline: end,
    why:
      `its gateway went away at ${new Date(since).toISOString()}; the wrapper keeps the tree (turn in flight included) ` +
      `for a gateway on this state dir and instance to re-adopt, and ends it (TERM, grace, KILL) at ${new Date(end).toISOString()}; ` +
      "`proclease reap` ends it now",
  };
}

/**
 * A settled lease's socket and waiting file, removed: a wrapper that ended
 * normally removed them itself; one killed outright (SIGKILL) could not.
 */
export async function forgetAttach(stateDir: string, leaseId: string): Promise<void> {
  const dir = join(stateDir, "acpx", ATTACH_DIR);
  await Promise.all([`${leaseId}.sock`, `${leaseId}.waiting`].map((f) => unlink(join(dir, f)).catch(() => undefined)));
}
