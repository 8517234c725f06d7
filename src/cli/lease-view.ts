/**
 * How the CLI reaches a state dir's leases. Readers (leases, explain, status,
 * reap --dry-run) open it read-only: nothing is created, moved, chmod'ed or
 * quarantined, and they work beside a live gateway. The one writer (reap)
 * takes the state dir's lock like a gateway does. Both ask the same
 * lifecycle (ownership/lifecycle.ts reconcileLeases), so `explain` and
 * `reap --dry-run` say exactly what `reap` would do.
 */
import { createSignaller } from "../facts/signal.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import {
  acquireStateDirLock,
  DEFAULT_GRACE_MS,
  isSupervisorLease,
  openLeaseStore,
  readGatewayInstanceId,
  stateDirLockHolder,
  StateDirLockedError,
  type AcpxProcessLease,
  type LifecycleDeps,
  type StateDirLock,
} from "../ownership/index.js";

/** A dry run never signals; this signaller makes sure of it. */
const NEVER: ProcessSignaller = {
  raceFree: true,
  signal: () => Promise.reject(new Error("a read-only view never signals")),
};

/** The state dir's leases, read-only; null when it has no gateway instance id (nothing was ever written there). */
export async function openReadOnly(stateDir: string, facts: ProcessFacts): Promise<LifecycleDeps | null> {
  const gatewayInstanceId = await readGatewayInstanceId(stateDir);
  if (gatewayInstanceId === null) return null;
  const store = await openLeaseStore(stateDir, { readOnly: true });
  return { store, facts, signaller: NEVER, graceMs: DEFAULT_GRACE_MS, gatewayInstanceId };
}

export type WriterOpen =
  | { kind: "none" }
  | { kind: "locked"; holderPid: number | null }
  | { kind: "ok"; deps: LifecycleDeps; lock: StateDirLock | null };

/**
 * The state dir for writing, under its lock. Held by a gateway: "locked",
 * unless `force` (then no lock, and the caller must leave alone whatever a
 * live gateway may be using).
 */
export async function openWriter(stateDir: string, facts: ProcessFacts, graceMs: number, force: boolean): Promise<WriterOpen> {
  const gatewayInstanceId = await readGatewayInstanceId(stateDir);
  // an operator command must not mint state: no instance id, no leases of any instance
  if (gatewayInstanceId === null) return { kind: "none" };
  let lock: StateDirLock | null = null;
  try {
    lock = await acquireStateDirLock(stateDir, facts);
  } catch (e) {
    if (!(e instanceof StateDirLockedError)) throw e;
    if (!force) return { kind: "locked", holderPid: e.holderPid };
  }
  try {
    const store = await openLeaseStore(stateDir);
    return { kind: "ok", deps: { store, facts, signaller: createSignaller(facts), graceMs, gatewayInstanceId }, lock };
  } catch (e) {
    await lock?.release();
    throw e;
  }
}

/**
 * Which leases a reap from the CLI treats as possibly attached to a running
 * gateway (reconcileLeases' skipAttached): all of them while a gateway holds
 * the state dir (`--force`), and always the process supervisor's runs, whose
 * gateway takes no state-dir lock (their root's parent IS that gateway).
 */
export function attachedGuard(gatewayHoldsLock: boolean): (lease: AcpxProcessLease) => boolean {
  return (lease) => gatewayHoldsLock || isSupervisorLease(lease);
}

/** Read-only: does a gateway hold the state dir now (and who)? */
export function gatewayHolder(stateDir: string, facts: ProcessFacts): Promise<{ held: boolean; holderPid: number | null }> {
  return stateDirLockHolder(stateDir, facts);
}
