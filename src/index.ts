// Kept in dist/index.d.ts (preserve): the declarations use Node's types, so a consumer needs @types/node installed and no "types" entry.
/// <reference types="node" preserve="true" />
/**
 * proclease: process ownership as a first-class fact.
 *
 * The package root is what a gateway author uses, named one by one (never
 * `export *`), so an internal added to a layer does not become public by
 * accident: the lifecycle controller, its handles, updates and errors; the
 * process supervisor; session visibility; the live process facts; read-only
 * views of leases. Nothing here moves a lease: the lifecycle
 * (src/ownership/lifecycle/lifecycle.ts, driven by the controller and the supervisor)
 * is the only mover. docs/api.md lists every name (scripts/api-list.mjs
 * writes it, test/api-list.test.ts checks it).
 *
 * The order of the layers, and of the folders inside a layer, is
 * test/helpers/layer-order.mjs's (the architecture test holds imports to it).
 */

// ── live process facts (CONTRACT §1) ──
export type {
  FactsBackend,
  IdentityStrength,
  InspectOptions,
  ProcessDetails,
  ProcessFacts,
  ProcessInfo,
  ProcessSignaller,
  ProcessSnapshot,
  SignalOutcome,
  NativeBinding,
  NonDumpableResult,
} from "./facts/index.js";
export {
  getProcessFacts,
  makeProcessNonDumpable,
  createSignaller,
  loadNative,
  loadError,
  FactsReadError,
  FactsUnavailableError,
} from "./facts/index.js";

// ── ownership: instance id, leases (read-only), verification (CONTRACT §2) ──
export type {
  GatewayInstanceId,
  ProcessLease,
  AcpxProcessLease,
  LeaseKind,
  LeaseSettledAs,
  LeaseState,
  OwnershipEvidence,
  EvidenceCheck,
  EvidenceCode,
  OwnedProcessTree,
  LeaseProblem,
  LeaseListFilter,
  LeaseVerdict,
  LeaseVerification,
  VerifyOptions,
  LeaseReader,
} from "./ownership/index.js";
export { LEASE_ENV_KEY, INSTANCE_ENV_KEY, DEFAULT_GRACE_MS, DEFAULT_RETENTION_MS } from "./ownership/index.js";
export { loadOrCreateGatewayInstanceId, readGatewayInstanceId, GatewayInstanceIdError } from "./ownership/index.js";
export { openLeaseReader, explainLease, verifyOwnedTree } from "./ownership/index.js";
export {
  StateDirLockedError,
  InsecurePathError,
  LeaseRecordWriteError,
  HostResourceError,
  CwdUnusableError,
  type HostResource,
} from "./ownership/index.js";

// ── the lifecycle controller (CONTRACT §3, §6–§8) ──
export { createAcpxLifecycleController, fixtureAgentPath } from "./acpx/index.js";
export type {
  AcpRuntimeEnsureInput,
  AcpRuntimeHandle,
  AcpxLifecycleController,
  AcpxLifecycleControllerOptions,
  AcpAuthInput,
  AcpAuthResolver,
  AcpxContainmentOptions,
  CancelReport,
  ClientCapabilitiesOption,
  ClientFsOptions,
  ClientTerminalOptions,
  CloseReport,
  ContentBlock,
  ControllerLogger,
  EnsureTiming,
  LeaseSettledOutcome,
  LimitController,
  PermissionAnswer,
  PermissionContext,
  PermissionHook,
  PromptOptions,
  RawAdapter,
  RawAdapterInput,
  ReapReport,
  ReapReportEntry,
  SessionAgentState,
  SessionEnd,
  SessionEndHow,
  SessionLimits,
  SessionStatus,
  SessionSummary,
  SessionUpdate,
  SessionUpdateListener,
  TreeKillMember,
  TreeKillSummary,
  TurnInput,
  TurnResult,
  TurnStream,
  AdoptedTurn,
  DurableOptions,
} from "./acpx/index.js";
// durable sessions (docs/lifecycle-controller.md "Durable sessions")
export { DEFAULT_JOURNAL_BYTES } from "./acpx/index.js";
export { permissionOption, DEFAULT_PERMISSION_TIMEOUT_MS } from "./acpx/index.js";
// the byte bounds on what an agent's updates may hold in the gateway (docs/conversation.md, "Memory from the agent")
export {
  DEFAULT_SESSION_BACKLOG_BYTES,
  DEFAULT_TURN_BACKLOG_BYTES,
  type DroppedUpdates,
  type UpdateLimits,
} from "./acpx/index.js";
// the per-session budget on everything an agent can make the gateway hold (docs/bounds.md)
export { DEFAULT_INTAKE_LIMITS, type IntakeLimits, type IntakeRefusal, type IntakeStatus } from "./acpx/index.js";
export {
  AcpxControllerDisposedError,
  AcpxEnsureError,
  AcpxNoSessionError,
  AcpxPromptAbortError,
  AcpxPromptError,
  AcpxPromptTimeoutError,
  AcpxPromptTooLargeError,
  AcpxRawSessionError,
  AcpxSessionBusyError,
  AcpxSessionClosedError,
  AcpxSessionRequestError,
  AcpxUnsupportedContentError,
  AcpxDurableUnavailableError,
  type AcpAuthMethodInfo,
  type AcpErrorInfo,
  type AcpxDiagnostics,
  type EnsureFailureCause,
  type LimitsRefusal,
  type PromptFailureCause,
  type SessionRequestFailure,
} from "./acpx/index.js";

// ── session visibility (CONTRACT §4) ──
export type {
  AcpSessionOwner,
  AgentToAgentPolicy,
  AuthorizeSessionActionInput,
  BuildSessionOwnerInput,
  CanSeeSessionRowInput,
  NormalizedSessionOwner,
  SessionAction,
  SessionAuthorization,
  SessionDenialReason,
  SessionRowOwnership,
  SessionVisibility,
  SessionVisibilityContext,
  VisibleSessions,
} from "./sessions/index.js";
export {
  SESSION_ACTIONS,
  SESSION_VISIBILITIES,
  agentIdFromSessionKey,
  assertAgentToAgentPolicy,
  authorizeSessionAction,
  buildSessionOwner,
  canSeeSessionRow,
  clampSessionVisibility,
  filterVisibleSessions,
  isAgentAllowed,
  isSessionVisibility,
  normalizeSessionOwner,
  parseSessionVisibility,
  resolveAgentToAgentPolicy,
  resolveSessionVisibility,
  toSessionRowOwnership,
} from "./sessions/index.js";

// ── the process supervisor (CONTRACT §5, §6) ──
export {
  createProcessSupervisor,
  SupervisorShutdownError,
  killProcessTree,
  signalProcessTree,
  PtyUnavailableError,
} from "./supervisor/index.js";
export type {
  ManagedRun,
  ManagedRunStdin,
  ProcessSupervisor,
  ProcessSupervisorOptions,
  PtyLoader,
  PtyModule,
  PtyProcess,
  ReconcileOrphansOptions,
  ReconcileReport,
  ReconciledRun,
  RunExit,
  RunRecord,
  RunState,
  ShutdownReport,
  SpawnChildInput,
  SpawnInput,
  SpawnPtyInput,
  StdinMode,
  SupervisorRunRef,
  TerminationReason,
  KillProcessTreeOptions,
  KillTreeResult,
  SignalProcessTreeOptions,
  SignalTreeResult,
  TreeSignalResult,
} from "./supervisor/index.js";
export {
  resolveNoOutputTimeoutMs,
  type ResolveNoOutputTimeoutInput,
  type WatchdogProfile,
} from "./supervisor/index.js";
export { createExecSessions, AdoptError, UnknownSessionError } from "./supervisor/index.js";
export type {
  ExecSessionInfo,
  ExecSessions,
  ExecSessionsOptions,
  ExecSessionStatus,
  LogResult,
  PollResult,
  ProcessActionRequest,
  ProcessActionResult,
  TerminateResult,
} from "./supervisor/index.js";
