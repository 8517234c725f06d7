/**
 * A turn's shapes: what it is given and what it answers (the stream, its
 * result, a cancel's report). turn-stream.ts runs the turn.
 */
import type { ContentBlock, SessionUpdate } from "@agentclientprotocol/sdk";
import type { SessionAgentState } from "./session-controls.js";

export type TurnInput = string | readonly ContentBlock[];

export interface TurnResult {
  stopReason: string;
  /** the agent's token usage for the turn, when its session/prompt answer carried one */
  usage?: unknown;
  /** the last usage_update of the turn (context window used/size, cost) */
  contextUsage?: SessionAgentState["contextUsage"];
  /** cancel() (or cancelTurn) was called during the turn: an agent may still answer end_turn */
  cancelRequested: boolean;
}

export interface CancelReport {
  /** session/cancel went out */
  cancelSent: boolean;
  /** the turn ended (within cancelGraceMs) */
  turnEnded: boolean;
  stopReason?: string;
}

export interface TurnStream {
  events: AsyncIterable<SessionUpdate>;
  result: Promise<TurnResult>;
  cancel(): Promise<CancelReport>;
}
