/**
 * Binding a cgroup to a lease (docs/containment.md): the one sequence run
 * around every leased spawn.
 *
 *   lease written (in place; synced by the record, or on its own when there
 *   is no cgroup to record) → cgroup created → record (the write that makes
 *   the lease durable, with its cgroup, before the spawn; the lease's first
 *   process joins it)
 *   → the first process is in it: kept, the lease's strongest evidence
 *   → it is not (its join failed, or the run cannot start inside): drop
 *   → the spawn never produced a process: never-started (lifecycle's
 *     settleUnstarted drains and removes the cgroup, then settles)
 *   → the lease settles: the drain (cgroup-drain.ts) is an input of the
 *     settlement table (settle.ts)
 *
 * A lease never names a cgroup its processes run outside of, and a cgroup
 * that could not be recorded is never left behind: the never-started
 * sequence runs on the lease with that cgroup.
 */
import {
  createLeaseCgroup,
  refOf,
  removeCgroup,
  removeEmptyInstanceFolder,
  type ContainmentSupport,
  type LeaseCgroup,
} from "../../containment/index.js";
import type { LeaseCreateInput, LeaseStore } from "../leases/lease-store.js";
import { settleUnstarted, type LifecycleDeps } from "./lifecycle.js";
import type { ProcessLease } from "../leases/types.js";

/** Why a lease gets no cgroup where containment is off: one wording for every caller. */
export function containmentOffWhy(support: Extract<ContainmentSupport, { available: false }>): string {
  return `containment is off: ${support.why}`;
}

export type LeaseCgroupBinding =
  | { lease: ProcessLease; cgroup: LeaseCgroup }
  /** uncontained, as without containment: ownership rests on the process tree and the markers */
  | { lease: ProcessLease; cgroup: null; why: string };

/**
 * A new lease and its cgroup, durable before the caller spawns anything for
 * it. The lease file is in place before the cgroup exists, so a gateway that
 * crashes in between leaves a lease naming no process, which the next
 * reconcile settles as never started, and the empty cgroup with it
 * (cgroup-drain.ts removeSettledLeftovers); its sync waits for the record
 * of the cgroup, one durable write instead of two before the spawn
 * (LeaseCreateOptions). With no cgroup to record, the lease is synced as it is.
 */
export async function openLeaseWithCgroup(
  deps: LifecycleDeps,
  support: ContainmentSupport,
  input: LeaseCreateInput,
): Promise<LeaseCgroupBinding> {
  const lease = await deps.store.create(input, { sync: support.available ? "deferred" : "now" });
  const bound = await bindLeaseCgroup(deps, support, lease);
  if (bound.cgroup !== null || !support.available) return bound;
  // the cgroup could not be made: the lease's own sync, which its record would have been
  try {
    return { ...bound, lease: await deps.store.update(lease.leaseId, {}) };
  } catch (err) {
    await settleUnstarted(deps, lease).catch(() => undefined);
    throw err;
  }
}

/**
 * create + record: the lease's own cgroup (`<root>/<instance id>/<lease id>`),
 * made and recorded in the lease before the spawn. Uncontained (cgroup null,
 * with why) when containment is off or the cgroup cannot be made. When the
 * record cannot take it, the never-started sequence runs on the lease with
 * that cgroup (drained, removed, settled) and the write's error is thrown.
 */
export async function bindLeaseCgroup(
  deps: LifecycleDeps,
  support: ContainmentSupport,
  lease: ProcessLease,
): Promise<LeaseCgroupBinding> {
  if (!support.available) return { lease, cgroup: null, why: containmentOffWhy(support) };
  const made = await createLeaseCgroup(support, lease.leaseId, deps.gatewayInstanceId);
  if (!made.ok) return { lease, cgroup: null, why: `the lease cgroup could not be made: ${made.why}` };
  const cgroup = made.cgroup;
  try {
    return { lease: await deps.store.update(lease.leaseId, { cgroup: refOf(cgroup) }), cgroup };
  } catch (err) {
    await settleUnstarted(deps, { ...lease, cgroup: refOf(cgroup) }).catch(() => undefined);
    throw err;
  }
}

/**
 * drop: the lease's first process is not in its cgroup, or cannot be started
 * inside it. The cgroup leaves the lease record first, then is removed (it
 * is empty: nothing of the lease was born in it), with its instance folder
 * when that is empty too. Throws what the record write throws: the cgroup
 * then stays recorded, and the lease's settlement drains it.
 */
export async function dropLeaseCgroup(store: LeaseStore, leaseId: string, cgroup: LeaseCgroup): Promise<ProcessLease> {
  const lease = await store.update(leaseId, { cgroup: undefined });
  const rm = await removeCgroup(cgroup, { waitMs: 0 });
  if (rm.outcome === "removed") await removeEmptyInstanceFolder(cgroup.path);
  return lease;
}
