/**
 * The plugin's config (`plugins.entries.proclease.config` in OpenClaw's
 * config), as openclaw.plugin.json's configSchema declares it, turned into
 * createOpenClawAcpRuntime options. OpenClaw validates the JSON against the
 * manifest before the plugin loads; this check is the plugin's own, so a
 * host that skips it still gets a TypeError naming the field.
 */
import { isAbsolute, join } from "node:path";
import type { PermissionHook } from "../acpx/connection/permissions.js";
import type { ControllerLogger } from "../acpx/report/logger.js";
import type { SessionLimits } from "../acpx/connection/types.js";
import { MAX_GRACE_MS } from "../acpx/wrapper/protocol.js";
import { resolveDurable, type DurableOptions } from "../acpx/durable/protocol.js";
import type { OpenClawAcpRuntimeOptions, OpenClawAgentConfig } from "./options.js";

export interface PluginAgentConfig {
  command: string[];
  env?: Record<string, string>;
  cwd?: string;
  envRemove?: string[];
  /** ACP authenticate with this method before session/new */
  authMethod?: string;
  limits?: SessionLimits;
}

export interface PluginConfig {
  backendId?: string;
  stateDir?: string;
  agents: Record<string, PluginAgentConfig>;
  graceMs?: number;
  containment?: "auto" | "off";
  /** cancel (default): every permission request is answered "cancelled"; allow-once: the agent's allow_once option */
  permissions?: "cancel" | "allow-once";
  limits?: SessionLimits;
  /** durable sessions: a config reload or a gateway restart keeps every session's adapter (docs/openclaw.md) */
  durable?: DurableOptions;
}

const TOP = new Set(["backendId", "stateDir", "agents", "graceMs", "containment", "permissions", "limits", "durable"]);
const AGENT = new Set(["command", "env", "cwd", "envRemove", "authMethod", "limits"]);

export function parsePluginConfig(value: unknown): PluginConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError(
      "plugins.entries.proclease.config must be an object with at least `agents` ({ [name]: { command: [argv…] } })",
    );
  }
  const c = value as Record<string, unknown>;
  for (const k of Object.keys(c))
    if (!TOP.has(k))
      throw new TypeError(`plugin config: unknown key ${JSON.stringify(k)} (known: ${[...TOP].join(", ")})`);
  if (c.stateDir !== undefined && (typeof c.stateDir !== "string" || !isAbsolute(c.stateDir)))
    throw new TypeError("plugin config: stateDir must be an absolute path");
  if (
    c.graceMs !== undefined &&
    (typeof c.graceMs !== "number" || !Number.isInteger(c.graceMs) || c.graceMs < 0 || c.graceMs > MAX_GRACE_MS)
  )
    throw new TypeError(
      `plugin config: graceMs must be an integer from 0 to ${MAX_GRACE_MS}, got ${String(c.graceMs)}`,
    );
  if (c.containment !== undefined && c.containment !== "auto" && c.containment !== "off")
    throw new TypeError('plugin config: containment must be "auto" or "off"');
  if (c.permissions !== undefined && c.permissions !== "cancel" && c.permissions !== "allow-once")
    throw new TypeError('plugin config: permissions must be "cancel" or "allow-once"');
  resolveDurable(c.durable, "plugin config: durable");
  if (typeof c.agents !== "object" || c.agents === null || Array.isArray(c.agents))
    throw new TypeError("plugin config: agents must be an object { [name]: { command } }");
  for (const [name, a] of Object.entries(c.agents as Record<string, unknown>)) {
    if (typeof a !== "object" || a === null) throw new TypeError(`plugin config: agents.${name} must be an object`);
    for (const k of Object.keys(a))
      if (!AGENT.has(k))
        throw new TypeError(`plugin config: agents.${name}.${k} is not an agent option (${[...AGENT].join(", ")})`);
    const m = (a as { authMethod?: unknown }).authMethod;
    if (m !== undefined && (typeof m !== "string" || m === ""))
      throw new TypeError(`plugin config: agents.${name}.authMethod must be a non-empty string`);
  }
  return c as unknown as PluginConfig;
}

/** The runtime options for a parsed config; `hostStateDir` is OpenClaw's state dir (the default parent). */
export function runtimeOptionsFor(
  config: PluginConfig,
  hostStateDir: string,
  logger: ControllerLogger | undefined,
): OpenClawAcpRuntimeOptions {
  const agents: Record<string, OpenClawAgentConfig> = {};
  for (const [name, a] of Object.entries(config.agents)) {
    const { authMethod, ...rest } = a;
    agents[name] = { ...rest, ...(authMethod !== undefined ? { auth: { methodId: authMethod } } : {}) };
  }
  return {
    stateDir: config.stateDir ?? join(hostStateDir, "proclease"),
    agents,
    ...(config.backendId !== undefined ? { backendId: config.backendId } : {}),
    ...(config.graceMs !== undefined ? { graceMs: config.graceMs } : {}),
    ...(config.containment !== undefined ? { containment: config.containment } : {}),
    ...(config.limits !== undefined ? { limits: config.limits } : {}),
    ...(config.durable !== undefined ? { durable: config.durable } : {}),
    ...(logger !== undefined ? { logger } : {}),
    ...(config.permissions === "allow-once" ? { onPermissionRequest: allowOnce(logger) } : {}),
  };
}

/** Answers with the agent's allow_once option, else "cancelled"; every answer is logged. */
function allowOnce(logger: ControllerLogger | undefined): PermissionHook {
  return (request) => {
    const allow = request.options.find((o) => o.kind === "allow_once");
    logger?.info?.(
      `proclease: permission "${request.toolCall.title ?? request.toolCall.toolCallId}": ${allow ? `allowed once (${allow.optionId})` : "cancelled (no allow_once option)"}`,
    );
    return allow ? { outcome: "selected", optionId: allow.optionId } : { outcome: "cancelled" };
  };
}
