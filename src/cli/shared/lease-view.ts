/**
 * How the CLI reaches a state dir's leases. Readers (leases, explain, status,
 * reap --dry-run) open it read-only: nothing is created, moved, chmod'ed or
 * quarantined, and they work beside a live gateway. The one writer (reap)
 * takes the state dir's lock like a gateway does. Both ask the same
 * lifecycle (ownership/lifecycle/lifecycle.ts reconcileLeases), so `explain` and
 * `reap --dry-run` say exactly what `reap` would do.
 */
import { readMemory, verifyCgroupIdentity, type MemoryReading } from "../../containment/index.js";
import { createSignaller } from "../../facts/signal.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import {
  acquireStateDirLock,
  DEFAULT_GRACE_MS,
  openLeaseStore,
  readGatewayInstanceId,
  settledLine,
  SETTLED_AS_MEANING,
  stateDirLockHolder,
  StateDirLockedError,
  type ProcessLease,
  type LifecycleDeps,
  type StateDirLock,
} from "../../ownership/index.js";

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
export async function openWriter(
  stateDir: string,
  facts: ProcessFacts,
  graceMs: number,
  force: boolean,
): Promise<WriterOpen> {
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
export function attachedGuard(gatewayHoldsLock: boolean): (lease: ProcessLease) => boolean {
  return (lease) => gatewayHoldsLock || lease.kind === "supervisor";
}

/** Read-only: does a gateway hold the state dir now (and who)? */
export function gatewayHolder(
  stateDir: string,
  facts: ProcessFacts,
): Promise<{ held: boolean; holderPid: number | null }> {
  return stateDirLockHolder(stateDir, facts);
}

// ------------------------------------------------- lease cgroups (docs/containment.md)

/**
 * A lease's memory figures, read-only. Only the lease's own cgroup is read:
 * a directory re-created under the recorded path (another identity) is not
 * the lease's, and its figures would be someone else's.
 */
export async function leaseMemory(lease: ProcessLease): Promise<MemoryReading | undefined> {
  const cg = lease.cgroup;
  if (!cg) return undefined;
  const id = await verifyCgroupIdentity(cg.path, cg.id);
  if (id === "gone")
    return { ok: false, code: "gone", why: `${cg.path} no longer exists (the lease's cgroup was removed)` };
  if (id === "mismatch")
    return {
      ok: false,
      code: "cgroup-replaced",
      why: `${cg.path} is no longer the lease's cgroup (another one was created under that name)`,
    };
  if (id === "unknown")
    return { ok: false, code: "identity-unreadable", why: `the identity of ${cg.path} cannot be read` };
  return readMemory(cg.path);
}

/** "current 1.5 MiB  peak 2.0 MiB": one lease's figures as status and explain print them. */
export function memoryFigures(m: Extract<MemoryReading, { ok: true }>): string {
  return `current ${formatBytes(m.current)}  peak ${m.peak === null ? "- (kernel < 5.19)" : formatBytes(m.peak)}`;
}

/** 1536 → "1.5 KiB" */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * The reasons memory could not be read, each once with the leases it hit (a
 * v1 memory controller says the same for every lease: one line, not one per
 * lease). A removed cgroup of a settled lease is expected, so not a reason.
 */
export function memoryWhyLines(
  rows: ReadonlyArray<{ lease: ProcessLease; memory?: MemoryReading | undefined }>,
): string[] {
  const byWhy = new Map<string, string[]>();
  for (const r of rows) {
    const m = r.memory;
    if (m === undefined || m.ok) continue;
    if ((r.lease.state === "closed" || r.lease.state === "lost") && m.code === "gone") continue;
    const list = byWhy.get(m.why) ?? [];
    list.push(r.lease.leaseId);
    byWhy.set(m.why, list);
  }
  return [...byWhy].map(
    ([why, ids]) =>
      `memory per lease not shown (${ids.length === 1 ? `lease ${ids[0]}` : `${ids.length} leases`}): ${why}`,
  );
}

/**
 * How a lease ended, as its cell in a listing: the recorded word (`killed`,
 * `ended-on-its-own`, …), `unrecorded` for a record settled before leases
 * said, `-` while it is not settled.
 */
export function endedCell(lease: Pick<ProcessLease, "state" | "settledAs">): string {
  if (settledLine(lease) === null) return "-";
  return lease.settledAs ?? "unrecorded";
}

/**
 * What each word of the ended cells means, once per word: a listing names
 * every lease once, in its row, and explains its words below it.
 */
export function endedLegend(leases: ReadonlyArray<Pick<ProcessLease, "state" | "settledAs">>): string[] {
  const meaning = new Map<string, string>();
  for (const l of leases) {
    const cell = endedCell(l);
    if (cell === "-" || meaning.has(cell)) continue;
    meaning.set(
      cell,
      l.settledAs !== undefined ? SETTLED_AS_MEANING[l.settledAs] : "settled before leases recorded how",
    );
  }
  return [...meaning].map(([word, what]) => `ended ${word}: ${what}`);
}
