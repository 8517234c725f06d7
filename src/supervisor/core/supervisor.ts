/**
 * The process supervisor (OpenClaw's, rebuilt on leases; docs/supervisor.md):
 * it owns the lifecycle of every run it spawns (registry
 * record, output capture, deadlines, cancellation through the verified tree
 * kill and, for background runs with a state directory, a lease that
 * survives a crash) and answers for them as a whole: cancel by run, scope or
 * all, shutdown, and the reconciliation of what an earlier incarnation left.
 *
 * One run is an object with explicit states (run/run.ts); each of its
 * concerns is a module of its own under run/: start, unstarted (the starting
 * window's rule), running, deadlines, terminate, pty-exit-fallback, finish.
 */
import { assertKeeperOption } from "../../ownership/keeper/keeper.js";
import { randomUUID } from "node:crypto";
import type { ContainmentSupport } from "../../containment/index.js";
import { getProcessFacts } from "../../facts/get.js";
import { createSignaller } from "../../facts/signal.js";
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import { nonNegativeOption } from "../../facts/validate.js";
import { DEFAULT_GRACE_MS } from "../../ownership/index.js";
import type { LeaseState } from "../../ownership/leases/types.js";
import { loadNodePty, type PtyLoader } from "../adapters/pty.js";
import { createRunLeases, type ReconcilableState, type ReconcileReport, type RunLeases } from "../hold/durability.js";
import { killProcessTree } from "../shared/kill-tree.js";
import { DEFAULT_MAX_OUTPUT_CHARS, maxOutputOption } from "../shared/output.js";
import { createRunRegistry } from "../run/registry.js";
import { createRunCgroups, detectRunContainment, sweepDeadRunFolders } from "../hold/run-cgroups.js";
import { validateSpawnInput } from "../run/input.js";
import { Run, type RunContext } from "../run/run.js";
import { enterRunning } from "../run/running.js";
import { launchProcess, prepareLaunch } from "../run/start.js";
import { endUnstarted } from "../run/unstarted.js";
import type {
  ManagedRun,
  RunRecord,
  RunExit,
  SpawnInput,
  SupervisorRunRef,
  TerminationReason,
} from "../shared/types.js";

/** OpenClaw's PTY adapter settles `wait()` this long after a forced kill when node-pty reports no exit. */
export const PTY_EXIT_FALLBACK_MS = 4_000;

export interface ProcessSupervisorOptions {
  /** Enables restart durability: background runs get a lease under this directory. */
  stateDir?: string;
  /** Defaults to the id stored in `stateDir` (created on first use). */
  gatewayInstanceId?: string;
  facts?: ProcessFacts;
  signaller?: ProcessSignaller;
  /** TERM → KILL grace for every tree kill; default DEFAULT_GRACE_MS (3000 ms) */
  graceMs?: number;
  /** exited records kept for getRecord; default 1000 */
  maxExitedRecords?: number;
  /** captured characters kept per stream (the tail); default 1 000 000; a spawn may set its own */
  maxOutputChars?: number;
  /** how node-pty is loaded; tests and embedders may substitute it */
  loadPty?: PtyLoader;
  /**
   * A PTY run whose forced kill has finished but whose exit node-pty never
   * reported: every this many ms the root is looked up, and `wait()` settles
   * as soon as it is verified gone (absent, a zombie, or its pid now names
   * another process). Default PTY_EXIT_FALLBACK_MS (4000, OpenClaw's).
   */
  ptyExitFallbackMs?: number;
  /**
   * "auto" (default): each leased run gets its own cgroup v2 where the host
   * allows it (detected once, on the first leased spawn), made and recorded in
   * the lease before the spawn, and the run is born inside it: whatever it
   * leaves behind, env-scrubbed setsid escapees included, is ended through
   * the cgroup when the lease's tree is killed (docs/containment.md). Runs without
   * a lease (foreground, or no stateDir) get a cgroup too (run-cgroups.ts):
   * their escapees end with the run's cancel or deadline. "off": never.
   */
  containment?: "auto" | "off";
  /**
   * With a `stateDir`: "on" (default, unless PROCLEASE_KEEPER=off in the
   * environment) starts this process's keeper with the first leased run, so
   * the process's death ends its leased runs at once (docs/ownership.md "The
   * keeper"); `shutdown()` stops it. "off": they wait for the next
   * `reconcileOrphans`. A run that must outlive the process is started
   * without a lease (no `stateDir`, or not in the background).
   */
  keeper?: "on" | "off";
}

export interface ReconcileOrphansOptions {
  /**
   * True keeps the run: its lease is neither verified nor killed nor settled,
   * and it is not reported (a run the caller still tracks, e.g. one it
   * adopted after the restart). A predicate that throws keeps the run too:
   * an unknown answer never leads to a signal.
   */
  isSessionTracked?: (run: SupervisorRunRef) => boolean;
  /** the lease states to start from (default both); a periodic retry takes `closing` only */
  states?: readonly ReconcilableState[];
  /**
   * true (default): a run whose lease is `durable` (SpawnChildInput.durable)
   * and whose tree verifies is left to its root, which ends it when its
   * session does; false ends it like any other (an explicit end of that run)
   */
  spareDurable?: boolean;
}

export interface ShutdownReport {
  /** runs asked to stop (starting ones included) */
  cancelled: number;
  /** every run that was live, once it ended and its lease settled; `exit` null when its startup failed (its spawn rejected) */
  runs: Array<{ runId: string; exit: RunExit | null }>;
}

/** `spawn` after `shutdown()`: nothing is started. */
export class SupervisorShutdownError extends Error {
  override readonly name = "SupervisorShutdownError";
  constructor() {
    super("the process supervisor is shut down: no new runs are started");
  }
}

export interface ProcessSupervisor {
  /**
   * Starts a run. It is registered (live, state "starting") before the first
   * await, so cancel/cancelScope/cancelAll reach it from the moment its id
   * exists, and a stop request shows on its record at once (state "exiting",
   * its terminationReason). The starting window's rule (run/unstarted.ts): a
   * startup that fails rejects with that error (record "spawn-error"), even
   * after a stop request; a run asked to stop whose startup did not fail never
   * gets a process, and spawn resolves with a run without pid whose wait()
   * reports the reason asked. One asked to stop once its process exists is
   * killed like any other.
   */
  spawn(input: SpawnInput): Promise<ManagedRun>;
  /** Requests the tree kill of a live (or starting) run; false when the supervisor has no live record of it. */
  cancel(runId: string, reason?: TerminationReason): boolean;
  /** Cancels every live run of the scope, starting ones included; returns how many were asked to stop. */
  cancelScope(scopeKey: string, reason?: TerminationReason): number;
  /** Cancels every live run, starting ones included (default reason `manual-cancel`); returns how many were asked to stop. */
  cancelAll(reason?: TerminationReason): number;
  /**
   * Ends a run and whatever it left: a live (or starting) run is cancelled
   * and awaited; then a leased run's lease, when it is not settled yet (its
   * root exited on its own but left processes in its cgroup or carrying its
   * markers), is ended through it (RunLeases.end: verified, killed, its
   * cgroup drained, settled). Resolves with the lease's state afterwards;
   * undefined for a run without a lease, or one this supervisor no longer
   * has a record of (reconcileOrphans takes its lease then).
   */
  endRun(runId: string, reason?: TerminationReason): Promise<LeaseState | undefined>;
  /**
   * Gateway shutdown: refuses new spawns (SupervisorShutdownError), cancels
   * every live run, and resolves once each has ended and its lease settled.
   * Idempotent; a second call waits for the same runs.
   */
  shutdown(reason?: TerminationReason): Promise<ShutdownReport>;
  getRecord(runId: string): RunRecord | undefined;
  listRecords(): RunRecord[];
  /** Records of one scope, any state (registry.listByScope). */
  listByScope(scopeKey: string): RunRecord[];
  /**
   * After a restart: verifies and kills the background runs that a previous
   * incarnation of THIS gateway instance left behind (from their leases,
   * never from a scan of command lines), settles their leases, and reports.
   * Skipped: this supervisor's own runs (live, starting, or still settling;
   * run one supervisor per state directory) and runs `isSessionTracked` keeps.
   * Without a `stateDir` there is nothing durable: an empty report.
   */
  reconcileOrphans(opts?: ReconcileOrphansOptions): Promise<ReconcileReport>;
  /**
   * The containment runs get, leased or not (ContainmentSupport: available,
   * or why not), detected once per supervisor.
   */
  containment(): Promise<ContainmentSupport>;
}

export function createProcessSupervisor(opts: ProcessSupervisorOptions = {}): ProcessSupervisor {
  const { ctx, defaultMaxOutput } = createRunContext(opts);
  let shutDown = false;
  let shutdownReport: Promise<ShutdownReport> | undefined;
  const cancel = (runId: string, reason: TerminationReason = "manual-cancel"): boolean => {
    const run = ctx.live.get(runId);
    run?.requestStop(reason);
    return run !== undefined;
  };
  const cancelScope = (scopeKey: string, reason: TerminationReason = "manual-cancel"): number =>
    stopRuns(ctx, (r) => r.scopeKey === scopeKey, reason);
  const cancelAll = (reason: TerminationReason = "manual-cancel"): number => stopRuns(ctx, () => true, reason);

  const spawn = async (input: SpawnInput): Promise<ManagedRun> => {
    if (shutDown) throw new SupervisorShutdownError();
    validateSpawnInput(input);
    const maxOutput = maxOutputOption(input.maxOutputChars, defaultMaxOutput, "maxOutputChars");
    const runId = input.runId ?? randomUUID();
    claimRunId(ctx, runId);
    // The fence: every earlier run of the scope, those still starting
    // included, is asked to stop before this one is registered. Each spawn
    // does this synchronously on entry, so of many replacements only the
    // last call is left, however their startups interleave or fail.
    if (input.replaceExistingScope && input.scopeKey !== undefined) cancelScope(input.scopeKey, "manual-cancel");
    const run = new Run(ctx, runId, input, input.background ? ctx.leases() : undefined);
    run.register();
    const prepared = await prepareLaunch(run, ctx);
    // nothing awaits from here to the running state: a stop request lands before the spawn's check or after the run runs
    const started = prepared.kind === "ready" ? launchProcess(run, prepared.launch) : prepared;
    if (started.kind !== "started") return endUnstarted(run, ctx, started);
    return enterRunning(run, ctx, started.proc, maxOutput);
  };

  const endRun = async (
    runId: string,
    reason: TerminationReason = "manual-cancel",
  ): Promise<LeaseState | undefined> => {
    const run = ctx.unsettled.get(runId);
    run?.requestStop(reason);
    if (run) await run.done;
    const leaseId = run?.lease?.leaseId ?? ctx.registry.get(runId)?.leaseId;
    const leases = ctx.leases();
    return leaseId === undefined || leases === undefined ? undefined : leases.end(leaseId);
  };

  return {
    spawn,
    cancel,
    cancelScope,
    cancelAll,
    endRun,
    shutdown(reason = "manual-cancel") {
      shutDown = true;
      shutdownReport ??= shutdownRuns(ctx, () => cancelAll(reason));
      return shutdownReport;
    },
    containment: () => ctx.containment(),
    getRecord: (runId) => ctx.registry.get(runId),
    listRecords: () => ctx.registry.list(),
    listByScope: (scopeKey) => ctx.registry.listByScope(scopeKey),
    reconcileOrphans: (ropts = {}) => reconcileRuns(ctx, opts.gatewayInstanceId, ropts),
  };
}

/** The options checked (a TypeError or RangeError naming the first bad one), and the context every run of this supervisor shares. */
function createRunContext(opts: ProcessSupervisorOptions): { ctx: RunContext; defaultMaxOutput: number } {
  const graceMs = nonNegativeOption(opts.graceMs, DEFAULT_GRACE_MS, "opts.graceMs");
  const ptyFallbackMs = nonNegativeOption(opts.ptyExitFallbackMs, PTY_EXIT_FALLBACK_MS, "opts.ptyExitFallbackMs");
  const defaultMaxOutput = maxOutputOption(opts.maxOutputChars, DEFAULT_MAX_OUTPUT_CHARS, "opts.maxOutputChars");
  if (opts.containment !== undefined && opts.containment !== "auto" && opts.containment !== "off") {
    throw new TypeError(`opts.containment must be "auto" or "off", got ${JSON.stringify(opts.containment)}`);
  }
  assertKeeperOption(opts.keeper, "opts.keeper");
  const facts = opts.facts ?? getProcessFacts();
  let leases: RunLeases | undefined;
  const getLeases = (): RunLeases | undefined => {
    if (opts.stateDir === undefined) return undefined;
    leases ??= createRunLeases({
      stateDir: opts.stateDir,
      gatewayInstanceId: opts.gatewayInstanceId,
      facts,
      signaller: opts.signaller,
      graceMs,
      ...(opts.containment !== undefined ? { containment: opts.containment } : {}),
      ...(opts.keeper !== undefined ? { keeper: opts.keeper } : {}),
    });
    return leases;
  };
  const containment = runContainment(getLeases, opts.containment, facts);
  const ctx: RunContext = {
    registry: createRunRegistry({ maxExitedRecords: opts.maxExitedRecords }),
    facts,
    graceMs,
    ptyFallbackMs,
    loadPty: opts.loadPty ?? loadNodePty,
    leases: getLeases,
    containment,
    runCgroups: createRunCgroups({
      detect: containment,
      facts,
      signaller: opts.signaller ?? createSignaller(facts),
      graceMs,
    }),
    killTree: (pid, expectedStartTime) =>
      killProcessTree(pid, { graceMs, facts, signaller: opts.signaller, expectedStartTime }),
    live: new Map(),
    unsettled: new Map(),
  };
  return { ctx, defaultMaxOutput };
}

/**
 * The containment runs get: the lease store's for a supervisor with a
 * stateDir; otherwise detected once for runs without a lease (run-cgroups.ts),
 * and a dead supervisor process's empty run folders go at that first detection.
 */
function runContainment(
  getLeases: () => RunLeases | undefined,
  mode: "auto" | "off" | undefined,
  facts: ProcessFacts,
): () => Promise<ContainmentSupport> {
  let unleased: Promise<ContainmentSupport> | undefined;
  return () => {
    const l = getLeases();
    if (l) return l.containment();
    if (!unleased) {
      unleased = detectRunContainment(mode);
      void unleased.then((s) => sweepDeadRunFolders(s, facts)).catch(() => undefined);
    }
    return unleased;
  };
}

/** A runId may be reused only once its run has settled: else an Error naming it. */
function claimRunId(ctx: RunContext, runId: string): void {
  const prior = ctx.registry.get(runId);
  if (ctx.unsettled.has(runId) || (prior && prior.state !== "exited")) {
    throw new Error(`runId ${runId} is already live`);
  }
  ctx.registry.delete(runId);
}

/** Asks every live run `pick` selects, starting ones included, to stop; returns how many were asked. */
function stopRuns(ctx: RunContext, pick: (run: Run) => boolean, reason: TerminationReason): number {
  const runs = [...ctx.live.values()].filter(pick);
  for (const run of runs) run.requestStop(reason);
  return runs.length;
}

async function shutdownRuns(ctx: RunContext, cancelAll: () => number): Promise<ShutdownReport> {
  const runs = [...ctx.unsettled.values()];
  const cancelled = cancelAll();
  const exits = await Promise.all(runs.map(async (r) => ({ runId: r.runId, exit: await r.done })));
  await ctx
    .leases()
    ?.release()
    .catch(() => undefined);
  await ctx.runCgroups.release().catch(() => undefined);
  return { cancelled, runs: exits };
}

/**
 * reconcileOrphans: runs this incarnation is still supervising (starting or
 * settling included) are not orphans, whatever their lease says; their ids
 * are known before their lease is written, so no startup can slip between.
 * A caller's predicate that throws keeps the run (fail closed).
 */
async function reconcileRuns(
  ctx: RunContext,
  instanceId: string | undefined,
  ropts: ReconcileOrphansOptions,
): Promise<ReconcileReport> {
  const store = ctx.leases();
  if (!store) return { instanceId: instanceId ?? null, runs: [] };
  const tracked = ropts.isSessionTracked;
  if (tracked !== undefined && typeof tracked !== "function") {
    throw new TypeError(`isSessionTracked must be a function, got ${typeof tracked}`);
  }
  const own = new Set<string>();
  for (const runId of ctx.unsettled.keys()) {
    const leaseId = ctx.registry.get(runId)?.leaseId;
    if (leaseId !== undefined) own.add(leaseId);
  }
  return store.reconcile(
    own,
    (ref) => {
      if (ctx.unsettled.has(ref.runId)) return true;
      if (tracked === undefined) return false;
      try {
        return tracked({ ...ref }) === true;
      } catch {
        return true;
      }
    },
    ropts.states,
    ropts.spareDurable,
  );
}
