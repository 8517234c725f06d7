/**
 * Gate helpers built on the single visibility rule: one per-row answer for
 * history/send/status (with an error that names what refused), and a list
 * filter that reports the scope it applied.
 */
import { describeValue, isRecord, own } from "./describe.js";
import {
  assertSessionAction,
  isVisibleWith,
  narrowestLevelFor,
  prepareVisibility,
  relationOf,
  visibilityRank,
  type PreparedVisibility,
} from "./visibility.js";
import type { SessionAction, SessionRowOwnership, SessionVisibility, SessionVisibilityContext } from "./types.js";

/** What refused: the visibility level, the sandbox clamp, the a2a policy, or an unreadable row. */
export type SessionDenialReason = "visibility" | "sandbox" | "agent-to-agent" | "unreadable-row";

export type SessionAuthorization =
  | { allowed: true }
  | {
      allowed: false;
      status: "forbidden";
      /** human-readable; names the level that refused and the setting to change */
      error: string;
      /** the effective level that refused (after any sandbox clamp) */
      visibility: SessionVisibility;
      reason: SessionDenialReason;
    };

export interface AuthorizeSessionActionInput extends SessionVisibilityContext {
  action: SessionAction;
  row: SessionRowOwnership;
}

/**
 * Same decision as `canSeeSessionRow` for every action; only the wording of
 * a refusal mentions the action. Bad input throws TypeError (as
 * canSeeSessionRow, plus a required `action`).
 */
export function authorizeSessionAction(input: AuthorizeSessionActionInput): SessionAuthorization {
  const prep = prepareVisibility(input);
  const fields = input as unknown as Record<string, unknown>;
  const action = own(fields, "action");
  if (action === undefined)
    throw new TypeError('action must be one of "list", "history", "send", "status", got undefined');
  assertSessionAction(action);
  const row: unknown = own(fields, "row");
  if (isVisibleWith(prep, row)) return { allowed: true };
  return deny(prep, action, row);
}

function deny(prep: PreparedVisibility, action: SessionAction, row: unknown): SessionAuthorization {
  const relation = relationOf(prep, row);
  const eff = prep.effective;
  const base = { allowed: false as const, status: "forbidden" as const, visibility: eff };
  if (relation === "unreadable") {
    return {
      ...base,
      reason: "unreadable-row",
      error: `Cannot ${action}: the session row has no readable key/agentId, and a row without ownership facts is never visible.`,
    };
  }
  // readable: its own key and agentId are non-empty strings
  const fields = isRecord(row) ? row : {};
  const r = { key: own(fields, "key") as string, agentId: own(fields, "agentId") as string };
  const target = `session ${JSON.stringify(r.key)} (agent ${JSON.stringify(r.agentId)})`;
  const level = narrowestLevelFor(prep, relation, r.agentId);
  if (level === null) {
    // A cross-agent row the agent-to-agent policy refuses: no level shows it.
    const why = !prep.policy.enabled
      ? "agent-to-agent access is disabled; set tools.agentToAgent.enabled=true"
      : !prep.requesterAllowed
        ? `requester agent ${JSON.stringify(prep.requesterAgentId)} is not in tools.agentToAgent.allow; add it`
        : `agent ${JSON.stringify(r.agentId)} is not in tools.agentToAgent.allow; add it`;
    const hint =
      eff === "all"
        ? ""
        : prep.sandboxClamped
          ? ` The requester is also sandboxed, which clamps visibility to "tree".`
          : ` Cross-agent sessions also need tools.sessions.visibility="all" (currently "${eff}").`;
    return {
      ...base,
      reason: eff === "all" ? "agent-to-agent" : prep.sandboxClamped ? "sandbox" : "visibility",
      error: `Cannot ${action} ${target}: it belongs to another agent and ${why}.${hint}`,
    };
  }
  if (prep.sandboxClamped && visibilityRank(prep.requested) >= visibilityRank(level)) {
    return {
      ...base,
      reason: "sandbox",
      error:
        `Cannot ${action} ${target}: the requester is sandboxed, so session visibility is clamped to "tree" ` +
        `(its own session and sessions it spawned or owns) although tools.sessions.visibility is "${prep.requested}". ` +
        `Only sessions this requester spawned or owns are reachable from a sandbox.`,
    };
  }
  return {
    ...base,
    reason: "visibility",
    error:
      `Cannot ${action} ${target}: session visibility "${eff}" shows ${describeLevel(eff)}. ` +
      `Set tools.sessions.visibility="${level}" (or wider) to allow it` +
      (level === "all" ? ", with tools.agentToAgent enabled for both agents." : "."),
  };
}

function describeLevel(v: SessionVisibility): string {
  switch (v) {
    case "self":
      return "only the requester's own session";
    case "tree":
      return "the requester's own session and sessions it spawned or owns";
    case "agent":
      return "the requester's tree and every session of the same agent";
    case "all":
      return "the agent's sessions plus cross-agent sessions allowed by tools.agentToAgent";
  }
}

export interface VisibleSessions<R> {
  /** the level actually applied (after the sandbox clamp) */
  scope: SessionVisibility;
  /** the configured level, before the clamp */
  requested: SessionVisibility;
  /** true when the sandbox clamp narrowed `requested` to `scope` */
  sandboxClamped: boolean;
  rows: R[];
}

/**
 * Keeps the rows the requester may see, validating the context once. The
 * result names the scope it applied, so a scoped list is never mistaken for
 * everything. Rows that cannot be read are dropped, never thrown on. Input
 * rows are not mutated or copied.
 */
export function filterVisibleSessions<R extends SessionRowOwnership>(
  rows: readonly R[],
  ctx: SessionVisibilityContext,
): VisibleSessions<R> {
  if (!Array.isArray(rows)) throw new TypeError(`rows must be an array, got ${describeValue(rows)}`);
  const prep = prepareVisibility(ctx);
  return {
    scope: prep.effective,
    requested: prep.requested,
    sandboxClamped: prep.sandboxClamped,
    rows: rows.filter((row) => isVisibleWith(prep, row)),
  };
}
