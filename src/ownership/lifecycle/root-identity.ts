/**
 * Recording the live root's identity in its lease right after the spawn: the
 * one place that decides what a lease remembers about the process it names,
 * whatever kind of lease it is.
 *
 * The identity comes from the same facts backend that will verify it later,
 * so the start time is in the unit verification compares against.
 */
import { isAlive } from "../../facts/liveness.js";
import type { ProcessDetails, ProcessFacts } from "../../facts/types.js";
import { assertPid } from "../../facts/validate.js";
import type { LeasePatch, LeaseStore } from "../leases/lease-store.js";
import type { ProcessLease } from "../leases/types.js";
import { hostResourceError } from "../leases/host-faults.js";

export interface SpawnedRoot {
  /** the root's pid as the spawn reported it */
  rootPid: number;
  /**
   * A group the spawn reported (the wrapper's adapter group). Recorded as
   * given, even when the root is gone already: it is what the spawn said,
   * and verification re-checks it against the live tree. When absent, the
   * group is taken from the live root, and not recorded without one.
   */
  processGroupId?: number;
}

export interface RecordedRoot {
  /** the lease as written */
  lease: ProcessLease;
  /**
   * recorded: the root was alive; its start time, group, boot id and pid
   *   namespace are in the lease.
   * gone: no such process, or only its zombie (it has exited): the lease
   *   records the pid (and a reported group) but no identity.
   * unknown: the facts backend could not answer: likewise.
   */
  identity: "recorded" | "gone" | "unknown";
  /** why no identity was recorded (absent, zombie: gone; inspect-failed: unknown); undefined when it was */
  code?: "absent" | "zombie" | "inspect-failed";
  /** the same, for people */
  detail?: string;
}

/**
 * Inspects `root.rootPid` once and writes what can be trusted into the lease.
 *
 * Fails closed: when the root cannot be inspected live, only the pid is
 * recorded (so the lease no longer reads as "spawn pending"), never a guessed
 * start time. A lease without a start time can only verify later through the
 * lease id in the root's environment plus one more positive check, so nothing
 * it names is signalled on the pid alone. What an unrecorded identity means
 * for the spawn is the caller's to decide. Store errors are thrown; facts
 * errors are reported as `identity: "unknown"`.
 */
export async function recordRootIdentity(
  store: LeaseStore,
  leaseId: string,
  root: SpawnedRoot,
  facts: ProcessFacts,
): Promise<RecordedRoot> {
  if (typeof root !== "object" || root === null) throw new TypeError("root must be an object");
  assertPid(root.rootPid, "root.rootPid");
  if (root.processGroupId !== undefined) assertPid(root.processGroupId, "root.processGroupId");

  let details: ProcessDetails | null;
  let failure: string | undefined;
  try {
    details = await facts.inspect(root.rootPid);
  } catch (err) {
    details = null;
    // a read the host refused (no descriptor left) names the limit that was hit
    failure = hostResourceError(err, "the read")?.message ?? (err instanceof Error ? err.message : String(err));
  }

  const reported: LeasePatch = {
    rootPid: root.rootPid,
    ...(root.processGroupId !== undefined ? { processGroupId: root.processGroupId } : {}),
  };
  if (details === null || !isAlive(details)) {
    const lease = await store.update(leaseId, reported);
    if (failure !== undefined) {
      return {
        lease,
        identity: "unknown",
        code: "inspect-failed",
        detail: `pid ${root.rootPid} could not be inspected (${failure}); no identity recorded`,
      };
    }
    const how = details === null ? "is not running" : "is a zombie (it has exited)";
    return {
      lease,
      identity: "gone",
      code: details === null ? "absent" : "zombie",
      detail: `pid ${root.rootPid} ${how}; no identity recorded`,
    };
  }
  const lease = await store.update(leaseId, {
    ...reported,
    processGroupId: root.processGroupId ?? details.pgid,
    rootStartTime: String(details.startTime),
    ...(details.bootId ? { bootId: details.bootId } : {}),
    ...(details.pidNamespace ? { pidNamespace: details.pidNamespace } : {}),
  });
  return { lease, identity: "recorded" };
}
