/**
 * The process supervisor (seed `process-supervisor-plan.es.md`): it owns the
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
import type { SpawnedProcess } from "./adapters/adapter.js";
import { spawnChild } from "./adapters/child.js";
import { loadNodePty, ptyArgv, spawnPty, type PtyLoader } from "./adapters/pty.js";
import { createRunLeases, type ReconcileReport, type RunLease, type RunLeaseReap, type RunLeases } from "./durability.js";
import { killProcessTree, type KillTreeResult } from "./kill-tree.js";
import { CappedOutput, DEFAULT_MAX_OUTPUT_CHARS } from "./output.js";
import { createRunRegistry } from "./registry.js";
import type { ManagedRun, RunExit, RunRecord, SpawnInput, TerminationReason } from "./types.js";
import { resolveRunNoOutputTimeoutMs } from "./watchdog.js";
import { nonNegativeOption } from "../facts/validate.js";

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
  /** captured characters kept per stream (the tail); default 1 000 000 */
  maxOutputChars?: number;
  /** how node-pty is loaded; tests and embedders may substitute it */
  loadPty?: PtyLoader;
}

export interface ProcessSupervisor {
  spawn(input: SpawnInput): Promise<ManagedRun>;
  /** Requests the tree kill of a live run; false when the supervisor has no live record of it. */
  cancel(runId: string, reason?: TerminationReason): boolean;
  /** Cancels every live run of the scope; returns how many were asked to stop. */
  cancelScope(scopeKey: string, reason?: TerminationReason): number;
  getRecord(runId: string): RunRecord | undefined;
  listRecords(): RunRecord[];
  /**
   * After a restart: verifies and reaps the background runs that a previous
   * incarnation of THIS gateway instance left behind (this supervisor's own
   * live runs are skipped; run one supervisor per state directory) (from their leases, never
   * from a scan of command lines), settles their leases, and reports.
   * Without a `stateDir` there is nothing durable: an empty report.
   */
  reconcileOrphans(): Promise<ReconcileReport>;
}

const RANK: Record<TerminationReason, number> = {
  "manual-cancel": 3,
  "overall-timeout": 2,
  "no-output-timeout": 2,
  "spawn-error": 2,
  signal: 1,
  exit: 0,
};

interface LiveRun {
  runId: string;
  scopeKey?: string;
  pid?: number;
  requested?: TerminationReason;
  kill?: Promise<unknown>;
  /** what the identity-checked tree kill reported, once it ran (undefined when it threw or never ran) */
  killResult?: KillTreeResult;
  /** a leased run's cancel: its lease verified and reaped (escapees carrying its markers included) */
  leaseReap?: RunLeaseReap | null;
  requestKill(reason: TerminationReason): void;
}

export function createProcessSupervisor(opts: ProcessSupervisorOptions = {}): ProcessSupervisor {
  const registry = createRunRegistry({ maxExitedRecords: opts.maxExitedRecords });
  const live = new Map<string, LiveRun>();
  const graceMs = nonNegativeOption(opts.graceMs, DEFAULT_GRACE_MS, "opts.graceMs");
  const maxOutput = opts.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
  const loadPty = opts.loadPty ?? loadNodePty;
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
    });
    return leases;
  };

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

  const spawn = async (input: SpawnInput): Promise<ManagedRun> => {
    validate(input);
    const runId = input.runId ?? randomUUID();
    if (registry.get(runId) && registry.get(runId)!.state !== "exited") {
      throw new Error(`runId ${runId} is already live`);
    }
    registry.delete(runId);
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

    // copied only when a lease adds to it: copying process.env costs more than the spawn bookkeeping
    let env: NodeJS.ProcessEnv = input.env ?? process.env;
    const argv = input.mode === "child" ? [...input.argv] : ptyArgv(input.ptyCommand);
    // The lease is written BEFORE the spawn (rootPid 0): a crash between the
    // two leaves a lease that verifies as "gone", never an untracked process.
    const store = input.background ? getLeases() : undefined;
    let lease: RunLease | undefined;
    try {
      if (store) {
        lease = await store.open(runId, argv);
        env = { ...env, ...lease.env };
      }
    } catch (err) {
      registry.finalize(runId, { reason: "spawn-error", exitCode: null, exitSignal: null });
      throw err;
    }

    let proc: SpawnedProcess;
    try {
      proc = input.mode === "child" ? spawnChild(input, env) : await spawnPty(input, env, loadPty);
    } catch (err) {
      registry.finalize(runId, { reason: "spawn-error", exitCode: null, exitSignal: null });
      // no process ever existed: the lease record's convention for a failed spawn is "lost"
      if (lease) await store!.neverStarted(lease.leaseId).catch(() => {});
      throw err;
    }

    const startedAtMs = Date.now();
    const pid = proc.pid;
    // Read now, concurrently with the rest of the bookkeeping (a spawn must stay cheap);
    // the tree kill waits for it.
    const rootStart: Promise<RootStart> =
      pid === undefined ? Promise.resolve({ why: "the spawn produced no pid" }) : readRootStart(facts, proc, pid, input.mode);
    void rootStart.then((r) =>
      registry.noteRootIdentity(runId, r.startTime !== undefined ? { rootStartTime: r.startTime } : { rootIdentityUnavailable: r.why }),
    );
    registry.setState(runId, "running", {
      pid,
      processGroupId: pid !== undefined && proc.leadsGroup ? pid : undefined,
      leaseId: lease?.leaseId,
    });

    const captureOutput = input.captureOutput !== false;
    const stdout = new CappedOutput(maxOutput);
    const stderr = new CappedOutput(maxOutput);

    const run: LiveRun = {
      runId,
      scopeKey: input.scopeKey,
      pid,
      requestKill(reason) {
        if (!live.has(runId)) return;
        if (run.kill) {
          // already terminating: a stronger reason relabels it (forced > deadline)
          if (RANK[reason] > RANK[run.requested!]) run.requested = reason;
          return;
        }
        // A root that exited on its own ends as "exit"/"signal": a late cancel or
        // deadline must not relabel it.
        if (proc.exitObserved) return;
        run.requested = reason;
        registry.setState(runId, "exiting");
        clearTimers();
        run.kill = pid === undefined ? Promise.resolve() : terminate(pid);
      },
    };
    live.set(runId, run);

    const terminate = async (rootPid: number): Promise<void> => {
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

    // Record the live root's identity in the lease before spawn() returns, so a
    // crash from here on leaves a lease the next incarnation can verify.
    if (lease && pid !== undefined) {
      await store!.attach(lease.leaseId, pid).catch(() => {});
    }

    const exitPromise: Promise<RunExit> = proc.wait().then(async (exit) => {
      // An exit during a tree kill is only final once the kill has finished
      // with the rest of the tree.
      if (run.kill) await run.kill;
      clearTimers();
      live.delete(runId);
      let reason: TerminationReason;
      if (exit.spawnError) reason = "spawn-error";
      else if (run.requested !== undefined) reason = run.requested;
      else if (exit.exitSignal) reason = "signal";
      else reason = "exit";
      const fin = registry.finalize(runId, { reason, exitCode: exit.exitCode, exitSignal: exit.exitSignal });
      const final = fin?.record.terminationReason ?? reason;
      proc.dispose();
      if (lease) {
        // closed only when nothing of ours may still run: a tree kill whose reap
        // left survivors keeps the lease closing, for reconcileOrphans to retry
        // settled by ownership's one rule: the lease reap of a cancel when it cleared
        // everything, else a fresh verification (a plain tree kill only counts as prior)
        const settled =
          pid === undefined
            ? store!.neverStarted(lease.leaseId)
            : store!.finish(lease.leaseId, run.leaseReap ?? null, run.killResult?.outcome === "reaped" ? run.killResult.report : null);
        await settled.catch(() => {});
      }
      const err = exit.spawnError ? `${exit.spawnError.message}\n` : "";
      return {
        reason: final,
        exitCode: exit.exitCode,
        exitSignal: exit.exitSignal,
        durationMs: Date.now() - startedAtMs,
        stdout: captureOutput ? stdout.toString() : "",
        stderr: captureOutput ? stderr.toString() + err : err,
        timedOut: final === "overall-timeout",
        noOutputTimedOut: final === "no-output-timeout",
      };
    });

    return {
      runId,
      pid,
      startedAtMs,
      stdin: proc.stdin,
      wait: () => exitPromise,
      cancel: (reason?: TerminationReason) => void cancel(runId, reason ?? "manual-cancel"),
    };
  };

  return {
    spawn,
    cancel,
    cancelScope,
    getRecord: (runId) => registry.get(runId),
    listRecords: () => registry.list(),
    async reconcileOrphans() {
      const store = getLeases();
      if (!store) return { instanceId: opts.gatewayInstanceId ?? null, runs: [] };
      // runs this incarnation is still supervising are not orphans, whatever their lease says
      const own = new Set<string>();
      for (const runId of live.keys()) {
        const leaseId = registry.get(runId)?.leaseId;
        if (leaseId !== undefined) own.add(leaseId);
      }
      return store.reconcile(own);
    },
  };
}

type RootStart = { startTime: string; why?: undefined } | { startTime?: undefined; why: string };

/**
 * The root's start time, read right after the spawn, kept only when the
 * process read provably was this run's child:
 * - child: Node had reported no exit once the read finished. libuv reaps a
 *   child and reports its exit in one callback, so the child was unreaped for
 *   the whole read and its pid could not name another process.
 * - PTY: node-pty reaps on its own thread, so the handle proves nothing; the
 *   process read must name this process as its parent (node-pty forks it
 *   from here) and not be a zombie. A pid reused within the read would have
 *   to be another child of ours, forked after our PTY child was reaped.
 * Anything else (backend "none", the read failed, it exited first) is
 * reported with why, and no tree kill is ever bound to a guess.
 */
async function readRootStart(facts: ProcessFacts, proc: SpawnedProcess, pid: number, mode: SpawnInput["mode"]): Promise<RootStart> {
  if (facts.identityStrength === "none") return { why: `the facts backend "${facts.backend}" cannot read start times` };
  let d;
  try {
    d = await facts.inspect(pid);
  } catch (err) {
    return { why: `pid ${pid} could not be inspected: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (d === null || d.state === "Z") return { why: `pid ${pid} had exited before its start time could be read` };
  if (mode === "child" && proc.exitObserved) return { why: `pid ${pid} exited while its start time was read, so the read proves nothing` };
  if (mode === "pty" && d.ppid !== process.pid) return { why: `pid ${pid} is not this process's child any more, so its start time is not the PTY's` };
  if (!/^\d+$/.test(String(d.startTime))) return { why: `pid ${pid} has no readable start time` };
  return { startTime: String(d.startTime) };
}

function validate(input: SpawnInput): void {
  if (input === null || typeof input !== "object") throw new TypeError("spawn input must be an object");
  if (typeof input.sessionId !== "string") throw new TypeError("sessionId must be a string");
  if (typeof input.backendId !== "string") throw new TypeError("backendId must be a string");
  if (input.mode === "child") {
    if (!Array.isArray(input.argv) || input.argv.length === 0) throw new TypeError("argv must be a non-empty array");
    input.argv.forEach((a: unknown, i) => {
      if (typeof a !== "string") throw new TypeError(`argv[${i}] must be a string`);
    });
    if (input.argv[0] === "") throw new TypeError("argv[0] must be a non-empty program name");
    if (input.stdinMode !== undefined && !["inherit", "pipe-open", "pipe-closed"].includes(input.stdinMode)) {
      throw new TypeError(`stdinMode must be inherit, pipe-open or pipe-closed, got ${String(input.stdinMode)}`);
    }
  } else if (input.mode === "pty") {
    if (typeof input.ptyCommand !== "string" || input.ptyCommand.trim() === "") {
      throw new TypeError("ptyCommand must be a non-empty command string (PTY runs never rebuild one from argv)");
    }
  } else {
    throw new TypeError(`mode must be "child" or "pty", got ${JSON.stringify((input as { mode?: unknown }).mode)}`);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

function positiveMs(v: number | undefined): number | undefined {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) return undefined;
  return Math.max(1, Math.floor(v));
}
