/**
 * Errors the controller throws. Each names its cause in the message and
 * carries it as a typed field, so callers can branch without parsing text.
 */

import type { SessionEnd } from "../launch/wrapper-end.js";

/** Why ensureSession failed. */
export type EnsureFailureCause =
  | "spawn-error" // the wrapper could not start the adapter (missing executable, EACCES, …)
  | "wrapper-failed" // the wrapper itself could not be started, died before reporting, or was killed (by a signal) during the handshake
  | "adapter-exited" // the adapter exited during the ACP handshake
  | "handshake-timeout" // the adapter never answered initialize / authenticate / session/new in time
  | "handshake-error" // the adapter answered the handshake with an error
  | "protocol-version" // the agent answered initialize with an ACP protocol version this client cannot speak
  | "auth-required" // the agent requires ACP authenticate and no method was given (authMethods lists the agent's)
  | "auth-failed" // the given method is not one the agent offers, authenticate failed, or the agent still required auth after it
  | "invalid-session-id" // the agent answered session/new (or resume/load) with a session id that is too long or not printable
  | "aborted" // dispose() or shutdown() ended the ensure (the cause of the AcpxControllerDisposedError it rejected with)
  | "limits-unavailable" // limits were asked for and cannot be applied (containment off, controller not on cgroup v2, write refused); nothing ran unlimited
  | "limits-mismatch" // the key's session is already running with other limits than the ones asked for; it was left alone
  | "session-mismatch"; // the key's session is already running with another command, agentId or cwd (ask replace: true to replace it)

/** An error answer of the agent (a JSON-RPC error object), kept as received. */
export interface AcpErrorInfo {
  code: number;
  message: string;
  /** the agent's own details, often the real cause ("Internal error" alone says little) */
  data?: unknown;
}

/** One of the agent's ACP auth methods, as its initialize answer advertised it. */
export interface AcpAuthMethodInfo {
  id: string;
  name: string;
  description?: string;
  /** "terminal" for methods ACP forbids passing to authenticate; absent = the agent's own ("agent") */
  type?: string;
}

/** What the gateway saw of a failing adapter, carried by every ensure and prompt error. */
export interface AcpxDiagnostics {
  /** the agent's JSON-RPC error answer, when the failure was one */
  acpError?: AcpErrorInfo;
  /** the adapter's most recent stderr (at most 16 KB), when it wrote any */
  stderrTail?: string;
  /** how its processes ended, when they did */
  end?: SessionEnd;
}

/** The JSON-RPC error carried by `err` (the SDK's RequestError or any {code, message, data}), else undefined. */
export function acpErrorOf(err: unknown): AcpErrorInfo | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { code?: unknown; message?: unknown; data?: unknown };
  if (typeof e.code !== "number" || !Number.isInteger(e.code) || typeof e.message !== "string") return undefined;
  return e.data === undefined
    ? { code: e.code, message: e.message }
    : { code: e.code, message: e.message, data: e.data };
}

// CSI sequences (colours, cursor moves) and OSC strings
const ANSI_ESCAPE = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/g;
const DATA_IN_MESSAGE = 600;
const STDERR_LINES_IN_MESSAGE = 6;
const STDERR_CHARS_IN_MESSAGE = 1000;

/**
 * The message suffix for diagnostics: the error's data (JSON, cut at 600
 * chars) and, only when `includeStderr` (the controller's
 * `stderrInMessages`), the last lines of stderr (cut at 1000 chars).
 * Otherwise the message only says how much stderr the `stderrTail` field
 * holds: an adapter's stderr can echo prompt text, and error messages end up
 * in gateway logs. The fields keep everything.
 */
export function diagnosticsNote(d: AcpxDiagnostics, includeStderr = false): string {
  let note = "";
  if (d.acpError?.data !== undefined) {
    let data: string;
    try {
      data = typeof d.acpError.data === "string" ? d.acpError.data : JSON.stringify(d.acpError.data);
    } catch {
      data = String(d.acpError.data);
    }
    note += `; error data: ${data.length > DATA_IN_MESSAGE ? `${data.slice(0, DATA_IN_MESSAGE)}…` : data}`;
  }
  // colour codes (codex-acp logs in colour) are noise in a log line; the field keeps them
  const tail = d.stderrTail?.replace(ANSI_ESCAPE, "").trim();
  if (tail && !includeStderr) {
    note += `; the adapter wrote ${Buffer.byteLength(d.stderrTail!, "utf8")} bytes of stderr (in the error's stderrTail)`;
  } else if (tail) {
    const lines = tail.split("\n").slice(-STDERR_LINES_IN_MESSAGE).join(" | ");
    note += `; adapter stderr: ${lines.length > STDERR_CHARS_IN_MESSAGE ? `…${lines.slice(-STDERR_CHARS_IN_MESSAGE)}` : lines}`;
  }
  return note;
}

/** Why ensureSession's limits were refused (the failures "limits-unavailable" and "limits-mismatch"). */
export interface LimitsRefusal {
  /** the cgroup controller that could not be had ("memory", "pids"), when one was the cause */
  controller?: string;
  /** the reason, in an operator's words (applyLimits's or detection's why) */
  why: string;
}

export interface AcpxEnsureErrorDetails extends AcpxDiagnostics {
  cause?: unknown;
  /** the agent's auth methods, when it advertised any (always set for auth-required / auth-failed) */
  authMethods?: readonly AcpAuthMethodInfo[];
  /** the protocol version the agent answered initialize with */
  agentProtocolVersion?: unknown;
  /** set for "limits-unavailable" and "limits-mismatch" */
  limitsRefusal?: LimitsRefusal;
  /** the first bytes of the adapter's stdout, when a line of them was not ACP (a banner, a usage text) */
  stdoutHead?: string;
}

export class AcpxEnsureError extends Error {
  override name = "AcpxEnsureError";
  readonly acpError: AcpErrorInfo | undefined;
  readonly stderrTail: string | undefined;
  readonly end: SessionEnd | undefined;
  readonly authMethods: readonly AcpAuthMethodInfo[] | undefined;
  readonly agentProtocolVersion: unknown;
  readonly limitsRefusal: LimitsRefusal | undefined;
  readonly stdoutHead: string | undefined;
  /** the failure, as every proclease error names its cause */
  get code(): EnsureFailureCause {
    return this.failure;
  }
  constructor(
    readonly sessionKey: string,
    readonly failure: EnsureFailureCause,
    message: string,
    /** the lease that was written for the attempt, settled before this was thrown */
    readonly leaseId: string | undefined,
    /**
     * its state then: "closed" (a verified kill completed), "lost" (nothing of
     * it alive), or "closing" when something may still run or the facts could
     * not tell (the maintenance timer and startup reaping retry it)
     */
    readonly leaseState: string | undefined,
    options?: AcpxEnsureErrorDetails,
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.acpError = options?.acpError;
    this.stderrTail = options?.stderrTail || undefined;
    this.end = options?.end;
    this.authMethods = options?.authMethods;
    this.agentProtocolVersion = options?.agentProtocolVersion;
    this.limitsRefusal = options?.limitsRefusal;
    this.stdoutHead = options?.stdoutHead;
  }
}

/** A prompt that was running when its session was closed. */
export class AcpxSessionClosedError extends Error {
  override name = "AcpxSessionClosedError";
  readonly code = "session-closed";
  constructor(
    readonly sessionKey: string,
    readonly reason: string | undefined,
  ) {
    super(
      `ACP session ${JSON.stringify(sessionKey)} was closed while a prompt was running${reason ? ` (${reason})` : ""}`,
    );
  }
}

/** prompt on a handle this controller has no live connection for. */
export class AcpxNoSessionError extends Error {
  override name = "AcpxNoSessionError";
  readonly code = "no-session";
  constructor(
    readonly sessionKey: string,
    detail: string,
  ) {
    super(`no live ACP session for ${JSON.stringify(sessionKey)}: ${detail}`);
  }
}

/** Why a prompt failed (other than a timeout, an abort or a close). */
export type PromptFailureCause =
  | "agent-error" // the agent answered session/prompt with an error (acpError)
  | "adapter-exited" // the adapter exited during the turn
  | "wrapper-killed" // the wrapper died by a signal during the turn: the session lost its supervisor
  | "wrapper-exited" // the wrapper exited without reporting an adapter exit
  | "connection-lost"; // the ACP connection ended and no process exit explains it (yet)

/** A prompt that failed; carries what the gateway saw (ACP error data, stderr tail, how it ended). */
export class AcpxPromptError extends Error {
  override name = "AcpxPromptError";
  get code(): PromptFailureCause {
    return this.failure;
  }
  readonly acpError: AcpErrorInfo | undefined;
  readonly stderrTail: string | undefined;
  readonly end: SessionEnd | undefined;
  constructor(
    readonly sessionKey: string,
    readonly failure: PromptFailureCause,
    message: string,
    details: AcpxDiagnostics & { cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.acpError = details.acpError;
    this.stderrTail = details.stderrTail || undefined;
    this.end = details.end;
  }
}

/** What became of a turn that was given up on (timeout or abort). */
export interface InterruptedTurn {
  /** session/cancel went out (false only when the turn had not been sent yet) */
  cancelSent: boolean;
  /** the agent ended the turn within the cancel grace: the session is usable */
  turnEnded: boolean;
  /** the turn's stop reason when it ended within the grace (normally "cancelled") */
  stopReason?: string;
  /** the grace waited after session/cancel */
  cancelGraceMs: number;
  stderrTail?: string;
}

/** What a timed-out or aborted prompt saw of its turn: both errors carry it the same way. */
abstract class InterruptedPromptError extends Error {
  readonly cancelSent: boolean;
  readonly turnEnded: boolean;
  readonly stopReason: string | undefined;
  readonly cancelGraceMs: number;
  readonly stderrTail: string | undefined;
  constructor(
    readonly sessionKey: string,
    message: string,
    turn: InterruptedTurn,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.cancelSent = turn.cancelSent;
    this.turnEnded = turn.turnEnded;
    this.stopReason = turn.stopReason;
    this.cancelGraceMs = turn.cancelGraceMs;
    this.stderrTail = turn.stderrTail || undefined;
  }
}

/**
 * `prompt` ran past `timeoutMs`. session/cancel was sent first.
 * When `turnEnded` is false the agent did not answer the cancel within the
 * grace: the turn still counts as running and the session takes no new
 * prompt until it ends (or the session is closed).
 */
export class AcpxPromptTimeoutError extends InterruptedPromptError {
  override name = "AcpxPromptTimeoutError";
  readonly code = "prompt-timeout";
  constructor(
    sessionKey: string,
    readonly timeoutMs: number,
    turn: InterruptedTurn,
    options?: { cause?: unknown },
  ) {
    super(
      sessionKey,
      `ACP prompt on ${JSON.stringify(sessionKey)} timed out after ${timeoutMs} ms; session/cancel sent, ` +
        (turn.turnEnded
          ? `the turn ended (${turn.stopReason ?? "with an error"}) within ${turn.cancelGraceMs} ms`
          : `the agent did not end the turn within ${turn.cancelGraceMs} ms: the session takes no new prompt until it does`) +
        diagnosticsNote({ ...(turn.stderrTail !== undefined ? { stderrTail: turn.stderrTail } : {}) }),
      turn,
      options,
    );
  }
}

/**
 * `prompt`'s AbortSignal fired (its `name` is "AbortError", like the
 * platform's own aborts). session/cancel was sent when the turn had started;
 * `cause` is the signal's reason.
 */
export class AcpxPromptAbortError extends InterruptedPromptError {
  override name = "AbortError";
  readonly code = "prompt-aborted";
  constructor(sessionKey: string, turn: InterruptedTurn, options?: { cause?: unknown }) {
    super(
      sessionKey,
      `ACP prompt on ${JSON.stringify(sessionKey)} was aborted` +
        (!turn.cancelSent
          ? " before it was sent"
          : turn.turnEnded
            ? `; session/cancel sent, the turn ended (${turn.stopReason ?? "with an error"}) within ${turn.cancelGraceMs} ms`
            : `; session/cancel sent, the agent did not end the turn within ${turn.cancelGraceMs} ms: the session takes no new prompt until it does`),
      turn,
      options,
    );
  }
}

/** A second turn on a session whose turn is still running (one turn at a time per ACP session). */
export class AcpxSessionBusyError extends Error {
  override name = "AcpxSessionBusyError";
  readonly code = "session-busy";
  constructor(readonly sessionKey: string) {
    super(
      `ACP session ${JSON.stringify(sessionKey)} already has a prompt running (a timed-out or aborted turn counts until the agent ends it); cancel it or wait`,
    );
  }
}

/** A call on a controller after dispose() or shutdown(). */
export class AcpxControllerDisposedError extends Error {
  override name = "AcpxControllerDisposedError";
  readonly code = "controller-disposed";
  /** `cause`: for an ensure the disposal aborted, the failure its settlement reported (which lease, settled how) */
  constructor(
    readonly how: "disposed" | "shut down" | "detached",
    options?: { cause?: unknown },
  ) {
    super(`this controller was ${how} (its state dir lock is released); create a new one`, options);
  }
}

/**
 * `durable` was asked for where it cannot hold: it needs the native wrapper
 * (Linux, with the addon), which relays the adapter's pipes and listens for
 * a re-adoption. `why` names what is missing (PROCLEASE_WRAPPER=node, no
 * addon, another platform).
 */
export class AcpxDurableUnavailableError extends Error {
  override name = "AcpxDurableUnavailableError";
  readonly code = "durable-unavailable";
  constructor(readonly why: string) {
    super(
      `durable sessions are unavailable here: ${why}; nothing was started (drop the durable option, or run with the native wrapper)`,
    );
  }
}

/** Why a session request other than a turn failed (AcpxSessionRequestError.failure). */
export type SessionRequestFailure =
  | "unsupported" // the agent did not advertise what the call needs (no modes, no such config option, no session/list)
  | "invalid" // the value is not one the agent offered
  | "agent-error" // the agent answered with an error (acpError)
  | "timeout" // no answer within the controller's handshakeTimeoutMs
  | "connection-lost"; // the session's connection closed

/** setMode, setConfigOption, session/list and the like, refused or failed. */
export class AcpxSessionRequestError extends Error {
  override name = "AcpxSessionRequestError";
  get code(): SessionRequestFailure {
    return this.failure;
  }
  constructor(
    readonly sessionKey: string,
    readonly method: string,
    readonly failure: SessionRequestFailure,
    message: string,
    readonly acpError?: AcpErrorInfo,
    options?: { cause?: unknown },
  ) {
    super(`ACP ${method} on ${JSON.stringify(sessionKey)}: ${message}`, options);
  }
}

/** A turn whose content the agent did not advertise (an image to an agent without promptCapabilities.image, …). */
export class AcpxUnsupportedContentError extends Error {
  override name = "AcpxUnsupportedContentError";
  readonly code = "unsupported-content";
  constructor(
    readonly sessionKey: string,
    readonly blockType: string,
    readonly capability: string,
  ) {
    super(
      `ACP session ${JSON.stringify(sessionKey)}: the agent did not advertise ${capability}, so a content block of type ${JSON.stringify(blockType)} cannot be sent; nothing was sent`,
    );
  }
}

/**
 * A turn whose session/prompt message would exceed the ACP transport's limit
 * on one message (the SDK's `DEFAULT_MAX_MESSAGE_BYTES`): an adapter built
 * on the SDK closes its connection on such a line, which would end the
 * session with nothing naming why. It is refused before anything is sent;
 * the session stays usable.
 */
export class AcpxPromptTooLargeError extends Error {
  override name = "AcpxPromptTooLargeError";
  readonly code = "prompt-too-large";
  constructor(
    readonly sessionKey: string,
    /** the encoded JSON-RPC message, in bytes (UTF-8, its newline included) */
    readonly sizeBytes: number,
    /** the transport's limit on one message, in bytes */
    readonly limitBytes: number,
  ) {
    super(
      `ACP session ${JSON.stringify(sessionKey)}: the prompt's session/prompt message would be ${sizeBytes} bytes, ` +
        `over the ACP transport's limit of ${limitBytes} bytes per message; nothing was sent and the session is unchanged`,
    );
  }
}
