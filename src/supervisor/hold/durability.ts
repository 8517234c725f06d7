/**
 * Restart durability for background runs (beyond OpenClaw's in-memory-only
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
 * - cgroup: with containment (docs/containment.md), the lease's own cgroup
 *   `<gateway cgroup>/proclease/<instance id>/<leaseId>`, made and recorded
 *   before the spawn by ownership's binding sequence (lease-cgroup.ts); the
 *   run is born inside it (adapters/cgroup-shim.ts), so the lifecycle's drain
 *   ends whatever it left there, markers or not.
 */
import { resolve } from "node:path";
import { getProcessFacts } from "../../facts/get.js";
import { holdSupervisorLock, liveHolders, releaseSupervisorLock } from "../../ownership/host/supervisor-holders.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { computeCommandHash } from "../../ownership/leases/command-hash.js";
import { loadOrCreateGatewayInstanceId } from "../../ownership/leases/instance-id.js";
import { openLeaseStore, type LeaseStore } from "../../ownership/leases/lease-store.js";
import type { TreeKillReport } from "../../ownership/terminate/tree-kill.js";
import {
  settleLease,
  settleUnstarted,
  type LeaseOutcome,
  type LeaseOutcomeCode,
  type LifecycleDeps,
} from "../../ownership/lifecycle/lifecycle.js";
import { reconcileLeases } from "../../ownership/lifecycle/reconcile.js";
import { recordRootIdentity } from "../../ownership/lifecycle/root-identity.js";
import {
  INSTANCE_ENV_KEY,
  LEASE_ENV_KEY,
  type ProcessLease,
  type LeaseSettledAs,
  type LeaseState,
  type OwnershipEvidence,
} from "../../ownership/leases/types.js";
import { createSignaller } from "../../facts/signal.js";
import { recordContainmentRoot } from "../../ownership/host/containment-record.js";
import { removeInstanceFolder, type ContainmentSupport, type LeaseCgroup } from "../../containment/index.js";
import { dropLeaseCgroup, openLeaseWithCgroup } from "../../ownership/lifecycle/lease-cgroup.js";
import { detectRunContainment } from "./run-cgroups.js";
import { acquireKeeper, keeperWanted, type KeeperLease, type KeeperOption } from "../../ownership/keeper/keeper.js";
import type { LeaseVerification } from "../../ownership/verify/verify.js";
import type { SupervisorRunRef } from "../shared/types.js";

/** A supervisor run's lease has the session key `supervisor:<runId>`. */
export const SUPERVISOR_SESSION_PREFIX = "supervisor:";

export interface RunLease {
  leaseId: string;
  /** to merge into the child's environment */
  env: Record<string, string>;
  /** the lease's own cgroup, recorded in the lease: the run must be born inside it (or `dropCgroup` before the spawn) */
  cgroup?: LeaseCgroup;
}

export interface ReconciledRun {
  leaseId: string;
  runId: string;
  rootPid: number;
  verdict: LeaseVerification["verdict"];
  /**
   * killed: a verified tree (or remnants) was torn down and the lease closed;
   * settled: nothing was killed and the lease was closed or lost by the rule;
   * left: the lease stays open or closing (survivors, remnants not cleared,
   * unknown evidence), retried by the next reconcile
   */
  action: "killed" | "settled" | "left";
  /** the lease's state after reconciliation */
  state: LeaseState;
  /** how the lease ended, when `state` is closed or lost */
  settledAs?: LeaseSettledAs;
  /** why, for code to read (ownership's LeaseOutcomeCode) */
  code: LeaseOutcomeCode;
  /** why, as ownership's settlementFor put it */
  why: string;
  evidence: readonly OwnershipEvidence[];
  kill?: TreeKillReport;
}

/** The lease states a reconcile starts from (default both): a maintenance pass takes `closing` only, as the controller's does for its own leases. */
export type ReconcilableState = "open" | "closing";

export interface ReconcileReport {
  instanceId: string | null;
  runs: ReconciledRun[];
}

/** What a cancel of a leased run did: the run's lease verified, the kill of what verified, and the look after it. */
export interface RunLeaseKill {
  /**
   * The LAST verification: after a kill, the re-verification
   * killLeaseVerification ran once the signals were sent (its `final`);
   * without a kill, the one that found nothing to kill.
   */
  verification: LeaseVerification;
  /** the tree kill's report (every kill of the lease combined) when a tree (with its marker-carrying escapees) or remnants were killed; null otherwise */
  report: TreeKillReport | null;
}

export interface RunLeases {
  /** Writes the run's lease (rootPid 0) and, with containment, makes its cgroup and records it. */
  open(runId: string, argv: readonly string[], durable?: { reattachWithinMs: number }): Promise<RunLease>;
  /**
   * The run cannot be started inside its cgroup (see adapters/cgroup-shim.ts):
   * the cgroup leaves the lease, and is removed, BEFORE the spawn, so no lease
   * names a cgroup its command runs outside of (the binding's rule,
   * ownership/lifecycle/lease-cgroup.ts: the cgroup is evidence only when the root is
   * in it).
   */
  dropCgroup(leaseId: string, cgroup: LeaseCgroup): Promise<void>;
  /** What containment this supervisor has (detected once, on the first call). */
  containment(): Promise<ContainmentSupport>;
  /**
   * Records the live root's identity (ownership's recordRootIdentity). The
   * group is `processGroupId` when the adapter knows it (a root that makes
   * itself a session leader: a PTY's child calls setsid after the fork, so
   * its live group read right after the spawn can still be the gateway's),
   * else the live root's. A root already gone, or facts that cannot answer,
   * leave only the pid (and a known group) recorded; the lease is then `finish`'s.
   */
  attach(leaseId: string, pid: number, processGroupId?: number): Promise<void>;
  /** The spawn never produced a process: open → closing → lost (ownership's NOTHING_STARTED). */
  neverStarted(leaseId: string): Promise<void>;
  /**
   * The tree kill of a leased run (cancel, deadline): verifies the run's
   * lease now and kills what verified through ownership's
   * killLeaseVerification: the root's tree INCLUDING the processes that
   * carry the run's markers outside the parent links (a double-forked
   * `setsid` escapee), or, when the root is already gone, its remnants.
   * Nothing is killed for any other verdict (report null); the caller may
   * then fall back to its identity-checked tree kill. The lease goes through
   * the one lifecycle (settleLease): settled when the kill completed, else
   * left closing for `finish`.
   */
  kill(leaseId: string): Promise<RunLeaseKill | null>;
  /**
   * Ends what the lease still covers once its run has settled: a root that
   * exited on its own may have left processes in its cgroup (a `setsid` +
   * `env -i` escapee carries no marker) or carrying its markers. The one
   * lifecycle with its kill (settleLease: verify now, closing, kill what
   * verified, drain the cgroup, settle). Returns the lease's state
   * afterwards (undefined: no such lease).
   */
  end(leaseId: string): Promise<LeaseState | undefined>;
  /**
   * Settles the lease of a run whose root exited (reported by the
   * supervisor's own handle) by ownership's one rule (settlementAfterKill /
   * settlementFor): closed when `kill` (the lease kill of a cancel, if one
   * ran) completed and the look after it found nothing left; otherwise by a
   * fresh verification: closed when the root is gone and nothing carries the
   * run's markers AND the earlier kill (lease kill or `prior`) completed, or
   * none ran (the observed exit then counts), closing while
   * anything may still run or cannot be cleared (reconcile retries it), open
   * when the process list was unavailable. `prior` is a tree kill that was
   * not derived from the lease (no marker pids): it never settles anything by
   * itself. Returns the lease's state afterwards (undefined: no such lease).
   */
  finish(leaseId: string, kill: RunLeaseKill | null, prior?: TreeKillReport | null): Promise<LeaseState | undefined>;
  /**
   * `live`: lease ids of runs this incarnation still supervises; `isTracked`:
   * runs a caller still tracks (true keeps it). Neither is touched or reported.
   */
  reconcile(
    live?: ReadonlySet<string>,
    isTracked?: (run: SupervisorRunRef) => boolean,
    states?: readonly ReconcilableState[],
    spareDurable?: boolean,
  ): Promise<ReconcileReport>;
  /** Shutdown: removes this instance's cgroup folder when no lease cgroup is left in it (containment's removeInstanceFolder). */
  release(): Promise<void>;
}

export interface RunLeasesOptions {
  stateDir: string;
  gatewayInstanceId?: string;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
  graceMs: number;
  /** "auto" (default): each lease gets its own cgroup v2 where the host allows it; "off": never */
  containment?: "auto" | "off";
  /** "on" (default, unless PROCLEASE_KEEPER=off): from the first leased run on, this process's keeper (ownership/keeper/keeper.ts) ends the runs if it dies */
  keeper?: KeeperOption;
}

/** What every call of one supervisor's run leases shares: the store, the instance id and holder lock (opened once), and containment (detected once). */
interface RunLeaseContext {
  opts: RunLeasesOptions;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  stateDir: string;
  init(): Promise<{ store: LeaseStore; instanceId: string; holder: string }>;
  /** the store, once init() was asked for; undefined before */
  opened(): Promise<{ instanceId: string }> | undefined;
  detect(): Promise<ContainmentSupport>;
  /** containment, once detect() was asked for; undefined before */
  detected(): Promise<ContainmentSupport> | undefined;
  lifecycle(): Promise<LifecycleDeps>;
}

function runLeaseContext(opts: RunLeasesOptions): RunLeaseContext {
  const facts = opts.facts ?? getProcessFacts();
  const signaller = opts.signaller ?? createSignaller(facts);
  const stateDir = resolve(opts.stateDir);
  let ready: Promise<{ store: LeaseStore; instanceId: string; holder: string }> | undefined;
  let containment: Promise<ContainmentSupport> | undefined;
  const init = () => {
    ready ??= (async () => {
      const [store, instanceId] = await Promise.all([
        openLeaseStore(opts.stateDir),
        opts.gatewayInstanceId ?? loadOrCreateGatewayInstanceId(opts.stateDir),
      ]);
      // this process's holder lock: another process's reconcile leaves our runs alone while we live (supervisor-holders.ts)
      const holder = await holdSupervisorLock(stateDir);
      return { store, instanceId, holder };
    })();
    ready.catch(() => (ready = undefined));
    return ready;
  };
  return {
    opts,
    facts,
    signaller,
    stateDir,
    init,
    opened: () => ready,
    detect: () => (containment ??= detectRunContainment(opts.containment)),
    detected: () => containment,
    lifecycle: async () => {
      const { store, instanceId } = await init();
      return { store, facts, signaller, graceMs: opts.graceMs, gatewayInstanceId: instanceId };
    },
  };
}

/** The lifecycle's deps and the lease's current record (null once removed). */
async function leaseOf(
  ctx: RunLeaseContext,
  leaseId: string,
): Promise<{ deps: LifecycleDeps; lease: ProcessLease | null }> {
  const deps = await ctx.lifecycle();
  return { deps, lease: await deps.store.get(leaseId) };
}

export function createRunLeases(opts: RunLeasesOptions): RunLeases {
  const ctx = runLeaseContext(opts);
  let rootRecorded: Promise<void> | undefined;
  const keeper = runKeeper(ctx);
  return {
    async open(runId, argv, durable) {
      await keeper.keep();
      const support = await ctx.detect();
      // the CLI finds this state dir's lease cgroups (and orphans among them) from this record; once per supervisor
      // (a failed write costs only that view, never the run)
      if (support.available)
        rootRecorded ??= ctx
          .init()
          .then(({ instanceId }) => recordContainmentRoot(opts.stateDir, support.root, instanceId))
          .catch(() => undefined);
      await rootRecorded;
      return openRunLease(ctx, support, runId, argv, durable);
    },

    async dropCgroup(leaseId, cgroup) {
      const { store } = await ctx.init();
      await dropLeaseCgroup(store, leaseId, cgroup);
    },

    containment: ctx.detect,

    async attach(leaseId, pid, processGroupId) {
      const { store } = await ctx.init();
      await recordRootIdentity(
        store,
        leaseId,
        { rootPid: pid, ...(processGroupId !== undefined ? { processGroupId } : {}) },
        ctx.facts,
      );
    },

    async neverStarted(leaseId) {
      const { deps, lease } = await leaseOf(ctx, leaseId);
      // the one unstarted sequence (lifecycle.ts): its cgroup drained and removed, the lease settled
      if (lease) await settleUnstarted(deps, lease);
    },

    async kill(leaseId) {
      const { deps, lease } = await leaseOf(ctx, leaseId);
      if (!lease || lease.state === "closed" || lease.state === "lost") return null;
      // the one lifecycle: verify, closing, kill what verified (tree + marker escapees, or remnants), verify again, settle
      const o = await settleLease(deps, lease);
      return { verification: o.verification, report: o.kill };
    },

    async end(leaseId) {
      const { deps, lease } = await leaseOf(ctx, leaseId);
      if (!lease) return undefined;
      if (lease.state === "closed" || lease.state === "lost") return lease.state;
      return (await settleLease(deps, lease)).stateAfter;
    },

    finish: (leaseId, kill, prior = null) => finishRun(ctx, leaseId, kill, prior),

    // the supervisor's one default: a waiting durable session's runs are spared unless the caller says not to
    reconcile: (live = new Set<string>(), isTracked, states, spareDurable = true) =>
      reconcileRuns(ctx, live, isTracked, states, spareDurable),

    release: () => releaseRuns(ctx, keeper),
  };
}

/** RunLeases.finish: the run ended; its lease settled on the facts, never by a signal. */
async function finishRun(
  ctx: RunLeaseContext,
  leaseId: string,
  kill: RunLeaseKill | null,
  prior: TreeKillReport | null,
): Promise<LeaseState | undefined> {
  const { deps, lease } = await leaseOf(ctx, leaseId);
  if (!lease) return undefined;
  if (lease.state === "closed" || lease.state === "lost") return lease.state;
  // Not settled by the lease's own kill (or none ran): the facts decide
  // now, with what ran before as the prior (the lease kill, else the
  // plain tree kill); the root's exit (our handle saw it) counts only
  // when nothing was killed at all.
  const before = kill?.report ?? prior;
  // the run ended: settle on the facts, never signal (what it left running is reconcile's, as in OpenClaw)
  const o = await settleLease(deps, lease, {
    kill: false,
    ...(before !== null ? { prior: before } : { rootExitObserved: true }),
  });
  return o.stateAfter;
}

/** RunLeases.release: the keeper's share, the holder lock and this supervisor's instance folder given back. */
async function releaseRuns(ctx: RunLeaseContext, keeper: { release(): Promise<void> }): Promise<void> {
  await keeper.release();
  const ready = ctx.opened();
  if (ready === undefined) return;
  const { instanceId } = await ready;
  await releaseSupervisorLock(ctx.stateDir);
  // only a supervisor that contained something has a folder; never detect just to remove one
  const containment = ctx.detected();
  if (containment === undefined) return;
  const support = await containment;
  if (support.available) await removeInstanceFolder(support, instanceId);
}

/**
 * This supervisor's share of its process's keeper (ownership/keeper/keeper.ts),
 * taken before the first lease is written: a crash from then on is the
 * keeper's to clean up (without one, the next reconcile's).
 */
function runKeeper(ctx: RunLeaseContext): { keep(): Promise<void>; release(): Promise<void> } {
  let keeping: Promise<KeeperLease | null> | undefined;
  let released = false;
  return {
    async keep() {
      // after release (shutdown) nothing starts one again: nobody would stop it
      if (released) return;
      keeping ??= keeperWanted(ctx.opts.keeper)
        ? ctx
            .init()
            .then(({ instanceId }) =>
              acquireKeeper({ stateDir: ctx.stateDir, gatewayInstanceId: instanceId, graceMs: ctx.opts.graceMs }),
            )
            .catch(() => null)
        : Promise.resolve(null);
      await keeping;
    },
    async release() {
      released = true;
      await (await keeping)?.release();
    },
  };
}

/** A run's lease, written before its spawn, with the markers for its environment and its own cgroup where containment allows. */
async function openRunLease(
  ctx: RunLeaseContext,
  support: ContainmentSupport,
  runId: string,
  argv: readonly string[],
  durable: { reattachWithinMs: number } | undefined,
): Promise<RunLease> {
  const { instanceId, holder } = await ctx.init();
  // ownership's one opening sequence: the lease, then its cgroup made and recorded, or uncontained (as without containment)
  const bound = await openLeaseWithCgroup(await ctx.lifecycle(), support, {
    kind: "supervisor",
    gatewayInstanceId: instanceId,
    sessionKey: SUPERVISOR_SESSION_PREFIX + runId,
    ...SUPERVISOR_WRAPPER_FIELDS,
    commandHash: computeCommandHash(argv),
    holder,
    ...(durable !== undefined ? { durable: { reattachWithinMs: durable.reattachWithinMs } } : {}),
  });
  const { leaseId } = bound.lease;
  const env = { [LEASE_ENV_KEY]: leaseId, [INSTANCE_ENV_KEY]: instanceId };
  return { leaseId, env, ...(bound.cgroup !== null ? { cgroup: bound.cgroup } : {}) };
}

/** What an earlier incarnation left: this instance's supervisor leases, except runs still supervised (here or by a live supervisor elsewhere) or tracked. */
async function reconcileRuns(
  ctx: RunLeaseContext,
  live: ReadonlySet<string>,
  isTracked: Parameters<RunLeases["reconcile"]>[1],
  states: readonly ReconcilableState[] | undefined,
  spareDurable: boolean,
): Promise<ReconcileReport> {
  const deps = await ctx.lifecycle();
  const instanceId = deps.gatewayInstanceId;
  const tracked = (l: ProcessLease) =>
    live.has(l.leaseId) ||
    isTracked?.({
      runId: l.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length),
      leaseId: l.leaseId,
      sessionKey: l.sessionKey,
    }) === true;
  // runs of a supervisor alive in another process are its own, whatever their lease says
  const others = await liveHolders(ctx.stateDir, ctx.facts);
  const skip = (l: ProcessLease) =>
    l.holder !== undefined && others.has(l.holder)
      ? `its supervisor (holder ${l.holder}) is alive in another process`
      : tracked(l)
        ? "tracked"
        : undefined;
  const support = await ctx.detect();
  const leftovers = support.available
    ? { leftovers: { instanceFolder: `${support.root}/${instanceId}`, isLive: (id: string) => live.has(id) } }
    : {};
  const r = await reconcileLeases(deps, {
    kind: "supervisor",
    skip,
    spareDurable,
    ...(states !== undefined ? { states } : {}),
    ...leftovers,
  });
  // runs still supervised or tracked are neither touched nor reported
  const runs = r.entries.filter((o) => o.action !== "skipped-live").map(reconciledRun);
  return { instanceId, runs };
}

function reconciledRun(o: LeaseOutcome): ReconciledRun {
  const action =
    o.kill !== null
      ? o.stateAfter === "closed"
        ? "killed"
        : "left"
      : o.stateAfter === "closed" || o.stateAfter === "lost"
        ? "settled"
        : "left";
  return {
    leaseId: o.leaseId,
    runId: o.sessionKey.slice(SUPERVISOR_SESSION_PREFIX.length),
    rootPid: o.rootPid,
    verdict: o.verdict,
    evidence: o.evidence,
    action,
    state: o.stateAfter,
    ...(o.settledAs ? { settledAs: o.settledAs } : {}),
    code: o.code,
    why: o.why,
    ...(o.kill !== null ? { kill: o.kill } : {}),
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
