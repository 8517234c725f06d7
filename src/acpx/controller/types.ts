/**
 * The lifecycle controller's public shapes (their names are the public API)
 * plus the two reports it returns, which are ours to design.
 */
import type { ContainmentSupport } from "../../containment/index.js";
import type {
  GatewayInstanceId,
  LeaseReconcileReport,
  OutcomeRow,
  OwnedProcessTree,
  AcpxProcessLease,
} from "../../ownership/index.js";
import type { ContentBlock, SessionConfigOption, SessionUpdate } from "@agentclientprotocol/sdk";
import type { DroppedUpdates, SessionUpdateListener } from "../connection/session-updates.js";
import type { UpdateLimits } from "../connection/update-bytes.js";
import type { CancelReport, TurnInput, TurnResult, TurnStream } from "../connection/turn.js";
import type { AcpRuntimeEnsureInput, AcpRuntimeHandle, PromptOptions } from "../connection/types.js";
import type { RawAdapter, RawAdapterInput } from "../sessions/raw-adapter.js";
import type { CloseReport, SessionStatus, SessionSummary } from "../sessions/types.js";

export type {
  TurnInput,
  TurnResult,
  TurnStream,
  CancelReport,
  SessionUpdate,
  ContentBlock,
  SessionUpdateListener,
  DroppedUpdates,
  UpdateLimits,
};

/**
 * closeSession's input. `handle`: the handle ensureSession returned (a stale
 * one, whose lease the key no longer holds, closes nothing), or
 * `{ sessionKey }`; `sessionKey` alone: whatever the key holds now.
 */
export type CloseSessionInput = {
  discardPersistentState?: boolean;
  reason?: string;
} & (
  { handle: AcpRuntimeHandle | { sessionKey: string }; sessionKey?: never } | { sessionKey: string; handle?: never }
);

/**
 * One lease of a batch reconcile: the lifecycle's neutral outcome
 * (src/ownership/lifecycle/lease-outcome.ts OutcomeRow: the same rows the supervisor's
 * reconcile and the CLI's reap and explain give), with the kill summarised.
 */
export type ReapReportEntry = OutcomeRow;

/** The batch report (lifecycle.ts LeaseReconcileReport) with ReapReportEntry rows. */
export type ReapReport = Omit<LeaseReconcileReport, "entries"> & {
  entries: ReapReportEntry[];
  /** where the leases were verified, killed and settled (AcpxLifecycleControllerOptions.startupReconcile; a worker that stopped hands its reconcile to the calling thread) */
  reconciledOn: "worker-thread" | "calling-thread";
};

export interface AcpxLifecycleController {
  readonly gatewayInstanceId: GatewayInstanceId;
  /** whether each lease gets its own cgroup here, and why not (docs/containment.md) */
  readonly containment: ContainmentSupport;
  ensureSession(input: AcpRuntimeEnsureInput): Promise<AcpRuntimeHandle>;
  /**
   * One turn. With `timeoutMs` or `signal`: session/cancel, a bounded grace
   * for the turn to end, then AcpxPromptTimeoutError / an "AbortError".
   */
  prompt(handle: AcpRuntimeHandle, text: string, options?: PromptOptions): Promise<{ stopReason: string }>;
  /**
   * One streamed turn (docs/conversation.md): `events` yields the session's
   * updates in arrival order, `result` the stop reason and usage, `cancel()`
   * sends session/cancel and resolves once the turn ended (or its grace ran out).
   */
  startTurn(handle: AcpRuntimeHandle, input: TurnInput, options?: PromptOptions): TurnStream;
  /** updates outside startTurn turns (the backlog first); returns the unsubscribe */
  onUpdate(handle: AcpRuntimeHandle, listener: SessionUpdateListener): () => void;
  /** session/cancel for the running turn; resolves once it ended or its grace ran out */
  cancelTurn(handle: AcpRuntimeHandle): Promise<CancelReport>;
  setMode(handle: AcpRuntimeHandle, modeId: string): Promise<void>;
  /** answers the agent's config options after the change */
  setConfigOption(handle: AcpRuntimeHandle, key: string, value: string | boolean): Promise<SessionConfigOption[]>;
  sessionStatus(handle: AcpRuntimeHandle): Promise<SessionStatus>;
  listSessions(): Promise<SessionSummary[]>;
  /** a leased adapter whose ACP the caller speaks itself: its stdin/stdout, the lease, close and verify (docs/conversation.md "Raw adapters") */
  spawnRawAdapter(input: RawAdapterInput): Promise<RawAdapter>;
  /** by the handle ensureSession returned, or by `{ sessionKey }` alone (after a restart a caller holds a key, not a handle) */
  closeSession(input: CloseSessionInput): Promise<CloseReport>;
  /** dryRun: verify and report, change nothing. skipAttached: leave owned trees whose root has a live parent (CLI use). */
  reapStartupOrphans(opts?: { dryRun?: boolean; skipAttached?: boolean }): Promise<ReapReport>;
  // the contract's name for a lease (CONTRACT §3), an alias of ProcessLease
  verifyOwnedTree(lease: AcpxProcessLease): Promise<OwnedProcessTree | null>;
  listLeases(): Promise<AcpxProcessLease[]>;
  /**
   * Stops timers and gives the state dir back. Live sessions are not
   * closed: their leases stay open for the next controller's startup reap
   * (or resume). Their processes end when this process exits (the lifeline
   * closes); call shutdown() to close them now.
   */
  dispose(): Promise<void>;
  /** closes every live session (verified, through the lifecycle), ends the terminals, then dispose() */
  shutdown(): Promise<CloseReport[]>;
  /**
   * Ends this controller without ending its durable sessions: each one's
   * wrapper keeps its tree, turn in flight included, waiting for a later
   * controller on this state dir and instance to re-adopt it (within
   * `durable.reattachWithinMs`); the other sessions are closed as
   * shutdown() closes them. Afterwards every method behaves as after
   * dispose().
   */
  detach(): Promise<void>;
}
