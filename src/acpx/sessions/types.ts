/**
 * The sessions' shapes: the options they run under (the controller's), what
 * a session reports (summary, status, how it ended, its close) and what a
 * spawn cost.
 */
import type { ProcessFacts, ProcessSignaller } from "../../facts/types.js";
import type {
  ProcessLease,
  LeaseSettledAs,
  PendingSettlement,
  LeaseVerdict,
  OwnershipEvidence,
  TreeKillSummary,
  LeaseOutcomeCode,
} from "../../ownership/index.js";
import type { ClientFsOptions } from "../connection/client-fs.js";
import type { ClientTerminalOptions } from "../connection/client-terminal.js";
import type { IntakeLimits } from "../connection/intake-limits.js";
import type { PermissionHook } from "../connection/permissions.js";
import type { IntakeStatus } from "../connection/session-budget.js";
import type { SessionAgentState } from "../connection/session-controls.js";
import type { UpdateLimits } from "../connection/update-bytes.js";
import type { AcpRuntimeHandle, LimitController } from "../connection/types.js";
import type { SessionEnd } from "../launch/wrapper-end.js";
import type { ControllerLogger } from "../report/logger.js";
import type { DurableOptions } from "../durable/protocol.js";

export type { TreeKillMember, TreeKillSummary } from "../../ownership/index.js";
export type { DurableOptions };

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
  { kind: "closed"; report: CloseReport } | { kind: "adapter-died"; duringTurn: boolean; end: SessionEnd };

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
