/**
 * The on-disk lease record: schema version, field validation, and the legal
 * state transitions. Pure; the store and the verifier both use it so that a
 * record is either fully valid or not a lease at all.
 */
import { MAX_PID } from "../../facts/validate.js";
import {
  LEASE_SCHEMA_VERSION,
  type LeaseKind,
  type LeaseSettledAs,
  type LeaseState,
  type ProcessLease,
} from "./types.js";

/** Lease ids name files: a conservative charset rules out traversal and odd names. */
export const LEASE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export const LEASE_STATES: readonly LeaseState[] = ["open", "closing", "closed", "lost"];
// from maps typed over every value of their type: a value added to the type and not here is a compile error
export const LEASE_KINDS = Object.keys({ acpx: 0, supervisor: 0 } satisfies Record<
  LeaseKind,
  0
>) as readonly LeaseKind[];

/** What each settledAs means, in words (one wording everywhere it is shown). */
export const SETTLED_AS_MEANING: Readonly<Record<LeaseSettledAs, string>> = Object.freeze({
  killed: "its processes were ended here (a verified tree, the remnants of a gone root, or what its cgroup held)",
  "exit-observed": "its root's exit was seen by the process that spawned it, and nothing of it was left",
  "ended-by-wrapper":
    "its wrapper ended the tree itself (TERM, grace, KILL) when its gateway went away, or when a durable session's window ran out with nobody to re-adopt it, and said so; nothing of it was left",
  "ended-on-its-own": "its processes had ended on their own before the close; nothing was signalled",
  "not-ours": "its root pid, group or namespace names someone else's process now; nothing was signalled",
  "never-started": "its spawn failed before any process of it existed",
  "left-unjudged":
    "its root was gone and nothing proven its own was left, but processes that may be its own hide their environment (non-dumpable), so they could not be judged: never signalled, left running",
});
export const LEASE_SETTLED_AS = Object.keys(SETTLED_AS_MEANING) as readonly LeaseSettledAs[];

/**
 * For records written before `kind` was a field, and only for them: the
 * process supervisor's session keys started with this, every other lease was
 * an ACPX session. A record with `kind` is read as it says.
 */
const SUPERVISOR_KEY_PREFIX_OF_KINDLESS_RECORDS = "supervisor:";

/** The lease's kind: its `kind` field, else (a record written before the field) what its session key says; null when `kind` is not a kind. */
function kindOf(kind: unknown, sessionKey: string): LeaseKind | null {
  if (kind === undefined)
    return sessionKey.startsWith(SUPERVISOR_KEY_PREFIX_OF_KINDLESS_RECORDS) ? "supervisor" : "acpx";
  return (LEASE_KINDS as readonly unknown[]).includes(kind) ? (kind as LeaseKind) : null;
}
export const TERMINAL_STATES: ReadonlySet<LeaseState> = new Set<LeaseState>(["closed", "lost"]);

/**
 * open → closing → closed | lost, and closing → open when cleanup could not
 * run (process list unavailable). Nothing else: in particular open → closed
 * and open → lost are refused, so every close goes through "closing" first
 * (a spawn that failed before any pid existed is open → closing → lost; the
 * intermediate write is what makes a crash mid-close visible at startup).
 * Terminal states are absorbing.
 */
const LEGAL: Readonly<Record<LeaseState, readonly LeaseState[]>> = {
  open: ["closing"],
  closing: ["closed", "lost", "open"],
  closed: [],
  lost: [],
};

export function isLegalTransition(from: LeaseState, to: LeaseState): boolean {
  return LEGAL[from]?.includes(to) ?? false;
}

export class LeaseTransitionError extends Error {
  override name = "LeaseTransitionError";
  constructor(
    readonly leaseId: string,
    readonly from: LeaseState,
    readonly to: LeaseState,
  ) {
    super(
      `lease ${leaseId}: illegal transition ${from} → ${to} (allowed from ${from}: ${LEGAL[from].join(", ") || "none"})`,
    );
  }
}

export type ParsedLease = { ok: true; lease: ProcessLease } | { ok: false; reason: string; futureSchema?: boolean };

/**
 * Validates anything (parsed JSON, a caller's object) as a lease record.
 * Unknown extra fields are dropped; `schemaVersion` is required when
 * `requireSchema` (files on disk) and must be ours.
 */
export function parseLeaseRecord(value: unknown, requireSchema: boolean): ParsedLease {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, reason: "not a JSON object" };
  }
  const v = value as Record<string, unknown>;
  if (requireSchema || v.schemaVersion !== undefined) {
    if (v.schemaVersion !== LEASE_SCHEMA_VERSION) {
      const future =
        typeof v.schemaVersion === "number" &&
        Number.isInteger(v.schemaVersion) &&
        v.schemaVersion > LEASE_SCHEMA_VERSION;
      return {
        ok: false,
        reason: `schemaVersion ${JSON.stringify(v.schemaVersion) ?? "missing"} is not ${LEASE_SCHEMA_VERSION}`,
        futureSchema: future,
      };
    }
  }
  const bad = (field: string, want: string) => ({ ok: false as const, reason: `${field} must be ${want}` });
  if (typeof v.leaseId !== "string" || !LEASE_ID_RE.test(v.leaseId))
    return bad("leaseId", "a lease id ([A-Za-z0-9_-], 1-128)");
  if (!nonEmpty(v.gatewayInstanceId)) return bad("gatewayInstanceId", "a non-empty string");
  if (typeof v.sessionKey !== "string") return bad("sessionKey", "a string");
  const kind = kindOf(v.kind, v.sessionKey);
  if (kind === null) return bad("kind", `absent or ${LEASE_KINDS.join(" | ")}`);
  if (typeof v.wrapperRoot !== "string") return bad("wrapperRoot", "a string");
  if (typeof v.wrapperPath !== "string") return bad("wrapperPath", "a string");
  if (!isInt(v.rootPid) || v.rootPid < 0 || v.rootPid > MAX_PID) return bad("rootPid", `an integer 0..${MAX_PID}`);
  if (
    v.processGroupId !== undefined &&
    (!isInt(v.processGroupId) || v.processGroupId < 1 || v.processGroupId > MAX_PID)
  ) {
    return bad("processGroupId", `absent or an integer 1..${MAX_PID}`);
  }
  if (typeof v.commandHash !== "string") return bad("commandHash", "a string");
  if (!isFiniteNumber(v.startedAt)) return bad("startedAt", "a finite number");
  if (typeof v.state !== "string" || !(LEASE_STATES as readonly string[]).includes(v.state)) {
    return bad("state", LEASE_STATES.join(" | "));
  }
  for (const k of ["rootStartTime", "bootId", "pidNamespace", "holder"] as const) {
    if (v[k] !== undefined && typeof v[k] !== "string") return bad(k, "absent or a string");
  }
  if (v.updatedAt !== undefined && !isFiniteNumber(v.updatedAt)) return bad("updatedAt", "absent or a finite number");
  if (v.settledAs !== undefined && !(LEASE_SETTLED_AS as readonly unknown[]).includes(v.settledAs))
    return bad("settledAs", `absent or ${LEASE_SETTLED_AS.join(" | ")}`);
  if (v.cgroup !== undefined) {
    const c = v.cgroup as Record<string, unknown> | null;
    if (
      typeof c !== "object" ||
      c === null ||
      !nonEmpty(c.path) ||
      !c.path.startsWith("/") ||
      typeof c.id !== "string" ||
      !/^\d+$/.test(c.id)
    ) {
      return bad("cgroup", "absent or {path: an absolute path, id: a decimal inode}");
    }
  }
  if (v.durable !== undefined) {
    const w = (v.durable as { reattachWithinMs?: unknown } | null)?.reattachWithinMs;
    if (!isInt(w) || w < 1 || w > 600_000) return bad("durable", "absent or {reattachWithinMs: an integer 1..600000}");
  }
  const lease: ProcessLease = {
    leaseId: v.leaseId,
    kind,
    gatewayInstanceId: v.gatewayInstanceId,
    sessionKey: v.sessionKey,
    wrapperRoot: v.wrapperRoot,
    wrapperPath: v.wrapperPath,
    rootPid: v.rootPid,
    commandHash: v.commandHash,
    startedAt: v.startedAt,
    state: v.state as LeaseState,
  };
  copyOptionalFields(v, lease);
  return { ok: true, lease };
}

/** The optional fields parseLeaseRecord has checked, copied onto `lease` where present. */
function copyOptionalFields(v: Record<string, unknown>, lease: ProcessLease): void {
  if (v.processGroupId !== undefined) lease.processGroupId = v.processGroupId as number;
  if (v.rootStartTime !== undefined) lease.rootStartTime = v.rootStartTime as string;
  if (v.bootId !== undefined) lease.bootId = v.bootId as string;
  if (v.pidNamespace !== undefined) lease.pidNamespace = v.pidNamespace as string;
  if (v.updatedAt !== undefined) lease.updatedAt = v.updatedAt as number;
  if (v.holder !== undefined) lease.holder = v.holder as string;
  if (v.settledAs !== undefined) lease.settledAs = v.settledAs as LeaseSettledAs;
  if (v.cgroup !== undefined) {
    const c = v.cgroup as { path: string; id: string };
    lease.cgroup = { path: c.path, id: c.id };
  }
  if (v.durable !== undefined)
    lease.durable = { reattachWithinMs: (v.durable as { reattachWithinMs: number }).reattachWithinMs };
}

/** How a settled lease ended, in words ("lost: its processes had ended on their own …"); null for a lease not settled. */
export function settledLine(lease: Pick<ProcessLease, "state" | "settledAs">): string | null {
  if (!TERMINAL_STATES.has(lease.state)) return null;
  return `${lease.state}: ${lease.settledAs !== undefined ? SETTLED_AS_MEANING[lease.settledAs] : "settled before leases recorded how"}`;
}

/** The JSON written to disk: schemaVersion first, then the lease fields. */
export function serializeLease(lease: ProcessLease): string {
  return `${JSON.stringify({ schemaVersion: LEASE_SCHEMA_VERSION, ...lease })}\n`;
}

function nonEmpty(v: unknown): v is string {
  return typeof v === "string" && v.length > 0;
}
function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}
function isFiniteNumber(v: unknown): v is number {
  return typeof v === "number" && Number.isFinite(v);
}
