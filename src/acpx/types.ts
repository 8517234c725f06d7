/**
 * The lifecycle controller's public shapes (their names are the public API)
 * plus the two reports it returns, which are ours to design.
 */
import type { ContainmentSupport } from "../containment/index.js";
import type { ProcessFacts, ProcessSignaller } from "../facts/types.js";
import type {
  AcpxProcessLease,
  ProcessLease,
  GatewayInstanceId,
  OutcomeRow,
  LeaseOutcomeCode,
  LeaseSettledAs,
  PendingSettlement,
  LeaseVerdict,
  OwnedProcessTree,
  OwnershipEvidence,
  TreeKillSummary,
  LeaseReconcileReport,
} from "../ownership/index.js";
export type { TreeKillMember, TreeKillSummary } from "../ownership/index.js";
import type { AcpSessionOwner } from "../sessions/index.js";
import type {
  AgentCapabilities,
  ContentBlock,
  Implementation,
  McpServer,
  SessionUpdate,
} from "@agentclientprotocol/sdk";
import type { ClientFsOptions } from "./client-fs.js";
import type { ClientTerminalOptions } from "./client-terminal.js";
import type { AcpAuthMethodInfo } from "./errors.js";
import type { IntakeLimits } from "./intake-limits.js";
import type { ControllerLogger } from "./logger.js";
import type { PermissionHook } from "./permissions.js";
import type { IntakeStatus } from "./session-budget.js";
import type { SessionAgentState } from "./session-controls.js";
import type { DroppedUpdates, SessionUpdateListener } from "./session-updates.js";
import type { UpdateLimits } from "./update-bytes.js";
import type { CancelReport, TurnInput, TurnResult, TurnStream } from "./turn-stream.js";
import type { DurableOptions } from "./durable/protocol.js";

export interface AcpRuntimeEnsureInput {
  sessionKey: string;
  agentId: string;
  /** the ACP adapter's argv */
  command: readonly string[];
  cwd?: string;
  /** keys set in the adapter's environment (after envRemove; the two markers always win) */
  env?: Record<string, string>;
  /**
   * Keys dropped from the environment the adapter inherits from the gateway
   * (OpenClaw's `env -u …`: provider credentials an adapter must not see).
   * The markers OPENCLAW_ACPX_LEASE_ID and OPENCLAW_GATEWAY_INSTANCE_ID can
   * never be removed (TypeError naming them). A key both removed and set in
   * `env` gets the `env` value.
   */
  envRemove?: readonly string[];
  /**
   * ACP `authenticate` before `session/new`: a method id the agent advertised
   * in its initialize answer, or a resolver that picks one from the agent's
   * methods (undefined = do not authenticate). Without it, an agent that
   * answers session/new with auth_required fails ensureSession with
   * AcpxEnsureError("auth-required") listing its methods.
   */
  auth?: AcpAuthInput;
  /**
   * Resource limits written into the lease's own cgroup v2 (memory.max,
   * pids.max) after the cgroup is made and before the wrapper is spawned, so
   * the adapter and everything it forks are born limited: a runaway agent is
   * OOM-killed, or refused forks, inside its own cgroup instead of taking
   * the host down. Fail closed: a positive limit that cannot be applied
   * (containment off, the controller not on cgroup v2 here, a refused write)
   * rejects with AcpxEnsureError("limits-unavailable") whose message carries
   * the reason, and nothing is spawned. `"max"` asks for no limit (a new
   * cgroup's default): it is never written and never refused. Malformed
   * values (0, negative, NaN, non-integer, unknown keys) are a TypeError
   * before any lease is written. The controllers are enabled for the leases
   * on the first request that needs them, or at create with
   * `containment: { controllers }` (docs/containment.md).
   * ensureSession on a key whose session is already running returns it only
   * when every positive limit asked for is the one it runs with
   * (AcpxEnsureError("limits-mismatch") otherwise).
   */
  limits?: SessionLimits;
  spawnedBy?: string;
  parentSessionKey?: string;
  ownerSessionKey?: string;
  /** MCP servers passed through to session/new (and session/resume / session/load) as given */
  mcpServers?: readonly McpServer[];
  /**
   * The agent session to take back (session/resume or session/load,
   * whichever the agent advertises; docs/conversation.md "Sessions survive a restart").
   * Absent: the key's stored record's agent session, unless `resume: false`.
   */
  resumeSessionId?: string;
  /** false: never take an earlier agent session back, start a new one (default true) */
  resume?: boolean;
  /**
   * The key already has a running session with another command, agentId or
   * cwd: true closes it (verified, through the lifecycle) and starts this
   * one; absent or false refuses with AcpxEnsureError("session-mismatch").
   */
  replace?: boolean;
}

/** ensureSession's `limits`: each a positive integer, or "max" for none. */
export interface SessionLimits {
  /** bytes (memory.max; the kernel rounds down to whole pages), or "max" */
  memoryMax?: number | "max";
  /** tasks: processes and threads together (pids.max), or "max" */
  pidsMax?: number | "max";
}

/** A cgroup v2 controller that SessionLimits needs (memoryMax → memory, pidsMax → pids). */
export type LimitController = "memory" | "pids";

/** createAcpxLifecycleController's `containment` in its object form: "auto" plus these. */
export interface AcpxContainmentOptions {
  /**
   * Controllers to enable for every lease cgroup at create, instead of on
   * the first ensureSession whose limits need them: the gateway learns at
   * start (`controller.containment.controllers` / `missingControllers`)
   * whether limits will hold, and no cgroup change happens later while
   * sessions are being spawned. Default none.
   */
  controllers?: readonly LimitController[];
  /**
   * May the gateway move itself into `<its cgroup>/proclease/_gateway` to
   * hand controllers to the leases (cgroup v2's no-internal-processes rule;
   * systemd's Delegate=yes pattern)? Applies at create and to the enabling
   * on first use. Default true; false = limits that would need the move are
   * refused, with that reason.
   */
  allowGatewayMove?: boolean;
}

/** ensureSession's `auth`: `{ methodId }`, or a resolver that picks one from the agent's methods. */
export type AcpAuthInput = { methodId: string } | AcpAuthResolver;
export type AcpAuthResolver = (
  methods: readonly AcpAuthMethodInfo[],
) => string | undefined | Promise<string | undefined>;

/** prompt's options: signal, timeoutMs, and the grace for the turn to end after session/cancel. */
export interface PromptOptions {
  /** aborting sends session/cancel and rejects with an error named "AbortError" */
  signal?: AbortSignal;
  /** past it, session/cancel is sent and prompt rejects with AcpxPromptTimeoutError */
  timeoutMs?: number;
  /** after session/cancel, how long to wait for the agent to end the turn before rejecting; default 2000 */
  cancelGraceMs?: number;
}

export interface AcpRuntimeHandle {
  sessionKey: string;
  leaseId: string;
  /** the wrapper's pid (the root of the lease's tree) */
  rootPid: number;
  /** the adapter's process group, as the wrapper reported it */
  processGroupId?: number;
  /** from the adapter's session/new answer (or the session resumed or loaded) */
  acpSessionId: string;
  owner: AcpSessionOwner;
  /** the key's running session was returned as it is (ensureSession on a live key) */
  reused: boolean;
  /** the earlier agent session was resumed or loaded (session/resume, session/load) */
  resumed: boolean;
  /** why not, when `resumed` is false ("nothing to resume: a new session" when none was asked for) */
  resumeReason?: string;
  /** what the agent advertised in initialize */
  agentCapabilities: AgentCapabilities;
  agentInfo?: Implementation;
  /**
   * A durable session an earlier gateway left waiting, re-adopted by this
   * controller: the same `rootPid`, nothing spawned (docs/lifecycle-controller.md
   * "Durable sessions").
   */
  adopted?: true;
  /**
   * Only on the handle the adopting ensureSession returns: the turn that was
   * in flight when the earlier gateway went away.
   */
  turn?: AdoptedTurn;
}

/**
 * A turn re-adopted with its session (startTurn's shape): `events` yields
 * every session/update of the turn since it began, in order, each once (the
 * `replayed` ones the wrapper kept first, then the live ones), `result` its
 * stop reason. `gap`: the wrapper could not keep all of it (the turn passed
 * the journal's bound while attached), so some of its updates are missing.
 */
export interface AdoptedTurn extends TurnStream {
  readonly replayed: number;
  readonly gap: boolean;
}

/** One session the controller knows: live ones and the records it keeps (closed, or from an earlier run). */
export interface SessionSummary {
  sessionKey: string;
  leaseId: string;
  acpSessionId: string;
  agentId: string;
  /** served by this controller now */
  live: boolean;
  /** a turn is running */
  busy: boolean;
  /** set when the record's lease was settled by a close */
  closedAt?: number;
  cwd?: string;
  command?: readonly string[];
}

/** sessionStatus: the live session's state and what its agent advertised. */
export interface SessionStatus extends SessionAgentState {
  sessionKey: string;
  leaseId: string;
  acpSessionId: string;
  busy: boolean;
  /** the lease as recorded now */
  leaseState: ProcessLease["state"] | "missing";
  /** live ACP terminals of the session (their supervisor run ids) */
  terminals: string[];
  /** updates dropped because nobody listened and the backlog was full (updateLimits.sessionBacklogBytes) */
  droppedUpdates: number;
  /** their estimated JSON size */
  droppedUpdateBytes: number;
  /** the adapter's stdout is not being read now: a streamed turn's consumer lags (updateLimits.turnBacklogBytes) */
  stdoutHeld: boolean;
  /** how many times a lagging consumer has held the adapter's stdout */
  stdoutHolds: number;
  /** the session's budget now: requests in flight, answer bytes queued, and what was refused (docs/bounds.md) */
  intake: IntakeStatus;
}

/** How a session ended, for onSessionEnd. */
export type SessionEndHow =
  | { kind: "closed"; report: CloseReport }
  | { kind: "adapter-died"; duringTurn: boolean; end: import("./wrapper-end.js").SessionEnd };

/** Which settlement onLeaseSettled reports. */
export interface LeaseSettledOutcome {
  via: "close" | "ensure-failed" | "reap";
  state: ProcessLease["state"];
  /** how it ended (ProcessLease.settledAs) */
  settledAs?: LeaseSettledAs;
  detail: string;
}

/** `clientCapabilities`: ACP client features, each advertised only when on. */
export interface ClientCapabilitiesOption {
  /** ACP terminals served by the process supervisor as leased runs of the session */
  terminal?: boolean | ClientTerminalOptions;
  /** fs/read_text_file and fs/write_text_file confined to the session's cwd and roots */
  fs?: ClientFsOptions;
}

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

export interface CloseReport {
  sessionKey: string;
  /**
   * - closed: a verified tree (or, with the wrapper gone, the remnants proven to carry the lease's
   *   markers: LeaseVerification.remnants) was killed and nothing it was handed may still run
   *   (killCompleted); lease closed. The wrapper exiting after its lifeline closed is never enough.
   * - lost: nothing verified was alive any more (root gone and nothing carries its markers, or the
   *   root pid names another process now); lease lost, nothing signalled
   * - left-alone: the process list was unavailable (also when asked again after the lifeline closed):
   *   nothing signalled, lease back to open; or a legacy record that did not verify
   * - retry-pending: something verified may still run (survived, permission denied, unknown outcome),
   *   or the verification could not settle the lease (unknown for another reason than an unavailable
   *   process list, a remnant search that could not clear every candidate); lease stays closing for
   *   the maintenance timer. `detail` names the cause (ownership's settlementFor).
   * - noop: unknown key, or already closed
   */
  outcome: "closed" | "lost" | "left-alone" | "retry-pending" | "noop";
  /** set when the key had a lease */
  leaseId?: string;
  /** the lease state after the close */
  leaseState?: ProcessLease["state"];
  /** how the lease ended, when it is closed or lost (ProcessLease.settledAs) */
  settledAs?: LeaseSettledAs;
  /** why, for code to read (the lifecycle's LeaseOutcomeCode); `detail` says it for people */
  code?: LeaseOutcomeCode;
  /** "legacy" when the record had no lease id */
  path: "lease" | "legacy" | "none";
  verdict?: LeaseVerdict;
  evidence: readonly OwnershipEvidence[];
  kill?: TreeKillSummary;
  /** whether a running prompt was rejected by this close */
  interruptedPrompt: boolean;
  reason?: string;
  /** human-readable one-liner, for logs and the CLI */
  detail: string;
  /** the lease record could not be written (a full disk, …): where it should go and why; the tree was ended all the same, the next reconcile settles it */
  settlementPending?: PendingSettlement;
  elapsedMs: number;
}

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
  setConfigOption(
    handle: AcpRuntimeHandle,
    key: string,
    value: string | boolean,
  ): Promise<import("@agentclientprotocol/sdk").SessionConfigOption[]>;
  sessionStatus(handle: AcpRuntimeHandle): Promise<SessionStatus>;
  listSessions(): Promise<SessionSummary[]>;
  /** a leased adapter whose ACP the caller speaks itself: its stdin/stdout, the lease, close and verify (docs/conversation.md "Raw adapters") */
  spawnRawAdapter(input: import("./raw-adapter.js").RawAdapterInput): Promise<import("./raw-adapter.js").RawAdapter>;
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

export type { DurableOptions };

export interface AcpxLifecycleControllerOptions {
  /** leases, session records, the instance id and the installed wrapper live under it */
  stateDir: string;
  facts?: ProcessFacts;
  /** identity-checked signals; default createSignaller(facts) */
  signaller?: ProcessSignaller;
  /** SIGTERM → SIGKILL grace, for the tree kill and the wrapper; default DEFAULT_GRACE_MS (3000, src/ownership/leases/types.ts) */
  graceMs?: number;
  /** closed/lost leases are kept this long; default 7 days */
  retentionMs?: number;
  /** per step of the handshake (initialize, session/new); default 30 000 */
  handshakeTimeoutMs?: number;
  /** how long to wait for the wrapper's "started" report; default 10 000 */
  startTimeoutMs?: number;
  /** maintenance timer period (retry closing leases, retention); default 60 000; 0 = no timer */
  maintenanceIntervalMs?: number;
  /**
   * Where reapStartupOrphans verifies, kills and settles: "worker" (a worker
   * thread, so the gateway's event loop keeps its ticks at a thousand
   * leases; docs/ownership.md), "calling-thread", or "auto" (the default): a
   * worker when the state dir holds at least 64 open or closing lease files,
   * since a worker's start costs more than a handful of leases do. With
   * `facts` or `signaller` given, the calling thread: a caller's objects
   * cannot cross to a worker (asking for "worker" with either is a TypeError).
   */
  startupReconcile?: "auto" | "worker" | "calling-thread";
  /** the node binary that runs the wrapper (and the keeper); default process.execPath */
  nodePath?: string;
  /**
   * "on" (default): from the first session on, a keeper process ends this
   * gateway's leases (sessions, terminals, its supervisor runs) when the
   * gateway dies without dispose/shutdown (docs/ownership.md "The keeper");
   * "off": they wait for the next controller's startup reap. Absent:
   * "on", unless PROCLEASE_KEEPER=off is in the environment.
   */
  keeper?: "on" | "off";
  /**
   * "auto" (default): each lease gets its own cgroup v2 where the host allows
   * it (docs/containment.md); "off": never (and ensureSession's positive
   * `limits` are refused); an object: "auto", plus controllers enabled for
   * the leases at create (AcpxContainmentOptions).
   */
  containment?: "auto" | "off" | AcpxContainmentOptions;
  /** diagnostics: called once per successful ensureSession spawn with its phase timings */
  onEnsureTiming?: (t: EnsureTiming) => void;
  /** answers session/request_permission (default: "cancelled", fail closed; docs/conversation.md "Permissions fail closed") */
  onPermissionRequest?: PermissionHook;
  /** bound on one onPermissionRequest answer; past it, "cancelled" (default 300 000) */
  permissionTimeoutMs?: number;
  /** ACP client terminals and file access, each off unless asked for */
  clientCapabilities?: ClientCapabilitiesOption;
  /** a session ended: closed, or its adapter died (in a turn or while idle) */
  onSessionEnd?: (handle: AcpRuntimeHandle, how: SessionEndHow) => void;
  /** a lease this controller settled (close, failed ensure, startup reap or maintenance) */
  onLeaseSettled?: (lease: ProcessLease, outcome: LeaseSettledOutcome) => void;
  /** where the controller reports what it decided on its own (console fits) */
  logger?: ControllerLogger;
  /** put the adapter's stderr tail into error messages too (default false: only in the errors' stderrTail field) */
  stderrInMessages?: boolean;
  /** byte bounds on the updates a session holds (docs/conversation.md "Memory from the agent") */
  updateLimits?: UpdateLimits;
  /** what one agent can make the gateway hold: message size and shape, requests in flight, queued answers, log rate (docs/bounds.md) */
  intakeLimits?: IntakeLimits;
  /**
   * Durable sessions (docs/lifecycle-controller.md "Durable sessions"): when
   * this gateway goes away (detach(), SIGTERM, SIGKILL, a kill of its
   * process group), each session's tree keeps running for
   * `reattachWithinMs` (1..600 000) waiting for a later controller to
   * re-adopt it; `journalBytes` bounds what its wrapper keeps of the agent's
   * output meanwhile (default 4 MiB). Needs the native wrapper (Linux, with
   * the addon): elsewhere the controller is refused with
   * AcpxDurableUnavailableError.
   */
  durable?: DurableOptions;
}

/** Where an ensureSession spawn spent its time (ms, monotonic clock). */
export interface EnsureTiming {
  sessionKey: string;
  /** writing the lease before the spawn */
  leaseMs: number;
  /** spawn of the wrapper until its "started" report (the adapter is running) */
  wrapperSpawnMs: number;
  /** recording root pid / pgid / start time in the lease */
  recordRootMs: number;
  /** what is left of ACP initialize + session/new once the root is recorded (the handshake starts with the spawn, beside the start and the record) */
  handshakeMs: number;
  totalMs: number;
}
