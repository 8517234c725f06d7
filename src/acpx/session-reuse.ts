/**
 * ensureSession on a key that already has a session.
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
import { AcpxEnsureError } from "./errors.js";
import type { StoredSessionRecord } from "./session-store.js";
import type { EnsureInput } from "./ensure-input.js";
import type { AcpRuntimeHandle } from "./types.js";

export interface RunningSessionFacts {
  handle: AcpRuntimeHandle;
  command: readonly string[];
  cwd: string | undefined;
}

/** The differences between a running session and an ensure input (empty = the same session). */
export function sessionDifferences(running: RunningSessionFacts, input: Pick<EnsureInput, "agentId" | "command" | "cwd">): string[] {
  const out: string[] = [];
  if (running.handle.owner.agentId !== input.agentId) out.push(`agentId ${JSON.stringify(running.handle.owner.agentId)} (asked ${JSON.stringify(input.agentId)})`);
  if (JSON.stringify(running.command) !== JSON.stringify(input.command)) out.push(`command ${JSON.stringify(running.command)} (asked ${JSON.stringify(input.command)})`);
  if (normCwd(running.cwd) !== normCwd(input.cwd)) out.push(`cwd ${JSON.stringify(normCwd(running.cwd))} (asked ${JSON.stringify(normCwd(input.cwd))})`);
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
export function resumeTarget(input: Pick<EnsureInput, "agentId" | "resumeSessionId" | "resume">, stored: StoredSessionRecord | null): string | undefined {
  if (input.resumeSessionId !== undefined) return input.resumeSessionId;
  if (input.resume === false || stored?.kind !== "lease") return undefined;
  const r = stored.record;
  const agentId = r.agentId ?? r.owner.agentId;
  // a raw adapter's record holds no agent session id (its plugin keeps it)
  if (agentId !== input.agentId || r.acpSessionId === "") return undefined;
  return r.acpSessionId;
}
