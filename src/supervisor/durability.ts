/**
 * Restart durability for background runs (beyond the seed's in-memory-only
 * boundary): each one gets a lease in the SAME store the ACPX controller uses
 * and is verified by the SAME verifier, so "is this still ours?" has one
 * answer in the whole package.
 *
 * How a supervisor lease maps onto the lease fields:
 * - sessionKey = "supervisor:<runId>". The prefix is how reconciliation tells
 *   its own leases from ACPX sessions sharing the store and instance id.
 * - commandHash = computeCommandHash(argv exactly as spawned): the child's
 *   argv, or ["/bin/sh", "-c", ptyCommand] for a PTY run.
 * - wrapperRoot / wrapperPath: a supervised run has no wrapper; the root IS
 *   the spawned program. See `wrapperFields` for what is recorded and why.
 * - the root's identity (start time, boot id, pid namespace, process group)
 *   is recorded right after the spawn; OPENCLAW_ACPX_LEASE_ID and
 *   OPENCLAW_GATEWAY_INSTANCE_ID are injected into the child's environment
 *   (descendants inherit them, which lets the verifier find escapees).
 */
import { getProcessFacts } from "../facts/get.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import { computeCommandHash } from "../ownership/command-hash.js";
import { loadOrCreateGatewayInstanceId } from "../ownership/instance-id.js";
import { openLeaseStore, type LeaseStore } from "../ownership/lease-store.js";
import { reapCompleted, type ReapReport } from "../ownership/reap.js";
import { reapLeaseVerification } from "../ownership/reap-verification.js";
import { recordRootIdentity } from "../ownership/root-identity.js";
import {
  INSTANCE_ENV_KEY,
  isSupervisorLease,
  LEASE_ENV_KEY,
  SUPERVISOR_SESSION_PREFIX,
  type AcpxProcessLease,
  type LeaseState,
  type OwnershipEvidence,
} from "../ownership/types.js";
import { createSignaller } from "../facts/signal.js";
import { verifyLeases, type LeaseVerification } from "../ownership/verify.js";

export { SUPERVISOR_SESSION_PREFIX };

export interface RunLease {
  leaseId: string;
  /** to merge into the child's environment */
  env: Record<string, string>;
}

export interface ReconciledRun {
  leaseId: string;
  runId: string;
  rootPid: number;
  verdict: LeaseVerification["verdict"];
  /** reaped: a verified tree was torn down; settled: nothing of ours was alive; left: unverifiable (untouched) or not finished (survivors: the lease stays closing) */
  action: "reaped" | "settled" | "left";
  /** the lease's state after reconciliation */
  state: LeaseState;
  evidence: readonly OwnershipEvidence[];
  reap?: ReapReport;
}

export interface ReconcileReport {
  instanceId: string | null;
  runs: ReconciledRun[];
}

export interface RunLeases {
  open(runId: string, argv: readonly string[]): Promise<RunLease>;
  /**
   * Records the live root's identity (ownership's recordRootIdentity; the
   * group is the root's own). A root already gone, or facts that cannot
   * answer, leave only the pid recorded; the lease is then `settle`'s.
   */
  attach(leaseId: string, pid: number): Promise<void>;
  /** open/closing → closing → closed|lost; a lease already terminal is left alone. */
  settle(leaseId: string, to: "closed" | "lost"): Promise<void>;
  /**
   * Settles the lease of a run whose root exited, by ownership's one reap
   * rule: closed when `report` (the run's tree kill, if one ran) completed,
   * or when the verifier finds nothing of the run alive (root gone, no
   * remnants carrying its markers). Anything else (survivors, remnants, a
   * reused pid, unknown evidence) leaves it "closing", which reconcile
   * retries. Returns the lease's state afterwards (undefined: no such lease).
   */
  finish(leaseId: string, report: ReapReport | null): Promise<LeaseState | undefined>;
  /** `live`: lease ids of runs this incarnation still supervises; never touched. */
  reconcile(live?: ReadonlySet<string>): Promise<ReconcileReport>;
}

export interface RunLeasesOptions {
  stateDir: string;
  gatewayInstanceId?: string;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
  graceMs: number;
}

export function createRunLeases(opts: RunLeasesOptions): RunLeases {
  const facts = opts.facts ?? getProcessFacts();
  const signaller = opts.signaller ?? createSignaller(facts);
  let ready: Promise<{ store: LeaseStore; instanceId: string }> | undefined;
  const init = () => {
    ready ??= (async () => {
      const [store, instanceId] = await Promise.all([
        openLeaseStore(opts.stateDir),
        opts.gatewayInstanceId ?? loadOrCreateGatewayInstanceId(opts.stateDir),
      ]);
      return { store, instanceId };
    })();
    ready.catch(() => (ready = undefined));
    return ready;
  };

  const settle = async (store: LeaseStore, lease: AcpxProcessLease, to: "closed" | "lost") => {
    let cur = lease;
    if (cur.state === "closed" || cur.state === "lost") return cur;
    if (cur.state === "open") cur = await store.transition(cur.leaseId, "closing");
    return store.transition(cur.leaseId, to);
  };

  return {
    async open(runId, argv) {
      const { store, instanceId } = await init();
      const lease = await store.create({
        gatewayInstanceId: instanceId,
        sessionKey: SUPERVISOR_SESSION_PREFIX + runId,
        ...SUPERVISOR_WRAPPER_FIELDS,
        commandHash: computeCommandHash(argv),
      });
      return { leaseId: lease.leaseId, env: { [LEASE_ENV_KEY]: lease.leaseId, [INSTANCE_ENV_KEY]: instanceId } };
    },

    async attach(leaseId, pid) {
      const { store } = await init();
      await recordRootIdentity(store, leaseId, { rootPid: pid }, facts);
    },

    async settle(leaseId, to) {
      const { store } = await init();
      const lease = await store.get(leaseId);
      if (lease) await settle(store, lease, to);
    },

    async finish(leaseId, report) {
      const { store, instanceId } = await init();
      const lease = await store.get(leaseId);
      if (!lease) return undefined;
      if (lease.state === "closed" || lease.state === "lost") return lease.state;
      let nothingAlive = report !== null && reapCompleted(report);
      if (!nothingAlive) {
        const [v] = await verifyLeases([lease], facts, { gatewayInstanceId: instanceId });
        nothingAlive = v !== undefined && provenNothingLeft(v);
      }
      if (nothingAlive) return (await settle(store, lease, "closed")).state;
      return lease.state === "open" ? (await store.transition(leaseId, "closing")).state : lease.state;
    },

    async reconcile(live = new Set<string>()) {
      const { store, instanceId } = await init();
      const { leases } = await store.list({ gatewayInstanceId: instanceId, states: ["open", "closing"] });
      const mine = leases.filter(
        (l) => isSupervisorLease(l) && l.gatewayInstanceId === instanceId && !live.has(l.leaseId),
      );
      const verdicts = await verifyLeases(mine, facts, { gatewayInstanceId: instanceId });
      const runs: ReconciledRun[] = [];
      for (const v of verdicts) {
        const base = {
          leaseId: v.lease.leaseId,
          runId: v.lease.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length),
          rootPid: v.lease.rootPid,
          verdict: v.verdict,
          evidence: v.evidence,
        };
        // a verified tree, or (root gone) the verified remnants still carrying this run's markers
        if ((v.verdict === "owned" && v.tree) || v.remnants) {
          const closing = v.lease.state === "open" ? await store.transition(v.lease.leaseId, "closing") : v.lease;
          const { report: reap } = await reapLeaseVerification(v, { facts, signaller, graceMs: opts.graceMs });
          if (reap === null) throw new Error("unreachable: a tree or remnants were present");
          if (!reapCompleted(reap)) {
            // could not finish: the lease stays closing (reconcile lists open and
            // closing, so the next one tries again). closing → open is kept for
            // "the process list was unavailable", which is not this case.
            runs.push({ ...base, action: "left", state: closing.state, reap });
          } else {
            await store.transition(closing.leaseId, "closed");
            runs.push({ ...base, action: "reaped", state: "closed", reap });
          }
        } else if (v.verdict === "gone" || v.verdict === "mismatch") {
          // nothing of ours is alive (a mismatching pid belongs to someone else now)
          const after = await settle(store, v.lease, "lost");
          runs.push({ ...base, action: "settled", state: after.state });
        } else {
          // unknown evidence never leads to a signal, nor to forgetting the lease
          runs.push({ ...base, action: "left", state: v.lease.state });
        }
      }
      return { instanceId, runs };
    },
  };
}

/**
 * True only when the verification proves nothing of the run is alive: its
 * root is gone AND the remnant search ran (environments readable) and found
 * no process carrying the run's markers, proven or refused. A mismatch only
 * proves the root's pid is someone else's now (its descendants are not
 * searched then); a blocked search (ps/none backends cannot read
 * environments) proves nothing either (LeaseVerification.remnantSearch).
 */
function provenNothingLeft(v: LeaseVerification): boolean {
  return v.verdict === "gone" && v.remnantSearch === "none-found";
}

/**
 * A supervised run has no wrapper: its root is the program itself. Both
 * fields are recorded empty, which the verifier reports as "unknown"
 * (not applicable) for its wrapper-path check. Naming the executable's
 * directory instead (/usr/bin for `node`, /bin for the PTY shell) would make
 * that check "match" for every process started from that directory: evidence
 * that proves nothing, counted as if it did. The verdict rests on what does
 * identify the run: the root's start time (with boot id and pid namespace),
 * the command hash of the exact argv, the lease id in the root's environment,
 * and its process group.
 */
export const SUPERVISOR_WRAPPER_FIELDS: Readonly<{ wrapperRoot: string; wrapperPath: string }> = Object.freeze({
  wrapperRoot: "",
  wrapperPath: "",
});
