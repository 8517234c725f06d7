/**
 * The ACPX lifecycle controller (CONTRACT §3, seed "Controller del ciclo di
 * vita"). It owns the leases and the cleanup policy; the wrapper only applies
 * local tree cleanup when the lifeline breaks, and decides nothing.
 *
 * Three intents, kept apart on purpose:
 * - cancelTurn: ACP `session/cancel`, never a signal; the session stays.
 * - closeSession: load record and lease, verify the live tree against the
 *   lease NOW, reap what verified, settle the lease.
 * - reapStartupOrphans: start from this instance's open/closing ACPX leases
 *   (never from command strings, never the process supervisor's runs), verify
 *   them all against one snapshot, reap, settle, then apply retention.
 *
 * Every signal goes through the ownership reaper (per pid, identity
 * re-checked); unknown evidence never leads to a signal. The one exception is
 * our own wrapper child after a failed ensure, SIGKILLed through the guard
 * only while it is unreaped (its pid cannot have been reused). Every lease
 * is settled by ownership's one rule (settlementFor, settle.ts): closed only
 * when a verified reap completed, lost only when nothing of it can be alive
 * or its root pid names another process, back to open only when the process
 * list was unavailable, closing (retried) otherwise. For a session this
 * controller spawned itself, closing our end of the lifeline is the one extra
 * lever: it is our own pipe, not a signal, and it makes the wrapper clean up
 * its own tree.
 */
import { mkdir } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { resolve } from "node:path";
import { getProcessFacts } from "../facts/get.js";
import { createSignaller } from "../facts/signal.js";
import type { ProcessFacts, ProcessSignaller, ProcessSnapshot } from "../facts/types.js";
import {
  checkSignalTarget,
  computeCommandHash,
  DEFAULT_GRACE_MS,
  explainLease,
  isSupervisorLease,
  loadOrCreateGatewayInstanceId,
  openLeaseStore,
  applySettlement,
  NOTHING_STARTED,
  reapLeaseVerification,
  reapOwnedTree,
  recordRootIdentity,
  settlementAfterReap,
  settlementFor,
  survivorsOf,
  verifyLeases,
  verifyLegacyRecord,
  verifyOwnedTree as verifyTree,
  type LeaseStore,
  type LeaseReapResult,
  type LeaseVerification,
  type OwnedTreeReapReport,
  type Settlement,
  type SettlementTarget,
} from "../ownership/index.js";
import type { AcpxProcessLease, OwnedProcessTree, OwnershipEvidence } from "../ownership/types.js";
import { buildSessionOwner } from "../sessions/index.js";
import { AcpClient, AcpTimeoutError } from "./acp-client.js";
import { AcpxEnsureError, AcpxNoSessionError, AcpxSessionClosedError, type EnsureFailureCause } from "./errors.js";
import { installWrapper, type InstalledWrapper } from "./install-wrapper.js";
import { KeyedQueue } from "./key-queue.js";
import { launchWrapper, rootArgvFor, type LaunchedWrapper } from "./launch.js";
import { openSessionStore, type AcpxSessionRecord, type LegacyAcpxSessionRecord, type SessionStore } from "./session-store.js";
import type {
  AcpRuntimeEnsureInput,
  AcpRuntimeHandle,
  AcpxLifecycleController,
  AcpxLifecycleControllerOptions,
  CloseReport,
  ReapReport,
  ReapReportEntry,
  TreeReapSummary,
} from "./types.js";
import { assertGraceMs } from "./wrapper/protocol.js";
import { nonNegativeOption, positiveOption } from "../facts/validate.js";

const DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;
const DEFAULT_START_TIMEOUT_MS = 10_000;
const DEFAULT_MAINTENANCE_MS = 60_000;

interface LiveSession {
  handle: AcpRuntimeHandle;
  launched: LaunchedWrapper;
  client: AcpClient;
  /** the running prompt, if any (one turn at a time per session) */
  turn: Promise<{ stopReason: string }> | undefined;
  closing: boolean;
  closeReason: string | undefined;
  /**
   * A close ran and left the lease open or closing while the wrapper still
   * ran: the session is over (its ACP connection closed), only the handle
   * is kept; the lease is retried by the maintenance timer, the startup
   * reap, or the next close.
   */
  closeSettling?: boolean;
}

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

  const stateDir = resolve(opts.stateDir);
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const facts = opts.facts ?? getProcessFacts();
  const signaller = opts.signaller ?? createSignaller(facts);
  const gatewayInstanceId = await loadOrCreateGatewayInstanceId(stateDir);
  const leases = await openLeaseStore(stateDir);
  const sessions = await openSessionStore(stateDir);
  const wrapper = await installWrapper(stateDir);

  const ctl = new Controller({
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
  });
  if (maintenanceIntervalMs > 0) ctl.startMaintenance(maintenanceIntervalMs);
  return ctl;
}

/** What the reaper was handed for one lease, summarized for the reports. */
interface VerifiedReap {
  target: NonNullable<LeaseReapResult["target"]>;
  reap: TreeReapSummary;
  /** the reaper's own report (every reap of the lease, the follow-up on the re-verification included) */
  report: OwnedTreeReapReport;
  /** the whole result, for settlementAfterReap: the lease is settled on its LAST verification */
  result: LeaseReapResult;
}

/** How a close reports each settlement target (CloseReport.outcome). */
const CLOSE_OUTCOME: Readonly<Record<SettlementTarget, CloseReport["outcome"]>> = Object.freeze({
  closed: "closed",
  lost: "lost",
  closing: "retry-pending",
  open: "left-alone",
  unchanged: "left-alone",
});

interface ControllerDeps {
  stateDir: string;
  facts: ProcessFacts;
  signaller: ProcessSignaller;
  gatewayInstanceId: string;
  leases: LeaseStore;
  sessions: SessionStore;
  wrapper: InstalledWrapper;
  graceMs: number;
  retentionMs: number;
  handshakeTimeoutMs: number;
  startTimeoutMs: number;
  nodePath: string;
  onEnsureTiming: AcpxLifecycleControllerOptions["onEnsureTiming"];
}

class Controller implements AcpxLifecycleController {
  readonly gatewayInstanceId: string;
  private readonly live = new Map<string, LiveSession>();
  /** lease ids an ensure or close of this controller is working on right now */
  private readonly inFlight = new Set<string>();
  private readonly queue = new KeyedQueue();
  private timer: NodeJS.Timeout | undefined;
  private maintaining: Promise<void> | undefined;
  private disposed = false;
  /** last maintenance failure, kept for diagnostics (the timer must never throw) */
  lastMaintenanceError: unknown;

  constructor(private readonly d: ControllerDeps) {
    this.gatewayInstanceId = d.gatewayInstanceId;
  }

  // ---------------------------------------------------------------- ensure

  async ensureSession(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    validateEnsureInput(input);
    return this.queue.run(input.sessionKey, () => this.ensureLocked(input));
  }

  private async ensureLocked(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    const existing = this.live.get(input.sessionKey);
    if (existing && !existing.closing && existing.launched.exitStatus() === undefined) return existing.handle;
    // A record from an earlier run (or a session whose adapter died) is
    // settled first, through the same verified close path.
    if (existing || (await this.d.sessions.get(input.sessionKey))) {
      const prior = await this.closeLocked(input.sessionKey, "superseded by ensureSession", false);
      if (prior.outcome === "left-alone" || prior.outcome === "retry-pending") {
        throw new Error(
          `ensureSession ${JSON.stringify(input.sessionKey)}: the previous session could not be settled (${prior.detail}); refusing to start a second one`,
        );
      }
    }
    return this.spawnSession(input);
  }

  private async spawnSession(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle> {
    const d = this.d;
    const tStart = performance.now();
    const rootArgv = rootArgvFor(d.nodePath, d.wrapper.wrapperPath, input.command, d.graceMs);
    let lease = await d.leases.create({
      gatewayInstanceId: d.gatewayInstanceId,
      sessionKey: input.sessionKey,
      wrapperRoot: d.wrapper.wrapperRoot,
      wrapperPath: d.wrapper.wrapperPath,
      commandHash: computeCommandHash(rootArgv),
    });
    this.inFlight.add(lease.leaseId);
    const tLease = performance.now();
    let launched: LaunchedWrapper | undefined;
    let client: AcpClient | undefined;
    const fail = async (failure: EnsureFailureCause, message: string, cause?: unknown): Promise<never> => {
      client?.close(new Error(`ensureSession failed: ${failure}`));
      const settled = await this.settleFailedSpawn(lease, launched);
      this.inFlight.delete(lease.leaseId);
      throw new AcpxEnsureError(
        input.sessionKey,
        failure,
        `ensureSession ${JSON.stringify(input.sessionKey)} failed: ${message} (lease ${lease.leaseId} ${settled})`,
        lease.leaseId,
        settled,
        cause === undefined ? undefined : { cause },
      );
    };

    try {
      launched = launchWrapper({
        nodePath: d.nodePath,
        wrapperPath: d.wrapper.wrapperPath,
        command: input.command,
        graceMs: d.graceMs,
        leaseId: lease.leaseId,
        gatewayInstanceId: d.gatewayInstanceId,
        cwd: input.cwd,
        env: input.env,
      });
    } catch (err) {
      return fail("wrapper-failed", `the wrapper could not be spawned: ${errMessage(err)}`, err);
    }

    const start = await launched.waitStart(d.startTimeoutMs);
    const tStarted = performance.now();
    if (start.kind === "spawn-error") {
      return fail(
        "spawn-error",
        `the adapter ${JSON.stringify(input.command[0])} could not be started: ${start.report.code} ${start.report.message}`,
      );
    }
    if (start.kind === "error") return fail("wrapper-failed", `the wrapper could not be spawned: ${start.error.message}`, start.error);
    if (start.kind === "exited") {
      return fail("wrapper-failed", `the wrapper exited before reporting (${describeExit(start.exit)})${stderrNote(launched)}`);
    }
    if (start.kind === "timeout") return fail("wrapper-failed", `the wrapper sent no "started" report within ${start.ms} ms`);

    // Identity of the live root; the group is the adapter group the wrapper reported.
    const rootPid = start.report.wrapperPid;
    const recorded = await recordRootIdentity(d.leases, lease.leaseId, { rootPid, processGroupId: start.report.pgid }, d.facts);
    lease = recorded.lease;
    if (recorded.identity === "gone") return fail("adapter-exited", `the wrapper (pid ${rootPid}) was gone right after it started${stderrNote(launched)}`);
    if (recorded.identity === "unknown") return fail("adapter-exited", `the wrapper's identity could not be recorded: ${recorded.detail}${stderrNote(launched)}`);

    const tRecorded = performance.now();
    client = new AcpClient({ input: launched.stdout, output: launched.stdin });
    let step = "initialize";
    let acpSessionId: string;
    try {
      await client.initialize(d.handshakeTimeoutMs);
      step = "session/new";
      acpSessionId = await client.newSession(input.cwd ?? process.cwd(), d.handshakeTimeoutMs);
    } catch (err) {
      if (err instanceof AcpTimeoutError) {
        return fail("handshake-timeout", `the adapter never answered ACP ${err.method} (timeout ${err.timeoutMs} ms)`, err);
      }
      // the connection closing usually means the adapter died: say how
      const exitedNow = await launched.waitExit(500);
      const exitReport = launched.exitReport();
      if (exitedNow || exitReport) {
        const how = exitReport
          ? exitReport.signal
            ? `signal ${exitReport.signal}`
            : `exit code ${exitReport.code}`
          : describeExit(launched.exitStatus()!);
        return fail("adapter-exited", `the adapter exited during ACP ${step} (${how})${stderrNote(launched)}`, err);
      }
      return fail("handshake-error", `ACP ${step} failed: ${errMessage(err)}`, err);
    }

    const tHandshake = performance.now();
    const owner = buildSessionOwner({
      sessionKey: input.sessionKey,
      agentId: input.agentId,
      gatewayInstanceId: d.gatewayInstanceId,
      ...(input.spawnedBy !== undefined ? { spawnedBy: input.spawnedBy } : {}),
      ...(input.parentSessionKey !== undefined ? { parentSessionKey: input.parentSessionKey } : {}),
      ...(input.ownerSessionKey !== undefined ? { ownerSessionKey: input.ownerSessionKey } : {}),
    });
    const now = Date.now();
    const record: AcpxSessionRecord = {
      sessionKey: input.sessionKey,
      leaseId: lease.leaseId,
      acpSessionId,
      owner,
      command: [...input.command],
      ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
      createdAt: now,
      updatedAt: now,
    };
    try {
      await d.sessions.put(record);
    } catch (err) {
      return fail("wrapper-failed", `the session record could not be written: ${errMessage(err)}`, err);
    }
    const handle: AcpRuntimeHandle = {
      sessionKey: input.sessionKey,
      leaseId: lease.leaseId,
      rootPid,
      processGroupId: start.report.pgid,
      acpSessionId,
      owner,
    };
    const live: LiveSession = { handle, launched, client, turn: undefined, closing: false, closeReason: undefined };
    this.live.set(input.sessionKey, live);
    this.inFlight.delete(lease.leaseId);
    if (this.disposed) launched.unref();
    d.onEnsureTiming?.({
      sessionKey: input.sessionKey,
      leaseMs: tLease - tStart,
      wrapperSpawnMs: tStarted - tLease,
      recordRootMs: tRecorded - tStarted,
      handshakeMs: tHandshake - tRecorded,
      totalMs: performance.now() - tStart,
    });
    return handle;
  }

  /**
   * Cleanup after a failed ensure: verify and reap whatever the lease owns,
   * break the lifeline (the wrapper then cleans its own tree), wait for our
   * child, verify again (its remnants are reaped too), and settle the lease
   * by ownership's one rule (settlementFor) applied to that LAST
   * verification, the first pass's reap counting only as a prior one: a
   * first reap that completed never closes the lease when the last look
   * could not prove nothing is left. Returns the lease state afterwards.
   * A wrapper that never reported its pid is still our child: its pid
   * (without an identity, see recordChildPid) lets the second look search
   * for what carries the lease's markers; no pid at all = nothing started.
   */
  private async settleFailedSpawn(lease: AcpxProcessLease, launched: LaunchedWrapper | undefined): Promise<string> {
    const d = this.d;
    let current = (await d.leases.get(lease.leaseId)) ?? lease;
    if (current.state === "closed" || current.state === "lost") return current.state;
    if (current.state === "open") current = await d.leases.transition(current.leaseId, "closing");
    if (current.rootPid <= 0 && launched?.pid !== undefined) current = await this.recordChildPid(current, launched.pid);
    let prior: OwnedTreeReapReport | null = null;
    let last: { v: LeaseVerification | null; r: VerifiedReap | null } | null = null;
    const pass = async () => {
      if (current.rootPid <= 0) return;
      const v = await explainLease(current, d.facts, { gatewayInstanceId: d.gatewayInstanceId }).catch(() => null);
      const r = v ? await this.reapVerified(v) : null;
      if (last?.r) prior = last.r.report;
      last = { v, r };
    };
    await pass();
    if (launched) {
      launched.endLifeline();
      launched.stdin.destroy();
      if (!(await launched.waitExit(d.graceMs + 2000))) {
        killUnreapedChild(launched);
        await launched.waitExit(2000);
      }
    }
    // The wrapper exits with its adapter; a grandchild in its own session can
    // outlive both. Verified again now the root is gone: its remnants are reaped too.
    await pass();
    const final = last as { v: LeaseVerification | null; r: VerifiedReap | null } | null;
    const s: Settlement =
      current.rootPid <= 0
        ? NOTHING_STARTED
        : final?.r
          ? settlementAfterReap(final.r.result, { prior })
          : final?.v
            ? settlementFor(final.v, null, { prior })
            : { to: "closing", why: "the verification itself failed; retried later" };
    const after = await applySettlement(d.leases, current.leaseId, s);
    return after?.state ?? current.state;
  }

  /**
   * Records the pid of our own wrapper child in a lease that has none (it
   * never reported): the pid only, never an identity read now (the child
   * may have exited and been reaped, so the pid may name another process).
   * Verification then needs the lease id in the root's environment plus one
   * more positive check to call a live pid ours, and a gone pid starts the
   * remnant search (dated against the lease's startedAt).
   */
  private async recordChildPid(lease: AcpxProcessLease, pid: number): Promise<AcpxProcessLease> {
    if (!checkSignalTarget(pid).allowed) return lease;
    return this.d.leases.update(lease.leaseId, { rootPid: pid }).catch(() => lease);
  }

  // ---------------------------------------------------------------- turns

  async prompt(handle: AcpRuntimeHandle, text: string): Promise<{ stopReason: string }> {
    assertHandle(handle);
    if (typeof text !== "string") throw new TypeError("text must be a string");
    const live = this.liveFor(handle);
    if (live.closing) throw new AcpxSessionClosedError(handle.sessionKey, live.closeReason);
    if (live.turn) throw new Error(`ACP session ${JSON.stringify(handle.sessionKey)} already has a prompt running; cancel it or wait`);
    const turn = live.client.prompt(live.handle.acpSessionId, text);
    live.turn = turn;
    try {
      return await turn;
    } catch (err) {
      if (live.closing) throw new AcpxSessionClosedError(handle.sessionKey, live.closeReason);
      const exit = live.launched.exitReport();
      const status = live.launched.exitStatus();
      if (exit || status) {
        const how = exit ? (exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`) : describeExit(status!);
        throw new Error(`the adapter of ACP session ${JSON.stringify(handle.sessionKey)} exited during the prompt (${how})`, {
          cause: err,
        });
      }
      throw err;
    } finally {
      if (live.turn === turn) live.turn = undefined;
    }
  }

  async cancelTurn(handle: AcpRuntimeHandle): Promise<void> {
    assertHandle(handle);
    const live = this.live.get(handle.sessionKey);
    // nothing live: there is no turn to cancel, and cancel never escalates
    if (!live || live.handle.leaseId !== handle.leaseId || live.closing) return;
    await live.client.cancel(live.handle.acpSessionId);
  }

  private liveFor(handle: AcpRuntimeHandle): LiveSession {
    const live = this.live.get(handle.sessionKey);
    if (!live) {
      throw new AcpxNoSessionError(handle.sessionKey, "it was closed, or was started by an earlier gateway run; call ensureSession");
    }
    if (live.handle.leaseId !== handle.leaseId) {
      throw new AcpxNoSessionError(handle.sessionKey, `the handle names lease ${handle.leaseId}, the live session is ${live.handle.leaseId}`);
    }
    return live;
  }

  // ---------------------------------------------------------------- close

  async closeSession(input: {
    handle: AcpRuntimeHandle | { sessionKey: string };
    discardPersistentState?: boolean;
    reason?: string;
  }): Promise<CloseReport> {
    if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
    const h = input.handle as { sessionKey?: unknown } | null | undefined;
    if (typeof h !== "object" || h === null || typeof h.sessionKey !== "string" || h.sessionKey.length === 0) {
      throw new TypeError("input.handle.sessionKey must be a non-empty string");
    }
    const key = h.sessionKey;
    // Mark the live session closing right away (not after the queue): a
    // prompt racing this close must fail with the close error, and no new
    // prompt may start.
    markClosing(this.live.get(key), input.reason);
    return this.queue.run(key, () => this.closeLocked(key, input.reason, input.discardPersistentState === true));
  }

  private async closeLocked(key: string, reason: string | undefined, discard: boolean): Promise<CloseReport> {
    const t0 = Date.now();
    const d = this.d;
    const live = this.live.get(key);
    markClosing(live, reason);
    const base = { sessionKey: key, reason, evidence: [] as OwnershipEvidence[], interruptedPrompt: false };
    type Partial = Omit<CloseReport, "elapsedMs" | "sessionKey" | "reason" | "interruptedPrompt" | "evidence"> & {
      interruptedPrompt?: boolean;
      evidence?: readonly OwnershipEvidence[];
    };
    const done = (r: Partial) =>
      ({ ...base, ...r, elapsedMs: Date.now() - t0 }) as CloseReport;

    const stored = await d.sessions.get(key);
    if (stored?.kind === "legacy") {
      const r = await this.closeLegacy(stored.record, discard);
      return done(r);
    }
    const leaseId = live?.handle.leaseId ?? (stored?.kind === "lease" ? stored.record.leaseId : undefined);
    if (!leaseId) return done({ outcome: "noop", path: "none", detail: "no session record for this key" });
    const lease = await d.leases.get(leaseId);
    if (!lease) {
      this.dropLive(key, live);
      return done({ outcome: "noop", path: "lease", leaseId, detail: `lease ${leaseId} no longer exists (expired?); nothing signalled` });
    }
    if (lease.state === "closed" || lease.state === "lost") {
      this.dropLive(key, live);
      if (discard) await d.sessions.remove(key);
      return done({ outcome: "noop", path: "lease", leaseId, leaseState: lease.state, detail: `already ${lease.state}` });
    }

    this.inFlight.add(leaseId);
    try {
      const r = await this.settleLease(lease, live, reason);
      if (r.leaseState === "closed" || r.leaseState === "lost") {
        this.dropLive(key, live);
        if (discard) await d.sessions.remove(key);
        else if (stored?.kind === "lease") await d.sessions.put({ ...stored.record, closedAt: Date.now(), updatedAt: Date.now() });
      } else if (live) {
        // Not settled (open or closing): the session is over either way, it
        // must not hold its lease hostage. A wrapper that exited is let go (the
        // session record still names the lease, for the next close); one still
        // running keeps its handle, and the lease is retried by the
        // maintenance timer (closing) or the startup reap and the next close.
        if (live.launched.exitStatus() !== undefined) this.dropLive(key, live);
        else live.closeSettling = true;
      }
      return done({ ...r, path: "lease", leaseId });
    } finally {
      this.inFlight.delete(leaseId);
    }
  }

  /**
   * The lease-first close: verify now, mark closing, reap, settle by
   * ownership's one rule (settlementFor). A live session's prompt is failed
   * with the close error before anything is signalled, and its lifeline is
   * ended last.
   */
  private async settleLease(
    lease: AcpxProcessLease,
    live: LiveSession | undefined,
    reason: string | undefined,
  ): Promise<Pick<CloseReport, "outcome" | "leaseState" | "verdict" | "evidence" | "reap" | "detail" | "interruptedPrompt">> {
    const d = this.d;
    let v = await explainLease(lease, d.facts, { gatewayInstanceId: d.gatewayInstanceId });
    if (lease.state === "open") await d.leases.transition(lease.leaseId, "closing");
    const interruptedPrompt = live?.turn !== undefined;
    live?.client.close(new AcpxSessionClosedError(lease.sessionKey, reason));

    // every outcome carries the verdict and evidence of the verification that
    // decided it; the lease moves exactly as the rule says
    const settle = async (s: Settlement, note: string, r?: VerifiedReap) => {
      const after = await applySettlement(d.leases, lease.leaseId, s);
      const leaseState = after?.state ?? lease.state;
      return {
        outcome: CLOSE_OUTCOME[s.to],
        leaseState,
        verdict: v.verdict,
        evidence: v.evidence,
        interruptedPrompt,
        detail: `${note}${s.why}`,
        ...(r ? { reap: r.reap } : {}),
      };
    };

    let note = "";
    if (v.verdict === "unknown") {
      // Facts could not prove ownership: no signal. Our own live child is
      // still told to clean up through its lifeline (our pipe, not a signal),
      // but its exit proves nothing about the tree: only a verification can
      // settle the lease, so the facts are asked once more.
      const released = live ? await this.releaseLive(live) : false;
      const again = live ? await explainLease(lease, d.facts, { gatewayInstanceId: d.gatewayInstanceId }).catch(() => null) : null;
      if (again !== null) v = again; // the latest answer decides, whatever it is
      if (released) note = "the wrapper exited after its lifeline closed, which proves nothing about its tree; ";
      if (v.verdict === "unknown") return settle(settlementFor(v, null), `nothing signalled; ${note}`);
    }

    // The tree when it verified, else (the wrapper gone) the remnants still
    // proven to carry this lease: ownership's one choice.
    // A gone wrapper lets go of our end first; a live one is reaped first.
    if (!v.tree) await this.releaseLive(live);
    const r = await this.reapVerified(v);
    if (v.tree) await this.releaseLive(live);
    const what = r === null ? "nothing signalled; " : r.target === "tree" ? "verified tree reaped; " : "the wrapper was gone, remnants carrying the lease and instance id reaped; ";
    // settled on the verification after the reap (settlementAfterReap), never on the report alone
    return settle(r ? settlementAfterReap(r.result) : settlementFor(v, null), `${what}${note}`, r ?? undefined);
  }

  /** Reaps what a verification proved ours (ownership's choice: tree, else remnants); null when nothing was. */
  private async reapVerified(
    v: LeaseVerification,
    facts: ProcessFacts = this.d.facts,
  ): Promise<VerifiedReap | null> {
    const r = await reapLeaseVerification(v, { facts, signaller: this.d.signaller, graceMs: this.d.graceMs, gatewayInstanceId: this.d.gatewayInstanceId });
    return r.target !== null && r.report !== null ? { target: r.target, reap: summarize(r.report), report: r.report, result: r } : null;
  }

  /** Ends our side of a live session (lifeline, stdin) and waits for the wrapper to exit. */
  private async releaseLive(live: LiveSession | undefined): Promise<boolean> {
    if (!live) return false;
    live.launched.endLifeline();
    live.launched.stdin.destroy();
    return live.launched.waitExit(this.d.graceMs + 2000);
  }

  private dropLive(key: string, live: LiveSession | undefined): void {
    if (live && this.live.get(key) === live) {
      this.live.delete(key);
      live.client.close(new AcpxSessionClosedError(key, live.closeReason));
      live.launched.endLifeline();
    }
  }

  /** Records without a lease: live root required, wrapper-root or command match, else left alone. */
  private async closeLegacy(
    record: LegacyAcpxSessionRecord,
    discard: boolean,
  ): Promise<Omit<CloseReport, "elapsedMs" | "sessionKey" | "reason">> {
    const d = this.d;
    const v = await verifyLegacyRecord(record, d.facts, { wrapperRoot: d.wrapper.wrapperRoot });
    if (v.tree) {
      const reap = summarize(await reapOwnedTree(v.tree, { facts: d.facts, signaller: d.signaller, graceMs: d.graceMs }));
      if (reap.survivors.length === 0) await d.sessions.remove(record.sessionKey);
      return {
        outcome: reap.survivors.length === 0 ? "closed" : "retry-pending",
        path: "legacy",
        verdict: "owned",
        evidence: v.evidence,
        reap,
        interruptedPrompt: false,
        detail: `legacy record verified; reaped ${reap.members.length} process(es)`,
      };
    }
    const gone = v.evidence.some((e) => e.check === "root-alive" && e.result === "mismatch");
    if (gone) {
      // the recorded pid is not alive: there is nothing left to leave alone
      await d.sessions.remove(record.sessionKey);
      return {
        outcome: "lost",
        path: "legacy",
        verdict: "gone",
        evidence: v.evidence,
        interruptedPrompt: false,
        detail: "legacy record: the recorded pid is gone; nothing signalled, record retired",
      };
    }
    const verdict = v.evidence.some((e) => e.result === "mismatch") ? "mismatch" : "unknown";
    void discard; // an unverifiable legacy record is kept as it is, whatever the caller asked
    return {
      outcome: "left-alone",
      path: "legacy",
      verdict,
      evidence: v.evidence,
      interruptedPrompt: false,
      detail: `legacy record could not be verified (${verdict}); left as it is, nothing signalled`,
    };
  }

  // ---------------------------------------------------------------- startup / maintenance

  reapStartupOrphans(opts?: { dryRun?: boolean; skipAttached?: boolean }): Promise<ReapReport> {
    return this.reapLeases(["open", "closing"], opts?.dryRun === true, opts?.skipAttached === true);
  }

  /**
   * `skipAttached` (the CLI's default): an owned tree whose root still has a
   * live parent other than init is treated as attached to a running gateway
   * and left alone. A controller at startup does not need it: its state dir
   * is its own, and any earlier gateway on it is dead.
   */
  private async reapLeases(states: readonly ("open" | "closing")[], dryRun: boolean, skipAttached = false): Promise<ReapReport> {
    const t0 = Date.now();
    const d = this.d;
    const listed = await d.leases.list({ gatewayInstanceId: d.gatewayInstanceId, states });
    const problems = listed.problems;
    // the process supervisor's runs share the store and the instance id; they are its to settle
    const all = listed.leases.filter((l) => !isSupervisorLease(l));
    const entries: ReapReportEntry[] = [];
    const candidates: AcpxProcessLease[] = [];
    for (const l of all) {
      if (this.inFlight.has(l.leaseId) || this.isLiveLease(l.leaseId)) {
        entries.push(entryFor(l, "owned", l.state, [], "skipped-live"));
      } else candidates.push(l);
    }
    let snapshots = 0;
    let verifications: LeaseVerification[] = [];
    let snapshot: ProcessSnapshot | undefined;
    if (candidates.length > 0) {
      // ONE snapshot for the whole batch: tree verification and the remnant search share it
      const counting = countingFacts(d.facts, () => snapshots++);
      try {
        snapshot = await counting.snapshot();
      } catch {
        snapshot = undefined; // verifyLeases then answers "unknown" for every lease: nothing is signalled
      }
      verifications = await verifyLeases(candidates, counting, {
        gatewayInstanceId: d.gatewayInstanceId,
        ...(snapshot ? { snapshot } : {}),
      });
    }
    const batchFacts = coalescingFacts(d.facts);
    await Promise.all(
      verifications.map(async (v) => {
        const l = v.lease;
        if (v.tree || v.remnants) {
          const parent = v.tree?.root.ppid;
          if (skipAttached && parent !== undefined && parent > 1 && snapshot?.processes.has(parent)) {
            return void entries.push(entryFor(l, v.verdict, l.state, v.evidence, "skipped-live"));
          }
          if (dryRun) return void entries.push(entryFor(l, v.verdict, l.state, v.evidence, "would-reap"));
          this.inFlight.add(l.leaseId);
          try {
            if (l.state === "open") await d.leases.transition(l.leaseId, "closing");
            const r = (await this.reapVerified(v, batchFacts))!; // a tree or remnants is always handed to the reaper
            const s = settlementAfterReap(r.result);
            const after = (await applySettlement(d.leases, l.leaseId, s))?.state ?? "closing";
            this.afterSettled(l.leaseId, after);
            entries.push({ ...entryFor(l, v.verdict, after, v.evidence, r.target === "tree" ? "reaped" : "reaped-remnants", s.why), reap: r.reap });
          } finally {
            this.inFlight.delete(l.leaseId);
          }
          return;
        }
        const s = settlementFor(v, null);
        // the CLI's attached-run guard: an unknown verdict cannot tell whether a
        // running gateway holds the lease (a spawn still pending, say), so it is left as it is
        if (skipAttached && v.verdict === "unknown") return void entries.push(entryFor(l, v.verdict, l.state, v.evidence, "left-alone", s.why));
        if (dryRun) return void entries.push(entryFor(l, v.verdict, l.state, v.evidence, s.to === "lost" ? "would-mark-lost" : "left-alone", s.why));
        const after = (await applySettlement(d.leases, l.leaseId, s))?.state ?? l.state;
        this.afterSettled(l.leaseId, after);
        entries.push(entryFor(l, v.verdict, after, v.evidence, after === "lost" ? "marked-lost" : "left-alone", s.why));
      }),
    );
    let expired: string[] = [];
    if (!dryRun) {
      const ex = await d.leases.expire(d.retentionMs);
      expired = ex.removed;
      for (const p of ex.problems) problems.push(p);
    }
    return {
      gatewayInstanceId: d.gatewayInstanceId,
      dryRun,
      examined: all.length,
      entries,
      snapshots,
      expired,
      problems: problems.map((p) => ({ file: p.file, detail: p.detail })),
      elapsedMs: Date.now() - t0,
    };
  }

  /**
   * A session this controller still serves. One whose close already ran and
   * left the lease open or closing (its wrapper still running) is not: the
   * maintenance timer and the startup reap retry its lease like any other.
   */
  private isLiveLease(leaseId: string): boolean {
    for (const s of this.live.values()) if (s.handle.leaseId === leaseId && !s.closeSettling) return true;
    return false;
  }

  /** A batch reap settled `leaseId`: a closed session still held for it is let go. */
  private afterSettled(leaseId: string, state: AcpxProcessLease["state"]): void {
    if (state !== "closed" && state !== "lost") return;
    for (const [key, s] of this.live) if (s.handle.leaseId === leaseId && s.closeSettling) this.dropLive(key, s);
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

  verifyOwnedTree(lease: AcpxProcessLease): Promise<OwnedProcessTree | null> {
    // a lease of another gateway instance is never ours, whatever the live facts say
    return verifyTree(lease, this.d.facts, { gatewayInstanceId: this.d.gatewayInstanceId });
  }

  async listLeases(): Promise<AcpxProcessLease[]> {
    return (await this.d.leases.list()).leases;
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.maintaining;
    // Sessions keep running; only their hold on our event loop is released.
    // If this process then exits, the lifelines close and the wrappers clean up.
    for (const s of this.live.values()) s.launched.unref();
  }
}

// -------------------------------------------------------------------- helpers

/**
 * SIGKILLs our own wrapper child, only while it is unreaped (Node has not
 * seen its exit, so its pid cannot have been reused) and the guard allows
 * the pid. Used when the lifeline and stdin were ended and it still did not exit.
 */
function killUnreapedChild(l: LaunchedWrapper): void {
  const c = l.child;
  const pid = c.pid;
  if (pid === undefined || c.exitCode !== null || c.signalCode !== null || l.exitStatus() !== undefined) return;
  if (!checkSignalTarget(pid).allowed) return;
  c.kill("SIGKILL");
}

/** The first close to reach a live session marks it, with its reason; a later one keeps that reason. */
function markClosing(live: LiveSession | undefined, reason: string | undefined): void {
  if (live && !live.closing) {
    live.closing = true;
    live.closeReason = reason;
  }
}

function entryFor(
  l: AcpxProcessLease,
  verdict: ReapReportEntry["verdict"],
  stateAfter: AcpxProcessLease["state"],
  evidence: readonly OwnershipEvidence[],
  action: ReapReportEntry["action"],
  why?: string,
): ReapReportEntry {
  return {
    leaseId: l.leaseId,
    sessionKey: l.sessionKey,
    rootPid: l.rootPid,
    stateBefore: l.state,
    verdict,
    stateAfter,
    evidence,
    action,
    ...(why !== undefined ? { why } : {}),
  };
}

function summarize(r: OwnedTreeReapReport): TreeReapSummary {
  return {
    members: r.results.map((x) => ({ pid: x.pid, startTime: x.startTime, outcome: x.outcome })),
    survivors: survivorsOf(r),
    termSent: r.termSent,
    killSent: r.killSent,
    durationMs: r.durationMs,
  };
}

/** Counts snapshot() calls (the one-snapshot promise is checked, not assumed). */
function countingFacts(facts: ProcessFacts, onSnapshot: () => void): ProcessFacts {
  return {
    backend: facts.backend,
    identityStrength: facts.identityStrength,
    snapshot: () => {
      onSnapshot();
      return facts.snapshot();
    },
    inspect: (pid, o) => facts.inspect(pid, o),
  };
}

/**
 * Many trees reaped at once each ask for a fresh snapshot (to catch children
 * forked mid-teardown) at nearly the same moment; concurrent callers share
 * the walk in flight instead of each walking /proc.
 */
function coalescingFacts(facts: ProcessFacts): ProcessFacts {
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
  };
}

function validateEnsureInput(input: AcpRuntimeEnsureInput): void {
  if (typeof input !== "object" || input === null) throw new TypeError("input must be an object");
  if (typeof input.sessionKey !== "string" || input.sessionKey.length === 0) {
    throw new TypeError("input.sessionKey must be a non-empty string");
  }
  if (typeof input.agentId !== "string" || input.agentId.length === 0) throw new TypeError("input.agentId must be a non-empty string");
  if (!Array.isArray(input.command) || input.command.length === 0) {
    throw new TypeError("input.command must be a non-empty array (the adapter's argv); got an empty command");
  }
  input.command.forEach((a: unknown, i: number) => {
    if (typeof a !== "string") throw new TypeError(`input.command[${i}] must be a string`);
  });
  if (input.command[0] === "") throw new TypeError("input.command[0] (the adapter executable) must be a non-empty string");
  if (input.cwd !== undefined && (typeof input.cwd !== "string" || input.cwd.length === 0)) {
    throw new TypeError("input.cwd must be a non-empty string when given");
  }
  if (input.env !== undefined) {
    if (typeof input.env !== "object" || input.env === null) throw new TypeError("input.env must be an object of strings");
    for (const [k, v] of Object.entries(input.env)) {
      if (typeof v !== "string") throw new TypeError(`input.env.${k} must be a string`);
    }
  }
}

function assertHandle(handle: AcpRuntimeHandle): void {
  if (typeof handle !== "object" || handle === null || typeof handle.sessionKey !== "string" || typeof handle.leaseId !== "string") {
    throw new TypeError("handle must be an AcpRuntimeHandle from ensureSession");
  }
}

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  return e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
}

function stderrNote(l: LaunchedWrapper): string {
  const t = l.stderrTail();
  if (!t) return "";
  const last = t.split("\n").slice(-3).join(" | ");
  return `; stderr: ${last.slice(-300)}`;
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}


