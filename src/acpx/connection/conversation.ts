/**
 * The conversation side of one session, beside its lease: where its updates
 * go (session-updates.ts), who answers its permission requests
 * (permissions.ts), its client fs and terminals (client-fs.ts,
 * client-terminal.ts), and what the agent advertised (session-controls.ts).
 * Made before the ACP client (the client's handlers are its), bound to the
 * handle once the handshake succeeded, and ended before the session's lease
 * is settled: pending permissions answered "cancelled", ACP session/close
 * sent when the agent advertises it, every terminal's tree ended. Decides
 * nothing about the lease.
 */
import type { DurableTerminals } from "../durable/terminals.js";
import type { InitializeResponse } from "@agentclientprotocol/sdk";
import { INSTANCE_ENV_KEY, LEASE_ENV_KEY } from "../../ownership/leases/types.js";
import type { ProcessSupervisor } from "../../supervisor/index.js";
import { withTimeout, type AcpClient, type AcpClientOptions } from "./acp-client.js";
import { createClientFs, type ClientFsOptions } from "./client-fs.js";
import { SessionTerminals, type ClientTerminalOptions } from "./client-terminal.js";
import type { HandshakeOptions, HandshakeResult } from "./handshake.js";
import type { ResolvedIntakeLimits } from "./intake-limits.js";
import type { ControllerLogger } from "../report/logger.js";
import { PermissionBroker, type PermissionHook } from "./permissions.js";
import { canCloseSession } from "./resume.js";
import { SessionBudget } from "./session-budget.js";
import { SessionState } from "./session-controls.js";
import { UpdateRouter } from "./session-updates.js";
import type { ResolvedUpdateLimits } from "./update-bytes.js";
import type { AcpRuntimeEnsureInput, AcpRuntimeHandle } from "./types.js";

/** how long session/close may take before the kill goes ahead */
export const SESSION_CLOSE_TIMEOUT_MS = 2000;

/** What every session's conversation shares, from the controller's options. */
export interface ConversationConfig {
  log: ControllerLogger;
  onPermissionRequest: PermissionHook | undefined;
  permissionTimeoutMs: number;
  fs: ClientFsOptions | undefined;
  terminal: ClientTerminalOptions | undefined;
  /** the supervisor that serves terminals (present when `terminal` is) */
  supervisor: ProcessSupervisor | undefined;
  /** durable sessions' terminals under the holder (durable/terminals.ts); undefined: not durable, or no holder here */
  durableTerminals?: DurableTerminals;
  stderrInMessages: boolean;
  /** byte bounds on held updates (update-bytes.ts) */
  updateLimits: ResolvedUpdateLimits;
  /** what one agent can make the gateway hold (intake-limits.ts, session-budget.ts) */
  intakeLimits: ResolvedIntakeLimits;
}

export class SessionConversation {
  handle: AcpRuntimeHandle | undefined;
  private rootStartTime: string | undefined;
  acpSessionId: string | undefined;
  init: InitializeResponse | undefined;
  /** what the agent advertised, tracked from the first update on */
  readonly state = new SessionState();
  /** how the handshake opened the agent session (new, resumed, loaded) */
  opening: HandshakeResult["opened"] | undefined;
  readonly router: UpdateRouter;
  readonly permissions: PermissionBroker;
  readonly terminals: SessionTerminals | undefined;
  /** everything the agent can make the gateway hold, and the session's rate-limited log */
  readonly budget: SessionBudget;
  private readonly fsOpts: ClientFsOptions | undefined;
  private readonly cwd: string;
  private ended = false;

  constructor(
    readonly config: ConversationConfig,
    input: Pick<AcpRuntimeEnsureInput, "sessionKey" | "cwd" | "env" | "envRemove">,
  ) {
    this.budget = new SessionBudget(config.intakeLimits, config.log, () => input.sessionKey);
    // what the agent can make the session log (refusals, paths, commands) goes through the session's rate and escaping
    const log = this.budget.log;
    this.cwd = input.cwd ?? process.cwd();
    this.router = new UpdateRouter({
      observe: (u) => this.state.observe(u),
      onListenerError: (err) =>
        log.warn?.(
          `an onUpdate listener of ${JSON.stringify(input.sessionKey)} threw: ${err instanceof Error ? err.message : String(err)}`,
        ),
      onBacklogFull: (bound) =>
        log.warn?.(
          `${JSON.stringify(input.sessionKey)} has no onUpdate listener and its held updates passed ${bound} bytes: the oldest are dropped and counted (sessionStatus droppedUpdates)`,
        ),
      backlogBytes: config.updateLimits.sessionBacklogBytes,
    });
    this.permissions = new PermissionBroker(
      config.onPermissionRequest,
      config.permissionTimeoutMs,
      () => this.handle,
      log,
    );
    this.fsOpts = config.fs;
    if (config.terminal !== undefined && config.supervisor !== undefined) {
      this.terminals = new SessionTerminals({
        supervisor: config.supervisor,
        sessionKey: input.sessionKey,
        sessionId: () => this.acpSessionId,
        cwd: this.cwd,
        env: adapterEnv(input),
        options: config.terminal,
        log,
        budget: this.budget,
        ...(config.durableTerminals !== undefined
          ? {
              durable: {
                terminals: config.durableTerminals,
                session: () =>
                  this.handle === undefined || this.rootStartTime === undefined
                    ? undefined
                    : { leaseId: this.handle.leaseId, pid: this.handle.rootPid, startTicks: this.rootStartTime },
              },
            }
          : {}),
      });
    }
  }

  /** The ACP client's handlers: updates, permissions, and fs / terminals when turned on. */
  clientOptions(): Omit<AcpClientOptions, "input" | "output"> {
    const out: Omit<AcpClientOptions, "input" | "output"> = {
      onUpdate: this.router.deliver,
      requestPermission: this.permissions.answer,
      budget: this.budget,
    };
    if (this.fsOpts !== undefined)
      out.fs = createClientFs(this.fsOpts, this.cwd, () => this.acpSessionId, this.budget.log);
    if (this.terminals !== undefined) out.terminal = this.terminals;
    return out;
  }

  /** The handshake succeeded: the agent session and what the agent advertised. */
  opened(hs: HandshakeResult): void {
    this.acpSessionId = hs.sessionId;
    this.init = hs.init;
    this.opening = hs.opened;
    this.state.adopt(hs.opened.response);
  }

  /** `rootStartTime`: the root's start time as its lease recorded it (what a durable terminal's holder watches by) */
  bind(handle: AcpRuntimeHandle, rootStartTime?: string): void {
    this.handle = handle;
    this.rootStartTime = rootStartTime;
  }

  /**
   * Before the lease is settled: permissions cancelled, ACP session/close
   * (bounded) when the agent advertises it and the adapter still runs, then
   * every terminal's tree ended. Never throws.
   */
  async beforeClose(
    client: AcpClient | undefined,
    adapterRunning: boolean,
    why: string,
  ): Promise<{ sessionCloseSent: boolean }> {
    // from the moment the close begins no terminal is made; one spawning now is ended by end() below
    this.terminals?.refuseNew();
    this.permissions.cancelAll(why);
    // a turn whose consumer lags holds the adapter's stdout: the close's answer must not wait behind it, and
    // what the agent sends from here on goes to the (bounded) backlog; the turn ends with the close error
    this.router.detachTurn();
    client?.stdoutGate.releaseAll();
    let sessionCloseSent = false;
    if (
      client !== undefined &&
      adapterRunning &&
      !this.ended &&
      this.acpSessionId !== undefined &&
      canCloseSession(this.init)
    ) {
      try {
        await withTimeout(
          "session/close",
          SESSION_CLOSE_TIMEOUT_MS,
          client.connection.agent.request("session/close", { sessionId: this.acpSessionId }),
        );
        sessionCloseSent = true;
      } catch (err) {
        this.budget.log.debug?.(
          `session/close of ${JSON.stringify(this.handle?.sessionKey)} got no clean answer: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    await this.end(why);
    return { sessionCloseSent };
  }

  /** The session is over (closed, or its processes ended): terminals ended, listeners dropped. Never throws. */
  async end(why: string): Promise<void> {
    this.ended = true;
    this.permissions.cancelAll(why);
    await this.terminals?.closeAll(why).catch((err: unknown) => {
      this.budget.log.error?.(
        `ending the terminals of ${JSON.stringify(this.handle?.sessionKey)} failed: ${err instanceof Error ? err.message : String(err)}`,
      );
    });
  }
}

/** The environment the adapter was given (without the lease markers, which a terminal's own lease sets). */
function adapterEnv(input: Pick<AcpRuntimeEnsureInput, "env" | "envRemove">): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const k of input.envRemove ?? []) delete env[k];
  Object.assign(env, input.env ?? {});
  delete env[LEASE_ENV_KEY];
  delete env[INSTANCE_ENV_KEY];
  return env;
}

/** The handshake's part of an ensure input: MCP servers, and the agent session to take back. */
export function handshakeFields(
  input: Pick<AcpRuntimeEnsureInput, "mcpServers" | "resumeSessionId">,
): Pick<HandshakeOptions, "mcpServers" | "resumeSessionId"> {
  return {
    ...(input.mcpServers !== undefined ? { mcpServers: input.mcpServers } : {}),
    ...(input.resumeSessionId !== undefined ? { resumeSessionId: input.resumeSessionId } : {}),
  };
}

/** The conversation's part of a new handle. */
export function handleFields(
  conv: SessionConversation,
): Pick<AcpRuntimeHandle, "reused" | "resumed" | "resumeReason" | "agentCapabilities" | "agentInfo"> {
  const o = conv.opening;
  return {
    reused: false,
    resumed: o?.resumed === true,
    ...(o?.resumeReason !== undefined ? { resumeReason: o.resumeReason } : {}),
    agentCapabilities: conv.init?.agentCapabilities ?? {},
    ...(conv.init?.agentInfo ? { agentInfo: conv.init.agentInfo } : {}),
  };
}
