/**
 * The one place a proclease failure becomes an OpenClaw one. OpenClaw's ACP
 * boundary knows seven codes (openclaw@2026.9.6 `ACP_ERROR_CODES`,
 * packages/acp-core/src/runtime/errors.ts) and narrows any other code to
 * ACP_TURN_FAILED, so the cause travels in `detailCode` (OpenClaw's own
 * field for it: TURN_TIMEOUT, SESSION_RESUME_REQUIRED, …) and in the
 * message, which always names it. `retryable` says whether the same call
 * may succeed without anyone changing anything.
 *
 * OpenClaw has no ACP code for a login: an agent that needs one fails
 * ensureSession with ACP_SESSION_INIT_FAILED, detailCode AUTH_REQUIRED (the
 * name OpenClaw's gateway protocol gives its own auth-required detail), and
 * the agent's methods in `authMethods` and in the message.
 */
import {
  AcpxControllerDisposedError,
  AcpxEnsureError,
  AcpxNoSessionError,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxPromptTooLargeError,
  AcpxSessionBusyError,
  AcpxSessionClosedError,
  AcpxSessionRequestError,
  AcpxUnsupportedContentError,
  type AcpAuthMethodInfo,
  type EnsureFailureCause,
} from "../acpx/report/errors.js";
import type { AcpAuthInput } from "../acpx/connection/types.js";
import type { CloseReport } from "../acpx/sessions/types.js";
import { CwdUnusableError, HostResourceError, LeaseRecordWriteError, StateDirLockedError } from "../ownership/index.js";
import type { OpenClawTurnError } from "./types.js";

export const OPENCLAW_ACP_ERROR_CODES = [
  "ACP_BACKEND_MISSING",
  "ACP_BACKEND_UNAVAILABLE",
  "ACP_BACKEND_UNSUPPORTED_CONTROL",
  "ACP_DISPATCH_DISABLED",
  "ACP_INVALID_RUNTIME_OPTION",
  "ACP_SESSION_INIT_FAILED",
  "ACP_TURN_FAILED",
] as const;
export type OpenClawAcpErrorCode = (typeof OPENCLAW_ACP_ERROR_CODES)[number];

/** What every error of this runtime carries, whichever class built it. */
export interface OpenClawFailure {
  code: OpenClawAcpErrorCode;
  /** the cause, as a stable upper-case name (AUTH_REQUIRED, ADAPTER_EXITED, …) */
  detailCode: string;
  message: string;
  retryable: boolean;
  /** for AUTH_REQUIRED / AUTH_FAILED: the methods the agent offers */
  authMethods?: readonly AcpAuthMethodInfo[];
  cause?: unknown;
}

/** A failure this runtime decided, on its way to the boundary that throws it (toThrown). */
export class DecidedFailure extends Error {
  constructor(readonly failure: OpenClawFailure) {
    super(failure.message);
  }
}

/** Builds the thrown error; the plugin passes the host's `new AcpRuntimeError(code, message, { detailCode, cause })`. */
export type OpenClawErrorFactory = (
  code: OpenClawAcpErrorCode,
  message: string,
  options: { detailCode: string; cause?: unknown },
) => Error;

/** The error this runtime throws without a host factory; OpenClaw recognizes it by its `code`. */
export class ProcleaseAcpRuntimeError extends Error {
  override name = "ProcleaseAcpRuntimeError";
  readonly code: OpenClawAcpErrorCode;
  readonly detailCode: string;
  readonly retryable: boolean;
  readonly authMethods: readonly AcpAuthMethodInfo[] | undefined;
  constructor(f: OpenClawFailure) {
    super(f.message, f.cause === undefined ? undefined : { cause: f.cause });
    this.code = f.code;
    this.detailCode = f.detailCode;
    this.retryable = f.retryable;
    this.authMethods = f.authMethods;
  }
}

/** The error to throw for `f`: the factory's (with retryable and authMethods added), else ours. */
export function toThrown(f: OpenClawFailure, factory: OpenClawErrorFactory | undefined): Error {
  if (factory === undefined) return new ProcleaseAcpRuntimeError(f);
  let e: Error;
  try {
    e = factory(f.code, f.message, { detailCode: f.detailCode, ...(f.cause !== undefined ? { cause: f.cause } : {}) });
  } catch {
    // a host factory that fails must not hide the real failure
    return new ProcleaseAcpRuntimeError(f);
  }
  return Object.assign(e, {
    retryable: f.retryable,
    ...(f.authMethods !== undefined ? { authMethods: f.authMethods } : {}),
  });
}

export function turnError(f: OpenClawFailure): OpenClawTurnError {
  return { message: f.message, code: f.code, detailCode: f.detailCode, retryable: f.retryable };
}

/** Where a failure happened: it decides the code of causes that are not typed. */
export type FailurePhase = "ensure" | "turn" | "control" | "close" | "status";

const FALLBACK: Record<FailurePhase, OpenClawAcpErrorCode> = {
  ensure: "ACP_SESSION_INIT_FAILED",
  turn: "ACP_TURN_FAILED",
  control: "ACP_TURN_FAILED",
  close: "ACP_TURN_FAILED",
  status: "ACP_TURN_FAILED",
};

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Any failure of a proclease call, as OpenClaw's code, detail and retryability. */
export function classify(err: unknown, phase: FailurePhase, backendId: string): OpenClawFailure {
  if (err instanceof DecidedFailure) return err.failure;
  if (err instanceof ProcleaseAcpRuntimeError)
    return { code: err.code, detailCode: err.detailCode, message: err.message, retryable: err.retryable, cause: err };
  const f = classifyTyped(err, phase);
  const prefix = `proclease backend "${backendId}": `;
  return { ...f, message: prefix + message(err), cause: err };
}

type Classified = Omit<OpenClawFailure, "message" | "cause">;

function classifyTyped(err: unknown, phase: FailurePhase): Classified {
  if (err instanceof AcpxEnsureError) return ensureFailure(err);
  if (err instanceof AcpxPromptTimeoutError)
    return { code: "ACP_TURN_FAILED", detailCode: "TURN_TIMEOUT", retryable: true };
  if (err instanceof AcpxPromptAbortError)
    return { code: "ACP_TURN_FAILED", detailCode: "TURN_ABORTED", retryable: true };
  if (err instanceof AcpxPromptError) {
    return {
      code: "ACP_TURN_FAILED",
      detailCode: err.failure.toUpperCase().replaceAll("-", "_"),
      retryable: err.failure !== "agent-error",
    };
  }
  if (err instanceof AcpxSessionClosedError)
    return { code: "ACP_TURN_FAILED", detailCode: "SESSION_CLOSED", retryable: false };
  if (err instanceof AcpxSessionBusyError)
    return { code: "ACP_TURN_FAILED", detailCode: "SESSION_BUSY", retryable: true };
  if (err instanceof AcpxNoSessionError) return { code: "ACP_TURN_FAILED", detailCode: "NO_SESSION", retryable: true };
  if (err instanceof AcpxUnsupportedContentError)
    return { code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "UNSUPPORTED_CONTENT", retryable: false };
  if (err instanceof AcpxPromptTooLargeError)
    return { code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "PROMPT_TOO_LARGE", retryable: false };
  if (err instanceof AcpxSessionRequestError) return requestFailure(err);
  if (err instanceof AcpxControllerDisposedError)
    return { code: "ACP_BACKEND_UNAVAILABLE", detailCode: "BACKEND_DISPOSED", retryable: false };
  if (err instanceof StateDirLockedError)
    return { code: "ACP_BACKEND_UNAVAILABLE", detailCode: "STATE_DIR_LOCKED", retryable: false };
  if (err instanceof LeaseRecordWriteError)
    return { code: "ACP_BACKEND_UNAVAILABLE", detailCode: "LEASE_WRITE_FAILED", retryable: true };
  if (err instanceof HostResourceError)
    return { code: "ACP_BACKEND_UNAVAILABLE", detailCode: "HOST_RESOURCES", retryable: true };
  if (err instanceof CwdUnusableError)
    return { code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "CWD_UNUSABLE", retryable: false };
  if (err instanceof TypeError || err instanceof RangeError)
    return { code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "INVALID_INPUT", retryable: false };
  return { code: FALLBACK[phase], detailCode: "INTERNAL", retryable: false };
}

const ENSURE_RETRYABLE: Readonly<Record<EnsureFailureCause, boolean>> = {
  "spawn-error": false,
  "wrapper-failed": true,
  "adapter-exited": true,
  "handshake-timeout": true,
  "handshake-error": false,
  "protocol-version": false,
  "auth-required": false,
  "auth-failed": false,
  // an agent answering a refused session id answers it again
  "invalid-session-id": false,
  // never an AcpxEnsureError of its own: the cause of the disposal's error
  aborted: false,
  "limits-unavailable": false,
  "limits-mismatch": false,
  "session-mismatch": false,
};

function ensureFailure(err: AcpxEnsureError): Classified {
  const detailCode = err.failure.toUpperCase().replaceAll("-", "_");
  const code: OpenClawAcpErrorCode =
    err.failure === "limits-unavailable" || err.failure === "limits-mismatch"
      ? "ACP_INVALID_RUNTIME_OPTION"
      : "ACP_SESSION_INIT_FAILED";
  return {
    code,
    detailCode,
    retryable: ENSURE_RETRYABLE[err.failure],
    ...(err.authMethods !== undefined ? { authMethods: err.authMethods } : {}),
  };
}

function requestFailure(err: AcpxSessionRequestError): Classified {
  switch (err.failure) {
    case "unsupported":
      return { code: "ACP_BACKEND_UNSUPPORTED_CONTROL", detailCode: "UNSUPPORTED", retryable: false };
    case "invalid":
      return { code: "ACP_INVALID_RUNTIME_OPTION", detailCode: "INVALID_VALUE", retryable: false };
    case "agent-error":
      return { code: "ACP_TURN_FAILED", detailCode: "AGENT_ERROR", retryable: false };
    case "timeout":
      return { code: "ACP_TURN_FAILED", detailCode: "CONTROL_TIMEOUT", retryable: true };
    case "connection-lost":
      return { code: "ACP_TURN_FAILED", detailCode: "CONNECTION_LOST", retryable: true };
  }
}

/**
 * An agent's login failure, told as an OpenClaw operator fixes it: the plugin
 * setting that picks the method (`agents.<name>.authMethod`; an embedder's
 * `auth: { methodId }`), the methods the agent offers (their descriptions
 * often name the variable that carries the key), and where the key goes:
 * the agent's environment. Undefined for any other failure.
 */
export function authFailure(
  err: unknown,
  agentName: string,
  backendId: string,
  auth: AcpAuthInput | undefined,
): OpenClawFailure | undefined {
  if (!(err instanceof AcpxEnsureError) || (err.failure !== "auth-required" && err.failure !== "auth-failed"))
    return undefined;
  // a resolver picks its method only during the handshake: the agent's answer names it
  const methodId = auth !== undefined && typeof auth !== "function" ? auth.methodId : undefined;
  const methods = err.authMethods ?? [];
  const offered =
    methods.length === 0
      ? "the agent advertised no auth method"
      : `the agent offers ${methods.map((m) => `"${m.id}"${m.description ? ` (${m.description})` : m.name && m.name !== m.id ? ` (${m.name})` : ""}`).join(", ")}`;
  const setting = `plugins.entries.proclease.config.agents.${agentName}.authMethod`;
  const key =
    `give the agent its key in its environment: agents.${agentName}.env in the same config ` +
    `(for example {"CODEX_API_KEY": "…"} for codex-acp), or the gateway's own environment, which agents inherit unless envRemove names the variable`;
  const text =
    err.failure === "auth-required"
      ? `agent "${agentName}" requires authentication and no method is configured: set ${setting} to one the agent offers (an embedder: agents.${agentName}.auth = { methodId }); ${offered}; ${key}`
      : `agent "${agentName}" still requires authentication after authenticate(${methodId === undefined ? "the method its resolver picked" : `"${methodId}"`}): check that ${setting} is one the agent offers and that its key is set; ${offered}; ${key}`;
  return failure(
    "ACP_SESSION_INIT_FAILED",
    err.failure === "auth-required" ? "AUTH_REQUIRED" : "AUTH_FAILED",
    backendId,
    `${text} (the agent answered: ${err.acpError?.message ?? "authentication required"}${err.leaseId !== undefined ? `; lease ${err.leaseId} ${err.leaseState ?? "settled"}` : ""})`,
    false,
    {
      authMethods: methods,
      cause: err,
    },
  );
}

/** A failure this runtime decides itself (an unknown agent, a close that could not settle, …). */
export function failure(
  code: OpenClawAcpErrorCode,
  detailCode: string,
  backendId: string,
  text: string,
  retryable: boolean,
  extra: Partial<OpenClawFailure> = {},
): OpenClawFailure {
  return { code, detailCode, message: `proclease backend "${backendId}": ${text}`, retryable, ...extra };
}

/** A close that could not settle its lease (something verified may still run, or nothing could be verified): retried, and said loudly. */
export function closeUnsettled(backendId: string, key: string, report: CloseReport): DecidedFailure {
  return new DecidedFailure(
    failure(
      "ACP_TURN_FAILED",
      "CLOSE_UNSETTLED",
      backendId,
      `closing ${key}: ${report.detail}; lease ${report.leaseId ?? "?"} is ${report.leaseState ?? "unknown"} (retried by the maintenance timer and the next startup reap)`,
      true,
    ),
  );
}
