/**
 * closeSession's work, run under the session key's lock: load the record and
 * its lease, then settle the lease through the one lifecycle (lifecycle.ts:
 * verify now, mark closing, kill what verified, verify again, settle). A
 * live session's prompt is failed with the close error before anything is
 * signalled, and its lifeline is our lever (a pipe, not a signal). Records
 * without a lease id take the legacy path: live root required, wrapper-root
 * or command match, else left alone. A record that cannot be read at all
 * (session-store.ts DamagedSessionRecord) does not hold the key's session
 * hostage: its lease is found in the lease store by the key, and the file
 * goes once that lease is settled.
 */
import {
  killOwnedTree,
  settleLease,
  summarizeKill,
  verifyLegacyRecord,
  type LeaseOutcome,
} from "../../ownership/index.js";
import type { LeaseState, OwnershipEvidence, ProcessLease } from "../../ownership/leases/types.js";
import { AcpxSessionClosedError } from "../report/errors.js";
import {
  lifecycleDeps,
  markSessionClosing,
  type ControllerDeps,
  type LiveSession,
  type LiveSessions,
} from "./live-sessions.js";
import type { DamagedSessionRecord, LegacyAcpxSessionRecord, StoredSessionRecord } from "./session-store.js";
import type { CloseReport } from "./types.js";

/**
 * closeSession's input, checked: the key, and the lease the handle names when
 * it names one. `{ sessionKey }` alone is the form a caller has after a
 * restart (a key, no handle): it closes whatever the key holds now, as a
 * handle without a lease id does.
 */
export function closeTarget(input: unknown): { key: string; expected: string | undefined } {
  if (typeof input !== "object" || input === null)
    throw new TypeError("input must be an object: { handle } (from ensureSession) or { sessionKey }");
  const { handle, sessionKey } = input as { handle?: unknown; sessionKey?: unknown };
  if (handle !== undefined && sessionKey !== undefined)
    throw new TypeError("input takes handle or sessionKey, not both: the handle already names its key");
  if (handle === undefined) {
    if (typeof sessionKey !== "string" || sessionKey.length === 0)
      throw new TypeError("input.sessionKey must be a non-empty string (or give input.handle from ensureSession)");
    return { key: sessionKey, expected: undefined };
  }
  const h = handle as { sessionKey?: unknown; leaseId?: unknown } | null;
  if (typeof h !== "object" || h === null || typeof h.sessionKey !== "string" || h.sessionKey.length === 0) {
    throw new TypeError("input.handle.sessionKey must be a non-empty string");
  }
  if (h.leaseId !== undefined && typeof h.leaseId !== "string")
    throw new TypeError("input.handle.leaseId must be a string when given");
  return { key: h.sessionKey, expected: typeof h.leaseId === "string" ? h.leaseId : undefined };
}

/** How a close reports the lease's state afterwards (CloseReport.outcome). */
const CLOSE_OUTCOME: Readonly<Record<LeaseState, CloseReport["outcome"]>> = Object.freeze({
  closed: "closed",
  lost: "lost",
  closing: "retry-pending",
  open: "left-alone",
});

type CloseBody = Omit<CloseReport, "elapsedMs" | "sessionKey" | "reason" | "interruptedPrompt" | "evidence"> & {
  interruptedPrompt?: boolean;
  evidence?: readonly OwnershipEvidence[];
};

/** The session closeLocked closes: its key, why, whether its record goes, and what is known of it. */
interface SessionToClose {
  key: string;
  reason: string | undefined;
  discard: boolean;
  live: LiveSession | undefined;
  stored: StoredSessionRecord | DamagedSessionRecord | null;
}

/**
 * `expectedLeaseId`: the lease the caller's handle names. When it is not the
 * key's current lease (a stale handle of a session closed and started again)
 * the close is a no-op that names the mismatch: nothing is signalled and the
 * current session is not touched.
 */
export async function closeLocked(
  d: ControllerDeps,
  sessions: LiveSessions,
  key: string,
  reason: string | undefined,
  discard: boolean,
  expectedLeaseId?: string,
): Promise<CloseReport> {
  const t0 = Date.now();
  const done = (r: CloseBody): CloseReport =>
    ({
      sessionKey: key,
      reason,
      evidence: [],
      interruptedPrompt: false,
      ...r,
      elapsedMs: Date.now() - t0,
    }) as CloseReport;

  const live = sessions.get(key);
  const stored = await d.sessions.get(key);
  if (stored?.kind === "legacy") return done(await closeLegacy(d, stored.record));
  const leaseId =
    live?.handle.leaseId ??
    (stored?.kind === "lease"
      ? stored.record.leaseId
      : stored?.kind === "damaged"
        ? await keyLeaseId(d, key)
        : undefined);
  if (expectedLeaseId !== undefined && leaseId !== expectedLeaseId) {
    return done({
      outcome: "noop",
      path: leaseId === undefined ? "none" : "lease",
      ...(leaseId !== undefined ? { leaseId } : {}),
      detail: `stale handle: it names lease ${expectedLeaseId}, the key's current session is ${leaseId === undefined ? "none" : `lease ${leaseId}`}; nothing signalled, the current session untouched`,
    });
  }
  markSessionClosing(live, reason);
  if (!leaseId) {
    // a damaged record with no lease of its key left: nothing runs for it, so it goes
    if (stored?.kind === "damaged") await d.sessions.remove(key);
    return done({
      outcome: "noop",
      path: "none",
      detail:
        stored?.kind === "damaged"
          ? `${stored.why}; no lease of this key, record removed`
          : "no session record for this key",
    });
  }
  // in flight before the record is read: a reconcile listing it meanwhile leaves it to this close
  return sessions.held(leaseId, () => closeLease(d, sessions, { key, reason, discard, live, stored }, leaseId, done));
}

/** The key's lease, read under `held`: already gone or settled, or settled now (settleSession). */
async function closeLease(
  d: ControllerDeps,
  sessions: LiveSessions,
  c: SessionToClose,
  leaseId: string,
  done: (r: CloseBody) => CloseReport,
): Promise<CloseReport> {
  const { key, live, discard } = c;
  const lease = await d.leases.get(leaseId);
  if (!lease) {
    sessions.drop(key, live);
    return done({
      outcome: "noop",
      path: "lease",
      leaseId,
      detail: `lease ${leaseId} no longer exists (expired?); nothing signalled`,
    });
  }
  if (lease.state === "closed" || lease.state === "lost") {
    sessions.drop(key, live);
    if (discard || c.stored?.kind === "damaged") await d.sessions.remove(key);
    return done({
      outcome: "noop",
      path: "lease",
      leaseId,
      leaseState: lease.state,
      ...(lease.settledAs ? { settledAs: lease.settledAs } : {}),
      code: "already-settled",
      detail: `already ${lease.state}`,
    });
  }

  return done(await settleSession(d, sessions, c, leaseId, lease));
}

/**
 * The lease settled through the one lifecycle, then the session and its
 * record: dropped (and the record closed or discarded) when the lease
 * settled, otherwise let go or left to settle (see below).
 */
async function settleSession(
  d: ControllerDeps,
  sessions: LiveSessions,
  { key, reason, discard, live, stored }: SessionToClose,
  leaseId: string,
  lease: ProcessLease,
): Promise<CloseBody> {
  const interruptedPrompt = live?.turn !== undefined;
  // ACP session/close when the agent advertises it, and the terminals' trees, before the kill (conversation.ts)
  await live?.conv.beforeClose(live.client, live.launched.exitStatus() === undefined, reason ?? "closeSession");
  const o = await settleLease(lifecycleDeps(d), lease, {
    // the prompt fails with the close error before anything is signalled
    beforeSignals: () => live?.client?.close(new AcpxSessionClosedError(lease.sessionKey, reason)),
    ...(live ? { release: () => sessions.release(live) } : {}),
  });
  if (o.stateAfter === "closed" || o.stateAfter === "lost") {
    sessions.drop(key, live);
    if (discard || stored?.kind === "damaged") await d.sessions.remove(key);
    else if (stored?.kind === "lease")
      await d.sessions.put({ ...stored.record, closedAt: Date.now(), updatedAt: Date.now() });
  } else if (live) {
    // Not settled (open or closing): the session is over either way, it
    // must not hold its lease hostage. A wrapper that exited is let go (the
    // session record still names the lease, for the next close); one still
    // running keeps its handle, and the lease is retried by the
    // maintenance timer (closing) or the startup reap and the next close.
    if (live.launched.exitStatus() !== undefined) sessions.drop(key, live);
    else live.closeSettling = true;
  }
  return {
    // a settlement the record could not take (a full disk): the tree is ended, the lease is retried
    outcome: o.pending ? "retry-pending" : CLOSE_OUTCOME[o.stateAfter],
    ...(o.pending ? { settlementPending: o.pending } : {}),
    path: "lease",
    leaseId,
    leaseState: o.stateAfter,
    ...(o.settledAs ? { settledAs: o.settledAs } : {}),
    code: o.code,
    verdict: o.verdict,
    evidence: o.evidence,
    interruptedPrompt,
    detail: `${describeKill(o)}${o.why}`,
    ...(o.kill ? { kill: summarizeKill(o.kill) } : {}),
  };
}

/**
 * The key's lease when its record cannot be read: this instance's newest
 * ACPX lease of the key that is not settled, else its newest at all (a
 * close then reports it already settled); undefined when it has none.
 */
async function keyLeaseId(d: ControllerDeps, key: string): Promise<string | undefined> {
  const mine = (await d.leases.list()).leases
    .filter((l) => l.sessionKey === key && l.kind === "acpx" && l.gatewayInstanceId === d.gatewayInstanceId)
    .sort((a, b) => b.startedAt - a.startedAt);
  return (mine.find((l) => l.state === "open" || l.state === "closing") ?? mine[0])?.leaseId;
}

function describeKill(o: LeaseOutcome): string {
  if (o.kill === null) return "nothing signalled; ";
  return o.target === "tree"
    ? "verified tree killed; "
    : "the wrapper was gone, remnants carrying the lease and instance id killed; ";
}

/** Records without a lease: live root required, wrapper-root or command match, else left alone. */
async function closeLegacy(d: ControllerDeps, record: LegacyAcpxSessionRecord): Promise<CloseBody> {
  const v = await verifyLegacyRecord(record, d.facts, { wrapperRoot: d.wrapper.wrapperRoot });
  if (v.tree) {
    const kill = summarizeKill(
      await killOwnedTree(v.tree, { facts: d.facts, signaller: d.signaller, graceMs: d.graceMs }),
    );
    if (kill.survivors.length === 0) await d.sessions.remove(record.sessionKey);
    return {
      outcome: kill.survivors.length === 0 ? "closed" : "retry-pending",
      path: "legacy",
      verdict: "owned",
      evidence: v.evidence,
      kill,
      detail: `legacy record verified; killed ${kill.members.length} process(es)`,
    };
  }
  const gone = v.evidence.some((e) => e.check === "root-alive" && e.result === "mismatch");
  if (gone) {
    // the recorded pid is not alive: there is nothing left to leave alone
    await d.sessions.remove(record.sessionKey);
    return {
      outcome: "lost",
      path: "legacy",
      verdict: "gone",
      evidence: v.evidence,
      detail: "legacy record: the recorded pid is gone; nothing signalled, record retired",
    };
  }
  // an unverifiable legacy record is kept as it is, whatever the caller asked
  const verdict = v.evidence.some((e) => e.result === "mismatch") ? "mismatch" : "unknown";
  return {
    outcome: "left-alone",
    path: "legacy",
    verdict,
    evidence: v.evidence,
    detail: `legacy record could not be verified (${verdict}); left as it is, nothing signalled`,
  };
}
