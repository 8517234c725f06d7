/**
 * The session visibility rule (docs/session-visibility.md): one pure check shared by list,
 * history, send and status.
 *
 * Each row gets a relation to the requester (self, owned, same agent, cross
 * agent) and each relation a narrowest level that shows it. A row is visible
 * when the effective level is at least that wide. Because every level is a
 * threshold on the same ladder, self ⊆ tree ⊆ agent ⊆ all holds by
 * construction: `all` can never hide an owned child that `tree` shows.
 */
import { compileAgentToAgentPolicy, type CompiledAgentToAgentPolicy } from "./a2a-policy.js";
import { describeValue, isNonEmptyString, isRecord, own } from "./describe.js";
import {
  SESSION_ACTIONS,
  SESSION_VISIBILITIES,
  type AgentToAgentPolicy,
  type CanSeeSessionRowInput,
  type SessionAction,
  type SessionVisibility,
  type SessionVisibilityContext,
} from "./types.js";

const RANK: Readonly<Record<SessionVisibility, number>> = { self: 0, tree: 1, agent: 2, all: 3 };

/** Exactly one of the four level names, as the type spells them (lower case). */
export function isSessionVisibility(v: unknown): v is SessionVisibility {
  return typeof v === "string" && (SESSION_VISIBILITIES as readonly string[]).includes(v);
}

/**
 * A level name as config spells it: any case, surrounding whitespace ignored
 * (OpenClaw lower-cases and trims `tools.sessions.visibility`, so "ALL"
 * means `all`); undefined for anything else. The one parser of level
 * strings: the config resolver and the check's own input both use it.
 */
export function parseSessionVisibility(v: unknown): SessionVisibility | undefined {
  if (typeof v !== "string") return undefined;
  const level = v.trim().toLowerCase();
  return isSessionVisibility(level) ? level : undefined;
}

/** min(visibility, "tree") when sandboxed; sandboxing only ever narrows. */
export function clampSessionVisibility(visibility: SessionVisibility, sandboxed: boolean): SessionVisibility {
  return sandboxed && RANK[visibility] > RANK.tree ? "tree" : visibility;
}

/**
 * The agent id encoded in an "agent:<id>:<rest>" session key, else "main".
 * Used only for the requester's default agent id ("agent:<id>:…", else "main"); ownership of
 * a row is never inferred from its key.
 */
export function agentIdFromSessionKey(sessionKey: string): string {
  if (typeof sessionKey !== "string") return "main";
  const parts = sessionKey.split(":");
  if (parts.length >= 3 && parts[0] === "agent" && isNonEmptyString(parts[1])) return parts[1];
  return "main";
}

/**
 * `tools.sessions.visibility` from OpenClaw-style config, in any case
 * ("ALL" is `all`). Missing or invalid (including a config that is not an
 * object) → "tree"; a sandboxed requester is clamped to "tree". Only own
 * properties are read.
 */
export function resolveSessionVisibility(cfg: unknown, opts: { sandboxed?: boolean } = {}): SessionVisibility {
  if (!isRecord(opts)) throw new TypeError(`opts must be an object, got ${describeValue(opts)}`);
  const sandboxed = readSandboxed(own(opts, "sandboxed"));
  let configured: unknown;
  const tools = isRecord(cfg) ? own(cfg, "tools") : undefined;
  const sessions = isRecord(tools) ? own(tools, "sessions") : undefined;
  if (isRecord(sessions)) configured = own(sessions, "visibility");
  return clampSessionVisibility(parseSessionVisibility(configured) ?? "tree", sandboxed);
}

/** Why a row is (or is not) reachable: the narrowest level that shows it. */
export type RowRelation = "self" | "owned" | "same-agent" | "cross-agent" | "unreadable";

/** A validated, compiled context: built once, then applied to many rows. */
export interface PreparedVisibility {
  readonly requesterSessionKey: string;
  readonly requesterAgentId: string;
  /** the configured level */
  readonly requested: SessionVisibility;
  /** the level actually applied (after the sandbox clamp) */
  readonly effective: SessionVisibility;
  readonly sandboxClamped: boolean;
  readonly policy: CompiledAgentToAgentPolicy;
  readonly requesterAllowed: boolean;
}

/**
 * Validates everything except the row. Bad input throws a TypeError naming
 * the field: requesterSessionKey (missing, non-string, empty),
 * requesterAgentId (present but not a non-empty string), visibility (unknown
 * string), a2aPolicy (malformed), sandboxed (present but not boolean).
 */
export function prepareVisibility(ctx: SessionVisibilityContext): PreparedVisibility {
  if (!isRecord(ctx)) throw new TypeError(`input must be an object, got ${describeValue(ctx)}`);
  const key: unknown = own(ctx, "requesterSessionKey");
  if (!isNonEmptyString(key)) {
    throw new TypeError(`requesterSessionKey must be a non-empty string, got ${describeValue(key)}`);
  }
  const agentIn: unknown = own(ctx, "requesterAgentId");
  if (agentIn !== undefined && !isNonEmptyString(agentIn)) {
    throw new TypeError(`requesterAgentId must be a non-empty string when given, got ${describeValue(agentIn)}`);
  }
  const given: unknown = own(ctx, "visibility");
  const requested = parseSessionVisibility(given);
  if (requested === undefined) {
    throw new TypeError(
      `visibility must be one of ${SESSION_VISIBILITIES.map((v) => JSON.stringify(v)).join(", ")} (any case), got ${describeValue(given)}`,
    );
  }
  const sandboxed = readSandboxed(own(ctx, "sandboxed"));
  const policy = compileAgentToAgentPolicy(own(ctx, "a2aPolicy") as AgentToAgentPolicy);
  const requesterAgentId = agentIn ?? agentIdFromSessionKey(key);
  const effective = clampSessionVisibility(requested, sandboxed);
  return {
    requesterSessionKey: key,
    requesterAgentId,
    requested,
    effective,
    sandboxClamped: effective !== requested,
    policy,
    requesterAllowed: policy.isAllowed(requesterAgentId),
  };
}

/** The requester's relation to a row; a row without a readable key/agentId is "unreadable". Own properties only. */
export function relationOf(prep: PreparedVisibility, row: unknown): RowRelation {
  if (!isRecord(row)) return "unreadable";
  const key = own(row, "key");
  const agentId = own(row, "agentId");
  if (!isNonEmptyString(key) || !isNonEmptyString(agentId)) return "unreadable";
  const me = prep.requesterSessionKey;
  if (key === me) return "self";
  // Only explicit owner fields count; non-string values simply do not match.
  if (own(row, "ownerSessionKey") === me || own(row, "spawnedBy") === me || own(row, "parentSessionKey") === me)
    return "owned";
  if (agentId === prep.requesterAgentId) return "same-agent";
  return "cross-agent";
}

/**
 * The narrowest level at which a row with this relation is visible, or null
 * when no level shows it (unreadable rows; cross-agent rows the a2a policy
 * refuses).
 */
export function narrowestLevelFor(
  prep: PreparedVisibility,
  relation: RowRelation,
  rowAgentId?: string,
): SessionVisibility | null {
  switch (relation) {
    case "self":
      return "self";
    case "owned":
      return "tree";
    case "same-agent":
      return "agent";
    case "cross-agent":
      return prep.policy.enabled &&
        prep.requesterAllowed &&
        rowAgentId !== undefined &&
        prep.policy.isAllowed(rowAgentId)
        ? "all"
        : null;
    case "unreadable":
      return null;
  }
}

export function isVisibleWith(prep: PreparedVisibility, row: unknown): boolean {
  const relation = relationOf(prep, row);
  const agentId = relation === "cross-agent" ? (own(row as Record<string, unknown>, "agentId") as string) : undefined;
  const level = narrowestLevelFor(prep, relation, agentId);
  return level !== null && RANK[prep.effective] >= RANK[level];
}

export function assertSessionAction(action: unknown, name = "action"): asserts action is SessionAction | undefined {
  if (action === undefined) return;
  if (typeof action !== "string" || !(SESSION_ACTIONS as readonly string[]).includes(action)) {
    throw new TypeError(
      `${name} must be one of ${SESSION_ACTIONS.map((a) => JSON.stringify(a)).join(", ")}, got ${describeValue(action)}`,
    );
  }
}

/**
 * self ⊆ tree ⊆ agent ⊆ all. Pure: reads only the row and the policy, never mutates them,
 * never queries anything else. The same answer for every action.
 */
export function canSeeSessionRow(input: CanSeeSessionRowInput): boolean {
  const prep = prepareVisibility(input);
  const fields = input as unknown as Record<string, unknown>;
  assertSessionAction(own(fields, "action"));
  return isVisibleWith(prep, own(fields, "row"));
}

export function visibilityRank(v: SessionVisibility): number {
  return RANK[v];
}

function readSandboxed(v: unknown): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new TypeError(`sandboxed must be a boolean when given, got ${describeValue(v)}`);
  return v;
}
