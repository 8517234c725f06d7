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
import type { ReapReport } from "../ownership/reap.js";
import { reapLeaseVerification } from "../ownership/reap-verification.js";
import { applySettlement, NOTHING_STARTED, settlementAfterReap, settlementFor } from "../ownership/settle.js";
import { recordRootIdentity } from "../ownership/root-identity.js";
import {
  INSTANCE_ENV_KEY,
  isSupervisorLease,
  LEASE_ENV_KEY,
  SUPERVISOR_SESSION_PREFIX,
  type LeaseState,
  type OwnershipEvidence,
} from "../ownership/types.js";
import { createSignaller } from "../facts/signal.js";
import { explainLease, verifyLeases, type LeaseVerification } from "../ownership/verify.js";

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
  /**
   * reaped: a verified tree (or remnants) was torn down and the lease closed;
   * settled: nothing was reaped and the lease was closed or lost by the rule;
   * left: the lease stays open or closing (survivors, remnants not cleared,
   * unknown evidence), retried by the next reconcile
   */
  action: "reaped" | "settled" | "left";
  /** the lease's state after reconciliation */
  state: LeaseState;
  /** why, as ownership's settlementFor put it */
  why: string;
  evidence: readonly OwnershipEvidence[];
  reap?: ReapReport;
}

export interface ReconcileReport {
  instanceId: string | null;
  runs: ReconciledRun[];
}

/** What a cancel of a leased run did: the run's lease verified, the reap of what verified, and the look after it. */
export interface RunLeaseReap {
  /**
   * The LAST verification: after a reap, the re-verification
   * reapLeaseVerification ran once the signals were sent (its `final`);
   * without a reap, the one that found nothing to reap.
   */
  verification: LeaseVerification;
  /** the reaper's report (every reap of the lease combined) when a tree (with its marker-carrying escapees) or remnants were reaped; null otherwise */
  report: ReapReport | null;
  /** the follow-up reap run on `verification` (remnants it found after the first reap); null or absent when none ran */
  finalReap?: ReapReport | null;
}

export interface RunLeases {
  open(runId: string, argv: readonly string[]): Promise<RunLease>;
  /**
   * Records the live root's identity (ownership's recordRootIdentity; the
   * group is the root's own). A root already gone, or facts that cannot
   * answer, leave only the pid recorded; the lease is then `finish`'s.
   */
  attach(leaseId: string, pid: number): Promise<void>;
  /** The spawn never produced a process: open → closing → lost (ownership's NOTHING_STARTED). */
  neverStarted(leaseId: string): Promise<void>;
  /**
   * The tree kill of a leased run (cancel, deadline): verifies the run's
   * lease now and reaps what verified through ownership's
   * reapLeaseVerification: the root's tree INCLUDING the processes that
   * carry the run's markers outside the parent links (a double-forked
   * `setsid` escapee), or, when the root is already gone, its remnants.
   * Nothing is reaped for any other verdict (report null); the caller may
   * then fall back to its identity-checked tree kill. The lease is moved to
   * closing first; `finish` settles it.
   */
  reap(leaseId: string): Promise<RunLeaseReap | null>;
  /**
   * Settles the lease of a run whose root exited (reported by the
   * supervisor's own handle) by ownership's one rule (settlementAfterReap /
   * settlementFor): closed when `reap` (the lease reap of a cancel, if one
   * ran) completed and the look after it found nothing left; otherwise by a
   * fresh verification: closed when the root is gone and nothing carries the
   * run's markers AND the earlier reap (lease reap or `prior`) completed, or
   * none ran (the observed exit then counts), closing while
   * anything may still run or cannot be cleared (reconcile retries it), open
   * when the process list was unavailable. `prior` is a tree kill that was
   * not derived from the lease (no marker pids): it never settles anything by
   * itself. Returns the lease's state afterwards (undefined: no such lease).
   */
  finish(leaseId: string, reap: RunLeaseReap | null, prior?: ReapReport | null): Promise<LeaseState | undefined>;
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
  const reapOpts = { facts, signaller, graceMs: opts.graceMs };

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

    async neverStarted(leaseId) {
      const { store } = await init();
      await applySettlement(store, leaseId, NOTHING_STARTED);
    },

    async reap(leaseId) {
      const { store, instanceId } = await init();
      const lease = await store.get(leaseId);
      if (!lease || lease.state === "closed" || lease.state === "lost") return null;
      const verification = await explainLease(lease, facts, { gatewayInstanceId: instanceId });
      if (verification.tree === null && verification.remnants === null) return { verification, report: null };
      if (lease.state === "open") await store.transition(leaseId, "closing");
      const r = await reapLeaseVerification(verification, { ...reapOpts, gatewayInstanceId: instanceId });
      return { verification: r.final, report: r.report, finalReap: r.finalReap };
    },

    async finish(leaseId, reap, prior = null) {
      const { store, instanceId } = await init();
      const lease = await store.get(leaseId);
      if (!lease) return undefined;
      if (lease.state === "closed" || lease.state === "lost") return lease.state;
      if (reap?.report) {
        // settled on the verification after the reap, never on its report alone
        const s = settlementAfterReap({ final: reap.verification, report: reap.report, finalReap: reap.finalReap ?? null });
        if (s.to === "closed") return (await applySettlement(store, leaseId, s))?.state;
      }
      // no lease reap, or one that could not settle it: the facts decide now.
      // The prior reap is what ran (the lease reap, else the plain tree kill):
      // one that left a member that may still run keeps the lease closing; the
      // root's exit (our handle saw it) counts only when no reap ran at all.
      const [v] = await verifyLeases([lease], facts, { gatewayInstanceId: instanceId });
      const before = reap?.report ?? prior;
      const s = v ? settlementFor(v, null, before !== null ? { prior: before } : { rootExitObserved: true }) : { to: "closing" as const, why: "not verified" };
      // the run is over: a lease it leaves unsettled is closing (reconcile retries it), unless the rule hands it back
      return (await applySettlement(store, leaseId, s.to === "unchanged" ? { ...s, to: "closing" } : s))?.state;
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
        let reap: ReapReport | null = null;
        let s = settlementFor(v, null);
        if (v.tree || v.remnants) {
          if (v.lease.state === "open") await store.transition(v.lease.leaseId, "closing");
          const r = await reapLeaseVerification(v, { ...reapOpts, gatewayInstanceId: instanceId });
          reap = r.report;
          // settled on the verification after the reap (escapees forked during the teardown were reaped too)
          s = settlementAfterReap(r);
        }
        const after = (await applySettlement(store, v.lease.leaseId, s))?.state ?? v.lease.state;
        const action = reap !== null ? (after === "closed" ? "reaped" : "left") : after === "closed" || after === "lost" ? "settled" : "left";
        runs.push({ ...base, action, state: after, why: s.why, ...(reap !== null ? { reap } : {}) });
      }
      return { instanceId, runs };
    },
  };
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
