/**
 * The ACPX lifecycle controller: the class and its dispatch. It owns the
 * leases and the cleanup policy; the wrapper only applies local tree cleanup
 * when the lifeline breaks, and decides nothing. The work lives beside it:
 * spawn-session.ts (ensure: spawn + handshake), close-session.ts (close),
 * live-sessions.ts (which sessions it serves), and every lease moves through
 * src/ownership/lifecycle.ts.
 *
 * Three intents, kept apart on purpose:
 * - cancelTurn: ACP `session/cancel`, never a signal; the session stays.
 * - closeSession: verify the live tree against the lease NOW, reap what
 *   verified, settle the lease (lifecycle.ts settleLease).
 * - reapStartupOrphans: this instance's open/closing ACPX leases (never
 *   command strings, never the process supervisor's runs), verified against
 *   one snapshot, reaped, settled (lifecycle.ts reconcileLeases), then
 *   retention.
 *
 * Handles are exact: a handle whose lease is not the key's current one (a
 * session closed and started again) never reaches the current session, for
 * prompt, cancelTurn and closeSession alike. One controller per state dir:
 * it holds the state dir's lock (state-lock.ts) until dispose().
 */
import { resolve } from "node:path";
import { getProcessFacts } from "../facts/get.js";
import { createSignaller } from "../facts/signal.js";
import { nonNegativeOption, positiveOption } from "../facts/validate.js";
import {
  acquireStateDirLock,
  DEFAULT_GRACE_MS,
  DEFAULT_RETENTION_MS,
  KeyedQueue,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  reconcileLeases,
  verifyOwnedTree as verifyTree,
  type LeaseOutcome,
  type StateDirLock,
} from "../ownership/index.js";
import type { AcpxProcessLease, OwnedProcessTree } from "../ownership/types.js";
import { closeLocked, summarize } from "./close-session.js";
import { assertPromptOptions, sessionEndedError, startTurn } from "./acp-client.js";
import { AcpxSessionClosedError } from "./errors.js";
import { installWrapper } from "./install-wrapper.js";
import { detectContainment, removeOwnerFolder, type ContainmentSupport } from "../containment/index.js";
import { recordContainmentRoot } from "../ownership/containment-record.js";
import { lifecycleDeps, LiveSessions, markClosing, type ControllerDeps } from "./live-sessions.js";
import { openSessionStore } from "./session-store.js";
import { spawnSession, validateEnsureInput } from "./spawn-session.js";
import { assertContainmentOption, assertRunningLimits, configureLimitControllers, detectOptionsFor } from "./session-limits.js";
import type {
  AcpRuntimeEnsureInput,
  AcpRuntimeHandle,
  AcpxLifecycleController,
  AcpxLifecycleControllerOptions,
  CloseReport,
  PromptOptions,
  ReapReport,
  ReapReportEntry,
} from "./types.js";
import { assertGraceMs } from "./wrapper/protocol.js";

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;
const DEFAULT_START_TIMEOUT_MS = 10_000;
const DEFAULT_MAINTENANCE_MS = 60_000;

export async function createAcpxLifecycleController(opts: AcpxLifecycleControllerOptions): Promise<AcpxLifecycleController> {
  if (typeof opts !== "object" || opts === null) throw new TypeError("opts must be an object");
  if (typeof opts.stateDir !== "string" || opts.stateDir.length === 0) {
    throw new TypeError("opts.stateDir must be a non-empty string");
  }
  const graceMs = opts.graceMs ?? DEFAULT_GRACE_MS;
  assertGraceMs(graceMs, "opts.graceMs");
  const retentionMs = nonNegativeOption(opts.retentionMs, DEFAULT_RETENTION_MS, "opts.retentionMs");
  const handshakeTimeoutMs = positiveOption(opts.handshakeTimeoutMs, DEFAULT_HANDSHAKE_TIMEOUT_MS, "opts.handshakeTimeoutMs");
  const startTimeoutMs = positiveOption(opts.startTimeoutMs, DEFAULT_START_TIMEOUT_MS, "opts.startTimeoutMs");
  const maintenanceIntervalMs = nonNegativeOption(opts.maintenanceIntervalMs, DEFAULT_MAINTENANCE_MS, "opts.maintenanceIntervalMs");
  assertContainmentOption(opts.containment, "opts.containment");

  const stateDir = resolve(opts.stateDir);
  const facts = opts.facts ?? getProcessFacts();
  const signaller = opts.signaller ?? createSignaller(facts);
  // one gateway per state dir, before anything is read or written (state-lock.ts)
  const lock = await acquireStateDirLock(stateDir, facts);
  let deps: ControllerDeps;
  try {
    const gatewayInstanceId = await loadOrCreateGatewayInstanceId(stateDir);
    const leases = await openLeaseStore(stateDir);
    const sessions = await openSessionStore(stateDir);
    const wrapper = await installWrapper(stateDir);
    const containment: ContainmentSupport =
      opts.containment === "off"
        ? { available: false, code: "refused", why: "turned off (containment: \"off\")" }
        : // controllers (and a gateway move) only when asked for: session-limits.ts
          await detectContainment(detectOptionsFor(opts.containment));
    // the CLI finds this state dir's lease cgroups (and orphans among them) from this record
    if (containment.available) await recordContainmentRoot(stateDir, containment.root);
    deps = {
    containment,
    stateDir,
    facts,
    signaller,
    gatewayInstanceId,
    leases,
    sessions,
    wrapper,
    graceMs,
    retentionMs,
    handshakeTimeoutMs,
    startTimeoutMs,
    nodePath: opts.nodePath ?? process.execPath,
    onEnsureTiming: opts.onEnsureTiming,
    };
  } catch (e) {
    await lock.release();
    throw e;
  }
  configureLimitControllers(deps, opts.containment);
  const ctl = new Controller(deps, lock);
  if (maintenanceIntervalMs > 0) ctl.startMaintenance(maintenanceIntervalMs);
  return ctl;
}

class Controller implements AcpxLifecycleController {
  readonly gatewayInstanceId: string;
  private readonly live: LiveSessions;
  private readonly queue = new KeyedQueue();
  private timer: NodeJS.Timeout | undefined;
  private maintaining: Promise<void> | undefined;
  private disposed = false;
  /** last maintenance failure, kept for diagnostics (the timer must never throw) */
  lastMaintenanceError: unknown;

  constructor(
    private readonly d: ControllerDeps,
    private readonly lock: StateDirLock,
  ) {
    this.gatewayInstanceId = d.gatewayInstanceId;
    this.live = new LiveSessions(d.graceMs);
  }

  // ---------------------------------------------------------------- ensure

  async ensureSession(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    validateEnsureInput(input);
    this.assertUsable();
    return this.queue.run(input.sessionKey, () => this.ensureLocked(input));
  }

  private async ensureLocked(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    const existing = this.live.get(input.sessionKey);
    if (existing && !existing.closing && existing.launched.exitStatus() === undefined) {
      assertRunningLimits(existing.handle, input);
      return existing.handle;
    }
    // A record from an earlier run (or a session whose adapter died) is
    // settled first, through the same verified close path.
    if (existing || (await this.d.sessions.get(input.sessionKey))) {
      const prior = await closeLocked(this.d, this.live, input.sessionKey, "superseded by ensureSession", false);
      if (prior.outcome === "left-alone" || prior.outcome === "retry-pending") {
        throw new Error(
          `ensureSession ${JSON.stringify(input.sessionKey)}: the previous session could not be settled (${prior.detail}); refusing to start a second one`,
        );
      }
    }
    return spawnSession(this.d, this.live, input, () => this.disposed);
  }

  // ---------------------------------------------------------------- turns

  async prompt(handle: AcpRuntimeHandle, text: string, options?: PromptOptions): Promise<{ stopReason: string }> {
    assertHandle(handle);
    if (typeof text !== "string") throw new TypeError("text must be a string");
    assertPromptOptions(options);
    const live = this.live.require(handle);
    if (live.closing) throw new AcpxSessionClosedError(handle.sessionKey, live.closeReason);
    // a session whose wrapper or adapter is gone says how, whatever turn it had
    const ended = sessionEndedError(handle.sessionKey, live.launched);
    if (ended) throw ended;
    if (live.turn) {
      throw new Error(
        `ACP session ${JSON.stringify(handle.sessionKey)} already has a prompt running (a timed-out or aborted turn counts until the agent ends it); cancel it or wait`,
      );
    }
    // timeout / abort → session/cancel, bounded grace, typed rejection; errors carry ACP data and stderr (acp-client.ts)
    const turn = startTurn(live.client, {
      sessionKey: handle.sessionKey,
      acpSessionId: live.handle.acpSessionId,
      text,
      launched: live.launched,
      ...(options !== undefined ? { options } : {}),
    });
    const request = turn.request;
    if (request !== null) {
      // the turn holds the session until the agent ends it, even after the caller stopped waiting
      live.turn = request;
      const free = (): void => {
        if (live.turn === request) live.turn = undefined;
      };
      request.then(free, free);
    }
    try {
      return await turn.result;
    } catch (err) {
      if (live.closing) throw new AcpxSessionClosedError(handle.sessionKey, live.closeReason);
      throw err;
    }
  }

  async cancelTurn(handle: AcpRuntimeHandle): Promise<void> {
    assertHandle(handle);
    const live = this.live.forHandle(handle);
    // nothing live (or a stale handle): there is no turn to cancel, and cancel never escalates
    if (!live || live.closing) return;
    await live.client.cancel(live.handle.acpSessionId);
  }

  // ---------------------------------------------------------------- close

  async closeSession(input: {
    handle: AcpRuntimeHandle | { sessionKey: string };
    discardPersistentState?: boolean;
    reason?: string;
  }): Promise<CloseReport> {
    if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
    const h = input.handle as { sessionKey?: unknown; leaseId?: unknown } | null | undefined;
    if (typeof h !== "object" || h === null || typeof h.sessionKey !== "string" || h.sessionKey.length === 0) {
      throw new TypeError("input.handle.sessionKey must be a non-empty string");
    }
    if (h.leaseId !== undefined && typeof h.leaseId !== "string") throw new TypeError("input.handle.leaseId must be a string when given");
    const key = h.sessionKey;
    const expected = typeof h.leaseId === "string" ? h.leaseId : undefined;
    // Mark the live session closing right away (not after the queue): a
    // prompt racing this close must fail with the close error, and no new
    // prompt may start. A stale handle marks nothing.
    markClosing(expected === undefined ? this.live.get(key) : this.live.forHandle({ sessionKey: key, leaseId: expected }), input.reason);
    return this.queue.run(key, () => closeLocked(this.d, this.live, key, input.reason, input.discardPersistentState === true, expected));
  }

  // ---------------------------------------------------------------- startup / maintenance

  reapStartupOrphans(opts?: { dryRun?: boolean; skipAttached?: boolean }): Promise<ReapReport> {
    this.assertUsable();
    return this.reapLeases(["open", "closing"], opts?.dryRun === true, opts?.skipAttached === true);
  }

  private async reapLeases(states: readonly ("open" | "closing")[], dryRun: boolean, skipAttached = false): Promise<ReapReport> {
    const r = await reconcileLeases(lifecycleDeps(this.d), {
      // the process supervisor's runs share the store and the instance id; they are its to settle
      kind: "acpx",
      states,
      dryRun,
      skipAttached,
      skip: (l) => this.live.busy(l),
      retentionMs: this.d.retentionMs,
      onSettled: (o) => this.live.afterSettled(o.leaseId, o.stateAfter),
    });
    return { ...r, entries: r.entries.map(toEntry) };
  }

  startMaintenance(intervalMs: number): void {
    this.timer = setInterval(() => {
      if (this.maintaining) return;
      this.maintaining = this.reapLeases(["closing"], false)
        .then(
          () => undefined,
          (err: unknown) => {
            this.lastMaintenanceError = err;
          },
        )
        .finally(() => {
          this.maintaining = undefined;
        });
    }, intervalMs);
    // a gateway must be able to exit with the timer armed
    this.timer.unref();
  }

  // ---------------------------------------------------------------- misc

  /** Whether each lease gets its own cgroup here, and why not (README "Containment"). */
  get containment(): ContainmentSupport {
    return this.d.containment;
  }

  verifyOwnedTree(lease: AcpxProcessLease): Promise<OwnedProcessTree | null> {
    // a lease of another gateway instance is never ours, whatever the live facts say
    return verifyTree(lease, this.d.facts, { gatewayInstanceId: this.d.gatewayInstanceId });
  }

  async listLeases(): Promise<AcpxProcessLease[]> {
    return (await this.d.leases.list()).leases;
  }

  /**
   * Stops the timer and gives the state dir back (its lock): a new
   * controller may start on it. Sessions keep running; only their hold on
   * our event loop is released. If this process then exits, the lifelines
   * close and the wrappers clean up.
   */
  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.maintaining;
    this.live.unrefAll();
    // the instance's cgroup folder goes when no lease cgroup is left in it (live sessions keep theirs)
    if (this.d.containment.available) await removeOwnerFolder(this.d.containment, this.d.gatewayInstanceId);
    await this.lock.release();
  }

  private assertUsable(): void {
    if (this.disposed) throw new Error("this controller was disposed (its state dir lock is released); create a new one");
  }
}

/** The controller's report rows: the lifecycle's outcome, with the reap summarised. */
function toEntry(o: LeaseOutcome): ReapReportEntry {
  const { verification: _v, reap, ...rest } = o;
  return { ...rest, ...(reap ? { reap: summarize(reap) } : {}) };
}

function assertHandle(handle: AcpRuntimeHandle): void {
  if (typeof handle !== "object" || handle === null || typeof handle.sessionKey !== "string" || typeof handle.leaseId !== "string") {
    throw new TypeError("handle must be an AcpRuntimeHandle from ensureSession");
  }
}
