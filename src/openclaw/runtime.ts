/**
 * createOpenClawAcpRuntime: an OpenClaw ACP runtime backend (`AcpRuntime`)
 * on the lifecycle controller. Every session OpenClaw asks for is a
 * controller session: a lease written before the spawn, the adapter's tree
 * verified against it before any signal, its own cgroup where the host
 * allows it. Nothing here spawns or signals a process itself.
 *
 * - ensureSession: the named agent's adapter; `persistent` takes the agent
 *   session back (OpenClaw's resumeSessionId, else the key's stored one),
 *   `oneshot` starts fresh and closes after its turn; model and thinking
 *   are applied as config options (session-options.ts). prepareFreshSession
 *   closes what runs and makes the next ensure fresh.
 * - startTurn / runTurn: turn.ts; cancel: ACP session/cancel, never a signal.
 * - close: verified reap through the lease (`discardPersistentState` forgets
 *   the agent session); with durable, the shutdown's are a handover (handover.ts).
 * - getStatus, getCapabilities, setMode, setConfigOption: status.ts; doctor.ts.
 *
 * The factory is synchronous (OpenClaw registers backends synchronously):
 * the controller starts, and reaps what an earlier gateway on the state
 * dir left, in the background; every call waits for it, `ready` says when
 * it is done, and `healthy()` is false until then and after dispose.
 * Every error is typed (errors.ts) and names its cause; none is thrown
 * past a call, and no promise of this runtime rejects unobserved.
 */
import { isAbsolute } from "node:path";
import { createAcpxLifecycleController } from "../acpx/controller/controller.js";
import { describeEnd } from "../acpx/launch/wrapper-end.js";
import type { AcpRuntimeHandle } from "../acpx/connection/types.js";
import type { SessionEndHow } from "../acpx/sessions/types.js";
import type { AcpxLifecycleController, ReapReport } from "../acpx/controller/types.js";
import { getProcessFacts } from "../facts/get.js";
import type { ProcessFacts } from "../facts/types.js";
import { openLeaseStore, type LeaseStore } from "../ownership/index.js";
import { doctorReport } from "./doctor.js";
import {
  authFailure,
  classify,
  closeUnsettled,
  DecidedFailure,
  failure,
  toThrown,
  type FailurePhase,
  type OpenClawErrorFactory,
} from "./errors.js";
import {
  controllerOptions,
  normalizeAgentName,
  validateRuntimeOptions,
  type OpenClawAcpRuntimeOptions,
  type ResolvedAgent,
} from "./options.js";
import { applyRequestedOptions } from "./session-options.js";
import { readAdoptedTurn } from "./adopted-turn.js";
import { SessionTable, type SessionEntry } from "./session-table.js";
import { capabilities, configOptionResult, configValue, noSessionStatus, sessionStatus, TreeCache } from "./status.js";
import { runOpenClawTurn, startOpenClawTurn, type TurnDeps } from "./turn.js";
import { ShutdownHandover } from "./handover.js";
import { resolveUpdateLimits } from "../acpx/connection/update-bytes.js";
import type {
  OpenClawAcpRuntimeContract,
  OpenClawCapabilities,
  OpenClawConfigOptionResult,
  OpenClawDoctorReport,
  OpenClawEnsureInput,
  OpenClawRuntimeEvent,
  OpenClawRuntimeHandle,
  OpenClawRuntimeStatus,
  OpenClawRuntimeTurn,
  OpenClawTurnInput,
} from "./types.js";

/** A handle this runtime returns: OpenClaw's fields, plus the lease it names (a handle of an older lease never reaches a newer session). */
export type ProcleaseOpenClawHandle = OpenClawRuntimeHandle & { leaseId: string };

export interface OpenClawAcpRuntime extends OpenClawAcpRuntimeContract {
  readonly ownerAwareSessions: 1;
  readonly backendId: string;
  /** resolves once the controller runs and the startup reap is done; rejects (observed) with why it could not start */
  readonly ready: Promise<void>;
  /** what the startup reap did (undefined until `ready`) */
  readonly startupReap: ReapReport | undefined;
  /** false until `ready`, after a failed start, after dispose, and on a host without process facts (OpenClaw's registry asks it) */
  healthy(): boolean;
  /** the controller under this runtime (waits for it) */
  controller(): Promise<AcpxLifecycleController>;
  ensureSession(input: OpenClawEnsureInput): Promise<ProcleaseOpenClawHandle>;
  startTurn(input: OpenClawTurnInput): OpenClawRuntimeTurn;
  runTurn(input: OpenClawTurnInput): AsyncIterable<OpenClawRuntimeEvent>;
  getCapabilities(input: { handle?: OpenClawRuntimeHandle }): Promise<OpenClawCapabilities>;
  getStatus(input: { handle: OpenClawRuntimeHandle; signal?: AbortSignal }): Promise<OpenClawRuntimeStatus>;
  setMode(input: { handle: OpenClawRuntimeHandle; mode: string }): Promise<void>;
  setConfigOption(input: {
    handle: OpenClawRuntimeHandle;
    key: string;
    value: string;
  }): Promise<OpenClawConfigOptionResult>;
  doctor(): Promise<OpenClawDoctorReport>;
  prepareFreshSession(input: {
    sessionKey: string;
    agentId?: string;
    persistedHandle?: OpenClawRuntimeHandle;
  }): Promise<void>;
  cancel(input: { handle: OpenClawRuntimeHandle; reason?: string }): Promise<void>;
  close(input: { handle: OpenClawRuntimeHandle; reason: string; discardPersistentState?: boolean }): Promise<void>;
  /** stops the controller's timers and releases the state dir; live sessions end with this process (their wrappers' lifelines) */
  dispose(): Promise<void>;
  /** closes every live session through the lifecycle, then disposes */
  shutdown(): Promise<void>;
  /** with `durable`: leaves every session waiting for the next gateway to re-adopt it (the controller's detach()) */
  detach(): Promise<void>;
}

const noop = (): void => undefined;

export function createOpenClawAcpRuntime(options: OpenClawAcpRuntimeOptions): OpenClawAcpRuntime {
  return new Runtime(options);
}

class Runtime implements OpenClawAcpRuntime {
  readonly ownerAwareSessions = 1 as const;
  readonly backendId: string;
  readonly ready: Promise<void>;
  startupReap: ReapReport | undefined;
  private readonly agents: Map<string, ResolvedAgent>;
  private readonly table = new SessionTable();
  private readonly trees = new TreeCache();
  private readonly facts: ProcessFacts;
  private readonly starting: Promise<AcpxLifecycleController>;
  private ctl: AcpxLifecycleController | undefined;
  private leases: Promise<LeaseStore> | undefined;
  private disposed = false;
  private readonly errorFactory: OpenClawErrorFactory | undefined;
  private readonly turnDeps: TurnDeps;
  private readonly handover: ShutdownHandover;

  constructor(private readonly opts: OpenClawAcpRuntimeOptions) {
    const v = validateRuntimeOptions(opts);
    this.backendId = v.backendId;
    this.agents = v.agents;
    this.errorFactory = opts.errorFactory;
    this.handover = new ShutdownHandover(opts.durable !== undefined);
    this.facts = opts.facts ?? getProcessFacts();
    const userEnd = opts.onSessionEnd;
    this.starting = createAcpxLifecycleController({
      ...controllerOptions(opts),
      // only a caller's own facts are handed on: with the default ones the startup reap runs on a worker thread
      ...(opts.facts !== undefined ? { facts: opts.facts } : {}),
      onSessionEnd: (handle, how) => {
        this.sessionEnded(handle, how);
        userEnd?.(handle, how);
      },
    }).then(async (ctl) => {
      // what an earlier gateway on this state dir left running is reaped before any new session;
      // a reap that fails fails the start (and gives the state dir back), loudly
      try {
        this.startupReap = await ctl.reapStartupOrphans();
      } catch (err) {
        await ctl.dispose().catch(noop);
        throw err;
      }
      this.ctl = ctl;
      return ctl;
    });
    this.starting.catch(noop);
    this.ready = this.starting.then(noop);
    this.ready.catch(noop);
    this.turnDeps = {
      backendId: this.backendId,
      errorFactory: this.errorFactory,
      open: (handle) => this.open(handle),
      ended: (entry) => this.turnEnded(entry),
      handingOver: () => this.handover.active,
      eventBacklogBytes: resolveUpdateLimits(opts.updateLimits).turnBacklogBytes,
    };
  }

  healthy(): boolean {
    // without facts nothing can be verified, so no session can be started or cleaned up: OpenClaw is told at once
    return this.ctl !== undefined && !this.disposed && this.facts.backend !== "none";
  }

  async controller(): Promise<AcpxLifecycleController> {
    try {
      return await this.starting;
    } catch (err) {
      throw new DecidedFailure({
        ...classify(err, "ensure", this.backendId),
        code: "ACP_BACKEND_UNAVAILABLE",
        message: `proclease backend "${this.backendId}" did not start: ${err instanceof Error ? err.message : String(err)}`,
      });
    }
  }

  /** Runs `fn`, and throws what it throws as OpenClaw's typed error. */
  private async guard<T>(phase: FailurePhase, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw toThrown(classify(err, phase, this.backendId), this.errorFactory);
    }
  }

  // ------------------------------------------------------------------ ensure

  ensureSession(input: OpenClawEnsureInput): Promise<ProcleaseOpenClawHandle> {
    return this.guard("ensure", async () => {
      const agent = this.agentFor(input);
      const ctl = await this.controller();
      const key = this.table.keyOf(input);
      await this.table.closed(key);
      const fresh = this.table.isFresh(key);
      // a oneshot session never takes an earlier one back unless OpenClaw names it
      const resume = fresh || (input.mode === "oneshot" && input.resumeSessionId === undefined) ? false : undefined;
      const c = agent.config;
      const cwd = input.cwd ?? c.cwd;
      const env = { ...c.env, ...input.env };
      const limits = c.limits ?? this.opts.limits;
      const handle = await ctl
        .ensureSession({
          sessionKey: key,
          agentId: agent.name,
          command: c.command,
          ...(cwd !== undefined ? { cwd } : {}),
          ...(Object.keys(env).length > 0 ? { env } : {}),
          ...(c.envRemove !== undefined ? { envRemove: c.envRemove } : {}),
          ...(c.auth !== undefined ? { auth: c.auth } : {}),
          ...(limits !== undefined ? { limits } : {}),
          ...(c.mcpServers !== undefined ? { mcpServers: c.mcpServers } : {}),
          ...(resume === false
            ? { resume: false }
            : input.resumeSessionId !== undefined
              ? { resumeSessionId: input.resumeSessionId }
              : {}),
          replace: true,
        })
        .catch((err: unknown) => {
          const auth = authFailure(err, agent.name, this.backendId, c.auth);
          throw auth === undefined ? err : new DecidedFailure(auth);
        });
      // a session whose requested options could not be applied is not handed out: it is closed again
      const applied = await applyRequestedOptions(ctl, handle, input, this.backendId).catch(async (err: unknown) => {
        await ctl
          .closeSession({
            handle,
            reason: "its requested model or thinking level could not be set",
            discardPersistentState: true,
          })
          .catch(noop);
        throw err;
      });
      if (!applied.ok) {
        await ctl.closeSession({ handle, reason: applied.failure.message, discardPersistentState: true });
        throw new DecidedFailure(applied.failure);
      }
      const openclaw: ProcleaseOpenClawHandle = {
        sessionKey: input.sessionKey,
        ...(input.agentId !== undefined ? { agentId: input.agentId } : {}),
        backend: this.backendId,
        runtimeSessionName: key,
        cwd: cwd ?? process.cwd(),
        backendSessionId: handle.acpSessionId,
        agentSessionId: handle.acpSessionId,
        leaseId: handle.leaseId,
        ...applied.applied,
      };
      const prior = this.table.get(key);
      if (prior !== undefined && prior.handle.leaseId !== handle.leaseId) this.trees.forget(prior.handle.leaseId);
      this.table.set({
        key,
        openclaw,
        handle,
        mode: input.mode,
        agent,
        ...(prior?.handle.leaseId === handle.leaseId && prior.ended !== undefined ? { ended: prior.ended } : {}),
        // a durable session re-adopted with a turn a restart interrupted: read now, shown before the next reply
        ...(handle.turn !== undefined ? { adopted: readAdoptedTurn(handle.turn) } : {}),
      });
      this.table.clearFresh(key);
      return { ...openclaw };
    });
  }

  private agentFor(input: OpenClawEnsureInput): ResolvedAgent {
    if (typeof input !== "object" || input === null) throw new TypeError("ensureSession input must be an object");
    if (typeof input.sessionKey !== "string" || input.sessionKey.trim() === "")
      throw new TypeError("input.sessionKey must be a non-empty string");
    if (input.mode !== "persistent" && input.mode !== "oneshot")
      throw new TypeError(`input.mode must be "persistent" or "oneshot", got ${JSON.stringify(input.mode)}`);
    if (input.cwd !== undefined && (typeof input.cwd !== "string" || !isAbsolute(input.cwd)))
      throw new TypeError(`input.cwd must be an absolute path, got ${JSON.stringify(input.cwd)}`);
    const name = typeof input.agent === "string" ? normalizeAgentName(input.agent) : "";
    const agent = this.agents.get(name);
    if (agent === undefined) {
      throw new DecidedFailure(
        failure(
          "ACP_SESSION_INIT_FAILED",
          "AGENT_NOT_CONFIGURED",
          this.backendId,
          `no agent ${JSON.stringify(input.agent)} is configured (configured: ${[...this.agents.keys()].join(", ")})`,
          false,
        ),
      );
    }
    return agent;
  }

  startTurn(input: OpenClawTurnInput): OpenClawRuntimeTurn {
    return startOpenClawTurn(this.turnDeps, input);
  }

  runTurn(input: OpenClawTurnInput): AsyncIterable<OpenClawRuntimeEvent> {
    return runOpenClawTurn(this.turnDeps, input);
  }

  /** The live session a handle names, for a turn or a control; a missing or ended one fails typed. */
  private async open(handle: OpenClawRuntimeHandle): Promise<{ ctl: AcpxLifecycleController; entry: SessionEntry }> {
    const ctl = await this.controller();
    const { key, entry, stale } = this.table.lookup(handle);
    if (entry === undefined) {
      const why = stale
        ? "the handle names an earlier lease of this key; its session was replaced"
        : "no live session (closed, or not ensured by this gateway)";
      throw new DecidedFailure(
        failure("ACP_TURN_FAILED", "NO_SESSION", this.backendId, `${key}: ${why}; ensure it again`, true),
      );
    }
    if (entry.ended !== undefined) {
      throw new DecidedFailure(
        failure(
          "ACP_TURN_FAILED",
          "SESSION_ENDED",
          this.backendId,
          `${key}: the session's processes ended (${entry.ended}); close it and ensure it again`,
          true,
        ),
      );
    }
    return { ctl, entry };
  }

  private turnEnded(entry: SessionEntry): void {
    if (entry.mode !== "oneshot") return;
    // a oneshot session is over with its turn; OpenClaw does not wait for the reap
    void this.closeEntry(entry.key, entry, "oneshot turn ended", true).catch((err: unknown) => {
      this.opts.logger?.warn?.(
        `proclease backend "${this.backendId}": the oneshot close of ${entry.key} did not settle: ${err instanceof Error ? err.message : String(err)}`,
      );
    });
  }

  private sessionEnded(handle: AcpRuntimeHandle, how: SessionEndHow): void {
    if (how.kind !== "adapter-died") return;
    const entry = this.table.byLease(handle.leaseId);
    if (entry !== undefined) entry.ended = describeEnd(how.end);
  }

  getCapabilities(input: { handle?: OpenClawRuntimeHandle }): Promise<OpenClawCapabilities> {
    return this.guard("control", async () => {
      const ctl = await this.controller();
      const entry = input?.handle !== undefined ? this.table.lookup(input.handle).entry : undefined;
      return capabilities(ctl, entry?.ended === undefined ? entry : undefined);
    });
  }

  getStatus(input: { handle: OpenClawRuntimeHandle; signal?: AbortSignal }): Promise<OpenClawRuntimeStatus> {
    return this.guard("status", async () => {
      const ctl = await this.controller();
      const { key, entry, stale } = this.table.lookup(input.handle);
      if (entry === undefined)
        return noSessionStatus(
          this,
          key,
          stale
            ? "the handle names an earlier lease of this key"
            : "no live session (closed, or not ensured by this gateway)",
        );
      return sessionStatus(
        { backendId: this.backendId, ctl, leases: await this.leaseStore(), trees: this.trees },
        entry,
      );
    });
  }

  setMode(input: { handle: OpenClawRuntimeHandle; mode: string }): Promise<void> {
    return this.guard("control", async () => {
      const { ctl, entry } = await this.open(input.handle);
      await ctl.setMode(entry.handle, input.mode);
    });
  }

  setConfigOption(input: {
    handle: OpenClawRuntimeHandle;
    key: string;
    value: string;
  }): Promise<OpenClawConfigOptionResult> {
    return this.guard("control", async () => {
      const { ctl, entry } = await this.open(input.handle);
      const offered = (await ctl.sessionStatus(entry.handle)).configOptions;
      return configOptionResult(
        await ctl.setConfigOption(entry.handle, input.key, configValue(offered, input.key, input.value)),
      );
    });
  }

  doctor(): Promise<OpenClawDoctorReport> {
    return doctorReport({
      backendId: this.backendId,
      stateDir: this.opts.stateDir,
      facts: this.facts,
      agents: this.agents,
      controller: () =>
        this.starting.then(
          (ctl) => ({ ok: true as const, ctl }),
          (err: unknown) => ({ ok: false as const, why: err instanceof Error ? err.message : String(err) }),
        ),
    });
  }

  private leaseStore(): Promise<LeaseStore> {
    this.leases ??= openLeaseStore(this.opts.stateDir, { readOnly: true });
    return this.leases;
  }

  // ------------------------------------------------------------------ cancel and close

  cancel(input: { handle: OpenClawRuntimeHandle; reason?: string }): Promise<void> {
    if (this.handover.claims(input.reason)) return Promise.resolve();
    return this.guard("control", async () => {
      const ctl = await this.controller();
      const { entry } = this.table.lookup(input.handle);
      // nothing live under this handle (or an older lease): nothing to cancel, and a cancel never escalates
      if (entry === undefined) return;
      if (entry.turn !== undefined) await entry.turn.cancel();
      else await ctl.cancelTurn(entry.handle);
    });
  }

  close(input: { handle: OpenClawRuntimeHandle; reason: string; discardPersistentState?: boolean }): Promise<void> {
    if (this.handover.claims(input.reason)) return Promise.resolve();
    return this.guard("close", async () => {
      await this.controller();
      const { key, entry, stale } = this.table.lookup(input.handle);
      // a handle of an older lease never closes the key's current session
      if (stale) return;
      await this.closeEntry(key, entry, input.reason, input.discardPersistentState === true);
    });
  }

  prepareFreshSession(input: { sessionKey: string; agentId?: string }): Promise<void> {
    return this.guard("close", async () => {
      await this.controller();
      const key = this.table.keyOf(input);
      this.table.markFresh(key);
      await this.closeEntry(key, this.table.get(key), "prepareFreshSession", true);
    });
  }

  /**
   * Closes the key's session (the live one, else whatever record the key
   * has) through the lifecycle. A close that could not settle the lease
   * (something verified may still run, or nothing could be verified) fails
   * loudly: the lease stays closing and the maintenance timer retries it.
   */
  private async closeEntry(
    key: string,
    entry: SessionEntry | undefined,
    reason: string,
    discard: boolean,
  ): Promise<void> {
    const ctl = await this.controller();
    this.table.delete(key, entry?.handle.leaseId);
    if (entry !== undefined) this.trees.forget(entry.handle.leaseId);
    const report = await this.table.trackClose(key, () =>
      ctl.closeSession({ handle: entry?.handle ?? { sessionKey: key }, reason, discardPersistentState: discard }),
    );
    if (report.outcome === "retry-pending" || report.outcome === "left-alone")
      throw closeUnsettled(this.backendId, key, report);
  }

  dispose(): Promise<void> {
    return this.end((ctl) => ctl.dispose());
  }

  /** Ends the runtime leaving its durable sessions waiting for the next gateway (the controller's detach()); the others are closed. */
  detach(): Promise<void> {
    return this.end((ctl) => ctl.detach());
  }

  shutdown(): Promise<void> {
    return this.end((ctl) => ctl.shutdown());
  }

  private async end(how: (ctl: AcpxLifecycleController) => Promise<unknown>): Promise<void> {
    this.disposed = true;
    const ctl = await this.starting.catch(() => undefined);
    if (ctl !== undefined) await how(ctl);
  }
}
