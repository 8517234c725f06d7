/**
 * One supervised run, as an object with explicit states. Each concern of a
 * run is a module of its own beside this one: start.ts (spawn's first line
 * to the process), unstarted.ts (a run that never got one), running.ts (the
 * process to spawn's return), deadlines.ts, terminate.ts,
 * pty-exit-fallback.ts and finish.ts.
 *
 * States, and the only moves between them:
 *
 *     starting ──► running ──► terminating ──► finishing ──► settled
 *        │            │                              ▲
 *        │            └──────────────────────────────┤  the root exited on its own
 *        └───────────────────────────────────────────┘  no process was made (unstarted.ts)
 *
 * - starting: registered (record "starting"), no process yet. A stop request
 *   is remembered and shows on the record at once (state "exiting", its
 *   reason); the startup checks it before every step that could create a
 *   process.
 * - running: the process exists. A stop request starts the termination,
 *   unless the root's exit was already observed (the run then ends as
 *   "exit" or "signal": a late cancel or deadline never relabels it).
 * - terminating: the kill runs (terminate.ts); a stronger request relabels
 *   it (result.ts stronger), a weaker one changes nothing.
 * - finishing: the exit is known; no stop request reaches the run any more
 *   while its record, cgroup and lease are settled.
 * - settled: `done` has resolved (the exit, or null when the startup failed).
 */
import type { LeaseCgroup } from "../../containment/index.js";
import type { ContainmentSupport } from "../../containment/index.js";
import type { ProcessFacts } from "../../facts/types.js";
import type { PtyLoader } from "../adapters/pty.js";
import type { RunRegistry } from "./registry.js";
import type { RunCgroups } from "../hold/run-cgroups.js";
import type { AdapterExit, SpawnedProcess } from "../adapters/adapter.js";
import type { RunLease, RunLeaseKill, RunLeases } from "../hold/durability.js";
import type { KillTreeResult } from "../shared/kill-tree.js";
import type { RunExit, SpawnInput, TerminationReason } from "../shared/types.js";
import type { Deadlines } from "./deadlines.js";
import { stronger } from "./result.js";
import type { RootStart } from "./root-start.js";
import { terminate } from "./terminate.js";

/** What every run of one supervisor shares. */
export interface RunContext {
  readonly registry: RunRegistry;
  /** one facts backend for the start-time read, the tree kill and the leases: the same unit everywhere */
  readonly facts: ProcessFacts;
  /** TERM → KILL grace of every kill */
  readonly graceMs: number;
  /** how often the PTY exit fallback looks the root up (pty-exit-fallback.ts) */
  readonly ptyFallbackMs: number;
  readonly loadPty: PtyLoader;
  /** the lease store of background runs (made on first use); undefined without a stateDir */
  leases(): RunLeases | undefined;
  /** the containment runs get, leased or not, detected once */
  containment(): Promise<ContainmentSupport>;
  /** the cgroups of runs without a lease */
  readonly runCgroups: RunCgroups;
  /** the identity-checked tree kill, bound to the root's start time read at spawn: a reused pid gets nothing */
  killTree(pid: number, expectedStartTime: string): Promise<KillTreeResult>;
  /** runs a stop request can reach: from spawn's first line until their exit is final */
  readonly live: Map<string, Run>;
  /** runs whose lease may not be settled yet: from spawn's first line until the last bookkeeping; reconcile never touches them */
  readonly unsettled: Map<string, Run>;
}

/** The PTY exit fallback of a run (pty-exit-fallback.ts makes it). */
export interface ExitFallback {
  /** the exit the fallback settles on, once the root is verified gone */
  readonly exit: Promise<AdapterExit>;
  /** the forced kill has finished: start looking */
  watch(): void;
  /** the exit is known: stop looking */
  stop(): void;
}

export type RunPhase = "starting" | "running" | "terminating" | "finishing" | "settled";

export class Run {
  phase: RunPhase = "starting";
  /** the stop asked for (the strongest, when several were) */
  requested: TerminationReason | undefined;
  readonly createdAtMs = Date.now();
  /** the run's lease, once written (a background run of a supervisor with a stateDir) */
  lease: RunLease | undefined;
  /** the cgroup of a run without a lease (run-cgroups.ts) */
  ownCgroup: LeaseCgroup | undefined;

  /** set when the process exists (started) */
  proc: SpawnedProcess | undefined;
  startedAtMs = this.createdAtMs;
  /** the root's start time, read right after the spawn (root-start.ts); every tree kill waits for it */
  rootStart: Promise<RootStart> = Promise.resolve({ why: "the run has no process" });
  /** resolves once the lease names the live root, or at once without a lease; every kill waits for it */
  attached: Promise<void> = Promise.resolve();
  deadlines: Deadlines | undefined;
  /** set for a transport that may never report the exit (SpawnedProcess.mayMissExit) */
  exitFallback: ExitFallback | undefined;

  /** the termination, once it started */
  kill: Promise<void> | undefined;
  /** what the identity-checked tree kill reported, once it ran (undefined when it threw or never ran) */
  killResult: KillTreeResult | undefined;
  /** a leased run's kill through its lease: verified, then killed (escapees carrying its markers included) */
  leaseKill: RunLeaseKill | null | undefined;

  /** its exit once it ended and its lease settled; null when its startup failed */
  readonly done: Promise<RunExit | null>;
  private resolveDone!: (exit: RunExit | null) => void;

  constructor(
    private readonly ctx: RunContext,
    readonly runId: string,
    readonly input: SpawnInput,
    /** the lease store when the run gets a lease */
    readonly store: RunLeases | undefined,
  ) {
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  get scopeKey(): string | undefined {
    return this.input.scopeKey;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Record "starting", live and unsettled: from here on cancel, cancelScope, cancelAll and reconcile see it. */
  register(): void {
    const { input } = this;
    this.ctx.registry.add({
      runId: this.runId,
      sessionId: input.sessionId,
      backendId: input.backendId,
      mode: input.mode,
      scopeKey: input.scopeKey,
      state: "starting",
      createdAtMs: this.createdAtMs,
      startedAtMs: this.createdAtMs,
      updatedAtMs: this.createdAtMs,
      lastOutputAtMs: this.createdAtMs,
    });
    this.ctx.live.set(this.runId, this);
    this.ctx.unsettled.set(this.runId, this);
  }

  /** starting → running: the process exists. */
  started(proc: SpawnedProcess): void {
    this.proc = proc;
    this.startedAtMs = Date.now();
    this.phase = "running";
  }

  /** Asks the run to stop (cancel, scope replacement, deadline); what it does depends on the state (see above). */
  requestStop(reason: TerminationReason): void {
    if (this.ctx.live.get(this.runId) !== this) return;
    switch (this.phase) {
      case "starting":
      case "terminating":
        return this.noteStop(reason);
      case "running":
        return this.beginTermination(reason);
      case "finishing":
      case "settled":
        return;
    }
  }

  /** running|starting → finishing: the exit is known (or the run never started); no stop request reaches it any more. */
  beginFinishing(): void {
    this.phase = "finishing";
    if (this.ctx.live.get(this.runId) === this) this.ctx.live.delete(this.runId);
  }

  /** → settled: the last bookkeeping is done; `done` resolves. */
  settle(exit: RunExit | null): void {
    this.beginFinishing();
    this.phase = "settled";
    if (this.ctx.unsettled.get(this.runId) === this) this.ctx.unsettled.delete(this.runId);
    this.resolveDone(exit);
  }

  /** The record says at once that the run is exiting, and why. */
  private noteStop(reason: TerminationReason): void {
    this.requested = stronger(this.requested, reason);
    this.ctx.registry.setState(this.runId, "exiting", { terminationReason: this.requested });
  }

  private beginTermination(reason: TerminationReason): void {
    const proc = this.proc;
    if (proc === undefined || proc.exitObserved) return;
    this.phase = "terminating";
    this.noteStop(reason);
    this.deadlines?.clear();
    const kill = terminate(this, this.ctx, proc);
    this.kill = kill;
    const fallback = this.exitFallback;
    if (fallback !== undefined) void kill.then(() => fallback.watch());
  }
}
