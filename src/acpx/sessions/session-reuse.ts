/**
 * ensureSession on a key that already has a session (reuseOrOpen).
 * - Live: returned as it is (`reused: true`) only when it runs the same
 *   command, agentId and cwd; another one is AcpxEnsureError
 *   ("session-mismatch") unless the caller asks `replace: true`, which
 *   closes it through the lifecycle and starts the new one. Limits are
 *   compared as before (session-limits.ts).
 * - A record from an earlier run, or a session whose adapter died: the
 *   agent session it names is what ensureSession takes back (resume.ts),
 *   unless `resume: false`, the caller names another one
 *   (`resumeSessionId`), or the record belongs to another agentId (an agent
 *   never gets another agent's session id). A record whose close discarded
 *   its state is gone, so there is nothing to take back.
 */
import { isAbsolute, resolve } from "node:path";
import { withResumeSessionId, type EnsureInput } from "./ensure-input.js";
import { AcpxEnsureError } from "../report/errors.js";
import type { ControllerDeps, LiveSessions } from "./live-sessions.js";
import { assertRunningLimits } from "./session-limits.js";
import { sessionIdProblem } from "../connection/session-id.js";
import type { AcpxSessionRecord, DamagedSessionRecord, StoredSessionRecord } from "./session-store.js";
import type { AcpRuntimeHandle } from "../connection/types.js";
import type { CloseReport } from "./types.js";

/** What ensureSession does with its key: hand back the running session as it is, or open one with this input. */
export type ReuseOrOpen = { reused: AcpRuntimeHandle } | { open: EnsureInput };

/**
 * The key's running session when it is the one asked for; else the key's
 * earlier session (live, being replaced, or only recorded) settled through
 * `settle` (the verified close path), and the input to open with, the agent
 * session to take back filled in.
 */
export async function reuseOrOpen(
  d: ControllerDeps,
  live: LiveSessions,
  input: EnsureInput,
  settle: (reason: string) => Promise<CloseReport>,
  adopt?: (record: AcpxSessionRecord) => Promise<AcpRuntimeHandle | undefined>,
): Promise<ReuseOrOpen> {
  const existing = live.get(input.sessionKey);
  if (existing && !existing.closing && existing.launched.exitStatus() === undefined) {
    const stored = await d.sessions.get(input.sessionKey);
    const cwd = stored?.kind === "lease" ? stored.record.cwd : undefined;
    const command = stored?.kind === "lease" ? (stored.record.command ?? []) : [];
    const differences = sessionDifferences({ handle: existing.handle, command, cwd }, input);
    if (differences.length === 0 || input.replace !== true) {
      if (differences.length > 0) throw mismatchError(existing.handle, differences);
      assertRunningLimits(existing.handle, input);
      return { reused: { ...existing.handle, reused: true } };
    }
  }
  const stored = await d.sessions.get(input.sessionKey);
  // a durable session an earlier gateway left waiting is taken back as it runs (durable/adopt.ts)
  // not when the caller asks for a fresh agent session (resume: false) or names another one
  if (
    !existing &&
    adopt !== undefined &&
    stored?.kind === "lease" &&
    input.resume !== false &&
    (input.resumeSessionId === undefined || input.resumeSessionId === stored.record.acpSessionId)
  ) {
    const adopted = await adopt(stored.record);
    if (adopted !== undefined) return { reused: adopted };
  }
  const resumeSessionId = resumeTarget(input, stored);
  if (existing || stored) {
    const prior = await settle(existing ? "superseded by ensureSession" : "settled by ensureSession");
    if (prior.outcome === "left-alone" || prior.outcome === "retry-pending") {
      throw new Error(
        `ensureSession ${JSON.stringify(input.sessionKey)}: the previous session could not be settled (${prior.detail}); refusing to start a second one`,
      );
    }
  }
  return { open: resumeSessionId !== undefined ? withResumeSessionId(input, resumeSessionId) : input };
}

export interface RunningSessionFacts {
  handle: AcpRuntimeHandle;
  command: readonly string[];
  cwd: string | undefined;
}

/** The differences between a running session and an ensure input (empty = the same session). */
export function sessionDifferences(
  running: RunningSessionFacts,
  input: Pick<EnsureInput, "agentId" | "command" | "cwd">,
): string[] {
  const out: string[] = [];
  if (running.handle.owner.agentId !== input.agentId)
    out.push(`agentId ${JSON.stringify(running.handle.owner.agentId)} (asked ${JSON.stringify(input.agentId)})`);
  if (JSON.stringify(running.command) !== JSON.stringify(input.command))
    out.push(`command ${JSON.stringify(running.command)} (asked ${JSON.stringify(input.command)})`);
  if (normCwd(running.cwd) !== normCwd(input.cwd))
    out.push(`cwd ${JSON.stringify(normCwd(running.cwd))} (asked ${JSON.stringify(normCwd(input.cwd))})`);
  return out;
}

function normCwd(cwd: string | undefined): string {
  const c = cwd ?? process.cwd();
  return isAbsolute(c) ? resolve(c) : resolve(process.cwd(), c);
}

export function mismatchError(h: AcpRuntimeHandle, differences: readonly string[]): AcpxEnsureError {
  return new AcpxEnsureError(
    h.sessionKey,
    "session-mismatch",
    `ensureSession ${JSON.stringify(h.sessionKey)} refused: the key's session is already running (lease ${h.leaseId}) with ${differences.join(", ")}; ` +
      "pass replace: true to close it and start this one, or use another key",
    undefined,
    undefined,
  );
}

/** The agent session ensureSession should take back for this input, given the key's stored record. */
export function resumeTarget(
  input: Pick<EnsureInput, "agentId" | "resumeSessionId" | "resume">,
  stored: StoredSessionRecord | DamagedSessionRecord | null,
): string | undefined {
  if (input.resumeSessionId !== undefined) return input.resumeSessionId;
  if (input.resume === false || stored?.kind !== "lease") return undefined;
  const r = stored.record;
  const agentId = r.agentId ?? r.owner.agentId;
  // a raw adapter's record holds no agent session id (its plugin keeps it); one an earlier version stored unchecked is not offered back
  if (agentId !== input.agentId || r.acpSessionId === "" || sessionIdProblem(r.acpSessionId) !== null) return undefined;
  return r.acpSessionId;
}
