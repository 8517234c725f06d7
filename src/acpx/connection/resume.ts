/**
 * Opening the agent session at the end of the handshake: session/new, or an
 * earlier agent session asked back. The session record keeps the agent's
 * session id; after a gateway restart or an adapter crash, ensureSession on
 * that key (or with `resumeSessionId`) starts a new lease and adapter and
 * comes here with the old id.
 *
 * - The agent advertises `sessionCapabilities.resume`: session/resume (the
 *   agent restores the session without replaying it).
 * - Else it advertises `loadSession`: session/load (the agent replays the
 *   conversation as session/update notifications; they reach the session's
 *   onUpdate listeners, held until one is attached).
 * - Else, or when the agent refuses the id (an error answer: unknown or
 *   expired session), a fresh session/new, and the handle says why
 *   (`resumed: false`, `resumeReason`). A timeout or a dead adapter during
 *   the resume fails the ensure like any handshake step: the agent's state is
 *   unknown then, and a silent fresh start would hide it.
 */
import type {
  InitializeResponse,
  LoadSessionResponse,
  McpServer,
  NewSessionResponse,
  ResumeSessionResponse,
} from "@agentclientprotocol/sdk";
import { ACP_AUTH_REQUIRED, withTimeout, type AcpClient } from "./acp-client.js";
import type { HandshakeFailure, StepRunner } from "./handshake-steps.js";

export interface OpenSessionOptions {
  cwd: string;
  timeoutMs: number;
  mcpServers: readonly McpServer[];
  resumeSessionId?: string;
  step: StepRunner;
}

export interface OpenedSession {
  sessionId: string;
  /** how the session was opened */
  via: "new" | "resume" | "load";
  /** true when the earlier agent session was resumed or loaded */
  resumed: boolean;
  /** why it was not, when a resume was asked for (or "nothing to resume") */
  resumeReason?: string;
  /** the agent's answer: its modes and config options, when it has any */
  response: NewSessionResponse | ResumeSessionResponse | LoadSessionResponse;
}

export type ResumeMethod = "session/resume" | "session/load";

/** How this agent can take a session back, from its initialize answer; null = it cannot. */
export function resumeMethodOf(init: Pick<InitializeResponse, "agentCapabilities">): ResumeMethod | null {
  const caps = init.agentCapabilities;
  if (caps?.sessionCapabilities?.resume !== undefined && caps.sessionCapabilities.resume !== null)
    return "session/resume";
  if (caps?.loadSession === true) return "session/load";
  return null;
}

/** Whether the agent advertises session/close (sent before the kill when it does). */
export function canCloseSession(init: Pick<InitializeResponse, "agentCapabilities"> | undefined): boolean {
  const close = init?.agentCapabilities?.sessionCapabilities?.close;
  return close !== undefined && close !== null;
}

export async function openAcpSession(
  client: AcpClient,
  init: InitializeResponse,
  o: OpenSessionOptions,
): Promise<OpenedSession> {
  const fresh = async (resumeReason: string): Promise<OpenedSession> => {
    const response = await o.step("session/new", client.openNewSession(o.cwd, o.timeoutMs, o.mcpServers));
    return { sessionId: response.sessionId, via: "new", resumed: false, resumeReason, response };
  };
  if (o.resumeSessionId === undefined) return fresh("nothing to resume: a new session");
  const method = resumeMethodOf(init);
  if (method === null) {
    return fresh(
      `the agent advertises neither sessionCapabilities.resume nor loadSession, so session ${JSON.stringify(o.resumeSessionId)} could not be taken back; a new session was started`,
    );
  }
  const params = { sessionId: o.resumeSessionId, cwd: o.cwd, mcpServers: [...o.mcpServers] };
  try {
    const response = await o.step(
      method,
      withTimeout(
        method,
        o.timeoutMs,
        method === "session/resume"
          ? client.connection.agent.request("session/resume", params)
          : client.connection.agent.request("session/load", params),
      ),
    );
    return {
      sessionId: o.resumeSessionId,
      via: method === "session/resume" ? "resume" : "load",
      resumed: true,
      response: response ?? {},
    };
  } catch (err) {
    const f = err as HandshakeFailure;
    // only a plain refusal of the id falls back; auth, timeouts and a dead adapter fail the ensure
    if (f.kind !== "agent-error" || f.info.acpError?.code === ACP_AUTH_REQUIRED) throw err;
    return fresh(
      `the agent refused ${method} for session ${JSON.stringify(o.resumeSessionId)}: ${f.info.acpError?.message ?? f.message}; a new session was started`,
    );
  }
}
