/**
 * The ACPX lifecycle controller: the class and its dispatch. It owns the
 * leases and the cleanup policy; the wrapper only applies local tree cleanup
 * when the lifeline breaks, and decides nothing. The work lives beside it:
 * controller-open.ts (its options checked, its state dir opened),
 * ensure-input.ts (ensure's input parsed), session-reuse.ts (a running
 * session reused or the key's earlier one settled), spawn-session.ts
 * (ensure: spawn + handshake), close-session.ts (close),
 * live-sessions.ts (which sessions it serves), and every lease moves through
 * src/ownership/lifecycle/lifecycle.ts.
 *
 * Three intents, kept apart on purpose:
 * - cancelTurn: ACP `session/cancel`, never a signal; the session stays.
 * - closeSession: verify the live tree against the lease NOW, kill what
 *   verified, settle the lease (lifecycle.ts settleLease).
 * - reapStartupOrphans: this instance's open/closing ACPX leases (never
 *   command strings, never the process supervisor's runs), verified against
 *   one snapshot, killed, settled (lifecycle.ts reconcileLeases), then
 *   retention.
 *
 * Handles are exact: a handle whose lease is not the key's current one (a
 * session closed and started again) never reaches the current session, for
 * prompt, cancelTurn and closeSession alike. One controller per state dir:
 * it holds the state dir's lock (state-lock.ts) until dispose(); from
 * dispose() or shutdown() on, every call is refused (controller-guard.ts).
 *
 * The conversation rides on top (docs/conversation.md): streamed turns
 * (turn-stream.ts), updates outside turns (session-updates.ts), permissions,
 * client fs and terminals, resume and session controls, each in its own
 * file; none of them moves a lease.
 */
import { KeyedQueue, verifyOwnedTree as verifyTree, worthAWorker, type StateDirLock } from "../../ownership/index.js";
import type { ProcessLease, OwnedProcessTree } from "../../ownership/leases/types.js";
import { closeLocked, closeTarget } from "../sessions/close-session.js";
import { DEFAULT_CANCEL_GRACE_MS } from "../connection/acp-client.js";
import { assertPromptOptions, sessionEndedError } from "../connection/prompt-turn.js";
import { AcpxControllerDisposedError, AcpxSessionBusyError, AcpxSessionClosedError } from "../report/errors.js";
import { ControllerEnd, guardAfterDispose, settleOnDispose, type EndedAs } from "./controller-guard.js";
import { ControllerHooks } from "./controller-hooks.js";
import { rawAdapterOf, type RawAdapter, type RawAdapterInput } from "../sessions/raw-adapter.js";
import { AcpxRawSessionError } from "../sessions/raw-session-error.js";
import { mismatchError, reuseOrOpen } from "../sessions/session-reuse.js";
import { assertHandle, controlTargetOf } from "../sessions/live-sessions.js";
import type { ControlTarget } from "../connection/session-controls.js";
import { setConfigOption, setMode } from "../connection/session-controls.js";
import { listSessionSummaries, statusOf } from "../sessions/session-status.js";
import type { SessionUpdateListener } from "../connection/session-updates.js";
import {
  runTurn,
  cancelAndWait,
  type CancelReport,
  type TurnInput,
  type TurnStream,
} from "../connection/turn-stream.js";
import type { SessionConfigOption } from "@agentclientprotocol/sdk";
import { removeInstanceFolder, type ContainmentSupport } from "../../containment/index.js";
import { controllerKeeper, type ControllerKeeper } from "../keeper/controller-keeper.js";
import { LiveSessions, markSessionClosing, type ControllerDeps, type LiveSession } from "../sessions/live-sessions.js";
import { reconcileOwnLeases, reconcileTerminals } from "./controller-reconcile.js";
import { parseEnsureInput, parseRawAdapterInput, type EnsureInput } from "../sessions/ensure-input.js";
import { spawnSession } from "../sessions/spawn-session.js";
import { adoptWaiting } from "../sessions/adopt.js";
import { forgetAttach } from "../durable/waiting.js";
import type { AcpxSessionRecord } from "../sessions/session-store.js";
import { disposalError } from "../sessions/ensure-attempt.js";
import type { AcpRuntimeEnsureInput, AcpRuntimeHandle } from "../connection/types.js";
import type { AcpxLifecycleControllerOptions } from "../sessions/types.js";
import type { AcpxLifecycleController } from "./types.js";
import type { PromptOptions } from "../connection/types.js";
import type { CloseReport, SessionStatus, SessionSummary } from "../sessions/types.js";
import type { CloseSessionInput, ReapReport } from "./types.js";
import { openControllerDeps } from "./controller-open.js";

export async function createAcpxLifecycleController(
  opts: AcpxLifecycleControllerOptions,
): Promise<AcpxLifecycleController> {
  const { deps, lock, maintenanceIntervalMs } = await openControllerDeps(opts);
  const ctl = new Controller(deps, lock, opts);
  if (maintenanceIntervalMs > 0) ctl.startMaintenance(maintenanceIntervalMs);
  return ctl.guarded;
}

class Controller implements AcpxLifecycleController {
  readonly gatewayInstanceId: string;
  /** what callers hold: this controller behind the disposal guard */
  readonly guarded: AcpxLifecycleController;
  private readonly live: LiveSessions;
  private readonly queue = new KeyedQueue();
  private timer: NodeJS.Timeout | undefined;
  private maintaining: Promise<void> | undefined;
  private readonly end = new ControllerEnd();
  /** the release of the state dir, once dispose() or shutdown() began it */
  private ending: Promise<void> | undefined;
  private readonly hooks: ControllerHooks;
  private readonly keeper: ControllerKeeper; // ends this gateway's leases if it dies without dispose
  /** last maintenance failure, kept for diagnostics (the timer must never throw) */
  lastMaintenanceError: unknown;

  constructor(
    private readonly d: ControllerDeps,
    private readonly lock: StateDirLock,
    opts: Pick<AcpxLifecycleControllerOptions, "onSessionEnd" | "onLeaseSettled" | "keeper">,
  ) {
    this.gatewayInstanceId = d.gatewayInstanceId;
    this.live = new LiveSessions(d.graceMs);
    this.hooks = new ControllerHooks(opts, d.leases, d.conversation.log);
    this.keeper = controllerKeeper(opts.keeper, d);
    this.guarded = guardAfterDispose(this, this.end);
  }

  // ---------------------------------------------------------------- ensure

  /** parse (ensure-input.ts), reuse or open (session-reuse.ts), spawn (spawn-session.ts), watch */
  async ensureSession(given: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    const input = parseEnsureInput(given);
    return this.queue.run(input.sessionKey, async () => {
      // queued behind a call the controller's end let finish: it starts nothing
      if (this.end.signal.aborted) throw disposalError(this.end.signal);
      const next = await reuseOrOpen(
        this.d,
        this.live,
        input,
        (reason) => this.closeAndReport(input.sessionKey, reason, false),
        this.d.durable !== undefined ? (record) => this.adopt(input, record) : undefined,
      );
      if ("reused" in next) return next.reused;
      return (await this.spawn(next.open, false)).handle;
    });
  }

  /**
   * A durable session an earlier gateway left waiting, re-adopted
   * (durable/adopt.ts), kept and watched as a spawned one; undefined (and
   * why, logged) when it cannot be: the ensure then closes and resumes it.
   */
  private async adopt(input: EnsureInput, record: AcpxSessionRecord): Promise<AcpRuntimeHandle | undefined> {
    const r = await adoptWaiting(this.d, this.live, input, record);
    if (r.kind === "not-adopted") return undefined;
    // the handle comes back with the session's terminals already its own (sessionStatus lists them)
    await r.live.conv.terminals?.whenReady();
    this.keeper.keep();
    this.watchEnd(r.live);
    if (r.turn === undefined) return r.handle;
    const turn = this.guardTurn(r.live, r.turn);
    return { ...r.handle, turn: { ...turn, replayed: r.turn.replayed, gap: r.turn.gap } };
  }

  /**
   * A leased adapter whose ACP the caller speaks itself (raw-adapter.ts).
   * The key must have no running session; an earlier record is settled first.
   */
  async spawnRawAdapter(given: RawAdapterInput): Promise<RawAdapter> {
    const input = parseRawAdapterInput(given);
    return this.queue.run(input.sessionKey, async () => {
      if (this.end.signal.aborted) throw disposalError(this.end.signal);
      const existing = this.live.get(input.sessionKey);
      if (existing && !existing.closing && existing.launched.exitStatus() === undefined) {
        throw mismatchError(existing.handle, ["a running session (close it first)"]);
      }
      if (existing || (await this.d.sessions.get(input.sessionKey)))
        await this.closeAndReport(input.sessionKey, "superseded by spawnRawAdapter", false);
      const { handle, live } = await this.spawn(input, true);
      const lease = (await this.d.leases.get(handle.leaseId))!;
      return rawAdapterOf(
        handle,
        lease,
        live!.launched,
        this.guarded,
        async () => (await this.d.leases.get(handle.leaseId)) ?? lease,
      );
    });
  }

  /** spawnSession, then the session kept (the keeper) and watched; a failure is reported to the hooks. */
  private async spawn(
    input: EnsureInput,
    raw: boolean,
  ): Promise<{ handle: AcpRuntimeHandle; live: LiveSession | undefined }> {
    const handle = await spawnSession(this.d, this.live, input, this.end.signal, raw).catch((err: unknown) => {
      this.hooks.ensureFailed(err);
      throw err;
    });
    this.keeper.keep();
    const live = this.live.forHandle(handle);
    if (live) this.watchEnd(live);
    return { handle, live };
  }

  /** onSessionEnd for a session whose processes end while it is not being closed. */
  private watchEnd(live: LiveSession): void {
    live.launched.onEnd((end) => {
      if (live.closing) return;
      const duringTurn = live.turn !== undefined;
      void live.conv.end("the session's processes ended");
      this.hooks.sessionEnded(live.handle, { kind: "adapter-died", duringTurn, end });
    });
  }

  // ---------------------------------------------------------------- turns

  async prompt(handle: AcpRuntimeHandle, text: string, options?: PromptOptions): Promise<{ stopReason: string }> {
    if (typeof text !== "string") throw new TypeError("text must be a string");
    const turn = this.beginTurn(handle, text, options, false);
    const r = await turn.result;
    return { stopReason: r.stopReason };
  }

  startTurn(handle: AcpRuntimeHandle, input: TurnInput, options?: PromptOptions): TurnStream {
    return this.beginTurn(handle, input, options, true);
  }

  private beginTurn(
    handle: AcpRuntimeHandle,
    input: TurnInput,
    options: PromptOptions | undefined,
    stream: boolean,
  ): TurnStream {
    assertHandle(handle);
    assertPromptOptions(options);
    const live = this.live.require(handle);
    if (live.closing) throw new AcpxSessionClosedError(handle.sessionKey, live.closeReason);
    // a session whose wrapper or adapter is gone says how, whatever turn it had
    const ended = sessionEndedError(handle.sessionKey, live.launched);
    if (ended) throw ended;
    if (live.turn) throw new AcpxSessionBusyError(handle.sessionKey);
    if (live.client === undefined) throw new AcpxRawSessionError(handle.sessionKey);
    const turn = runTurn(
      {
        sessionKey: handle.sessionKey,
        acpSessionId: live.handle.acpSessionId,
        client: live.client,
        launched: live.launched,
        conv: live.conv,
        setTurn: (r) => {
          live.turn = r;
        },
      },
      input,
      options,
      stream,
      this.d.conversation.stderrInMessages,
    );
    return this.guardTurn(live, turn);
  }

  /** A turn as callers see it: a close racing it fails it with the close error, the controller's end with its own. */
  private guardTurn(live: LiveSession, turn: TurnStream): TurnStream {
    const key = live.handle.sessionKey;
    // a close racing the turn fails it with the close error, also when the agent ended it for the close (session/close)
    const result = turn.result.then(
      (r) => {
        if (live.closing) throw new AcpxSessionClosedError(key, live.closeReason);
        return r;
      },
      (err: unknown) => {
        if (live.closing) throw new AcpxSessionClosedError(key, live.closeReason);
        throw err;
      },
    );
    result.catch(() => undefined);
    return settleOnDispose({ ...turn, result }, this.end);
  }

  onUpdate(handle: AcpRuntimeHandle, listener: SessionUpdateListener): () => void {
    assertHandle(handle);
    if (typeof listener !== "function") throw new TypeError("listener must be a function");
    const live = this.live.require(handle);
    if (live.client === undefined) throw new AcpxRawSessionError(handle.sessionKey);
    return live.conv.router.subscribe(listener);
  }

  async cancelTurn(handle: AcpRuntimeHandle): Promise<CancelReport> {
    assertHandle(handle);
    const live = this.live.forHandle(handle);
    // nothing live (or a stale handle): there is no turn to cancel, and cancel never escalates
    if (!live || live.closing || live.turn === undefined || live.client === undefined)
      return { cancelSent: false, turnEnded: true };
    live.conv.permissions.cancelAll("the turn was cancelled");
    return cancelAndWait(
      live.client,
      live.handle.acpSessionId,
      live.turn as Promise<{ stopReason: string }>,
      DEFAULT_CANCEL_GRACE_MS,
    );
  }

  // ---------------------------------------------------------------- controls and status

  async setMode(handle: AcpRuntimeHandle, modeId: string): Promise<void> {
    await setMode(this.controlTarget(handle), modeId);
  }

  async setConfigOption(
    handle: AcpRuntimeHandle,
    key: string,
    value: string | boolean,
  ): Promise<SessionConfigOption[]> {
    return setConfigOption(this.controlTarget(handle), key, value);
  }

  private controlTarget(handle: AcpRuntimeHandle): ControlTarget {
    assertHandle(handle);
    return controlTargetOf(this.live.require(handle), this.d.handshakeTimeoutMs);
  }

  async sessionStatus(handle: AcpRuntimeHandle): Promise<SessionStatus> {
    assertHandle(handle);
    return statusOf(this.d, this.live.require(handle));
  }

  listSessions(): Promise<SessionSummary[]> {
    return listSessionSummaries(this.d, this.live);
  }

  // ---------------------------------------------------------------- close

  async closeSession(input: CloseSessionInput): Promise<CloseReport> {
    const { key, expected } = closeTarget(input);
    // Mark the live session closing right away (not after the queue): a
    // prompt racing this close must fail with the close error, and no new
    // prompt may start. A stale handle marks nothing.
    markSessionClosing(
      expected === undefined ? this.live.get(key) : this.live.forHandle({ sessionKey: key, leaseId: expected }),
      input.reason,
    );
    return this.queue.run(key, () =>
      this.closeAndReport(key, input.reason, input.discardPersistentState === true, expected),
    );
  }

  /** closeLocked, then the hooks: onSessionEnd for a live session, onLeaseSettled for a settled lease. */
  private async closeAndReport(
    key: string,
    reason: string | undefined,
    discard: boolean,
    expected?: string,
  ): Promise<CloseReport> {
    const live = this.live.get(key);
    const report = await closeLocked(this.d, this.live, key, reason, discard, expected);
    if (report.outcome === "noop") return report;
    if (live && (expected === undefined || live.handle.leaseId === expected))
      this.hooks.sessionEnded(live.handle, { kind: "closed", report });
    if (report.leaseId !== undefined && (report.leaseState === "closed" || report.leaseState === "lost")) {
      await forgetAttach(this.d.stateDir, report.leaseId);
      await this.hooks.leaseSettled(report.leaseId, { via: "close", state: report.leaseState, detail: report.detail });
    }
    return report;
  }

  // ---------------------------------------------------------------- startup / maintenance

  async reapStartupOrphans(opts?: { dryRun?: boolean; skipAttached?: boolean }): Promise<ReapReport> {
    const mode = this.d.startupReconcile;
    const onWorker = mode === "worker" || (mode === "auto" && (await worthAWorker(this.d.leases)));
    const report = await reconcileOwnLeases(
      this.d,
      this.live,
      this.hooks,
      ["open", "closing"],
      opts?.dryRun === true,
      opts?.skipAttached === true,
      onWorker,
    );
    if (opts?.dryRun !== true) await reconcileTerminals(this.d, this.live, this.hooks);
    return report;
  }

  startMaintenance(intervalMs: number): void {
    this.timer = setInterval(() => {
      // a reconcile on a worker thread holds leases this one must not write meanwhile
      if (this.maintaining || this.live.lending !== undefined || this.end.endedAs !== undefined) return;
      // terminals' leases are retried as the controller's own are, whatever that pass did
      const failed = (err: unknown) => {
        this.lastMaintenanceError = err;
      };
      this.maintaining = reconcileOwnLeases(this.d, this.live, this.hooks, ["closing"], false)
        .then(() => undefined, failed)
        .then(() => reconcileTerminals(this.d, this.live, this.hooks, ["closing"]))
        .catch(failed)
        .finally(() => {
          this.maintaining = undefined;
        });
    }, intervalMs);
    // a gateway must be able to exit with the timer armed
    this.timer.unref();
  }

  // ---------------------------------------------------------------- misc

  /** Whether each lease gets its own cgroup here, and why not (docs/containment.md). */
  get containment(): ContainmentSupport {
    return this.d.containment;
  }

  verifyOwnedTree(lease: ProcessLease): Promise<OwnedProcessTree | null> {
    // a lease of another gateway instance is never ours, whatever the live facts say
    return verifyTree(lease, this.d.facts, { gatewayInstanceId: this.d.gatewayInstanceId });
  }

  async listLeases(): Promise<ProcessLease[]> {
    return (await this.d.leases.list()).leases;
  }

  /**
   * Closes every live session (each verified and killed through the
   * lifecycle, its terminals ended, session/close sent where advertised),
   * then disposes. From its call on, every other call is refused; a second
   * shutdown() too (the guard), while dispose() waits for this one.
   */
  shutdown(): Promise<CloseReport[]> {
    this.ended("shut down");
    const reports = this.closeAllThenRelease();
    this.ending = reports.then(
      () => undefined,
      () => undefined,
    );
    return reports;
  }

  private async closeAllThenRelease(): Promise<CloseReport[]> {
    try {
      // the ensures under way were aborted (each ends its processes and settles its lease); closes under way finish
      await this.end.writesSettled();
      const keys = this.live.all().map((l) => l.handle.sessionKey);
      // every close settles before the lock goes, also when one of them fails
      const closed = await Promise.allSettled(
        keys.map((key) => this.closeSession({ handle: { sessionKey: key }, reason: "controller shutdown" })),
      );
      // terminals whose lease an earlier close left closing end now, not at the next start
      await reconcileTerminals(this.d, this.live, this.hooks, ["closing"]).catch((err: unknown) =>
        this.d.conversation.log.error?.(`shutdown: terminals left closing: ${String(err)}`),
      );
      await this.d.conversation.supervisor?.shutdown();
      return closed.map((c) => {
        if (c.status === "rejected") throw c.reason;
        return c.value;
      });
    } finally {
      await this.release();
    }
  }

  /**
   * Stops the timer and the keeper and gives the state dir back (its lock):
   * a new controller may start on it. From its call on, every other method
   * is refused (AcpxControllerDisposedError) and running turns reject with
   * that error; an ensure under way is aborted (its processes ended, its
   * lease settled, the ensure rejected with that error), and the other
   * calls that write leases finish before the lock is released. Live sessions are not closed and their
   * leases stay open (the next controller's startup reap settles them, or
   * ensureSession resumes them); their wrappers end their trees when this
   * process exits (the lifeline). Idempotent: a later call (also during or
   * after shutdown()) resolves when the first release is done.
   */
  dispose(): Promise<void> {
    if (this.ending === undefined) {
      this.ended("disposed");
      this.ending = this.release();
    }
    return this.ending;
  }

  /** The durable sessions let go, the others closed as shutdown() does, then dispose()'s release (types.ts says the rest). */
  detach(): Promise<void> {
    this.ended("detached");
    this.ending = this.detachThenRelease();
    return this.ending;
  }

  private async detachThenRelease(): Promise<void> {
    try {
      await this.end.writesSettled();
      await this.live.flushDurableWrites();
      const others = this.live.letGoDurable(new AcpxControllerDisposedError("detached"));
      await Promise.allSettled(
        others.map((key) => this.closeSession({ handle: { sessionKey: key }, reason: "controller detach" })),
      );
    } finally {
      await this.release();
    }
  }

  /** Synchronous, so the guard refuses the very next call and the ensures under way are aborted at once. */
  private ended(how: EndedAs): void {
    this.end.finish(how);
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async release(): Promise<void> {
    this.end.failRunningTurns();
    await this.maintaining;
    await this.end.writesSettled();
    await this.keeper.release(); // before the lock goes: it must not act on a gateway that is only letting go
    this.live.unrefAll();
    // the instance's cgroup folder goes when no lease cgroup is left in it (live sessions keep theirs)
    if (this.d.containment.available) await removeInstanceFolder(this.d.containment, this.d.gatewayInstanceId);
    await this.lock.release();
  }
}
