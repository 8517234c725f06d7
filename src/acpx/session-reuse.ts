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
import type { AcpRuntimeEnsureInput, AcpRuntimeHandle } from "./types.js";

export interface RunningSessionFacts {
  handle: AcpRuntimeHandle;
  command: readonly string[];
  cwd: string | undefined;
}

/** The differences between a running session and an ensure input (empty = the same session). */
export function sessionDifferences(running: RunningSessionFacts, input: AcpRuntimeEnsureInput): string[] {
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
export function resumeTarget(input: AcpRuntimeEnsureInput, stored: StoredSessionRecord | null): string | undefined {
  if (input.resumeSessionId !== undefined) return input.resumeSessionId;
  if (input.resume === false || stored?.kind !== "lease") return undefined;
  const r = stored.record;
  const agentId = r.agentId ?? r.owner.agentId;
  // a raw adapter's record holds no agent session id (its plugin keeps it)
  if (agentId !== input.agentId || r.acpSessionId === "") return undefined;
  return r.acpSessionId;
}

export function assertReuseInput(input: AcpRuntimeEnsureInput): void {
  if (input.resumeSessionId !== undefined && (typeof input.resumeSessionId !== "string" || input.resumeSessionId === "")) {
    throw new TypeError("input.resumeSessionId must be a non-empty string when given");
  }
  if (input.resume !== undefined && typeof input.resume !== "boolean") throw new TypeError("input.resume must be a boolean");
  if (input.replace !== undefined && typeof input.replace !== "boolean") throw new TypeError("input.replace must be a boolean");
  if (input.mcpServers !== undefined) {
    if (!Array.isArray(input.mcpServers)) throw new TypeError("input.mcpServers must be an array of ACP MCP server configs");
    input.mcpServers.forEach((m: unknown, i: number) => {
      if (typeof m !== "object" || m === null || typeof (m as { name?: unknown }).name !== "string") {
        throw new TypeError(`input.mcpServers[${i}] must be an ACP MCP server config with a name`);
      }
    });
  }
}
