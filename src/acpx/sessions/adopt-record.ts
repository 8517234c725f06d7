/**
 * What a durable session's record keeps for its re-adoption: the agent's
 * initialize answer and how its session was opened (modes, config
 * options), so a later controller speaks to the session as this one did
 * without a handshake (the agent is mid-conversation; a second initialize
 * is not ACP). Bounded: an agent whose answers are too large to keep leaves
 * a session that is durable for its processes but cannot be re-adopted (the
 * next ensureSession on its key closes and resumes it as before).
 */
import type { InitializeResponse } from "@agentclientprotocol/sdk";
import type { SessionConversation } from "../connection/conversation.js";
import type { ControllerLogger } from "../report/logger.js";
import type { OpenedSession } from "../connection/resume.js";
import type { AcpxSessionRecord } from "./session-store.js";

/** The most a record keeps for adoption (the record itself is read up to 256 KiB). */
export const MAX_ADOPTION_BYTES = 64 * 1024;

export interface AdoptionFacts {
  init: InitializeResponse;
  opened: OpenedSession;
}

/** Puts the session's handshake facts into its record, when they fit. */
export function keepForAdoption(record: AcpxSessionRecord, conv: SessionConversation, log: ControllerLogger): void {
  if (conv.init === undefined || conv.opening === undefined) return;
  const facts: AdoptionFacts = { init: conv.init, opened: conv.opening };
  const bytes = Buffer.byteLength(JSON.stringify(facts), "utf8");
  if (bytes > MAX_ADOPTION_BYTES) {
    log.warn?.(
      `proclease: session ${JSON.stringify(record.sessionKey)} cannot be re-adopted: the agent's initialize and session answers take ${bytes} bytes, over ${MAX_ADOPTION_BYTES}`,
      { leaseId: record.leaseId },
    );
    return;
  }
  record.adoption = facts;
}

/** The record's adoption facts, checked for shape, or null. */
export function adoptionFactsOf(record: AcpxSessionRecord): AdoptionFacts | null {
  const a = record.adoption as Partial<AdoptionFacts> | undefined;
  if (typeof a !== "object" || a === null) return null;
  const { init, opened } = a;
  if (typeof init !== "object" || init === null || typeof init.protocolVersion !== "number") return null;
  if (typeof opened !== "object" || opened === null || opened.sessionId !== record.acpSessionId) return null;
  if (typeof opened.response !== "object" || opened.response === null) return null;
  return { init, opened };
}
