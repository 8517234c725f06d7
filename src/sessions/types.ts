/**
 * Session visibility types and the
 * `AcpSessionOwner`. Names are kept as OpenClaw spells them.
 */

/** Ordered narrowest to widest: self ⊆ tree ⊆ agent ⊆ all. */
export type SessionVisibility = "self" | "tree" | "agent" | "all";

export const SESSION_VISIBILITIES: readonly SessionVisibility[] = Object.freeze([
  "self",
  "tree",
  "agent",
  "all",
] as const);

export type SessionAction = "list" | "history" | "send" | "status";

export const SESSION_ACTIONS: readonly SessionAction[] = Object.freeze(["list", "history", "send", "status"] as const);

/**
 * Agent-to-agent policy. `allow` holds agent ids, where `*` matches any run
 * of characters (nothing else is special). Empty or absent `allow` = every
 * agent. `enabled: false` turns all cross-agent access off, whatever `allow`
 * says.
 */
export interface AgentToAgentPolicy {
  enabled: boolean;
  allow?: readonly string[];
}

/**
 * The ownership facts a session row carries. Visibility reads only these:
 * never a second query, never the shape of the key.
 */
export interface SessionRowOwnership {
  key: string;
  agentId: string;
  ownerSessionKey?: string;
  spawnedBy?: string;
  parentSessionKey?: string;
}

/** Kept as a plain string alias here so src/sessions stays independent of src/ownership. */
type GatewayInstanceIdString = string;

/** Normalized owner metadata for a spawned session. */
export interface AcpSessionOwner {
  sessionKey: string;
  spawnedBy?: string;
  parentSessionKey?: string;
  ownerSessionKey: string;
  agentId: string;
  backend: "acpx";
  gatewayInstanceId: GatewayInstanceIdString;
  createdAt: number;
}

/** Everything the check needs except the row; shared by list/authorize. */
export interface SessionVisibilityContext {
  requesterSessionKey: string;
  /** default: parsed from "agent:<id>:…", else "main" */
  requesterAgentId?: string;
  visibility: SessionVisibility;
  a2aPolicy: AgentToAgentPolicy;
  /** sandboxed requesters are clamped to "tree" (never widened) */
  sandboxed?: boolean;
}

export interface CanSeeSessionRowInput extends SessionVisibilityContext {
  row: SessionRowOwnership;
  /** accepted and validated, but the answer is the same for every action */
  action?: SessionAction;
}
