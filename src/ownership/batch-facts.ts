/**
 * The facts a batch reconcile (lifecycle.ts reconcileLeases) hands its
 * verifications and kills: one that counts snapshot() calls, and one that
 * lets concurrent kills share the walk in flight.
 */
import type { ProcessFacts, ProcessSnapshot } from "../facts/types.js";

/** Counts snapshot() calls (the one-snapshot promise is checked, not assumed). */
export function countingFacts(facts: ProcessFacts, onSnapshot: () => void): ProcessFacts {
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    snapshot: () => {
      onSnapshot();
      return facts.snapshot();
    },
    inspect: (pid, o) => facts.inspect(pid, o),
    inspectMany: (pids, o) => facts.inspectMany(pids, o),
  };
}

/**
 * Many trees killed at once each ask for a fresh snapshot (to catch children
 * forked mid-teardown) at nearly the same moment; concurrent callers share
 * the walk in flight instead of each walking /proc.
 */
export function coalescingFacts(facts: ProcessFacts): ProcessFacts {
  let inflight: Promise<ProcessSnapshot> | undefined;
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    snapshot: () => {
      if (!inflight) {
        inflight = facts.snapshot().finally(() => {
          inflight = undefined;
        });
      }
      return inflight;
    },
    inspect: (pid, o) => facts.inspect(pid, o),
    inspectMany: (pids, o) => facts.inspectMany(pids, o),
  };
}
