/**
 * What the handshake and the session it opens (resume.ts) share: the steps,
 * the failure a step ends in, and the auth the caller hands in (its check,
 * and the agent's advertised methods as plain data).
 */
import type { AcpAuthMethodInfo, AcpErrorInfo } from "../report/errors.js";
import type { SessionEnd } from "../launch/wrapper-end.js";

/** ensureSession's `auth`: `{ methodId }`, or a resolver that picks one from the agent's methods. */
export type AcpAuthInput = { methodId: string } | AcpAuthResolver;
export type AcpAuthResolver = (
  methods: readonly AcpAuthMethodInfo[],
) => string | undefined | Promise<string | undefined>;

export type HandshakeStep = "initialize" | "authenticate" | "session/new" | "session/resume" | "session/load";

/** Why the handshake failed, before the controller adds what the processes did (explainHandshakeFailure). */
export class HandshakeFailure extends Error {
  override name = "HandshakeFailure";
  constructor(
    readonly kind:
      | "timeout"
      | "aborted"
      | "agent-error"
      | "closed"
      | "ended"
      | "protocol-version"
      | "auth-required"
      | "auth-failed"
      | "invalid-session-id",
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

/** One bounded handshake step: timeouts, agent errors, a closed connection and ended processes become HandshakeFailure. */
export type StepRunner = <T>(name: HandshakeStep, p: Promise<T>) => Promise<T>;

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
