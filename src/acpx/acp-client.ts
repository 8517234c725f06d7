/**
 * The controller's side of ACP: a thin layer over the SDK's client app,
 * speaking newline-delimited JSON-RPC over the adapter's stdin/stdout (which
 * pass through the wrapper untouched). It adds what the lifecycle needs and
 * the SDK leaves to callers: timeouts on the handshake and a way to fail every
 * pending request with one named error when the session is torn down; the
 * handshake as one step (initialize, protocol version check, authenticate,
 * session/new: `handshake`); and a bounded turn (`startTurn`: timeout and
 * abort send session/cancel, wait a bounded grace, then reject typed).
 */
import { Readable, Writable } from "node:stream";
import {
  client as acpClient,
  ndJsonStream,
  PROTOCOL_VERSION,
  type ClientConnection,
  type InitializeResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import {
  acpErrorOf,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxSessionClosedError,
  diagnosticsNote,
  type AcpAuthMethodInfo,
  type AcpErrorInfo,
  type AcpxEnsureErrorDetails,
  type EnsureFailureCause,
  type InterruptedTurn,
  type PromptFailureCause,
} from "./errors.js";
import { describeEnd, type LaunchedWrapper, type SessionEnd } from "./launch.js";
import type { AcpAuthInput, PromptOptions } from "./types.js";

/**
 * The ACP protocol versions this client speaks: the SDK's v1 client speaks
 * exactly its PROTOCOL_VERSION. An agent answering initialize with any other
 * version is refused (the spec: the client disconnects), never half-spoken to.
 */
export const SUPPORTED_PROTOCOL_VERSIONS: readonly number[] = Object.freeze([PROTOCOL_VERSION]);

/** JSON-RPC error code of ACP's auth_required. */
export const ACP_AUTH_REQUIRED = -32000;

/** Default wait for a turn to end after session/cancel (prompt timeout or abort). */
export const DEFAULT_CANCEL_GRACE_MS = 2000;
/** Upper bound for a prompt timeout: what a Node timer can hold (about 24.8 days). */
export const MAX_PROMPT_TIMEOUT_MS = 2 ** 31 - 1;

export class AcpTimeoutError extends Error {
  override name = "AcpTimeoutError";
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super(`ACP ${method} got no answer within ${timeoutMs} ms`);
  }
}

export interface AcpClientOptions {
  /** the adapter's stdout, as seen by the controller */
  input: Readable;
  /** the adapter's stdin */
  output: Writable;
  onUpdate?: (n: SessionNotification) => void;
}

export class AcpClient {
  readonly connection: ClientConnection;

  constructor(opts: AcpClientOptions) {
    const app = acpClient({ name: "proclease" })
      .onNotification("session/update", ({ params }) => {
        opts.onUpdate?.(params);
      })
      // The controller runs no tools: a permission request is answered
      // "cancelled" so an adapter never blocks a turn waiting for a human.
      .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" as const } }));
    const stream = ndJsonStream(
      Writable.toWeb(opts.output) as WritableStream<Uint8Array>,
      Readable.toWeb(opts.input) as ReadableStream<Uint8Array>,
    );
    this.connection = app.connect(stream);
  }

  get closed(): Promise<void> {
    return this.connection.closed;
  }

  initialize(timeoutMs: number): Promise<InitializeResponse> {
    return withTimeout(
      "initialize",
      timeoutMs,
      this.connection.agent.request("initialize", {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "proclease", version: "0.1.0" },
      }),
    );
  }

  authenticate(methodId: string, timeoutMs: number): Promise<unknown> {
    return withTimeout("authenticate", timeoutMs, this.connection.agent.request("authenticate", { methodId }));
  }

  async newSession(cwd: string, timeoutMs: number): Promise<string> {
    const res = await withTimeout(
      "session/new",
      timeoutMs,
      this.connection.agent.request("session/new", { cwd, mcpServers: [] }),
    );
    if (typeof res.sessionId !== "string" || res.sessionId.length === 0) {
      throw new Error("ACP session/new answered without a sessionId");
    }
    return res.sessionId;
  }

  async prompt(sessionId: string, text: string): Promise<{ stopReason: string }> {
    const res = await this.connection.agent.request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text }],
    });
    return { stopReason: res.stopReason };
  }

  /** a notification: the running prompt answers `cancelled`; nothing is signalled */
  cancel(sessionId: string): Promise<void> {
    return this.connection.agent.notify("session/cancel", { sessionId });
  }

  /** Rejects every pending request with `reason` and stops reading. */
  close(reason?: Error): void {
    this.connection.close(reason);
  }
}

export async function withTimeout<T>(method: string, timeoutMs: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AcpTimeoutError(method, timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ------------------------------------------------------------------ handshake

export interface HandshakeOptions {
  cwd: string;
  /** per step (initialize, authenticate, session/new) */
  timeoutMs: number;
  auth?: AcpAuthInput;
  /** resolves when the session's processes ended: the handshake stops waiting then */
  ended?: Promise<SessionEnd>;
}

export interface HandshakeResult {
  sessionId: string;
  protocolVersion: number;
  authMethods: readonly AcpAuthMethodInfo[];
  /** the method passed to authenticate, when one was */
  authenticatedWith?: string;
}

export type HandshakeStep = "initialize" | "authenticate" | "session/new";

/** Why the handshake failed, before the controller adds what the processes did (explainHandshakeFailure). */
export class HandshakeFailure extends Error {
  override name = "HandshakeFailure";
  constructor(
    readonly kind: "timeout" | "agent-error" | "closed" | "ended" | "protocol-version" | "auth-required" | "auth-failed",
    readonly step: HandshakeStep,
    message: string,
    readonly info: {
      acpError?: AcpErrorInfo;
      authMethods?: readonly AcpAuthMethodInfo[];
      agentProtocolVersion?: unknown;
      end?: SessionEnd;
      cause?: unknown;
    } = {},
  ) {
    super(message, info.cause === undefined ? undefined : { cause: info.cause });
  }
}

/** Validates ensureSession's `auth`: `{ methodId: non-empty string }` or a resolver function. */
export function assertAuthInput(value: unknown, name = "auth"): asserts value is AcpAuthInput {
  if (typeof value === "function") return;
  if (typeof value !== "object" || value === null) {
    throw new TypeError(`${name} must be { methodId: string } or a function choosing one of the agent's auth methods`);
  }
  const id = (value as { methodId?: unknown }).methodId;
  if (typeof id !== "string" || id.length === 0) throw new TypeError(`${name}.methodId must be a non-empty string`);
}

/** The agent's advertised auth methods, as plain data (malformed entries are dropped). */
export function authMethodsOf(res: { authMethods?: unknown }): AcpAuthMethodInfo[] {
  if (!Array.isArray(res.authMethods)) return [];
  const out: AcpAuthMethodInfo[] = [];
  for (const m of res.authMethods as unknown[]) {
    if (typeof m !== "object" || m === null) continue;
    const r = m as Record<string, unknown>;
    if (typeof r.id !== "string" || r.id === "") continue;
    const info: AcpAuthMethodInfo = { id: r.id, name: typeof r.name === "string" ? r.name : r.id };
    if (typeof r.description === "string") info.description = r.description;
    if (typeof r.type === "string") info.type = r.type;
    out.push(info);
  }
  return out;
}

/** `id (name)` for each method, for messages. */
export function formatAuthMethods(methods: readonly AcpAuthMethodInfo[]): string {
  if (methods.length === 0) return "the agent advertised no auth methods";
  return `the agent offers: ${methods.map((m) => (m.name && m.name !== m.id ? `${m.id} (${m.name})` : m.id)).join(", ")}`;
}

/**
 * initialize → check the protocol version → authenticate (when `auth` names
 * a method) → session/new. Each step is bounded by `timeoutMs` and given up
 * as soon as `ended` resolves. Throws HandshakeFailure.
 */
export async function handshake(client: AcpClient, opts: HandshakeOptions): Promise<HandshakeResult> {
  const step = async <T>(name: HandshakeStep, p: Promise<T>): Promise<T> => {
    const ended = opts.ended?.then((end) => {
      throw new HandshakeFailure("ended", name, describeEnd(end, `ACP ${name}`), { end });
    });
    ended?.catch(() => undefined);
    try {
      return await (ended ? Promise.race([p, ended]) : p);
    } catch (err) {
      if (err instanceof HandshakeFailure) throw err;
      if (err instanceof AcpTimeoutError) {
        throw new HandshakeFailure("timeout", name, `the adapter never answered ACP ${name} (timeout ${err.timeoutMs} ms)`, { cause: err });
      }
      const acpError = acpErrorOf(err);
      if (acpError) {
        throw new HandshakeFailure("agent-error", name, `ACP ${name} failed: ${acpError.message} (code ${acpError.code})`, { acpError, cause: err });
      }
      throw new HandshakeFailure("closed", name, `ACP ${name} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  };

  const init = await step("initialize", client.initialize(opts.timeoutMs));
  const authMethods = authMethodsOf(init);
  const version: unknown = init.protocolVersion;
  if (typeof version !== "number" || !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
    throw new HandshakeFailure(
      "protocol-version",
      "initialize",
      `the agent answered initialize with ACP protocol version ${JSON.stringify(version)}; this client ` +
        `(@agentclientprotocol/sdk, v1) speaks ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")} only`,
      { agentProtocolVersion: version, authMethods },
    );
  }

  let methodId: string | undefined;
  if (opts.auth !== undefined) {
    try {
      methodId = typeof opts.auth === "function" ? await opts.auth(authMethods) : opts.auth.methodId;
    } catch (err) {
      throw new HandshakeFailure("auth-failed", "authenticate", `the auth resolver threw: ${err instanceof Error ? err.message : String(err)}; ${formatAuthMethods(authMethods)}`, {
        authMethods,
        cause: err,
      });
    }
    if (methodId !== undefined && (typeof methodId !== "string" || methodId === "")) {
      throw new HandshakeFailure("auth-failed", "authenticate", `the auth resolver returned ${JSON.stringify(methodId)}, not a method id; ${formatAuthMethods(authMethods)}`, { authMethods });
    }
  }
  if (methodId !== undefined) {
    const method = authMethods.find((m) => m.id === methodId);
    if (!method) {
      throw new HandshakeFailure("auth-failed", "authenticate", `auth method ${JSON.stringify(methodId)} is not one the agent offers; ${formatAuthMethods(authMethods)}`, { authMethods });
    }
    if (method.type === "terminal") {
      throw new HandshakeFailure("auth-failed", "authenticate", `auth method ${JSON.stringify(methodId)} is a terminal method, which ACP forbids passing to authenticate; ${formatAuthMethods(authMethods)}`, { authMethods });
    }
    try {
      await step("authenticate", client.authenticate(methodId, opts.timeoutMs));
    } catch (err) {
      if (err instanceof HandshakeFailure && err.kind === "agent-error") {
        throw new HandshakeFailure("auth-failed", "authenticate", `ACP authenticate(${JSON.stringify(methodId)}) failed: ${err.info.acpError?.message ?? err.message}; ${formatAuthMethods(authMethods)}`, {
          ...err.info,
          authMethods,
        });
      }
      throw err;
    }
  }

  try {
    const sessionId = await step("session/new", client.newSession(opts.cwd, opts.timeoutMs));
    return { sessionId, protocolVersion: version, authMethods, ...(methodId !== undefined ? { authenticatedWith: methodId } : {}) };
  } catch (err) {
    if (err instanceof HandshakeFailure && err.kind === "agent-error" && err.info.acpError?.code === ACP_AUTH_REQUIRED) {
      const kind = methodId === undefined ? "auth-required" : "auth-failed";
      const what =
        methodId === undefined
          ? "the agent requires authentication and no auth method was given (ensureSession({ auth: { methodId } }))"
          : `the agent still requires authentication after authenticate(${JSON.stringify(methodId)})`;
      throw new HandshakeFailure(kind, "session/new", `${what}; ${formatAuthMethods(authMethods)}`, { ...err.info, authMethods });
    }
    throw err;
  }
}

/**
 * The ensure failure for a failed handshake, with what the processes did: a
 * connection that closed is explained by how the session ended (waiting up to
 * `waitMs` for the exit to be known), and a wrapper killed by a signal is
 * named as such, never blamed on the adapter. Details carry the ACP error
 * (with its data), the stderr tail and the agent's auth methods.
 */
export async function explainHandshakeFailure(
  err: unknown,
  launched: Pick<LaunchedWrapper, "howEnded" | "ended" | "stderrTail" | "stderrSettled">,
  waitMs = 500,
): Promise<{ cause: EnsureFailureCause; message: string; details: AcpxEnsureErrorDetails }> {
  const f = err instanceof HandshakeFailure ? err : new HandshakeFailure("closed", "initialize", String(err), { cause: err });
  let end = f.info.end ?? launched.howEnded();
  if (end === undefined && f.kind === "closed") {
    end = await Promise.race([launched.ended, new Promise<undefined>((r) => setTimeout(() => r(undefined), waitMs).unref())]);
  }
  await launched.stderrSettled();
  const details: AcpxEnsureErrorDetails = {
    cause: f.info.cause ?? f,
    ...(f.info.acpError ? { acpError: f.info.acpError } : {}),
    ...(f.info.authMethods ? { authMethods: f.info.authMethods } : {}),
    ...(f.info.agentProtocolVersion !== undefined ? { agentProtocolVersion: f.info.agentProtocolVersion } : {}),
    ...(end ? { end } : {}),
  };
  const stderrTail = launched.stderrTail();
  if (stderrTail) details.stderrTail = stderrTail;
  let cause: EnsureFailureCause;
  let message = f.message;
  switch (f.kind) {
    case "timeout":
      cause = "handshake-timeout";
      break;
    case "protocol-version":
    case "auth-required":
    case "auth-failed":
      cause = f.kind;
      break;
    default:
      if (end === undefined) cause = "handshake-error";
      else {
        cause = end.kind === "adapter-exited" ? "adapter-exited" : "wrapper-failed";
        if (f.kind !== "ended") message = describeEnd(end, `ACP ${f.step}`);
        if (f.info.acpError) message += ` (the agent had answered: ${f.info.acpError.message})`;
      }
  }
  return { cause, message: message + diagnosticsNote(details), details };
}

// ------------------------------------------------------------------ turns

/** Validates prompt options (signal, timeoutMs, cancelGraceMs); throws TypeError / RangeError naming the field. */
export function assertPromptOptions(opts: unknown): asserts opts is PromptOptions | undefined {
  if (opts === undefined) return;
  if (typeof opts !== "object" || opts === null) throw new TypeError("prompt options must be an object");
  const o = opts as Record<string, unknown>;
  if (o.signal !== undefined) {
    const sig = o.signal as { aborted?: unknown; addEventListener?: unknown } | null;
    if (typeof sig !== "object" || sig === null || typeof sig.aborted !== "boolean" || typeof sig.addEventListener !== "function") {
      throw new TypeError("options.signal must be an AbortSignal");
    }
  }
  if (o.timeoutMs !== undefined) {
    if (typeof o.timeoutMs !== "number" || !Number.isFinite(o.timeoutMs)) throw new TypeError(`options.timeoutMs must be a number of milliseconds, got ${String(o.timeoutMs)}`);
    if (o.timeoutMs <= 0 || o.timeoutMs > MAX_PROMPT_TIMEOUT_MS) {
      throw new RangeError(`options.timeoutMs must be > 0 and <= ${MAX_PROMPT_TIMEOUT_MS}, got ${o.timeoutMs}`);
    }
  }
  if (o.cancelGraceMs !== undefined) {
    if (typeof o.cancelGraceMs !== "number" || !Number.isInteger(o.cancelGraceMs)) {
      throw new TypeError(`options.cancelGraceMs must be an integer number of milliseconds, got ${String(o.cancelGraceMs)}`);
    }
    if (o.cancelGraceMs < 0 || o.cancelGraceMs > 600_000) throw new RangeError(`options.cancelGraceMs must be between 0 and 600000, got ${o.cancelGraceMs}`);
  }
}

export interface TurnContext {
  sessionKey: string;
  acpSessionId: string;
  text: string;
  options?: PromptOptions;
  launched: Pick<LaunchedWrapper, "howEnded" | "ended" | "onEnd" | "stderrTail" | "stderrSettled">;
}

export interface StartedTurn {
  /**
   * The ACP request itself, settling when the agent ends the turn (or the
   * connection closes); null when nothing was sent (aborted before the start).
   * A turn given up on still runs until this settles.
   */
  request: Promise<{ stopReason: string }> | null;
  /** what prompt() returns: the turn's result, or the typed error */
  result: Promise<{ stopReason: string }>;
}

/**
 * Sends one session/prompt and bounds it. On timeout or abort: session/cancel,
 * then up to cancelGraceMs for the agent to end the turn, then a rejection
 * with AcpxPromptTimeoutError / AcpxPromptAbortError (turnEnded says whether
 * the session is free again). When the session's processes end first, an
 * AcpxPromptError names how (a killed wrapper as such). An error answer of
 * the agent becomes AcpxPromptError("agent-error") with its data and the
 * stderr tail. AcpxSessionClosedError (a close) passes through unchanged.
 */
export function startTurn(client: AcpClient, ctx: TurnContext): StartedTurn {
  const opts = ctx.options ?? {};
  const grace = opts.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS;
  const signal = opts.signal;
  if (signal?.aborted) {
    const turn: InterruptedTurn = { cancelSent: false, turnEnded: true, cancelGraceMs: grace };
    return { request: null, result: Promise.reject(new AcpxPromptAbortError(ctx.sessionKey, turn, { cause: signal.reason })) };
  }
  const over = sessionEndedError(ctx.sessionKey, ctx.launched);
  if (over !== undefined) return { request: null, result: Promise.reject(over) };
  const request = client.prompt(ctx.acpSessionId, ctx.text);
  // the caller may stop waiting before the request settles; it must never be an unhandled rejection
  request.catch(() => undefined);

  const result = new Promise<{ stopReason: string }>((resolve, reject) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    let unsubscribe = (): void => undefined;
    const finish = (): boolean => {
      if (done) return false;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      unsubscribe();
      return true;
    };
    const interrupt = async (why: "timeout" | "abort"): Promise<void> => {
      if (!finish()) return;
      let cancelSent = true;
      try {
        await client.cancel(ctx.acpSessionId);
      } catch {
        cancelSent = false; // the connection is gone; the turn's own settlement says how
      }
      const settled = await Promise.race([
        request.then(
          (r) => ({ ended: true as const, stopReason: r.stopReason, error: undefined as unknown }),
          (error: unknown) => ({ ended: true as const, stopReason: undefined, error }),
        ),
        new Promise<{ ended: false }>((r) => setTimeout(() => r({ ended: false }), grace).unref()),
      ]);
      if (settled.ended && settled.error instanceof AcpxSessionClosedError) return reject(settled.error);
      const turn: InterruptedTurn = {
        cancelSent,
        turnEnded: settled.ended,
        cancelGraceMs: grace,
        ...(settled.ended && settled.stopReason !== undefined ? { stopReason: settled.stopReason } : {}),
      };
      if (!settled.ended) await ctx.launched.stderrSettled();
      const tail = ctx.launched.stderrTail();
      if (tail) turn.stderrTail = tail;
      const cause = settled.ended ? settled.error : undefined;
      reject(
        why === "timeout"
          ? new AcpxPromptTimeoutError(ctx.sessionKey, opts.timeoutMs!, turn, cause === undefined ? undefined : { cause })
          : new AcpxPromptAbortError(ctx.sessionKey, turn, { cause: signal?.reason }),
      );
    };
    const onAbort = (): void => void interrupt("abort");
    signal?.addEventListener("abort", onAbort, { once: true });
    if (opts.timeoutMs !== undefined) timer = setTimeout(() => void interrupt("timeout"), opts.timeoutMs);

    request.then(
      (r) => {
        if (finish()) resolve(r);
      },
      (err: unknown) => {
        if (!finish()) return;
        void explainTurnFailure(err, ctx).then(reject);
      },
    );
    // the adapter's exit also closes the connection; whichever comes first, one error names it
    unsubscribe = ctx.launched.onEnd((end) => {
      if (!finish()) return;
      void ctx.launched.stderrSettled().then(() => reject(turnEndedError(ctx, end, undefined)));
    });
  });
  return { request, result };
}

/**
 * The error for a prompt on a session whose wrapper or adapter is gone, else
 * undefined. Such a session takes no turn: after a killed wrapper the adapter
 * may still answer, but nothing supervises it any more (its lease does).
 */
export function sessionEndedError(sessionKey: string, launched: Pick<LaunchedWrapper, "howEnded" | "stderrTail">): AcpxPromptError | undefined {
  const end = launched.howEnded();
  return end === undefined ? undefined : turnEndedError({ sessionKey, launched }, end, undefined);
}

function turnEndedError(ctx: Pick<TurnContext, "sessionKey"> & { launched: Pick<LaunchedWrapper, "stderrTail"> }, end: SessionEnd, cause: unknown): AcpxPromptError {
  const failure: PromptFailureCause = end.kind;
  const stderrTail = ctx.launched.stderrTail();
  const details = { end, ...(stderrTail ? { stderrTail } : {}), ...(cause !== undefined ? { cause } : {}) };
  return new AcpxPromptError(
    ctx.sessionKey,
    failure,
    `ACP session ${JSON.stringify(ctx.sessionKey)}: ${describeEnd(end, "the prompt")}${diagnosticsNote(details)}`,
    details,
  );
}

async function explainTurnFailure(err: unknown, ctx: TurnContext): Promise<Error> {
  if (err instanceof AcpxSessionClosedError) return err;
  const acpError = acpErrorOf(err);
  await ctx.launched.stderrSettled();
  const stderrTail = ctx.launched.stderrTail();
  if (acpError) {
    const details = { acpError, cause: err, ...(stderrTail ? { stderrTail } : {}) };
    return new AcpxPromptError(
      ctx.sessionKey,
      "agent-error",
      `ACP session/prompt on ${JSON.stringify(ctx.sessionKey)} failed: ${acpError.message} (code ${acpError.code})${diagnosticsNote(details)}`,
      details,
    );
  }
  // the connection closed: usually the processes ended; wait briefly to say how
  const end = ctx.launched.howEnded() ?? (await Promise.race([ctx.launched.ended, new Promise<undefined>((r) => setTimeout(() => r(undefined), 500).unref())]));
  if (end) return turnEndedError(ctx, end, err);
  const details = { cause: err, ...(stderrTail ? { stderrTail } : {}) };
  return new AcpxPromptError(
    ctx.sessionKey,
    "connection-lost",
    `ACP session/prompt on ${JSON.stringify(ctx.sessionKey)} failed: ${err instanceof Error ? err.message : String(err)}${diagnosticsNote(details)}`,
    details,
  );
}
