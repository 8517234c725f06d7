/**
 * The process supervisor (OpenClaw's, rebuilt on leases; docs/supervisor.md): it owns the
 * lifecycle of every run it spawns — registry record, output capture,
 * deadlines, cancellation through the verified tree kill, and, for
 * background runs with a state directory, a lease that survives a crash.
 *
 * Cancellation (manual, deadlines): a leased run is reaped through its lease
 * (ownership's verification + reapLeaseVerification: the tree with every
 * process that carries the run's markers, setsid escapees included) and
 * settled by ownership's one rule (settlementFor); any other run, or a
 * leased one whose lease proves nothing reapable, gets the plain tree kill,
 * always bound to the root's start time read right after the spawn (a
 * reused pid is never signalled). When that start time could not be read,
 * no tree kill is sent: only the guarded signal through the unreaped child
 * handle.
 */
import { randomUUID } from "node:crypto";
import { getProcessFacts } from "../facts/get.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import { DEFAULT_GRACE_MS, reapStoppedPid } from "../ownership/index.js";
import type { AdapterExit, SpawnedProcess } from "./adapters/adapter.js";
import { spawnChild } from "./adapters/child.js";
import { loadNodePty, loadPtyModule, ptyArgv, spawnPty, untilSessionLeader, type PtyLoader, type PtyModule } from "./adapters/pty.js";
import { createRunLeases, type ReconcileReport, type RunLease, type RunLeaseReap, type RunLeases } from "./durability.js";
import { killProcessTree, type KillTreeResult } from "./kill-tree.js";
import { CappedOutput, DEFAULT_MAX_OUTPUT_CHARS, maxOutputOption } from "./output.js";
import { createRunRegistry } from "./registry.js";
import type { ManagedRun, RunExit, RunRecord, SpawnInput, SupervisorRunRef, TerminationReason } from "./types.js";
import { resolveRunNoOutputTimeoutMs } from "./watchdog.js";
import { nonNegativeOption } from "../facts/validate.js";
import type { ContainmentSupport, LeaseCgroup } from "../containment/index.js";
import { createSignaller } from "../facts/signal.js";
import { createRunCgroups, detectRunContainment, sweepDeadRunFolders } from "./run-cgroups.js";
import { containedChild, containedPty, executableFound, type ShimCommand } from "./adapters/cgroup-shim.js";
import { provablyGone } from "../facts/liveness.js";
import { delay, exitFor, positiveMs, readRootStart, validate, type RootStart } from "./run-helpers.js";

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
   * the cgroup when the lease is reaped (docs/containment.md). Runs without
   * a lease (foreground, or no stateDir) get a cgroup too (run-cgroups.ts):
   * their escapees end with the run's cancel or deadline. "off": never.
   */
  containment?: "auto" | "off";
}

export interface ReconcileOrphansOptions {
  /**
   * True keeps the run: its lease is neither verified nor reaped nor settled,
   * and it is not reported (a run the caller still tracks, e.g. one it
   * adopted after the restart). A predicate that throws keeps the run too:
   * an unknown answer never leads to a signal.
   */
  isSessionTracked?: (run: SupervisorRunRef) => boolean;
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
   * exists: a run cancelled while it awaits its lease write or the PTY loader
   * never gets a process (its spawn resolves with a run whose wait() reports
   * the cancel, and its lease settles as never started); one cancelled once
   * its process exists is killed like any other.
   */
  spawn(input: SpawnInput): Promise<ManagedRun>;
  /** Requests the tree kill of a live (or starting) run; false when the supervisor has no live record of it. */
  cancel(runId: string, reason?: TerminationReason): boolean;
  /** Cancels every live run of the scope, starting ones included; returns how many were asked to stop. */
  cancelScope(scopeKey: string, reason?: TerminationReason): number;
  /** Cancels every live run, starting ones included (default reason `manual-cancel`); returns how many were asked to stop. */
  cancelAll(reason?: TerminationReason): number;
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
   * After a restart: verifies and reaps the background runs that a previous
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

const RANK: Record<TerminationReason, number> = {
  "manual-cancel": 3,
  "overall-timeout": 2,
  "no-output-timeout": 2,
  "spawn-error": 2,
  signal: 1,
  exit: 0,
};

const stronger = (a: TerminationReason | undefined, b: TerminationReason): TerminationReason =>
  a === undefined || RANK[b] > RANK[a] ? b : a;

interface LiveRun {
  runId: string;
  scopeKey?: string;
  /** set once the process exists; absent while the run is starting */
  proc?: SpawnedProcess;
  requested?: TerminationReason;
  kill?: Promise<unknown>;
  /** what the identity-checked tree kill reported, once it ran (undefined when it threw or never ran) */
  killResult?: KillTreeResult;
  /** a leased run's cancel: its lease verified and reaped (escapees carrying its markers included) */
  leaseReap?: RunLeaseReap | null;
  /** its exit once it ended and its lease settled; null when its startup failed */
  done: Promise<RunExit | null>;
  requestKill(reason: TerminationReason): void;
}

export function createProcessSupervisor(opts: ProcessSupervisorOptions = {}): ProcessSupervisor {
  const registry = createRunRegistry({ maxExitedRecords: opts.maxExitedRecords });
  /** runs that cancel can reach: from spawn's first line until their exit is final */
  const live = new Map<string, LiveRun>();
  /** runs whose lease may not be settled yet: from spawn's first line until the last bookkeeping; reconcile never touches them */
  const unsettled = new Map<string, LiveRun>();
  let shutDown = false;
  const graceMs = nonNegativeOption(opts.graceMs, DEFAULT_GRACE_MS, "opts.graceMs");
  const ptyFallbackMs = nonNegativeOption(opts.ptyExitFallbackMs, PTY_EXIT_FALLBACK_MS, "opts.ptyExitFallbackMs");
  const defaultMaxOutput = maxOutputOption(opts.maxOutputChars, DEFAULT_MAX_OUTPUT_CHARS, "opts.maxOutputChars");
  const loadPty = opts.loadPty ?? loadNodePty;
  if (opts.containment !== undefined && opts.containment !== "auto" && opts.containment !== "off") {
    throw new TypeError(`opts.containment must be "auto" or "off", got ${JSON.stringify(opts.containment)}`);
  }
  // one facts backend for the start time read at spawn, the tree kill and the leases: the same unit everywhere
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
    });
    return leases;
  };

  // runs without a lease get a cgroup of their own too, where containment is available (run-cgroups.ts)
  let unleasedSupport: Promise<ContainmentSupport> | undefined;
  const detectForRuns = (): Promise<ContainmentSupport> => {
    const l = getLeases();
    if (l) return l.containment();
    if (!unleasedSupport) {
      unleasedSupport = detectRunContainment(opts.containment);
      // a dead supervisor process's empty run folders go at the next start
      void unleasedSupport.then((s) => sweepDeadRunFolders(s, facts)).catch(() => undefined);
    }
    return unleasedSupport;
  };
  const runCgroups = createRunCgroups({ detect: detectForRuns, facts, signaller: opts.signaller ?? createSignaller(facts), graceMs });

  // every tree kill of a run's root is bound to the start time read at spawn: a reused pid gets nothing
  const killTree = (pid: number, expectedStartTime: string): Promise<KillTreeResult> =>
    killProcessTree(pid, { graceMs, facts, signaller: opts.signaller, expectedStartTime });

  const cancel = (runId: string, reason: TerminationReason = "manual-cancel"): boolean => {
    const run = live.get(runId);
    if (!run) return false;
    run.requestKill(reason);
    return true;
  };

  const cancelScope = (scopeKey: string, reason: TerminationReason = "manual-cancel"): number => {
    let n = 0;
    for (const run of [...live.values()]) {
      if (run.scopeKey === scopeKey) {
        run.requestKill(reason);
        n++;
      }
    }
    return n;
  };

  const cancelAll = (reason: TerminationReason = "manual-cancel"): number => {
    const runs = [...live.values()];
    for (const run of runs) run.requestKill(reason);
    return runs.length;
  };

  const spawn = async (input: SpawnInput): Promise<ManagedRun> => {
    if (shutDown) throw new SupervisorShutdownError();
    validate(input);
    const maxOutput = maxOutputOption(input.maxOutputChars, defaultMaxOutput, "maxOutputChars");
    const runId = input.runId ?? randomUUID();
    const prior = registry.get(runId);
    if (unsettled.has(runId) || (prior && prior.state !== "exited")) {
      throw new Error(`runId ${runId} is already live`);
    }
    registry.delete(runId);
    // The fence: every earlier run of the scope, those still starting
    // included, is cancelled before this one is registered. Each spawn does
    // this synchronously on entry, so of many replacements only the last
    // call is left, however their startups interleave or fail.
    if (input.replaceExistingScope && input.scopeKey !== undefined) cancelScope(input.scopeKey, "manual-cancel");

    const createdAtMs = Date.now();
    registry.add({
      runId,
      sessionId: input.sessionId,
      backendId: input.backendId,
      mode: input.mode,
      scopeKey: input.scopeKey,
      state: "starting",
      createdAtMs,
      startedAtMs: createdAtMs,
      updatedAtMs: createdAtMs,
      lastOutputAtMs: createdAtMs,
    });

    let resolveDone!: (exit: RunExit | null) => void;
    // started: set once the process exists; until then a cancel is only remembered
    let killStarted: ((reason: TerminationReason) => void) | undefined;
    const run: LiveRun = {
      runId,
      scopeKey: input.scopeKey,
      done: new Promise<RunExit | null>((r) => (resolveDone = r)),
      requestKill(reason) {
        if (live.get(runId) !== run) return;
        if (killStarted) return killStarted(reason);
        // still starting: the startup checks this before every step that could create a process
        run.requested = stronger(run.requested, reason);
        registry.setState(runId, "exiting");
      },
    };
    live.set(runId, run);
    unsettled.set(runId, run);
    const leaveLive = () => {
      if (live.get(runId) === run) live.delete(runId);
    };
    const settled = (exit: RunExit | null) => {
      leaveLive();
      if (unsettled.get(runId) === run) unsettled.delete(runId);
      resolveDone(exit);
    };

    // copied only when a lease adds to it: copying process.env costs more than the spawn bookkeeping
    let env: NodeJS.ProcessEnv = input.env ?? process.env;
    const argv = input.mode === "child" ? [...input.argv] : ptyArgv(input.ptyCommand);
    const store = input.background ? getLeases() : undefined;
    let lease: RunLease | undefined;
    /** the cgroup of a run without a lease (run-cgroups.ts) */
    let own: LeaseCgroup | undefined;

    /** Ends a run that never got a process: cancelled while starting, or its startup failed. */
    const endUnstarted = async (err: unknown): Promise<ManagedRun> => {
      const reason = run.requested;
      registry.finalize(runId, { reason: reason ?? "spawn-error", exitCode: null, exitSignal: null });
      leaveLive();
      // no process ever existed: the lease record's convention for that is "lost"
      if (lease) await store!.neverStarted(lease.leaseId).catch(() => {});
      if (own) await runCgroups.settle(own).catch(() => {});
      if (reason === undefined) {
        settled(null);
        throw err;
      }
      // cancelled first: the run ends as cancelled; a startup error after the cancel is kept in stderr
      const exit = exitFor(reason, { exitCode: null, exitSignal: null }, 0, "", err === undefined ? "" : `${errorMessage(err)}\n`);
      settled(exit);
      return { runId, startedAtMs: createdAtMs, wait: () => Promise.resolve(exit), cancel: () => {} };
    };

    // The lease is written BEFORE the spawn (rootPid 0): a crash between the
    // two leaves a lease that verifies as "gone", never an untracked process.
    let ptyModule: PtyModule | undefined;
    /** how a contained run starts: the shim that enters the lease's cgroup, then execs the run */
    let shim: ShimCommand | undefined;
    try {
      if (store) {
        lease = await store.open(runId, argv);
        env = { ...env, ...lease.env };
        if (lease.cgroup !== undefined) {
          shim = shimFor(input, lease.cgroup.path, argv, env) ?? undefined;
          // not startable inside it: out of the lease before anything runs (never a claim the run is outside of)
          if (shim === undefined) await store.dropCgroup(lease.leaseId, lease.cgroup);
        }
      } else if (run.requested === undefined) {
        own = (await runCgroups.open().catch(() => null)) ?? undefined;
        if (own !== undefined) {
          shim = shimFor(input, own.path, argv, env) ?? undefined;
          if (shim === undefined) {
            await runCgroups.settle(own);
            own = undefined;
          }
        }
      }
      if (run.requested === undefined && input.mode === "pty") ptyModule = await loadPtyModule(loadPty);
    } catch (err) {
      return endUnstarted(err);
    }
    if (run.requested !== undefined) return endUnstarted(undefined);

    // From here to `killStarted` nothing awaits: a cancel cannot fall between the check above and the spawn.
    let proc: SpawnedProcess;
    try {
      // the shim starts with the lease markers only (a run without a lease: nothing); it execs the run with `env`
      proc = input.mode === "child" ? spawnChild(input, env, shim && { ...shim, env: lease?.env ?? {} }) : spawnPty(input, env, ptyModule!, shim);
    } catch (err) {
      return endUnstarted(err);
    }
    run.proc = proc;

    const startedAtMs = Date.now();
    const pid = proc.pid;
    // Read now, concurrently with the rest of the bookkeeping (a spawn must stay cheap);
    // the tree kill waits for it.
    const rootStart: Promise<RootStart> =
      pid === undefined ? Promise.resolve({ why: "the spawn produced no pid" }) : readRootStart(facts, proc, pid, input.mode);
    void rootStart.then((r) =>
      registry.noteRootIdentity(runId, r.startTime !== undefined ? { rootStartTime: r.startTime } : { rootIdentityUnavailable: r.why }),
    );
    // A root that leads its group leads the group of its own pid (the adapter's
    // contract), which is what the lease records: read from the live root it
    // could still be the gateway's, before a PTY's child has called setsid.
    const ownGroup = pid !== undefined && proc.leadsGroup ? pid : undefined;
    registry.setState(runId, "running", {
      pid,
      processGroupId: ownGroup,
      leaseId: lease?.leaseId,
    });

    const captureOutput = input.captureOutput !== false;
    const stdout = new CappedOutput(maxOutput);
    const stderr = new CappedOutput(maxOutput);

    // Record the live root's identity in the lease before spawn() returns, so a
    // crash from here on leaves a lease the next incarnation can verify; a
    // cancel meanwhile reaps only once the lease names the root.
    // A PTY run is returned (and attached) once its shell leads its own group, so what is
    // recorded and verified from here on is the run's own group, never a moment before setsid.
    const led: Promise<void> = input.mode === "pty" && pid !== undefined ? untilSessionLeader((p) => facts.inspect(p), pid) : Promise.resolve();
    const attached: Promise<void> = lease && pid !== undefined ? led.then(() => store!.attach(lease.leaseId, pid, ownGroup)).catch(() => {}) : led;

    killStarted = (reason) => {
      if (run.kill) {
        // already terminating: a stronger reason relabels it (forced > deadline)
        run.requested = stronger(run.requested, reason);
        return;
      }
      // A root that exited on its own ends as "exit"/"signal": a late cancel or
      // deadline must not relabel it.
      if (proc.exitObserved) return;
      run.requested = reason;
      registry.setState(runId, "exiting");
      clearTimers();
      const killed = pid === undefined ? Promise.resolve() : terminate(pid);
      // a run without a lease: what its cgroup still holds (a setsid escapee) ends with the cancel or deadline
      run.kill = own === undefined ? killed : killed.finally(() => runCgroups.drain(own!).catch(() => undefined));
      if (proc.mayMissExit && pid !== undefined) void run.kill.then(() => watchGone(pid));
    };

    const terminate = async (rootPid: number): Promise<void> => {
      await attached;
      let stopped = false;
      let treeReaped = false;
      if (lease) {
        // A leased run: its lease names the tree, processes that escaped the
        // parent links but carry the run's markers included (ownership's
        // verification + reapLeaseVerification). Only when the lease proves
        // nothing reapable (unknown on ps, say) does the plain tree kill run.
        const r = await store!.reap(lease.leaseId).catch(() => null);
        run.leaseReap = r;
        if (r?.report) {
          treeReaped = true;
          stopped = reapStoppedPid(r.report, rootPid);
        }
      }
      if (!treeReaped) {
        const id = await rootStart;
        if (id.startTime !== undefined) {
          const result = await killTree(rootPid, id.startTime).catch(() => undefined);
          run.killResult = result;
          stopped = result?.outcome === "reaped" && reapStoppedPid(result.report, rootPid);
        }
        // else: the root's identity was never established (recorded in the run's
        // record): no tree kill, only the guarded handle signal below
      }
      if (stopped || proc.exitObserved) return;
      // The tree kill did not stop the root (facts "none", identity unknown,
      // signal denied). The one signal not derived from facts: the root alone,
      // through our own handle, whose identity is the handle itself. The
      // adapter sends it only while the child is provably unreaped (so its pid
      // cannot have been reused) and the guard allows the pid; a PTY handle
      // cannot prove that and sends nothing. See SpawnedProcess.signalRoot.
      if (proc.signalRoot("SIGTERM") !== "signalled") return;
      const exited = await Promise.race([proc.wait().then(() => true), delay(graceMs).then(() => false)]);
      if (!exited) proc.signalRoot("SIGKILL");
    };

    // A transport that may never report the exit (node-pty): after the forced
    // kill, the run settles once its root is verified gone. Looked up again
    // every ptyFallbackMs while it is not (unknown evidence settles nothing).
    let fallbackTimer: NodeJS.Timeout | undefined;
    let resolveFallback: ((exit: AdapterExit) => void) | undefined;
    const fallbackExit = new Promise<AdapterExit>((r) => (resolveFallback = r));
    const watchGone = (rootPid: number) => {
      if (proc.exitObserved || resolveFallback === undefined) return;
      fallbackTimer = setTimeout(async () => {
        fallbackTimer = undefined;
        if (proc.exitObserved || resolveFallback === undefined) return;
        if (await rootVerifiedGone(facts, rootPid, await rootStart)) {
          resolveFallback({ exitCode: null, exitSignal: signalThatStopped(run, rootPid) });
        } else watchGone(rootPid);
      }, ptyFallbackMs);
    };

    // Deadlines. Timers are unref'd: the child handle keeps the loop alive, the timers must not.
    let overallTimer: NodeJS.Timeout | undefined;
    let quietTimer: NodeJS.Timeout | undefined;
    const clearTimers = () => {
      if (overallTimer) clearTimeout(overallTimer);
      if (quietTimer) clearTimeout(quietTimer);
      overallTimer = quietTimer = undefined;
    };
    const timeoutMs = positiveMs(input.timeoutMs);
    // the watchdog's one resolver: clamped below the overall deadline, never under its minimum
    const quietMs = resolveRunNoOutputTimeoutMs({ noOutputTimeoutMs: input.noOutputTimeoutMs, timeoutMs });
    if (timeoutMs !== undefined) {
      overallTimer = setTimeout(() => run.requestKill("overall-timeout"), timeoutMs);
      overallTimer.unref();
    }
    const armQuiet = () => {
      if (quietMs === undefined || run.kill) return;
      if (quietTimer) quietTimer.refresh();
      else {
        quietTimer = setTimeout(() => run.requestKill("no-output-timeout"), quietMs);
        quietTimer.unref();
      }
    };
    armQuiet();

    const onChunk = (sink: CappedOutput, listener: ((c: string) => void) | undefined) => (chunk: string) => {
      registry.touchOutput(runId);
      armQuiet();
      if (captureOutput) sink.append(chunk);
      if (listener) {
        try {
          listener(chunk);
        } catch {
          // a throwing listener must not take the run's bookkeeping down with it
        }
      }
    };
    proc.onStdout(onChunk(stdout, input.onStdout));
    proc.onStderr(onChunk(stderr, input.onStderr));

    const exitPromise: Promise<RunExit> = Promise.race([proc.wait(), fallbackExit]).then(async (exit) => {
      resolveFallback = undefined;
      if (fallbackTimer) clearTimeout(fallbackTimer);
      // An exit during a tree kill is only final once the kill has finished
      // with the rest of the tree.
      if (run.kill) await run.kill;
      clearTimers();
      leaveLive();
      let reason: TerminationReason;
      if (exit.spawnError) reason = "spawn-error";
      else if (run.requested !== undefined) reason = run.requested;
      else if (exit.exitSignal) reason = "signal";
      else reason = "exit";
      const fin = registry.finalize(runId, { reason, exitCode: exit.exitCode, exitSignal: exit.exitSignal });
      const final = fin?.record.terminationReason ?? reason;
      proc.dispose();
      // ended on its own: nothing is signalled; its cgroup goes once it is empty
      if (own !== undefined && run.kill === undefined) await runCgroups.settle(own).catch(() => {});
      if (lease) {
        // closed only when nothing of ours may still run: a tree kill whose reap
        // left survivors keeps the lease closing, for reconcileOrphans to retry
        // settled by ownership's one rule: the lease reap of a cancel when it cleared
        // everything, else a fresh verification (a plain tree kill only counts as prior)
        const settledLease =
          pid === undefined
            ? store!.neverStarted(lease.leaseId)
            : store!.finish(lease.leaseId, run.leaseReap ?? null, run.killResult?.outcome === "reaped" ? run.killResult.report : null);
        await settledLease.catch(() => {});
      }
      const err = exit.spawnError ? `${exit.spawnError.message}\n` : "";
      const result = exitFor(
        final,
        exit,
        Date.now() - startedAtMs,
        captureOutput ? stdout.toString() : "",
        captureOutput ? stderr.toString() + err : err,
      );
      settled(result);
      return result;
    });

    await attached;
    return {
      runId,
      pid,
      startedAtMs,
      stdin: proc.stdin,
      wait: () => exitPromise,
      cancel: (reason?: TerminationReason) => void cancel(runId, reason ?? "manual-cancel"),
    };
  };

  let shutdownReport: Promise<ShutdownReport> | undefined;

  return {
    spawn,
    cancel,
    cancelScope,
    cancelAll,
    shutdown(reason = "manual-cancel") {
      shutDown = true;
      shutdownReport ??= (async () => {
        const runs = [...unsettled.values()];
        const cancelled = cancelAll(reason);
        const exits = await Promise.all(runs.map(async (r) => ({ runId: r.runId, exit: await r.done })));
        await getLeases()?.release().catch(() => undefined);
        await runCgroups.release().catch(() => undefined);
        return { cancelled, runs: exits };
      })();
      return shutdownReport;
    },
    containment: detectForRuns,
    getRecord: (runId) => registry.get(runId),
    listRecords: () => registry.list(),
    listByScope: (scopeKey) => registry.listByScope(scopeKey),
    async reconcileOrphans(ropts: ReconcileOrphansOptions = {}) {
      const store = getLeases();
      if (!store) return { instanceId: opts.gatewayInstanceId ?? null, runs: [] };
      const tracked = ropts.isSessionTracked;
      if (tracked !== undefined && typeof tracked !== "function") {
        throw new TypeError(`isSessionTracked must be a function, got ${typeof tracked}`);
      }
      // runs this incarnation is still supervising (starting or settling
      // included) are not orphans, whatever their lease says; their ids are
      // known before their lease is written, so no startup can slip between
      const own = new Set<string>();
      for (const runId of unsettled.keys()) {
        const leaseId = registry.get(runId)?.leaseId;
        if (leaseId !== undefined) own.add(leaseId);
      }
      return store.reconcile(own, (ref) => {
        if (unsettled.has(ref.runId)) return true;
        if (tracked === undefined) return false;
        try {
          return tracked({ ...ref }) === true;
        } catch {
          // fail closed: a caller that cannot answer keeps the run
          return true;
        }
      });
    },
  };
}

/**
 * The shim that starts this run inside its lease's cgroup, or null when it
 * cannot: a child program the exec would not find (started without the shim,
 * Node then reports the spawn error as for any run) or whose name env(1)
 * would read as an assignment.
 */
function shimFor(input: SpawnInput, cgroupPath: string, argv: readonly string[], env: NodeJS.ProcessEnv): ShimCommand | null {
  if (input.mode === "pty") return containedPty(cgroupPath, argv);
  if (!executableFound(argv[0]!, env, input.cwd ?? process.cwd())) return null;
  return containedChild(cgroupPath, argv, env);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** True only when the root is provably gone (liveness.ts provablyGone) against the start time read at spawn. */
function rootVerifiedGone(facts: ProcessFacts, pid: number, start: RootStart): Promise<boolean> {
  return provablyGone(facts, { pid, startTime: start.startTime });
}

/** The signal the reaper saw stop the root (TERM or KILL), or null when its reports do not say. */
function signalThatStopped(run: LiveRun, rootPid: number): NodeJS.Signals | null {
  const results = [
    ...(run.leaseReap?.report?.results ?? []),
    ...(run.killResult?.outcome === "reaped" ? run.killResult.report.results : []),
  ].filter((r) => r.pid === rootPid);
  const last = results[results.length - 1]?.outcome;
  return last === "killed" ? "SIGKILL" : last === "exited-after-term" ? "SIGTERM" : null;
}

