/**
 * The ACP handshake as one step: initialize, protocol version check,
 * authenticate, then the session (session/new, or session/resume /
 * session/load when an earlier agent session is asked back: resume.ts).
 * One deadline bounds the whole handshake (not each step: an agent answering
 * every step just in time must not stretch it), and it is given up as soon
 * as the processes end or the caller aborts (a controller's dispose). The
 * session id the agent answers is checked (session-id.ts) before anything
 * stores it. A failure is a HandshakeFailure, which explainHandshakeFailure
 * turns into the ensure error with what the processes did, the first non-ACP
 * bytes of stdout and the stderr tail (in a field; in the message only when
 * asked).
 */
import type { InitializeResponse, McpServer } from "@agentclientprotocol/sdk";
import { ACP_AUTH_REQUIRED, AcpTimeoutError, SUPPORTED_PROTOCOL_VERSIONS, type AcpClient } from "./acp-client.js";
import {
  acpErrorOf,
  diagnosticsNote,
  type AcpAuthMethodInfo,
  type AcpxEnsureErrorDetails,
  type EnsureFailureCause,
} from "../report/errors.js";
import type { LaunchedWrapper } from "../launch/launch.js";
import { describeEnd, type SessionEnd } from "../launch/wrapper-end.js";
import { hostLimitOf } from "../launch/early-exit.js";
import { openAcpSession, type OpenedSession } from "./resume.js";
import {
  authMethodsOf,
  formatAuthMethods,
  HandshakeFailure,
  type AcpAuthInput,
  type HandshakeStep,
  type StepRunner,
} from "./handshake-steps.js";
import { sessionIdProblem } from "./session-id.js";

export interface HandshakeOptions {
  cwd: string;
  /** the whole handshake: initialize, authenticate, then session/new (or session/resume or session/load) */
  timeoutMs: number;
  /** aborted: the handshake is given up at once (HandshakeFailure "aborted") */
  signal?: AbortSignal;
  auth?: AcpAuthInput;
  /** resolves when the session's processes ended: the handshake stops waiting then */
  ended?: Promise<SessionEnd>;
  /** passed through to session/new (and resume/load) */
  mcpServers?: readonly McpServer[];
  /** the agent session to resume or load (resume.ts); absent = a new session */
  resumeSessionId?: string;
}

export interface HandshakeResult {
  sessionId: string;
  protocolVersion: number;
  authMethods: readonly AcpAuthMethodInfo[];
  /** the method passed to authenticate, when one was */
  authenticatedWith?: string;
  /** the agent's initialize answer (capabilities, agent info) */
  init: InitializeResponse;
  /** how the session was opened: new, resumed or loaded, with the agent's modes and config options */
  opened: OpenedSession;
}

/**
 * initialize → check the protocol version → authenticate (when `auth` names
 * a method) → session/new (or resume/load, resume.ts) → check the session
 * id. `timeoutMs` bounds the whole; each step is given up as soon as `ended`
 * resolves or `signal` aborts. Throws HandshakeFailure.
 */
export async function handshake(client: AcpClient, opts: HandshakeOptions): Promise<HandshakeResult> {
  const bound = new HandshakeBound(opts.timeoutMs, opts.signal);
  try {
    return await handshakeWithin(client, opts, bound);
  } finally {
    bound.dispose();
  }
}

async function handshakeWithin(
  client: AcpClient,
  opts: HandshakeOptions,
  bound: HandshakeBound,
): Promise<HandshakeResult> {
  const step = stepRunner(opts.ended, bound);
  const init = await step("initialize", client.initialize(bound.remainingMs()));
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
  const methodId = await authenticateIfAsked(client, opts, authMethods, step, bound);
  try {
    const opened = await openAcpSession(client, init, {
      cwd: opts.cwd,
      timeoutMs: bound.remainingMs(),
      mcpServers: opts.mcpServers ?? [],
      ...(opts.resumeSessionId !== undefined ? { resumeSessionId: opts.resumeSessionId } : {}),
      step,
    });
    const refused = sessionIdProblem(opened.sessionId);
    if (refused !== null) {
      const asked = opened.via === "new" ? "session/new" : opened.via === "resume" ? "session/resume" : "session/load";
      throw new HandshakeFailure(
        "invalid-session-id",
        asked,
        `the agent answered ${asked} with a session id that is refused: ${refused}`,
      );
    }
    client.stdoutProbe.stop();
    return {
      sessionId: opened.sessionId,
      protocolVersion: version,
      authMethods,
      init,
      opened,
      ...(methodId !== undefined ? { authenticatedWith: methodId } : {}),
    };
  } catch (err) {
    if (
      err instanceof HandshakeFailure &&
      err.kind === "agent-error" &&
      err.info.acpError?.code === ACP_AUTH_REQUIRED
    ) {
      const kind = methodId === undefined ? "auth-required" : "auth-failed";
      const what =
        methodId === undefined
          ? "the agent requires authentication and no auth method was given (ensureSession({ auth: { methodId } }))"
          : `the agent still requires authentication after authenticate(${JSON.stringify(methodId)})`;
      throw new HandshakeFailure(kind, err.step, `${what}; ${formatAuthMethods(authMethods)}`, {
        ...err.info,
        authMethods,
      });
    }
    throw err;
  }
}

/**
 * The handshake's one deadline and the caller's abort, as a promise every
 * step races: it settles (never rejects) with why the handshake stops,
 * "timeout" or "aborted", and the timer is cleared by dispose().
 */
class HandshakeBound {
  private readonly deadline: number;
  private timer: NodeJS.Timeout | undefined;
  private unlisten: () => void = () => undefined;
  readonly stopped: Promise<"timeout" | "aborted">;

  constructor(
    readonly totalMs: number,
    signal: AbortSignal | undefined,
  ) {
    this.deadline = Date.now() + totalMs;
    this.stopped = new Promise((resolve) => {
      if (signal?.aborted) return resolve("aborted");
      this.timer = setTimeout(() => resolve("timeout"), totalMs);
      // a gateway must be able to exit while an adapter dawdles
      this.timer.unref();
      if (signal === undefined) return;
      const onAbort = (): void => resolve("aborted");
      signal.addEventListener("abort", onAbort, { once: true });
      this.unlisten = () => signal.removeEventListener("abort", onAbort);
    });
  }

  /** what is left of the handshake's time, for a request's own timeout (at least 1 ms) */
  remainingMs(): number {
    return Math.max(1, this.deadline - Date.now());
  }

  /** `p`, or the HandshakeFailure of the deadline or the abort, whichever comes first */
  race<T>(name: HandshakeStep, p: Promise<T>): Promise<T> {
    const stop = this.stopped.then((why): never => {
      throw why === "aborted"
        ? new HandshakeFailure("aborted", name, `the handshake was aborted at ACP ${name} (the controller ended)`)
        : this.timedOut(name);
    });
    return Promise.race([p, stop]);
  }

  timedOut(name: HandshakeStep, cause?: unknown): HandshakeFailure {
    return new HandshakeFailure(
      "timeout",
      name,
      `the adapter never answered ACP ${name} within the handshake timeout (${this.totalMs} ms for the whole handshake)`,
      cause === undefined ? {} : { cause },
    );
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.unlisten();
  }
}

function stepRunner(endedP: Promise<SessionEnd> | undefined, bound: HandshakeBound): StepRunner {
  return async <T>(name: HandshakeStep, p: Promise<T>): Promise<T> => {
    const ended = endedP?.then((end) => {
      throw new HandshakeFailure("ended", name, describeEnd(end, `ACP ${name}`), { end });
    });
    ended?.catch(() => undefined);
    try {
      return await bound.race(name, ended ? Promise.race([p, ended]) : p);
    } catch (err) {
      if (err instanceof HandshakeFailure) throw err;
      if (err instanceof AcpTimeoutError) throw bound.timedOut(name, err);
      const acpError = acpErrorOf(err);
      if (acpError) {
        throw new HandshakeFailure(
          "agent-error",
          name,
          `ACP ${name} failed: ${acpError.message} (code ${acpError.code})`,
          { acpError, cause: err },
        );
      }
      throw new HandshakeFailure(
        "closed",
        name,
        `ACP ${name} failed: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err },
      );
    }
  };
}

/** ACP authenticate when `auth` names a method (or its resolver picks one); the method id, or undefined. */
async function authenticateIfAsked(
  client: AcpClient,
  opts: HandshakeOptions,
  authMethods: readonly AcpAuthMethodInfo[],
  step: StepRunner,
  bound: HandshakeBound,
): Promise<string | undefined> {
  if (opts.auth === undefined) return undefined;
  let methodId: string | undefined;
  try {
    // the caller's resolver is part of the handshake: bounded by its deadline and abort as well
    methodId =
      typeof opts.auth === "function"
        ? await bound.race("authenticate", Promise.resolve(opts.auth(authMethods)))
        : opts.auth.methodId;
  } catch (err) {
    if (err instanceof HandshakeFailure) throw err;
    throw new HandshakeFailure(
      "auth-failed",
      "authenticate",
      `the auth resolver threw: ${err instanceof Error ? err.message : String(err)}; ${formatAuthMethods(authMethods)}`,
      {
        authMethods,
        cause: err,
      },
    );
  }
  if (methodId === undefined) return undefined;
  if (typeof methodId !== "string" || methodId === "") {
    throw new HandshakeFailure(
      "auth-failed",
      "authenticate",
      `the auth resolver returned ${JSON.stringify(methodId)}, not a method id; ${formatAuthMethods(authMethods)}`,
      { authMethods },
    );
  }
  const method = authMethods.find((m) => m.id === methodId);
  if (!method) {
    throw new HandshakeFailure(
      "auth-failed",
      "authenticate",
      `auth method ${JSON.stringify(methodId)} is not one the agent offers; ${formatAuthMethods(authMethods)}`,
      { authMethods },
    );
  }
  if (method.type === "terminal") {
    throw new HandshakeFailure(
      "auth-failed",
      "authenticate",
      `auth method ${JSON.stringify(methodId)} is a terminal method, which ACP forbids passing to authenticate; ${formatAuthMethods(authMethods)}`,
      { authMethods },
    );
  }
  try {
    await step("authenticate", client.authenticate(methodId, bound.remainingMs()));
  } catch (err) {
    if (err instanceof HandshakeFailure && err.kind === "agent-error") {
      throw new HandshakeFailure(
        "auth-failed",
        "authenticate",
        `ACP authenticate(${JSON.stringify(methodId)}) failed: ${err.info.acpError?.message ?? err.message}; ${formatAuthMethods(authMethods)}`,
        {
          ...err.info,
          authMethods,
        },
      );
    }
    throw err;
  }
  return methodId;
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
  extra: { client?: Pick<AcpClient, "stdoutProbe">; stderrInMessage?: boolean } = {},
): Promise<{ cause: EnsureFailureCause; message: string; details: AcpxEnsureErrorDetails }> {
  const f =
    err instanceof HandshakeFailure ? err : new HandshakeFailure("closed", "initialize", String(err), { cause: err });
  let end = f.info.end ?? launched.howEnded();
  if (end === undefined && f.kind === "closed") {
    end = await Promise.race([
      launched.ended,
      new Promise<undefined>((r) => setTimeout(() => r(undefined), waitMs).unref()),
    ]);
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
  const nonAcp = extra.client?.stdoutProbe.nonAcpLine();
  if (nonAcp !== undefined) details.stdoutHead = extra.client!.stdoutProbe.head();
  let cause: EnsureFailureCause;
  let message = f.message;
  switch (f.kind) {
    case "timeout":
      cause = "handshake-timeout";
      break;
    case "protocol-version":
    case "auth-required":
    case "auth-failed":
    case "invalid-session-id":
      cause = f.kind;
      break;
    default:
      if (end === undefined) cause = "handshake-error";
      else {
        cause = end.kind === "adapter-exited" ? "adapter-exited" : "wrapper-failed";
        if (f.kind !== "ended") message = describeEnd(end, `ACP ${f.step}`);
        // an adapter that could not make its threads (a pids cgroup at its limit) is named as such
        const host =
          end.kind === "adapter-exited" && (end.signal !== null || end.code !== 0)
            ? hostLimitOf(message, stderrTail ?? "")
            : undefined;
        if (host !== undefined) message = host.message;
        if (f.info.acpError) message += ` (the agent had answered: ${f.info.acpError.message})`;
      }
  }
  if (nonAcp !== undefined)
    message += `; the adapter wrote something other than ACP on stdout: ${JSON.stringify(nonAcp)} (stdoutHead)`;
  return { cause, message: message + diagnosticsNote(details, extra.stderrInMessage === true), details };
}
