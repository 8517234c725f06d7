/**
 * Which controller session an OpenClaw handle names. OpenClaw isolates a
 * bare session key by its agent id (`ownerAwareSessions: 1`), so the
 * controller's key is made of both: `oc:<agentId>:<sessionKey>` (the agent
 * id with ":" escaped), or `oc:-:<sessionKey>` without one. The table also
 * keeps what OpenClaw asked for that the controller does not know: the
 * session mode, a fresh start asked for by prepareFreshSession, and closes
 * still running (a oneshot session closes after its turn, while OpenClaw
 * already goes on).
 */
import type { AcpRuntimeHandle } from "../acpx/connection/types.js";
import { KeyedQueue } from "../ownership/leases/keyed-queue.js";
import type { ResolvedAgent } from "./options.js";
import type { AdoptedReply } from "./adopted-turn.js";
import type { OpenClawRuntimeHandle, OpenClawSessionMode } from "./types.js";

/** A running turn, as the table holds it for cancel() (turn.ts runs it). */
export interface TurnControl {
  cancel(): Promise<void>;
}

export interface SessionEntry {
  key: string;
  /** what ensureSession returned to OpenClaw */
  openclaw: OpenClawRuntimeHandle & { leaseId: string };
  /** the controller's handle */
  handle: AcpRuntimeHandle;
  mode: OpenClawSessionMode;
  agent: ResolvedAgent;
  /** set when the session's processes ended without a close (how they did) */
  ended?: string;
  /** the running turn, for cancel() */
  turn?: TurnControl;
  /** a turn a gateway restart interrupted, re-adopted with the session: shown before the next reply (adopted-turn.ts) */
  adopted?: AdoptedReply;
}

export function controllerKey(sessionKey: string, agentId: string | undefined): string {
  return `oc:${agentId === undefined ? "-" : agentId.replaceAll("%", "%25").replaceAll(":", "%3A")}:${sessionKey}`;
}

export class SessionTable {
  private readonly entries = new Map<string, SessionEntry>();
  private readonly fresh = new Set<string>();
  private readonly closing = new KeyedQueue();

  keyOf(h: { sessionKey: string; agentId?: string }): string {
    return controllerKey(h.sessionKey, h.agentId);
  }

  get(key: string): SessionEntry | undefined {
    return this.entries.get(key);
  }

  /**
   * The live entry a handle names. A handle that names a lease (one this
   * runtime returned) must name the entry's current lease: an older one is
   * stale, and never reaches the current session.
   */
  lookup(h: OpenClawRuntimeHandle): { key: string; entry: SessionEntry | undefined; stale: boolean } {
    const key = this.keyOf(h);
    const entry = this.entries.get(key);
    const leaseId = (h as { leaseId?: unknown }).leaseId;
    const stale = entry !== undefined && typeof leaseId === "string" && leaseId !== entry.handle.leaseId;
    return { key, entry: stale ? undefined : entry, stale };
  }

  set(entry: SessionEntry): void {
    this.entries.set(entry.key, entry);
  }

  delete(key: string, leaseId?: string): void {
    const e = this.entries.get(key);
    if (e !== undefined && (leaseId === undefined || e.handle.leaseId === leaseId)) this.entries.delete(key);
  }

  byLease(leaseId: string): SessionEntry | undefined {
    for (const e of this.entries.values()) if (e.handle.leaseId === leaseId) return e;
    return undefined;
  }

  all(): SessionEntry[] {
    return [...this.entries.values()];
  }

  markFresh(key: string): void {
    this.fresh.add(key);
  }

  /** Whether the next ensure must start fresh; the mark is consumed by a successful ensure. */
  isFresh(key: string): boolean {
    return this.fresh.has(key);
  }

  clearFresh(key: string): void {
    this.fresh.delete(key);
  }

  /** Runs `close` after any close of the key still running (ownership's one per-key queue). */
  trackClose<T>(key: string, close: () => Promise<T>): Promise<T> {
    return this.closing.run(key, close);
  }

  /** Resolves once no close of the key is running. */
  closed(key: string): Promise<void> {
    return this.closing.idle(key);
  }
}
