/**
 * Session controls and the state an agent advertises: its modes and config
 * options (from session/new, resume or load, kept current by
 * current_mode_update and config_option_update), its commands, the last
 * usage_update and title. setMode and setConfigOption map to ACP's
 * session/set_mode and session/set_config_option, checked first against
 * what the agent offered (an id it never offered is refused before anything
 * is sent), bounded by the controller's handshakeTimeoutMs, and every
 * failure is an AcpxSessionRequestError with its cause.
 */
import type {
  AvailableCommand,
  LoadSessionResponse,
  NewSessionResponse,
  ResumeSessionResponse,
  SessionConfigOption,
  SessionModeState,
  SessionUpdate,
  UsageUpdate,
} from "@agentclientprotocol/sdk";
import { AcpTimeoutError, withTimeout, type AcpClient } from "./acp-client.js";
import { acpErrorOf, AcpxSessionRequestError } from "../report/errors.js";

/** What the agent advertised for a session, kept current by its updates. */
export interface SessionAgentState {
  modes: SessionModeState | null;
  configOptions: SessionConfigOption[] | null;
  availableCommands: AvailableCommand[];
  /** the last usage_update (context window used/size, cost) */
  contextUsage: Omit<UsageUpdate, "_meta"> | null;
  title: string | null;
}

export class SessionState {
  readonly agent: SessionAgentState = {
    modes: null,
    configOptions: null,
    availableCommands: [],
    contextUsage: null,
    title: null,
  };

  /**
   * The agent's session/new (resume, load) answer. Updates that came before
   * it (an agent may send its commands before the answer has been read) are
   * kept; its modes and config options are the current ones.
   */
  adopt(opened: NewSessionResponse | ResumeSessionResponse | LoadSessionResponse): void {
    this.agent.modes = opened.modes ?? null;
    this.agent.configOptions = opened.configOptions ?? null;
  }

  /**
   * The router's observer: every update of the session passes here first.
   * ACP gives updates and answers no order beyond the stream's own, so the
   * message read last wins: an agent that sends an update built before a
   * later answer moves the tracked state back until its next update.
   */
  readonly observe = (u: SessionUpdate): void => {
    switch (u.sessionUpdate) {
      case "current_mode_update":
        if (this.agent.modes) this.agent.modes = { ...this.agent.modes, currentModeId: u.currentModeId };
        break;
      case "config_option_update":
        this.agent.configOptions = u.configOptions;
        break;
      case "available_commands_update":
        this.agent.availableCommands = u.availableCommands;
        break;
      case "usage_update":
        this.agent.contextUsage = { used: u.used, size: u.size, ...(u.cost !== undefined ? { cost: u.cost } : {}) };
        break;
      case "session_info_update":
        if (u.title !== undefined) this.agent.title = u.title ?? null;
        break;
      default:
        break;
    }
  };

  /** A copy for callers (they cannot change the tracked state). */
  snapshot(): SessionAgentState {
    return cloneJson(this.agent);
  }
}

export interface ControlTarget {
  sessionKey: string;
  acpSessionId: string;
  client: AcpClient;
  state: SessionState;
  timeoutMs: number;
}

export async function setMode(t: ControlTarget, modeId: string): Promise<void> {
  if (typeof modeId !== "string" || modeId === "") throw new TypeError("modeId must be a non-empty string");
  const modes = t.state.agent.modes;
  if (modes === null)
    throw new AcpxSessionRequestError(
      t.sessionKey,
      "session/set_mode",
      "unsupported",
      "the agent advertised no session modes",
    );
  if (!modes.availableModes.some((m) => m.id === modeId)) {
    throw new AcpxSessionRequestError(
      t.sessionKey,
      "session/set_mode",
      "invalid",
      `mode ${JSON.stringify(modeId)} is not one the agent offers (${modes.availableModes.map((m) => m.id).join(", ")})`,
    );
  }
  await send(t, "session/set_mode", () =>
    t.client.connection.agent.request("session/set_mode", { sessionId: t.acpSessionId, modeId }),
  );
  // the agent may also send current_mode_update; the answer alone already means the mode is set
  t.state.agent.modes = { ...modes, currentModeId: modeId };
}

export async function setConfigOption(
  t: ControlTarget,
  key: string,
  value: string | boolean,
): Promise<SessionConfigOption[]> {
  if (typeof key !== "string" || key === "") throw new TypeError("key must be a non-empty string");
  if (typeof value !== "string" && typeof value !== "boolean")
    throw new TypeError("value must be a string or a boolean");
  const options = t.state.agent.configOptions;
  const option = options?.find((o) => o.id === key);
  if (!options || !option) {
    const offered = options?.map((o) => o.id).join(", ");
    throw new AcpxSessionRequestError(
      t.sessionKey,
      "session/set_config_option",
      "unsupported",
      `the agent offers no config option ${JSON.stringify(key)}${offered ? ` (it offers ${offered})` : " (it advertised none)"}`,
    );
  }
  checkValue(t.sessionKey, option, value);
  const params =
    typeof value === "boolean"
      ? { sessionId: t.acpSessionId, configId: key, type: "boolean" as const, value }
      : { sessionId: t.acpSessionId, configId: key, value };
  const res = (await send(t, "session/set_config_option", () =>
    t.client.connection.agent.request("session/set_config_option", params),
  )) as { configOptions?: unknown } | undefined;
  if (Array.isArray(res?.configOptions)) t.state.agent.configOptions = res.configOptions as SessionConfigOption[];
  return cloneJson(t.state.agent.configOptions ?? []);
}

function checkValue(sessionKey: string, option: SessionConfigOption, value: string | boolean): void {
  const fail = (why: string): never => {
    throw new AcpxSessionRequestError(sessionKey, "session/set_config_option", "invalid", why);
  };
  if (option.type === "boolean") {
    if (typeof value !== "boolean")
      fail(`config option ${JSON.stringify(option.id)} is a boolean, got ${JSON.stringify(value)}`);
    return;
  }
  if (typeof value !== "string")
    fail(`config option ${JSON.stringify(option.id)} takes one of its values, got ${JSON.stringify(value)}`);
  const values = flatValues(option.options);
  if (!values.includes(value as string))
    fail(
      `${JSON.stringify(value)} is not a value of config option ${JSON.stringify(option.id)} (${values.join(", ")})`,
    );
}

/** select options may come flat or in groups (an explicit stack: the agent chooses how deep they nest) */
function flatValues(options: unknown): string[] {
  const out: string[] = [];
  if (!Array.isArray(options)) return out;
  // reversed onto the stack, so the values come out in the agent's order
  const stack: unknown[] = [...options].reverse();
  while (stack.length > 0) {
    const o = stack.pop() as { value?: unknown; options?: unknown } | null;
    if (typeof o !== "object" || o === null) continue;
    if (typeof o.value === "string") out.push(o.value);
    else if (Array.isArray(o.options)) for (let i = o.options.length - 1; i >= 0; i--) stack.push(o.options[i]);
  }
  return out;
}

/**
 * A deep copy of parsed JSON (what the agent sent, as the SDK parsed it),
 * walked with an explicit stack: structuredClone recurses, and a value
 * nested a few thousand deep overflows the call stack.
 */
export function cloneJson<T>(value: T): T {
  if (typeof value !== "object" || value === null) return value;
  const copy = (v: object): Record<string, unknown> => (Array.isArray(v) ? [] : {}) as Record<string, unknown>;
  const root = copy(value);
  const stack: [Record<string, unknown>, Record<string, unknown>][] = [[value as Record<string, unknown>, root]];
  while (stack.length > 0) {
    const [from, to] = stack.pop()!;
    for (const k of Object.keys(from)) {
      let v = from[k];
      if (typeof v === "object" && v !== null) {
        const c = copy(v);
        stack.push([v as Record<string, unknown>, c]);
        v = c;
      }
      // defined, never assigned: a "__proto__" key the agent sent stays a plain key
      Object.defineProperty(to, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
  }
  return root as T;
}

async function send<T>(t: ControlTarget, method: string, call: () => Promise<T>): Promise<T> {
  try {
    return await withTimeout(method, t.timeoutMs, call());
  } catch (err) {
    if (err instanceof AcpTimeoutError)
      throw new AcpxSessionRequestError(t.sessionKey, method, "timeout", err.message, undefined, { cause: err });
    const acpError = acpErrorOf(err);
    if (acpError)
      throw new AcpxSessionRequestError(
        t.sessionKey,
        method,
        "agent-error",
        `${acpError.message} (code ${acpError.code})`,
        acpError,
        { cause: err },
      );
    throw new AcpxSessionRequestError(
      t.sessionKey,
      method,
      "connection-lost",
      err instanceof Error ? err.message : String(err),
      undefined,
      { cause: err },
    );
  }
}
