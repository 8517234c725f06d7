/**
 * What the controller reports about its sessions: sessionStatus for a live
 * one (its lease's state now, its turn, terminals, and what the agent
 * advertised, kept current by its updates) and listSessions over every
 * record it keeps (live, closed with its state kept, or left by an earlier run).
 */
import type { ControllerDeps, LiveSession, LiveSessions } from "./live-sessions.js";
import type { SessionStatus, SessionSummary } from "./types.js";

export async function statusOf(d: ControllerDeps, live: LiveSession): Promise<SessionStatus> {
  const h = live.handle;
  const lease = await d.leases.get(h.leaseId);
  const agent = live.conv.state.snapshot();
  return {
    sessionKey: h.sessionKey,
    leaseId: h.leaseId,
    acpSessionId: h.acpSessionId,
    busy: live.turn !== undefined,
    leaseState: lease?.state ?? "missing",
    terminals: live.conv.terminals?.runIds() ?? [],
    droppedUpdates: live.conv.router.dropped,
    droppedUpdateBytes: live.conv.router.droppedBytes,
    stdoutHeld: live.client?.stdoutGate.held ?? false,
    stdoutHolds: live.client?.stdoutGate.pauses ?? 0,
    intake: live.conv.budget.status(),
    ...agent,
  };
}

export async function listSessionSummaries(d: ControllerDeps, sessions: LiveSessions): Promise<SessionSummary[]> {
  const { records } = await d.sessions.list();
  const out: SessionSummary[] = [];
  for (const r of records) {
    if (r.kind !== "lease") continue;
    const rec = r.record;
    const live = sessions.get(rec.sessionKey);
    const isLive = live !== undefined && live.handle.leaseId === rec.leaseId && !live.closing;
    out.push({
      sessionKey: rec.sessionKey,
      leaseId: rec.leaseId,
      acpSessionId: rec.acpSessionId,
      agentId: rec.agentId ?? rec.owner.agentId,
      live: isLive,
      busy: isLive && live.turn !== undefined,
      ...(rec.closedAt !== undefined ? { closedAt: rec.closedAt } : {}),
      ...(rec.cwd !== undefined ? { cwd: rec.cwd } : {}),
      ...(rec.command !== undefined ? { command: rec.command } : {}),
    });
  }
  return out;
}
