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
import { TERMINALS_DIR, terminalsOf } from "./terminals.js";
import { SUPERVISOR_SESSION_PREFIX } from "../../supervisor/hold/durability.js";

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
 * What waits with a lease: a durable session's own window, or, for the run
 * of one of its terminals, the session's (the terminal's file names the
 * session's lease, and its holder keeps it as long as the session's wrapper
 * runs). `leaseById` finds the session's record.
 */
export async function waitingOf(
  stateDir: string,
  lease: Pick<ProcessLease, "leaseId" | "durable" | "state" | "kind" | "sessionKey">,
  leaseById: (leaseId: string) => Promise<ProcessLease | null | undefined>,
  now = Date.now(),
): Promise<WaitingSession | null> {
  if (lease.kind !== "supervisor") return readWaiting(stateDir, lease, now);
  if (lease.durable === undefined || lease.state !== "open") return null;
  if (!lease.sessionKey.startsWith(SUPERVISOR_SESSION_PREFIX)) return null;
  const terminalId = lease.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length);
  const dir = join(stateDir, "acpx", TERMINALS_DIR);
  const meta = (await terminalsOf(dir, undefined, terminalId)).find((m) => m.terminalId === terminalId);
  const session = meta !== undefined ? await leaseById(meta.sessionLeaseId).catch(() => null) : null;
  if (session == null || session.kind !== "acpx") return null;
  const w = await readWaiting(stateDir, session, now);
  if (w === null) return null;
  return {
    ...w,
    why:
      `a terminal of the durable session ${JSON.stringify(session.sessionKey)} (lease ${session.leaseId}), which awaits re-adoption ` +
      `since its gateway went away at ${new Date(w.since).toISOString()}: the terminal's holder keeps it running with the session ` +
      `and ends it (TERM, grace, KILL) once the session's wrapper is gone, at ${new Date(w.deadline).toISOString()} at the latest; ` +
      "`proclease reap` ends the session now, and the terminal with it",
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
