/**
 * Owner metadata on session rows. Writers (the ACPX
 * controller, subagent and background-task spawners, the session store)
 * build it with `buildSessionOwner`; readers normalize whatever a row holds
 * with `normalizeSessionOwner`. Ownership is only ever what a row declares:
 * a legacy row without owner fields is not owned, whatever its key looks like.
 */
import { describeValue, isNonEmptyString, isRecord, own } from "./describe.js";
import type { AcpSessionOwner, SessionRowOwnership } from "./types.js";

export interface BuildSessionOwnerInput {
  sessionKey: string;
  agentId: string;
  gatewayInstanceId: string;
  spawnedBy?: string;
  parentSessionKey?: string;
  /** default: spawnedBy, else parentSessionKey, else the session itself */
  ownerSessionKey?: string;
  /** default: Date.now() */
  createdAt?: number;
}

/** The optional owner keys a row may declare: each a non-empty string when given (a TypeError names the field). */
export function assertOwnerKeys(fields: Record<string, unknown>): void {
  for (const f of ["spawnedBy", "parentSessionKey", "ownerSessionKey"] as const) {
    const v: unknown = own(fields, f);
    if (v !== undefined && !isNonEmptyString(v)) {
      throw new TypeError(`${f} must be a non-empty string when given, got ${describeValue(v)}`);
    }
  }
}

/**
 * Builds the `AcpSessionOwner` to store on a session row/record. A session
 * spawned by nobody owns itself, which grants nothing beyond "self". Throws
 * TypeError naming the field for a missing/empty key, agent id or instance
 * id, a non-string optional key, or a createdAt that is not a finite
 * non-negative number.
 */
export function buildSessionOwner(input: BuildSessionOwnerInput): AcpSessionOwner {
  if (!isRecord(input)) throw new TypeError(`input must be an object, got ${describeValue(input)}`);
  // own properties only, read once: the owner is built from what was read
  const fields = input as unknown as Record<string, unknown>;
  const str = (f: string): string | undefined => own(fields, f) as string | undefined;
  const required = ["sessionKey", "agentId", "gatewayInstanceId"] as const;
  for (const f of required) {
    const v = own(fields, f);
    if (!isNonEmptyString(v)) throw new TypeError(`${f} must be a non-empty string, got ${describeValue(v)}`);
  }
  assertOwnerKeys(fields);
  const sessionKey = str("sessionKey")!;
  const spawnedBy = str("spawnedBy");
  const parentSessionKey = str("parentSessionKey");
  const createdAt: unknown = own(fields, "createdAt") ?? Date.now();
  if (typeof createdAt !== "number" || !Number.isFinite(createdAt) || createdAt < 0) {
    throw new TypeError(`createdAt must be a finite non-negative number (ms), got ${describeValue(createdAt)}`);
  }
  const owner: AcpSessionOwner = {
    sessionKey,
    ownerSessionKey: str("ownerSessionKey") ?? spawnedBy ?? parentSessionKey ?? sessionKey,
    agentId: str("agentId")!,
    backend: "acpx",
    gatewayInstanceId: str("gatewayInstanceId")!,
    createdAt,
  };
  if (spawnedBy !== undefined) owner.spawnedBy = spawnedBy;
  if (parentSessionKey !== undefined) owner.parentSessionKey = parentSessionKey;
  return owner;
}

/** The owner fields a row declares; absent means unknown, never guessed. */
export type NormalizedSessionOwner = Partial<AcpSessionOwner>;

/**
 * Reads owner metadata from a gateway session row or a session record.
 * Accepts `key` or `sessionKey`, top-level fields or a nested `owner`
 * object (top-level wins), and keeps only well-typed values. ownerSessionKey
 * falls back to spawnedBy, then parentSessionKey. A row declaring none of
 * them has no ownerSessionKey: it is not owned by anyone. Pure; throws
 * TypeError only when `row` is not an object.
 */
export function normalizeSessionOwner(row: unknown): NormalizedSessionOwner {
  if (!isRecord(row)) throw new TypeError(`row must be an object, got ${describeValue(row)}`);
  const ownerField = own(row, "owner");
  const nested: Record<string, unknown> = isRecord(ownerField) ? ownerField : {};
  const str = (f: string): string | undefined => {
    const top = own(row, f);
    if (isNonEmptyString(top)) return top;
    const inner = own(nested, f);
    return isNonEmptyString(inner) ? inner : undefined;
  };
  const out: NormalizedSessionOwner = {};
  const sessionKey = str("key") ?? str("sessionKey");
  if (sessionKey !== undefined) out.sessionKey = sessionKey;
  const agentId = str("agentId");
  if (agentId !== undefined) out.agentId = agentId;
  const spawnedBy = str("spawnedBy");
  if (spawnedBy !== undefined) out.spawnedBy = spawnedBy;
  const parentSessionKey = str("parentSessionKey");
  if (parentSessionKey !== undefined) out.parentSessionKey = parentSessionKey;
  const ownerSessionKey = str("ownerSessionKey") ?? spawnedBy ?? parentSessionKey;
  if (ownerSessionKey !== undefined) out.ownerSessionKey = ownerSessionKey;
  if (own(row, "backend") === "acpx" || own(nested, "backend") === "acpx") out.backend = "acpx";
  const gatewayInstanceId = str("gatewayInstanceId");
  if (gatewayInstanceId !== undefined) out.gatewayInstanceId = gatewayInstanceId;
  const createdAt = [own(row, "createdAt"), own(nested, "createdAt")].find(
    (v): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0,
  );
  if (createdAt !== undefined) out.createdAt = createdAt;
  return out;
}

/**
 * The `SessionRowOwnership` view of a row or record for `canSeeSessionRow`,
 * or null when its key or agent id is unknown (such a row is never visible).
 */
export function toSessionRowOwnership(row: unknown): SessionRowOwnership | null {
  // the normalized owner leaves absent fields out: read its own properties only, never inherited ones
  const o = normalizeSessionOwner(row) as Record<string, unknown>;
  const sessionKey = own(o, "sessionKey") as string | undefined;
  const agentId = own(o, "agentId") as string | undefined;
  if (sessionKey === undefined || agentId === undefined) return null;
  const out: SessionRowOwnership = { key: sessionKey, agentId };
  for (const f of ["ownerSessionKey", "spawnedBy", "parentSessionKey"] as const) {
    const v = own(o, f) as string | undefined;
    if (v !== undefined) out[f] = v;
  }
  return out;
}
