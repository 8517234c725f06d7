/**
 * createOpenClawAcpRuntime's options, checked before anything runs: the
 * backend id OpenClaw registers and stores in every handle, the agents it
 * may name (each an ACP adapter's argv), and every controller option passed
 * through unchanged. Malformed options are a TypeError naming the field.
 */
import { isAbsolute } from "node:path";
import type { McpServer } from "@agentclientprotocol/sdk";
import { assertAuthInput } from "../acpx/connection/handshake-steps.js";
import { assertEnvRemove } from "../acpx/launch/wrapper-env.js";
import { assertSessionLimits } from "../acpx/sessions/session-limits.js";
import type { AcpAuthInput, SessionLimits } from "../acpx/connection/types.js";
import type { AcpxLifecycleControllerOptions } from "../acpx/sessions/types.js";
import type { OpenClawErrorFactory } from "./errors.js";

export const DEFAULT_BACKEND_ID = "proclease";

/** One agent OpenClaw may name in `ensureSession({ agent })`. */
export interface OpenClawAgentConfig {
  /** the ACP adapter's argv (never a shell string) */
  command: readonly string[];
  /** set in the adapter's environment; OpenClaw's per-session `env` wins over these */
  env?: Record<string, string>;
  /** absolute; OpenClaw's per-session `cwd` wins over it */
  cwd?: string;
  /** keys the adapter must not inherit from the gateway (provider credentials) */
  envRemove?: readonly string[];
  /** ACP authenticate before session/new (README "Lifecycle controller", `auth`) */
  auth?: AcpAuthInput;
  /** memory.max / pids.max of each session's cgroup; overrides the runtime's `limits` */
  limits?: SessionLimits;
  mcpServers?: readonly McpServer[];
}

export interface OpenClawAcpRuntimeOptions extends AcpxLifecycleControllerOptions {
  /**
   * The id registered with OpenClaw and carried by every handle (OpenClaw
   * finds the backend again by it after a restart). Lowercase, as OpenClaw's
   * registry normalizes ids. Default "proclease".
   */
  backendId?: string;
  agents: Readonly<Record<string, OpenClawAgentConfig>>;
  /** limits for every agent that sets none */
  limits?: SessionLimits;
  /**
   * Builds the errors this runtime throws and reports. The plugin entry
   * passes the host SDK's AcpRuntimeError, so `detailCode` survives
   * OpenClaw's error boundary; without it the errors are
   * ProcleaseAcpRuntimeError, which OpenClaw recognizes by `code`.
   */
  errorFactory?: OpenClawErrorFactory;
}

/** An agent as the runtime uses it: name normalized, config checked. */
export interface ResolvedAgent {
  name: string;
  config: OpenClawAgentConfig;
}

const BACKEND_ID_RE = /^[a-z0-9][a-z0-9._-]*$/;

export function validateRuntimeOptions(opts: OpenClawAcpRuntimeOptions): {
  backendId: string;
  agents: Map<string, ResolvedAgent>;
} {
  if (typeof opts !== "object" || opts === null) throw new TypeError("options must be an object");
  if (typeof opts.stateDir !== "string" || opts.stateDir.length === 0)
    throw new TypeError("options.stateDir must be a non-empty string");
  const backendId = opts.backendId ?? DEFAULT_BACKEND_ID;
  if (typeof backendId !== "string" || !BACKEND_ID_RE.test(backendId)) {
    throw new TypeError(
      `options.backendId must be lowercase letters, digits, ".", "_" or "-" (OpenClaw's registry lowercases ids, and a handle's backend must equal the registered id); got ${JSON.stringify(backendId)}`,
    );
  }
  if (opts.limits !== undefined) assertSessionLimits(opts.limits, "options.limits");
  if (opts.errorFactory !== undefined && typeof opts.errorFactory !== "function")
    throw new TypeError("options.errorFactory must be a function");
  return { backendId, agents: validateAgents(opts.agents) };
}

function validateAgents(agents: unknown): Map<string, ResolvedAgent> {
  if (typeof agents !== "object" || agents === null || Array.isArray(agents)) {
    throw new TypeError("options.agents must be an object { [agentName]: { command, env?, cwd? } }");
  }
  const out = new Map<string, ResolvedAgent>();
  for (const [raw, config] of Object.entries(agents as Record<string, unknown>)) {
    const name = normalizeAgentName(raw);
    if (name === "") throw new TypeError(`options.agents: ${JSON.stringify(raw)} is not an agent name`);
    if (out.has(name))
      throw new TypeError(
        `options.agents: ${JSON.stringify(raw)} and ${JSON.stringify(out.get(name)!.name)} are the same agent once lowercased (OpenClaw lowercases agent names)`,
      );
    out.set(name, { name, config: validateAgent(config, `options.agents.${raw}`) });
  }
  if (out.size === 0) throw new TypeError("options.agents must name at least one agent");
  return out;
}

function validateAgent(v: unknown, field: string): OpenClawAgentConfig {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new TypeError(`${field} must be an object { command, env?, cwd? }`);
  const a = v as Record<string, unknown>;
  const known = new Set(["command", "env", "cwd", "envRemove", "auth", "limits", "mcpServers"]);
  for (const k of Object.keys(a))
    if (!known.has(k)) throw new TypeError(`${field}.${k} is not an agent option (${[...known].join(", ")})`);
  if (typeof a.command === "string")
    throw new TypeError(
      `${field}.command must be an argv array, got a string: give the program and each argument as its own entry (["npx", "@agentclientprotocol/codex-acp"]); a command is never run through a shell`,
    );
  if (
    !Array.isArray(a.command) ||
    a.command.length === 0 ||
    a.command.some((x) => typeof x !== "string") ||
    a.command[0] === ""
  ) {
    throw new TypeError(
      `${field}.command must be a non-empty array of strings (the adapter's argv, never a shell string)`,
    );
  }
  if (a.env !== undefined) {
    if (typeof a.env !== "object" || a.env === null || Array.isArray(a.env))
      throw new TypeError(`${field}.env must be an object of strings`);
    for (const [k, val] of Object.entries(a.env))
      if (typeof val !== "string") throw new TypeError(`${field}.env.${k} must be a string`);
  }
  if (a.cwd !== undefined && (typeof a.cwd !== "string" || !isAbsolute(a.cwd)))
    throw new TypeError(`${field}.cwd must be an absolute path`);
  if (a.envRemove !== undefined) assertEnvRemove(a.envRemove, `${field}.envRemove`);
  if (a.auth !== undefined) assertAuthInput(a.auth, `${field}.auth`);
  if (a.limits !== undefined) assertSessionLimits(a.limits, `${field}.limits`);
  if (a.mcpServers !== undefined && !Array.isArray(a.mcpServers))
    throw new TypeError(`${field}.mcpServers must be an array`);
  return a as unknown as OpenClawAgentConfig;
}

/** OpenClaw's agent ids are trimmed and lowercased before they reach a backend. */
export function normalizeAgentName(name: string): string {
  return name.trim().toLowerCase();
}

/** The controller's own options: everything but this runtime's. */
export function controllerOptions(opts: OpenClawAcpRuntimeOptions): AcpxLifecycleControllerOptions {
  const { backendId: _b, agents: _a, limits: _l, errorFactory: _e, ...rest } = opts;
  return rest;
}
